// `y [m, n] = x [m, k] @ w [n, k]^T (+ bias)` against a q8 or q4 weight for at most 8 rows (decode
// steps), as integer dot products: the arithmetic of the CPU's and the CUDA kernels' decode
// products. `x` comes rounded per group of 32 to int8 codes, four to a word (quantize_rows.wgsl),
// with each group's scale and what the rounding took from its sum (`x_groups`). A group's
// products are exact integer dots of bytes (`dot4I8Packed`), scaled once; for q4 the offset times
// the codes' sum is added, and the rounding loss counted at the middle of the codes (7.5).
//
// 32 threads a weight row, 8 weight rows a workgroup (gemv_sums.wgsl). Each thread reads 16 bytes
// of the weight a load (a chunk: 16 q8 codes, half a group, or 32 q4 codes, a whole one), two
// chunks in flight, and the x codes beside them, which neighbouring lanes read side by side.
// For q4, x's codes come in the nibbles' order: each 8 values as the even ones' word, then the
// odd ones'.
//
// The epilogues `residual + x w^T` and SwiGLU's `silu(x w^T) * (x up^T)` with the second matrix
// `up` (in w's format); x's rows and the epilogue are constants of each pipeline (overrides).

// x's codes, `k / 16` vectors a row.
@group(0) @binding(1) var<storage, read> x: array<vec4<u32>>;
// x's group scales (`m * groups`), then what rounding took from each group's sum (as many).
@group(0) @binding(9) var<storage, read> x_groups: array<f32>;

const ONES: u32 = 0x01010101u;
const LOW_NIBBLES: u32 = 0x0f0f0f0fu;

// Row `i` of x's products with a chunk of a weight row, its group's `scale` and offset, against
// x's group `g` (`at` the chunk's first vector of x codes).
fn chunk_dot(raw: vec4<u32>, scale: vec2<f32>, i: u32, g: u32, at: u32) -> f32 {
    let x_scale = x_groups[i * p.groups + g];
    if w_PER_CHUNK == 16u {
        let xv = x[at];
        let codes = dot4I8Packed(raw.x, xv.x) + dot4I8Packed(raw.y, xv.y) + dot4I8Packed(raw.z, xv.z)
            + dot4I8Packed(raw.w, xv.w);
        return f32(codes) * (scale.x * x_scale);
    }
    // q4: each weight word holds 8 nibbles, the even ones against x's first word of the pair,
    // the odd ones against its second.
    let xa = x[at];
    let xb = x[at + 1u];
    let codes = dot4I8Packed(raw.x & LOW_NIBBLES, xa.x) + dot4I8Packed((raw.x >> 4u) & LOW_NIBBLES, xa.y)
        + dot4I8Packed(raw.y & LOW_NIBBLES, xa.z) + dot4I8Packed((raw.y >> 4u) & LOW_NIBBLES, xa.w)
        + dot4I8Packed(raw.z & LOW_NIBBLES, xb.x) + dot4I8Packed((raw.z >> 4u) & LOW_NIBBLES, xb.y)
        + dot4I8Packed(raw.w & LOW_NIBBLES, xb.z) + dot4I8Packed((raw.w >> 4u) & LOW_NIBBLES, xb.w);
    let x_codes = dot4I8Packed(xa.x, ONES) + dot4I8Packed(xa.y, ONES) + dot4I8Packed(xa.z, ONES)
        + dot4I8Packed(xa.w, ONES) + dot4I8Packed(xb.x, ONES) + dot4I8Packed(xb.y, ONES)
        + dot4I8Packed(xb.z, ONES) + dot4I8Packed(xb.w, ONES);
    let lost = x_groups[(p.m + i) * p.groups + g];
    return x_scale * (scale.x * f32(codes) + scale.y * f32(x_codes)) + (scale.y + 7.5 * scale.x) * lost;
}

// A lane's sums for each row of x: of products with w, and with up.
struct Sums {
    acc: array<f32, MAX_M>,
    acc_up: array<f32, MAX_M>,
}

// Adds the products of every row of x with chunk `c` of a weight row (`raw`, and `raw_up` of
// `up`'s), the row's chunks starting at chunk `row` of the weight.
fn add_chunk(sums: ptr<function, Sums>, row: u32, c: u32, raw: vec4<u32>, raw_up: vec4<u32>) {
    // Vectors of x codes a chunk covers, and a row of x holds.
    let per_chunk = w_PER_CHUNK / 16u;
    let per_row = p.k / 16u;
    let g = c * w_PER_CHUNK / 32u;
    let scale = w_scale(row + c);
    var scale_up = vec2<f32>(0.0);
    if EPILOGUE == EPILOGUE_SWIGLU {
        scale_up = up_scale(row + c);
    }
    for (var i = 0u; i < M; i++) {
        let at = i * per_row + c * per_chunk;
        (*sums).acc[i] += chunk_dot(raw, scale, i, g, at);
        if EPILOGUE == EPILOGUE_SWIGLU {
            (*sums).acc_up[i] += chunk_dot(raw_up, scale_up, i, g, at);
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
    var sums: Sums;
    var unused: array<f32, MAX_M>;
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
    }
    sum_lanes(lid, sums.acc, unused, false);
    var gate: array<f32, MAX_M>;
    for (var i = 0u; i < M; i++) {
        gate[i] = partial[i * 256u + lid];
    }
    if EPILOGUE == EPILOGUE_SWIGLU {
        workgroupBarrier();
        sum_lanes(lid, sums.acc_up, unused, false);
    }
    if lane == 0u && r < p.n {
        for (var i = 0u; i < M; i++) {
            var v = gate[i];
            if p.has_bias != 0u {
                v += bias(p.y_offset + r);
            }
            let at = i * p.y_stride + p.y_offset + r;
            if EPILOGUE == EPILOGUE_ADD {
                v = residual[at] + v;
            } else if EPILOGUE == EPILOGUE_SWIGLU {
                v = silu(v) * partial[i * 256u + lid];
            }
            y[at] = v;
        }
    }
}
