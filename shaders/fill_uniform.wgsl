// Synthetic weights: `center + half_width * u` with `u` uniform in [-1, 1) from the splitmix64
// hash of the seed and the index, the same values as `hash::uniform` on the CPU. WGSL has no
// 64-bit integers, so a u64 is a vec2 of its low and high words. With `bf16` set, each invocation
// writes two values rounded to bf16 into one word. The buffer holds elements `first..first + n`
// of the tensor (a piece of a matrix kept in pieces).

struct Params {
    n: u32,
    bf16: u32,
    seed_lo: u32,
    seed_hi: u32,
    center: f32,
    half_width: f32,
    first: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;

// The 64-bit product of two u32s, from 16-bit halves.
fn wide_mul(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    let lo = (p00 & 0xffffu) | (mid << 16u);
    let hi = a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u);
    return vec2<u32>(lo, hi);
}

// The low 64 bits of a * b.
fn mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let low = wide_mul(a.x, b.x);
    return vec2<u32>(low.x, low.y + a.x * b.y + a.y * b.x);
}

fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

// z ^ (z >> s) for 0 < s < 32.
fn xor_shift(z: vec2<u32>, s: u32) -> vec2<u32> {
    return vec2<u32>(z.x ^ ((z.x >> s) | (z.y << (32u - s))), z.y ^ (z.y >> s));
}

const GOLDEN: vec2<u32> = vec2<u32>(0x7f4a7c15u, 0x9e3779b9u);

fn mix64(z0: vec2<u32>) -> vec2<u32> {
    var z = mul64(xor_shift(z0, 30u), vec2<u32>(0x1ce4e5b9u, 0xbf58476du));
    z = mul64(xor_shift(z, 27u), vec2<u32>(0x133111ebu, 0x94d049bbu));
    return xor_shift(z, 31u);
}

fn uniform_value(local: u32) -> f32 {
    let i = p.first + local;
    let z = mix64(add64(vec2<u32>(p.seed_lo, p.seed_hi), mul64(vec2<u32>(i, 0u), GOLDEN)));
    let u = f32(z.y >> 8u) * (1.0 / 16777216.0) * 2.0 - 1.0;
    return p.center + p.half_width * u;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = workgroup_index(wid, nwg) * 256u + lid;
    if p.bf16 == 0u {
        if i < p.n {
            y[i] = bitcast<u32>(uniform_value(i));
        }
        return;
    }
    let first = 2u * i;
    if first >= p.n {
        return;
    }
    var word = to_bf16(uniform_value(first));
    if first + 1u < p.n {
        word = word | (to_bf16(uniform_value(first + 1u)) << 16u);
    }
    y[i] = word;
}
