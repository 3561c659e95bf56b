// What both decode GEMVs (gemv.wgsl, gemv_int8.wgsl) share: their parameters, epilogues and
// outputs; 32 lanes a weight row, 8 weight rows a workgroup of 256, at most 8 rows of x, and the
// sum of each weight row's lanes.

// `n` weight rows (a piece of a weight kept in pieces, whose columns of `y` start at `y_offset`
// in rows `y_stride` wide), rows `groups` groups of 32 long.
struct Params {
    m: u32,
    n: u32,
    k: u32,
    has_bias: u32,
    y_stride: u32,
    y_offset: u32,
    groups: u32,
    // gemv.wgsl's norm's epsilon, where NORM.
    eps: f32,
}

const EPILOGUE_PLAIN: u32 = 0u;
const EPILOGUE_ADD: u32 = 1u;
const EPILOGUE_SWIGLU: u32 = 2u;

// Rows of x, at most MAX_M (the loops' bound; p.m is the same number).
override M: u32 = 8u;
// EPILOGUE_PLAIN, EPILOGUE_ADD or EPILOGUE_SWIGLU.
override EPILOGUE: u32 = 0u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
// The epilogue's residual, where EPILOGUE_ADD.
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

