// `y [m, n] = x [m, k] @ w [n, k]^T (+ bias)` for at most 8 rows (decode steps), k a multiple of
// 4: 32 threads a weight row, 8 weight rows a workgroup, each thread reading 4 weights at a time
// (`w4`), so each weight is read once for every row of x. Against a quantized weight, `x` holds
// the activations already rounded to int8 per group of 32 (quantize_rows.wgsl) and, for q4,
// `lost` what the rounding took from each group's sum, counted at the middle of the codes: the
// arithmetic of the CPU's and the CUDA kernels' integer products.

// `n` weight rows (a piece of a weight kept in pieces, whose columns of `y` start at `y_offset`
// in rows `y_stride` wide).
struct Params {
    m: u32,
    n: u32,
    k: u32,
    has_bias: u32,
    y_stride: u32,
    y_offset: u32,
    groups: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(9) var<storage, read> lost: array<f32>;

const LANES: u32 = 32u;
const ROWS: u32 = 8u;
const MAX_M: u32 = 8u;
var<workgroup> partial: array<f32, 2048>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let lane = lid % LANES;
    let r = workgroup_index(wid, nwg) * ROWS + lid / LANES;
    let k4 = p.k / 4u;
    var acc: array<f32, MAX_M>;
    if r < p.n {
        for (var j = lane; j < k4; j += LANES) {
            let wv = w4(r * p.k + 4u * j);
            for (var i = 0u; i < MAX_M; i++) {
                if i < p.m {
                    acc[i] += dot(x[i * k4 + j], wv);
                }
            }
        }
        if w_corrects_rounding {
            for (var g = lane; g < p.groups; g += LANES) {
                let middle = w_middle(r * p.groups + g);
                for (var i = 0u; i < MAX_M; i++) {
                    if i < p.m {
                        acc[i] += middle * lost[i * p.groups + g];
                    }
                }
            }
        }
    }
    for (var i = 0u; i < MAX_M; i++) {
        partial[i * 256u + lid] = acc[i];
    }
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride = stride / 2u) {
        if lane < stride {
            for (var i = 0u; i < MAX_M; i++) {
                partial[i * 256u + lid] += partial[i * 256u + lid + stride];
            }
        }
        workgroupBarrier();
    }
    if lane == 0u && r < p.n {
        for (var i = 0u; i < MAX_M; i++) {
            if i < p.m {
                var v = partial[i * 256u + lid];
                if p.has_bias != 0u {
                    v += bias(p.y_offset + r);
                }
                y[i * p.y_stride + p.y_offset + r] = v;
            }
        }
    }
}
