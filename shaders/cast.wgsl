// A float tensor in another float format: f32 or bf16 in, f32, bf16 or f16 out (two to a word,
// the low half first), rounded to nearest even with the host's arithmetic (the `half` crate's),
// on the bits alone: NaN stays a NaN, quieted; past f16's range, infinity; f16's subnormals
// rounded too. So a tensor cast here holds the bits a cast on the host gives.

struct Params {
    n: u32,
    from_bf16: u32,
    // 0: f32, 1: bf16, 2: f16.
    to: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

// The f32 bits of element i of x.
fn bits_of(i: u32) -> u32 {
    if p.from_bf16 == 0u {
        return x[i];
    }
    let word = x[i >> 1u];
    return select(word << 16u, word & 0xffff0000u, (i & 1u) == 1u);
}

fn bf16_of(u: u32) -> u32 {
    if (u & 0x7fffffffu) > 0x7f800000u {
        return (u >> 16u) | 0x40u;
    }
    return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}

fn f16_of(u: u32) -> u32 {
    let sign = (u & 0x80000000u) >> 16u;
    let exp = u & 0x7f800000u;
    let man = u & 0x007fffffu;
    if exp == 0x7f800000u {
        return sign | 0x7c00u | select(0u, 0x0200u, man != 0u) | (man >> 13u);
    }
    let half_exp = i32(exp >> 23u) - 127 + 15;
    if half_exp >= 0x1f {
        return sign | 0x7c00u;
    }
    if half_exp <= 0 {
        if 14 - half_exp > 24 {
            return sign;
        }
        let full = man | 0x00800000u;
        let shift = u32(14 - half_exp);
        var half_man = full >> shift;
        let round_bit = 1u << (shift - 1u);
        if (full & round_bit) != 0u && (full & (3u * round_bit - 1u)) != 0u {
            half_man += 1u;
        }
        return sign | half_man;
    }
    let rounded = sign | (u32(half_exp) << 10u) | (man >> 13u);
    if (man & 0x1000u) != 0u && (man & 0x2fffu) != 0u {
        return rounded + 1u;
    }
    return rounded;
}

fn converted(i: u32) -> u32 {
    let u = bits_of(i);
    return select(f16_of(u), bf16_of(u), p.to == 1u);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = workgroup_index(wid, nwg) * 256u + lid;
    if p.to == 0u {
        if i < p.n {
            y[i] = bits_of(i);
        }
        return;
    }
    let first = 2u * i;
    if first >= p.n {
        return;
    }
    var word = converted(first);
    if first + 1u < p.n {
        word = word | (converted(first + 1u) << 16u);
    }
    y[i] = word;
}
