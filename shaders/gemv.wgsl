// `y [m, n] = x [m, k] @ w [n, k]^T (+ bias)` against a float weight for at most 8 rows (decode
// steps), k a multiple of 4: 32 threads a weight row, 8 weight rows a workgroup (gemv_sums.wgsl),
// each thread reading 4 weights at a time (`w4`), so each weight is read once for every row of x.
// Quantized weights take gemv_int8.wgsl.
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

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let lane = lid % LANES;
    let r = workgroup_index(wid, nwg) * ROWS + lid / LANES;
    let k4 = p.k / 4u;
    let swiglu = EPILOGUE == EPILOGUE_SWIGLU;
    let norm = NORM;
    var acc: array<f32, MAX_M>;
    var acc_up: array<f32, MAX_M>;
    var sq: array<f32, MAX_M>;
    // (The first weight row of a workgroup is never past the end, so its lanes sum the squares.)
    if r < p.n {
        for (var j = lane; j < k4; j += LANES) {
            let wv = w4(r * p.k + 4u * j);
            var uv = vec4<f32>(0.0);
            if swiglu {
                uv = up4(r * p.k + 4u * j);
            }
            var gv = vec4<f32>(1.0);
            if norm {
                gv = gain4(4u * j);
            }
            for (var i = 0u; i < M; i++) {
                let xv = x[i * k4 + j];
                var h = xv;
                if norm {
                    sq[i] += dot(xv, xv);
                    h = xv * gv;
                }
                acc[i] += dot(h, wv);
                if swiglu {
                    acc_up[i] += dot(h, uv);
                }
            }
        }
    }
    sum_lanes(lid, acc, sq, norm);
    var gate: array<f32, MAX_M>;
    for (var i = 0u; i < M; i++) {
        gate[i] = partial[i * 256u + lid];
    }
    if swiglu {
        workgroupBarrier();
        sum_lanes(lid, acc_up, sq, false);
    }
    if lane == 0u && r < p.n {
        for (var i = 0u; i < M; i++) {
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
            if EPILOGUE == EPILOGUE_ADD {
                v = residual[at] + v;
            } else if swiglu {
                v = silu(v) * (partial[i * 256u + lid] * scale);
            }
            y[at] = v;
        }
    }
}
