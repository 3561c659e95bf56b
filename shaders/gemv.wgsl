// `y [m, n] = x [m, k] @ w [n, k]^T (+ bias)` for at most 8 rows (decode steps), k a multiple of
// 4: 32 threads a weight row, 8 weight rows a workgroup, so each weight is read once for every row
// of x. A thread reads whole units of its row (`w_unit`: a vec4 of weights, two of q4's), UNROLL
// of them before it uses them, so that several loads are in flight; the 32 lanes of a row read
// adjacent units, so each load of a row's lanes is one run of memory. Against a quantized weight, `x` holds
// the activations already rounded to int8 per group of 32 (quantize_rows.wgsl) and, for q4,
// `lost` what the rounding took from each group's sum, counted at the middle of the codes: the
// arithmetic of the CPU's and the CUDA kernels' integer products.
//
// The decode step's fused forms, so a layer takes fewer dispatches: the input RMS-normalised on
// the way (`norm`: each row's squares are summed by the lanes that read it anyway, and the
// products scaled by the inverse root at the end; float weights only, a quantized weight's input
// comes rounded from the normalised rows), and the epilogues `residual + x w^T` and SwiGLU's
// `silu(x w^T) * (x up^T)` with the second matrix `up`.

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
    // EPILOGUE_PLAIN, EPILOGUE_ADD or EPILOGUE_SWIGLU.
    epilogue: u32,
    // Whether x goes in RMS-normalised with `gain`, and the norm's epsilon.
    norm: u32,
    eps: f32,
}

const EPILOGUE_PLAIN: u32 = 0u;
const EPILOGUE_ADD: u32 = 1u;
const EPILOGUE_SWIGLU: u32 = 2u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(9) var<storage, read> lost: array<f32>;
@group(0) @binding(16) var<storage, read> residual: array<f32>;

const LANES: u32 = 32u;
const ROWS: u32 = 8u;
const MAX_M: u32 = 8u;
const UNROLL: u32 = 4u;
var<workgroup> partial: array<f32, 2048>;
// Each input row's squares, from the first weight row's lanes (every weight row's lanes read the
// same inputs).
var<workgroup> squares: array<f32, 256>;

// Sums `acc` over each weight row's 32 lanes into `partial[i * 256 + lid]` of its lane 0, and, with
// `with_squares`, `sq` over the first weight row's lanes into `squares[i * LANES]`.
fn sum_lanes(lid: u32, acc: array<f32, MAX_M>, sq: array<f32, MAX_M>, with_squares: bool) {
    let lane = lid % LANES;
    for (var i = 0u; i < MAX_M; i++) {
        partial[i * 256u + lid] = acc[i];
        if with_squares && lid < LANES {
            squares[i * LANES + lid] = sq[i];
        }
    }
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride = stride / 2u) {
        if lane < stride {
            for (var i = 0u; i < MAX_M; i++) {
                partial[i * 256u + lid] += partial[i * 256u + lid + stride];
                if with_squares && lid < LANES {
                    squares[i * LANES + lid] += squares[i * LANES + lid + stride];
                }
            }
        }
        workgroupBarrier();
    }
}

// Adds unit `j` of a weight row (`wv`, and SwiGLU's second matrix's `uv`) times the rows of x to
// the sums, and, with the norm, each input row's squares.
fn add_unit(j: u32, wv: array<vec4<f32>, w_unit4s>, uv: array<vec4<f32>, w_unit4s>,
            acc: ptr<function, array<f32, MAX_M>>, acc_up: ptr<function, array<f32, MAX_M>>,
            sq: ptr<function, array<f32, MAX_M>>) {
    let k4 = p.k / 4u;
    let swiglu = p.epilogue == EPILOGUE_SWIGLU;
    let norm = p.norm != 0u;
    for (var c = 0u; c < w_unit4s; c++) {
        let j4 = j * w_unit4s + c;
        var gv = vec4<f32>(1.0);
        if norm {
            gv = gain4(4u * j4);
        }
        for (var i = 0u; i < MAX_M; i++) {
            if i < p.m {
                let xv = x[i * k4 + j4];
                var h = xv;
                if norm {
                    (*sq)[i] += dot(xv, xv);
                    h = xv * gv;
                }
                (*acc)[i] += dot(h, wv[c]);
                if swiglu {
                    (*acc_up)[i] += dot(h, uv[c]);
                }
            }
        }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let lane = lid % LANES;
    let r = workgroup_index(wid, nwg) * ROWS + lid / LANES;
    let swiglu = p.epilogue == EPILOGUE_SWIGLU;
    let norm = p.norm != 0u;
    var acc: array<f32, MAX_M>;
    var acc_up: array<f32, MAX_M>;
    var sq: array<f32, MAX_M>;
    // (The first weight row of a workgroup is never past the end, so its lanes sum the squares.)
    if r < p.n {
        // A row's units (k is a multiple of a unit's weights: q4's rows hold whole groups).
        let units = p.k / (4u * w_unit4s);
        let row = r * units;
        var j = lane;
        while j + LANES * (UNROLL - 1u) < units {
            var wv: array<array<vec4<f32>, w_unit4s>, UNROLL>;
            var uv: array<array<vec4<f32>, w_unit4s>, UNROLL>;
            for (var a = 0u; a < UNROLL; a++) {
                wv[a] = w_unit(row + j + a * LANES);
                if swiglu {
                    uv[a] = up_unit(row + j + a * LANES);
                }
            }
            for (var a = 0u; a < UNROLL; a++) {
                add_unit(j + a * LANES, wv[a], uv[a], &acc, &acc_up, &sq);
            }
            j += LANES * UNROLL;
        }
        for (; j < units; j += LANES) {
            var uv: array<vec4<f32>, w_unit4s>;
            if swiglu {
                uv = up_unit(row + j);
            }
            add_unit(j, w_unit(row + j), uv, &acc, &acc_up, &sq);
        }
        if w_corrects_rounding {
            for (var g = lane; g < p.groups; g += LANES) {
                let middle = w_middle(r * p.groups + g);
                var middle_up = 0.0;
                if swiglu {
                    middle_up = up_middle(r * p.groups + g);
                }
                for (var i = 0u; i < MAX_M; i++) {
                    if i < p.m {
                        acc[i] += middle * lost[i * p.groups + g];
                        acc_up[i] += middle_up * lost[i * p.groups + g];
                    }
                }
            }
        }
    }
    sum_lanes(lid, acc, sq, norm);
    var gate: array<f32, MAX_M>;
    for (var i = 0u; i < MAX_M; i++) {
        gate[i] = partial[i * 256u + lid];
    }
    if swiglu {
        workgroupBarrier();
        sum_lanes(lid, acc_up, sq, false);
    }
    if lane == 0u && r < p.n {
        for (var i = 0u; i < MAX_M; i++) {
            if i < p.m {
                var v = gate[i];
                var scale = 1.0;
                if norm {
                    scale = 1.0 / sqrt(squares[i * LANES] / f32(p.k) + p.eps);
                }
                v *= scale;
                if p.has_bias != 0u {
                    v += bias(p.y_offset + r);
                }
                let at = i * p.y_stride + p.y_offset + r;
                if p.epilogue == EPILOGUE_ADD {
                    v = residual[at] + v;
                } else if swiglu {
                    v = silu(v) * (partial[i * 256u + lid] * scale);
                }
                y[at] = v;
            }
        }
    }
}
