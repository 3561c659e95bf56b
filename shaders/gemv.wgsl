// `y [m, n] = x [m, k] @ w [n, k]^T (+ bias)` against a float weight for at most 8 rows (decode
// steps), k a multiple of 4: 32 threads a weight row, 8 weight rows a workgroup (gemv_sums.wgsl),
// each thread reading 4 weights a load (`w_chunk`: 8 bytes of bf16, so a subgroup's load is 256
// contiguous bytes, and its x beside its neighbours'), two loads in flight, so each weight is read
// once for every row of x. Quantized weights take gemv_int8.wgsl.
//
// The decode step's fused forms, so a layer takes fewer dispatches: the input RMS-normalised on
// the way (`NORM`: each row's squares are summed by the lanes that read it anyway, and the
// products scaled by the inverse root at the end), and the epilogues `residual + x w^T` and
// SwiGLU's `silu(x w^T) * (x up^T)` with the second matrix `up`.
//
// The rows of x, the epilogue and the norm are constants of each pipeline (overrides), so a
// compiler sees fixed loop bounds and only the epilogue it runs: a product carries the sums of
// its own rows alone, and the SwiGLU sums and the squares only where it needs them.

// Whether x goes in RMS-normalised with `gain`.
override NORM: bool = false;

@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;

// A lane's sums for each row of x: of products with w, with up, and of x's squares.
struct Sums {
    acc: array<f32, MAX_M>,
    acc_up: array<f32, MAX_M>,
    sq: array<f32, MAX_M>,
}

// Chunk `c` of `up`, where SwiGLU reads it.
fn load_up(c: u32) -> vec4<f32> {
    if EPILOGUE == EPILOGUE_SWIGLU {
        return up_chunk(c);
    }
    return vec4<f32>(0.0);
}

// The norm's gain over x's values `4j ..`, where x is normalised.
fn load_gain(j: u32) -> vec4<f32> {
    if NORM {
        return gain4(4u * j);
    }
    return vec4<f32>(1.0);
}

// Adds the products of every row of x's vector `j` with a weight row's (`wv`, and `uv` of up's).
fn add_chunk(sums: ptr<function, Sums>, j: u32, wv: vec4<f32>, uv: vec4<f32>, gv: vec4<f32>) {
    let k4 = p.k / 4u;
    for (var i = 0u; i < M; i++) {
        let xv = x[i * k4 + j];
        var h = xv;
        if NORM {
            (*sums).sq[i] += dot(xv, xv);
            h = xv * gv;
        }
        (*sums).acc[i] += dot(h, wv);
        if EPILOGUE == EPILOGUE_SWIGLU {
            (*sums).acc_up[i] += dot(h, uv);
        }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let lane = lid % LANES;
    let r = workgroup_index(wid, nwg) * ROWS + lid / LANES;
    let k4 = p.k / 4u;
    var sums: Sums;
    // (The first weight row of a workgroup is never past the end, so its lanes sum the squares.)
    if r < p.n {
        let row = r * k4;
        var j = lane;
        // Two chunks a lane in flight, then the one left over.
        for (; j + LANES < k4; j += 2u * LANES) {
            let wa = w_chunk(row + j);
            let ua = load_up(row + j);
            let wb = w_chunk(row + j + LANES);
            let ub = load_up(row + j + LANES);
            add_chunk(&sums, j, wa, ua, load_gain(j));
            add_chunk(&sums, j + LANES, wb, ub, load_gain(j + LANES));
        }
        if j < k4 {
            add_chunk(&sums, j, w_chunk(row + j), load_up(row + j), load_gain(j));
        }
    }
    sum_lanes(lid, sums.acc, sums.sq, NORM);
    var gate: array<f32, MAX_M>;
    for (var i = 0u; i < M; i++) {
        gate[i] = partial[i * 256u + lid];
    }
    let swiglu = EPILOGUE == EPILOGUE_SWIGLU;
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
