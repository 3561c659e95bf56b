// Helpers every shader of the wgpu backend starts with (the host prepends this file, then the
// tensor readers it generates, `engine/src/wgpu/shaders.rs`).

// The index of a workgroup in a dispatch folded into x and y: a dimension holds at most 65,535
// workgroups, so the host spreads a long dispatch over rows of them.
fn workgroup_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

// Whether `v` is neither NaN nor infinite (by its exponent bits, which no compiler folds away).
fn is_finite(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7f800000u) != 0x7f800000u;
}

fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

// The bits of the bf16 nearest to `v` (round to nearest even, as torch's .to(bfloat16) and
// `half::bf16::from_f32`), in the low half of a word; a NaN stays a NaN.
fn to_bf16(v: f32) -> u32 {
    let u = bitcast<u32>(v);
    if (u & 0x7fffffffu) > 0x7f800000u {
        return (u >> 16u) | 0x40u;
    }
    return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}
