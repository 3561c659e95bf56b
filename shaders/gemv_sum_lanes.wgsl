// The decode GEMVs' sum of each weight row's lanes (gemv_sums.wgsl), through workgroup memory.

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

