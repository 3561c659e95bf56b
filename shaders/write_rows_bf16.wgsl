// A KV cache append into a bf16 cache: f32 rows rounded to nearest even (torch's .to(bfloat16),
// NaN kept a NaN), two to a word, at rows [row, row + n) of each batch entry. One thread a word;
// the width is even, so no word holds two rows.

struct Params {
    words: u32,
    n: u32,
    half_cols: u32,
    capacity: u32,
    row: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> cache: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = workgroup_index(wid, nwg) * 256u + lid;
    if i >= p.words {
        return;
    }
    let r = i / p.half_cols;
    let c = i % p.half_cols;
    let b = r / p.n;
    let j = r % p.n;
    cache[(b * p.capacity + p.row + j) * p.half_cols + c] = to_bf16(x[2u * i]) | (to_bf16(x[2u * i + 1u]) << 16u);
}
