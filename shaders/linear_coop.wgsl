// `y [m, n] = x [m, k] @ w [n, k]^T (+ bias)` on the matrix units (tensor cores) through wgpu's
// cooperative matrices: 16 x 16 x 16 products of f16 inputs into f32 sums, a subgroup of 32 lanes
// each. The host takes this program only where the adapter offers that shape with subgroups of 32
// and the weight is f16 with rows a multiple of 8 long (the DiT's matrices under the bf16 policy
// on such an adapter), or q8 or q4 (the DiT under the smaller memory plans): x is rounded to f16
// as it is staged, as the CUDA backend rounds it to bf16 for its tensor cores, and a quantized
// weight's values too, each its code times its group's scale (plus offset).
//
// With `GLU`, the product's halves meet in the GLU on the way out: `y [m, n / 2] = silu(h [:, n /
// 2 ..]) * h [:, .. n / 2]` for `h = x w^T (+ bias)`, so `h` is never written.
//
// A workgroup of 8 subgroups computes a 128 x 128 tile of products, each subgroup a 32 x 64 part
// of it as 2 x 4 fragments, so each fragment loaded from workgroup memory feeds two to four
// products. Under GLU a tile's 128 weight rows are 64 of each half, the same output columns, and
// each subgroup holds 32 columns of both. Slices of 64 depths of x and w are staged in workgroup
// memory as f16 (rows padded to 72 halves against bank conflicts), zeros past the ends; the
// weight comes 16 bytes a load (8 halves, 16 q8 codes or 32 q4 ones), and the next slice's loads
// wait in registers while the current slice is multiplied. The sums start from the bias. A plain
// tile inside y is stored straight from the fragments; elsewhere each fragment goes through
// workgroup memory, so the tile's edges, a piece's column offset and the GLU are handled per
// element. (The preamble that enables f16 and cooperative matrices is put first by the host.)

// Whether the product's two halves meet in the GLU.
override GLU: bool = false;

// (The parameters `p` and the output `y` are product_params.wgsl's.)
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;

const TILE_M: u32 = 128u;
const TILE_N: u32 = 128u;
const DEPTH: u32 = 64u;
// A staged row: DEPTH halves and 8 of padding, as vec4s (the fragments' loads count in vec4s).
const ROW4: u32 = DEPTH / 4u + 2u;
// A slice's vec4s of x (4 values each) and chunks of w a thread loads, and a slice's chunks
// across a weight row.
const X_LOADS: u32 = DEPTH / 8u;
const W_LOADS: u32 = 128u * DEPTH / w_PER_CHUNK / 256u;
const W_ROW_CHUNKS: u32 = DEPTH / w_PER_CHUNK;
var<workgroup> xs: array<vec4<f16>, 128u * ROW4>;
var<workgroup> ws: array<vec4<f16>, 128u * ROW4>;
// The bias across the tile's columns, 16 rows of it, as the sums start; then a 16 x 16 fragment
// of sums of each subgroup, on its way to y.
var<workgroup> sums: array<f32, 2048>;

// The tile's output columns: 128 of a plain product, 64 under GLU.
fn tile_columns() -> u32 {
    if GLU {
        return TILE_N / 2u;
    }
    return TILE_N;
}

// The weight row of the tile's row `t` (of 128), from output column `n0`; past the end where it is
// `p.n` or more.
fn weight_row(n0: u32, t: u32) -> u32 {
    if GLU {
        let half = p.n / 2u;
        let column = n0 + t % 64u;
        if column >= half {
            return p.n;
        }
        return select(column, half + column, t >= 64u);
    }
    return n0 + t;
}

// Vec4 `e` of a slice of DEPTH depths of x (row `e / (DEPTH / 4)`) from row `m0` and depth `k0`;
// zeros past the ends.
fn load_x(m0: u32, k0: u32, e: u32) -> vec4<f32> {
    let row = m0 + e / (DEPTH / 4u);
    let kk = k0 + 4u * (e % (DEPTH / 4u));
    if row < p.m && kk < p.k {
        return x[(row * p.k + kk) / 4u];
    }
    return vec4<f32>();
}

// The weight's chunk holding chunk `e` of a slice of w from output column `n0` and depth `k0`
// (tile row `e / W_ROW_CHUNKS`), or the weight's chunk count where that is past the ends.
fn chunk_of(n0: u32, k0: u32, e: u32) -> u32 {
    let row = weight_row(n0, e / W_ROW_CHUNKS);
    let kk = k0 + w_PER_CHUNK * (e % W_ROW_CHUNKS);
    if row < p.n && kk < p.k {
        return (row * p.k + kk) / w_PER_CHUNK;
    }
    return p.n * p.k / w_PER_CHUNK;
}

fn load_w(n0: u32, k0: u32, e: u32) -> vec4<u32> {
    let c = chunk_of(n0, k0, e);
    if c < p.n * p.k / w_PER_CHUNK {
        return w_load(c);
    }
    return vec4<u32>();
}

// Fragment `c` into the subgroup's slot of `sums` at `own`, for its lanes to read.
fn to_sums(c: coop_mat16x16<f32, C>, own: u32) {
    let s16 = 16u;
    workgroupBarrier();
    coopStoreT(c, &sums[own], s16);
    workgroupBarrier();
}

// The sums of fragment `c` (rows `row0..`, columns `col0..` of y) out through `sums`, per element.
fn store_edge(c: coop_mat16x16<f32, C>, own: u32, lane: u32, row0: u32, col0: u32) {
    to_sums(c, own);
    for (var e = lane; e < 256u; e += 32u) {
        let row = row0 + e / 16u;
        let col = col0 + e % 16u;
        if row < p.m && col < p.n {
            y[row * p.y_stride + p.y_offset + col] = sums[own + e];
        }
    }
}

// The GLU of fragments `gate` (the second half's) and `value` (the first's), rows `row0..` and
// output columns `col0..`, out through `sums`.
fn store_glu(gate: coop_mat16x16<f32, C>, value: coop_mat16x16<f32, C>, own: u32, lane: u32, row0: u32, col0: u32) {
    var gated: array<f32, 8>;
    to_sums(gate, own);
    for (var i = 0u; i < 8u; i++) {
        gated[i] = silu(sums[own + lane + 32u * i]);
    }
    to_sums(value, own);
    for (var i = 0u; i < 8u; i++) {
        let e = lane + 32u * i;
        let row = row0 + e / 16u;
        let col = col0 + e % 16u;
        if row < p.m && col < p.n / 2u {
            y[row * p.y_stride + col] = gated[i] * sums[own + e];
        }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n0 = wid.x * tile_columns();
    let m0 = wid.y * TILE_M;
    // The subgroup's part: rows `qm .. qm + 32`, and the tile rows of w (columns of the product)
    // of its four fragments: 64 in a row, or under GLU 32 of each half.
    let sg = lid / 32u;
    let lane = lid % 32u;
    let qm = (sg / 2u) * 32u;
    var qb = vec4<u32>(0u, 16u, 32u, 48u) + (sg % 2u) * 64u;
    if GLU {
        qb = vec4<u32>(0u, 16u, 64u, 80u) + (sg % 2u) * 32u;
    }
    // The sums start from the bias: 16 rows of it across the tile, loaded as fragments.
    var c00 = coop_mat16x16<f32, C>();
    var c01 = coop_mat16x16<f32, C>();
    var c02 = coop_mat16x16<f32, C>();
    var c03 = coop_mat16x16<f32, C>();
    if p.has_bias != 0u {
        for (var e = lid; e < 2048u; e += 256u) {
            let row = weight_row(n0, e % 128u);
            var b = 0.0;
            // A matrix in pieces: this piece's rows are the output's from y_offset on, and so
            // are their biases.
            if row < p.n {
                b = bias(p.y_offset + row);
            }
            sums[e] = b;
        }
        workgroupBarrier();
        let s128 = 128u;
        let ib0 = qb.x;
        let ib1 = qb.y;
        let ib2 = qb.z;
        let ib3 = qb.w;
        c00 = coopLoadT<coop_mat16x16<f32, C>>(&sums[ib0], s128);
        c01 = coopLoadT<coop_mat16x16<f32, C>>(&sums[ib1], s128);
        c02 = coopLoadT<coop_mat16x16<f32, C>>(&sums[ib2], s128);
        c03 = coopLoadT<coop_mat16x16<f32, C>>(&sums[ib3], s128);
    }
    var c10 = c00;
    var c11 = c01;
    var c12 = c02;
    var c13 = c03;
    // The next slice waits in registers, rounded to f16 only as it is staged: rounding as it
    // arrives would wait for each load right there.
    var xa = array<vec4<f32>, X_LOADS>();
    var wa = array<vec4<u32>, W_LOADS>();
    for (var r = 0u; r < X_LOADS; r++) {
        xa[r] = load_x(m0, 0u, lid + 256u * r);
    }
    for (var r = 0u; r < W_LOADS; r++) {
        wa[r] = load_w(n0, 0u, lid + 256u * r);
    }
    for (var k0 = 0u; k0 < p.k; k0 += DEPTH) {
        workgroupBarrier();
        for (var r = 0u; r < X_LOADS; r++) {
            let e = lid + 256u * r;
            xs[(e / (DEPTH / 4u)) * ROW4 + e % (DEPTH / 4u)] = vec4<f16>(xa[r]);
        }
        // A chunk's values in f16, zeros past the ends (a q4 code of 0 is its group's offset).
        for (var r = 0u; r < W_LOADS; r++) {
            let e = lid + 256u * r;
            let c = chunk_of(n0, k0, e);
            let inside = c < p.n * p.k / w_PER_CHUNK;
            let at = (e / W_ROW_CHUNKS) * ROW4 + (w_PER_CHUNK / 4u) * (e % W_ROW_CHUNKS);
            for (var j = 0u; j < w_PER_CHUNK / 4u; j++) {
                var values = vec4<f16>();
                if inside {
                    values = vec4<f16>(w_quarter(wa[r], c, j));
                }
                ws[at + j] = values;
            }
        }
        workgroupBarrier();
        let next = k0 + DEPTH;
        for (var r = 0u; r < X_LOADS; r++) {
            xa[r] = load_x(m0, next, lid + 256u * r);
        }
        for (var r = 0u; r < W_LOADS; r++) {
            wa[r] = load_w(n0, next, lid + 256u * r);
        }
        for (var kk = 0u; kk < DEPTH; kk += 16u) {
            // (Each index and stride a `let` of its own: naga's SPIR-V wants them named.)
            let ia0 = qm * ROW4 + kk / 4u;
            let ia1 = (qm + 16u) * ROW4 + kk / 4u;
            let ib0 = qb.x * ROW4 + kk / 4u;
            let ib1 = qb.y * ROW4 + kk / 4u;
            let ib2 = qb.z * ROW4 + kk / 4u;
            let ib3 = qb.w * ROW4 + kk / 4u;
            let stride = ROW4;
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[ia0], stride);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[ia1], stride);
            // B [k][n] is w's row n at depth k: column-major in the staged rows.
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[ib0], stride);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[ib1], stride);
            let b2 = coopLoad<coop_mat16x16<f16, B>>(&ws[ib2], stride);
            let b3 = coopLoad<coop_mat16x16<f16, B>>(&ws[ib3], stride);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c02 = coopMultiplyAdd(a0, b2, c02);
            c03 = coopMultiplyAdd(a0, b3, c03);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
            c12 = coopMultiplyAdd(a1, b2, c12);
            c13 = coopMultiplyAdd(a1, b3, c13);
        }
    }
    let own = sg * 256u;
    let row0 = m0 + qm;
    // (Uniform across the workgroup: every subgroup takes the same way.)
    if GLU {
        let col0 = n0 + qb.x;
        store_glu(c02, c00, own, lane, row0, col0);
        store_glu(c03, c01, own, lane, row0, col0 + 16u);
        store_glu(c12, c10, own, lane, row0 + 16u, col0);
        store_glu(c13, c11, own, lane, row0 + 16u, col0 + 16u);
    } else if m0 + TILE_M <= p.m && n0 + TILE_N <= p.n {
        let stride = p.y_stride;
        let at00 = row0 * stride + p.y_offset + n0 + qb.x;
        let at01 = at00 + 16u;
        let at02 = at00 + 32u;
        let at03 = at00 + 48u;
        let at10 = at00 + 16u * stride;
        let at11 = at10 + 16u;
        let at12 = at10 + 32u;
        let at13 = at10 + 48u;
        coopStoreT(c00, &y[at00], stride);
        coopStoreT(c01, &y[at01], stride);
        coopStoreT(c02, &y[at02], stride);
        coopStoreT(c03, &y[at03], stride);
        coopStoreT(c10, &y[at10], stride);
        coopStoreT(c11, &y[at11], stride);
        coopStoreT(c12, &y[at12], stride);
        coopStoreT(c13, &y[at13], stride);
    } else {
        let col0 = n0 + qb.x;
        store_edge(c00, own, lane, row0, col0);
        store_edge(c01, own, lane, row0, col0 + 16u);
        store_edge(c02, own, lane, row0, col0 + 32u);
        store_edge(c03, own, lane, row0, col0 + 48u);
        store_edge(c10, own, lane, row0 + 16u, col0);
        store_edge(c11, own, lane, row0 + 16u, col0 + 16u);
        store_edge(c12, own, lane, row0 + 16u, col0 + 32u);
        store_edge(c13, own, lane, row0 + 16u, col0 + 48u);
    }
}
