// Activation rows rounded as the integer decode products take them (gemv_int8.wgsl): per group of
// 32, the codes round(x * 127 / max|x|), four to a word, the group's scale max|x| / 127 (NaN for
// a group holding a non-finite value, whose codes are 0), and what the rounding took from the
// group's sum.
// Eight threads a group, one a word of codes, 32 groups a workgroup: a thread a group would read
// its 32 values one after another, each load waiting on memory, before every product of a decode
// step; eight read them side by side and meet in workgroup memory.

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

const WORDS: u32 = 8u;
// Each thread's share of its group: the largest magnitude, the sum, whether all are finite; then
// the sum of its codes.
var<workgroup> part_max: array<f32, 256>;
var<workgroup> part_sum: array<f32, 256>;
var<workgroup> part_finite: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = workgroup_index(wid, nwg) * (256u / WORDS) + lid / WORDS;
    let w = lid % WORDS;
    let lead = lid - w;
    // Threads past the last group still meet the barriers (they stay in uniform control flow).
    let valid = g < p.groups;
    // Word w of the group: in order, values 4w..4w + 4; in the nibbles' order, of the 8 values
    // from 8 (w / 2), the even ones (w even) or the odd ones.
    var first = g * 32u + 4u * w;
    var step = 1u;
    if p.nibble_order != 0u {
        first = g * 32u + 8u * (w / 2u) + (w % 2u);
        step = 2u;
    }
    var v = vec4<f32>(0.0);
    if valid {
        v = vec4<f32>(x[first], x[first + step], x[first + 2u * step], x[first + 3u * step]);
    }
    let a = abs(v);
    part_max[lid] = max(max(a.x, a.y), max(a.z, a.w));
    part_sum[lid] = (v.x + v.y) + (v.z + v.w);
    part_finite[lid] = u32(is_finite(v.x) && is_finite(v.y) && is_finite(v.z) && is_finite(v.w));
    workgroupBarrier();
    var amax = 0.0;
    var sum = 0.0;
    var finite = true;
    for (var j = 0u; j < WORDS; j++) {
        amax = max(amax, part_max[lead + j]);
        sum += part_sum[lead + j];
        finite = finite && part_finite[lead + j] != 0u;
    }
    var to_code = 0.0;
    if finite && amax > 0.0 {
        to_code = 127.0 / amax;
    }
    var scale = amax / 127.0;
    if !finite {
        scale = p.nan;
    }
    // A non-finite group's codes are 0 (its scale, NaN, carries the news).
    let c = select(vec4<f32>(0.0), round(v * to_code), finite);
    let bytes = vec4<u32>(bitcast<vec4<u32>>(vec4<i32>(c)) & vec4<u32>(0xffu));
    let word = bytes.x | (bytes.y << 8u) | (bytes.z << 16u) | (bytes.w << 24u);
    // Every thread has read the sums above before they are overwritten with the codes'.
    workgroupBarrier();
    part_sum[lid] = (c.x + c.y) + (c.z + c.w);
    workgroupBarrier();
    if valid {
        codes[g * WORDS + w] = word;
        if w == 0u {
            var code_sum = 0.0;
            for (var j = 0u; j < WORDS; j++) {
                code_sum += part_sum[lead + j];
            }
            x_groups[g] = scale;
            x_groups[p.groups + g] = sum - scale * code_sum;
        }
    }
}
