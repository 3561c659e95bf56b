// The decode GEMVs' sum of each weight row's lanes (gemv_sums.wgsl) by subgroup operations: a
// weight row's 32 lanes are one subgroup (the host takes this only where every subgroup is 32
// invocations, which run in order of `local_invocation_index`), so one `subgroupAdd` sums them,
// where workgroup memory takes five halvings with a barrier each. (wgpu takes subgroup operations
// from the device's feature, without `enable subgroups`.)

// Sums `acc` over each weight row's 32 lanes into `partial[i * 256 + lid]` of its lane 0, and, with
// `with_squares`, `sq` over the first weight row's lanes into `squares[i * LANES]`.
fn sum_lanes(lid: u32, acc: array<f32, MAX_M>, sq: array<f32, MAX_M>, with_squares: bool) {
    for (var i = 0u; i < M; i++) {
        partial[i * 256u + lid] = subgroupAdd(acc[i]);
        // Every lane takes part in the sum (subgroup operations want them all); the first row's
        // lanes keep it.
        let squared = subgroupAdd(sq[i]);
        if with_squares && lid < LANES {
            squares[i * LANES + lid] = squared;
        }
    }
    workgroupBarrier();
}
