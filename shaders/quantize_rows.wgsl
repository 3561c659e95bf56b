// Activation rows rounded as the integer decode products take them (gemv_int8.wgsl): per group of
// 32, the codes round(x * 127 / max|x|), four to a word, the group's scale max|x| / 127 (NaN for
// a group holding a non-finite value, whose codes are 0), and what the rounding took from the
// group's sum. One thread a group.

struct Params {
    groups: u32,
    // A NaN from the host (WGSL refuses one as a constant).
    nan: f32,
    // Whether each 8 codes go as the even ones' word, then the odd ones' (against q4's nibbles),
    // rather than in order.
    nibble_order: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> codes: array<u32>;
// The groups' scales, then what rounding took from their sums.
@group(0) @binding(3) var<storage, read_write> x_groups: array<f32>;

// The code of `v` in the low byte of a word.
fn byte_of(v: f32, to_code: f32) -> u32 {
    return bitcast<u32>(i32(round(v * to_code))) & 0xffu;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = workgroup_index(wid, nwg) * 256u + lid;
    if g >= p.groups {
        return;
    }
    let base = g * 32u;
    var finite = true;
    var amax = 0.0;
    var sum = 0.0;
    for (var j = 0u; j < 32u; j++) {
        let v = x[base + j];
        finite = finite && is_finite(v);
        amax = max(amax, abs(v));
        sum += v;
    }
    var to_code = 0.0;
    if finite && amax > 0.0 {
        to_code = 127.0 / amax;
    }
    var scale = amax / 127.0;
    if !finite {
        scale = p.nan;
    }
    var code_sum = 0.0;
    for (var j = 0u; j < 32u; j++) {
        code_sum += round(x[base + j] * to_code);
    }
    // Word w of the group: in order, values 4w..4w + 4; in the nibbles' order, of the 8 values
    // from 8 (w / 2), the even ones (w even) or the odd ones.
    for (var w = 0u; w < 8u; w++) {
        var first = base + 4u * w;
        var step = 1u;
        if p.nibble_order != 0u {
            first = base + 8u * (w / 2u) + (w % 2u);
            step = 2u;
        }
        var word = 0u;
        for (var b = 0u; b < 4u; b++) {
            word |= byte_of(x[first + b * step], to_code) << (8u * b);
        }
        codes[g * 8u + w] = word;
    }
    x_groups[g] = scale;
    x_groups[p.groups + g] = sum - scale * code_sum;
}
