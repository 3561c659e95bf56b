// `y [m, n] = x [m, k] @ w [n, k]^T (+ bias)` for at most 8 rows (decode steps): 32 threads a
// weight row, 8 weight rows a workgroup, each thread reading 16 bytes of the weight a load (a
// chunk: `w_PER_CHUNK` weights, `w_load`, `w_part`) and two loads in flight, so each weight is
// read once for every row of x and enough bytes are in flight to keep memory busy. The rows of
// `w` hold whole chunks (the host routes other widths elsewhere). Against a quantized weight, `x`
// holds the activations already rounded to int8 per group of 32 (quantize_rows.wgsl) and, for
// q4, `lost` what the rounding took from each group's sum, counted at the middle of the codes:
// the arithmetic of the CPU's and the CUDA kernels' integer products.
//
// The decode step's fused forms, so a layer takes fewer dispatches: the input RMS-normalised on
// the way (`NORM`: each row's squares are summed by the lanes that read it anyway, and the
// products scaled by the inverse root at the end; float weights only, a quantized weight's input
// comes rounded from the normalised rows), and the epilogues `residual + x w^T` and SwiGLU's
// `silu(x w^T) * (x up^T)` with the second matrix `up` (in w's format).
//
// The rows of x, the epilogue and the norm are constants of each pipeline (overrides), so a
// compiler sees fixed loop bounds and only the epilogue it runs: a product carries the sums of
// its own rows alone, and the SwiGLU sums and the squares only where it needs them.

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
    // The norm's epsilon, where NORM.
    eps: f32,
}

const EPILOGUE_PLAIN: u32 = 0u;
const EPILOGUE_ADD: u32 = 1u;
const EPILOGUE_SWIGLU: u32 = 2u;

// Rows of x, at most MAX_M (the loops' bound; p.m is the same number).
override M: u32 = 8u;
// EPILOGUE_PLAIN, EPILOGUE_ADD or EPILOGUE_SWIGLU.
override EPILOGUE: u32 = 0u;
// Whether x goes in RMS-normalised with `gain`.
override NORM: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(9) var<storage, read> lost: array<f32>;
@group(0) @binding(16) var<storage, read> residual: array<f32>;

const LANES: u32 = 32u;
const ROWS: u32 = 8u;
const MAX_M: u32 = 8u;
var<workgroup> partial: array<f32, 2048>;
// Each input row's squares, from the first weight row's lanes (every weight row's lanes read the
// same inputs).
var<workgroup> squares: array<f32, 256>;

// Sums `acc` over each weight row's 32 lanes into `partial[i * 256 + lid]` of its lane 0, and, with
// `with_squares`, `sq` over the first weight row's lanes into `squares[i * LANES]`.
fn sum_lanes(lid: u32, acc: array<f32, MAX_M>, sq: array<f32, MAX_M>, with_squares: bool) {
    let lane = lid % LANES;
    for (var i = 0u; i < M; i++) {
        partial[i * 256u + lid] = acc[i];
        if with_squares && lid < LANES {
            squares[i * LANES + lid] = sq[i];
        }
    }
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride = stride / 2u) {
        if lane < stride {
            for (var i = 0u; i < M; i++) {
                partial[i * 256u + lid] += partial[i * 256u + lid + stride];
                if with_squares && lid < LANES {
                    squares[i * LANES + lid] += squares[i * LANES + lid + stride];
                }
            }
        }
        workgroupBarrier();
    }
}

// A lane's sums for each row of x: of products with w, with up, and of squares (for the norm).
struct Sums {
    acc: array<f32, MAX_M>,
    acc_up: array<f32, MAX_M>,
    sq: array<f32, MAX_M>,
}

// Adds the products of every row of x with chunk `c` of a weight row (`raw`, and `raw_up` of
// `up`'s), the row's chunks starting at chunk `row` of the weight.
fn add_chunk(sums: ptr<function, Sums>, row: u32, c: u32, raw: vec4<u32>, raw_up: vec4<u32>) {
    let k4 = p.k / 4u;
    let swiglu = EPILOGUE == EPILOGUE_SWIGLU;
    let scale = w_scale(row + c);
    let scale_up = up_scale(row + c);
    for (var q = 0u; q < w_PER_CHUNK / 4u; q++) {
        let j = c * (w_PER_CHUNK / 4u) + q;
        let wv = w_part(raw, scale, q);
        var uv = vec4<f32>(0.0);
        if swiglu {
            uv = up_part(raw_up, scale_up, q);
        }
        var gv = vec4<f32>(1.0);
        if NORM {
            gv = gain4(4u * j);
        }
        for (var i = 0u; i < M; i++) {
            let xv = x[i * k4 + j];
            var h = xv;
            if NORM {
                (*sums).sq[i] += dot(xv, xv);
                h = xv * gv;
            }
            (*sums).acc[i] += dot(h, wv);
            if swiglu {
                (*sums).acc_up[i] += dot(h, uv);
            }
        }
    }
}

// Chunk `at` of `up`, where SwiGLU reads it.
fn load_up(at: u32) -> vec4<u32> {
    if EPILOGUE == EPILOGUE_SWIGLU {
        return up_load(at);
    }
    return vec4<u32>(0u);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let lane = lid % LANES;
    let r = workgroup_index(wid, nwg) * ROWS + lid / LANES;
    let chunks = p.k / w_PER_CHUNK;
    let swiglu = EPILOGUE == EPILOGUE_SWIGLU;
    var sums: Sums;
    // (The first weight row of a workgroup is never past the end, so its lanes sum the squares.)
    if r < p.n {
        let row = r * chunks;
        var c = lane;
        // Two chunks a lane in flight, then the one left over.
        for (; c + LANES < chunks; c += 2u * LANES) {
            let a = w_load(row + c);
            let a_up = load_up(row + c);
            let b = w_load(row + c + LANES);
            let b_up = load_up(row + c + LANES);
            add_chunk(&sums, row, c, a, a_up);
            add_chunk(&sums, row, c + LANES, b, b_up);
        }
        if c < chunks {
            add_chunk(&sums, row, c, w_load(row + c), load_up(row + c));
        }
        if w_corrects_rounding {
            for (var g = lane; g < p.groups; g += LANES) {
                let middle = w_middle(r * p.groups + g);
                var middle_up = 0.0;
                if swiglu {
                    middle_up = up_middle(r * p.groups + g);
                }
                for (var i = 0u; i < M; i++) {
                    sums.acc[i] += middle * lost[i * p.groups + g];
                    sums.acc_up[i] += middle_up * lost[i * p.groups + g];
                }
            }
        }
    }
    sum_lanes(lid, sums.acc, sums.sq, NORM);
    var gate: array<f32, MAX_M>;
    for (var i = 0u; i < M; i++) {
        gate[i] = partial[i * 256u + lid];
    }
    if swiglu {
        workgroupBarrier();
        sum_lanes(lid, sums.acc_up, sums.sq, false);
    }
    if lane == 0u && r < p.n {
        for (var i = 0u; i < M; i++) {
            var v = gate[i];
            var scale = 1.0;
            if NORM {
                scale = 1.0 / sqrt(squares[i * LANES] / f32(p.k) + p.eps);
            }
            v *= scale;
            if p.has_bias != 0u {
                v += bias(p.y_offset + r);
            }
            let at = i * p.y_stride + p.y_offset + r;
            if EPILOGUE == EPILOGUE_ADD {
                v = residual[at] + v;
            } else if swiglu {
                v = silu(v) * (partial[i * 256u + lid] * scale);
            }
            y[at] = v;
        }
    }
}
