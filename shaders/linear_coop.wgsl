// `y [m, n] = x [m, k] @ w [n, k]^T (+ bias)` on the matrix units (tensor cores) through wgpu's
// cooperative matrices: 16 x 16 x 16 products of f16 inputs into f32 sums, a subgroup of 32 lanes
// each. The host takes this program only where the adapter offers that shape with subgroups of 32
// and the weight is f16 with rows a multiple of 8 long (the DiT's matrices under the bf16 policy
// on such an adapter): x is rounded to f16 as it is staged, as the CUDA backend rounds it to bf16
// for its tensor cores.
//
// A workgroup of 8 subgroups computes a 128 x 128 tile of y, each subgroup a 32 x 64 part of it as
// 2 x 4 fragments, so each fragment loaded from workgroup memory feeds two to four products
// (a 128 x 64 tile of 2 x 2 fragments fed each only two, and read x from memory twice as often).
// Slices of 64 depths of x and w are staged in workgroup memory as f16 (rows padded to 72 halves
// against bank conflicts), zeros past the ends; the weight comes 16 bytes (8 halves) a load, and
// the next slice's loads are issued before the current slice is multiplied. A tile inside y
// without a bias is stored straight from the fragments; elsewhere each fragment goes through
// workgroup memory, so the tile's edges, the bias and a piece's column offset are handled per
// element. (The preamble that enables f16 and cooperative matrices is put first by the host.)

// `n` weight rows (a piece of a weight kept in pieces, whose columns of `y` start at `y_offset`
// in rows `y_stride` wide).
struct Params {
    m: u32,
    n: u32,
    k: u32,
    has_bias: u32,
    y_stride: u32,
    y_offset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

const TILE_M: u32 = 128u;
const TILE_N: u32 = 128u;
const DEPTH: u32 = 64u;
// A staged row: 64 halves and 8 of padding, as vec4s (the fragments' loads count in vec4s).
const ROW4: u32 = 18u;
var<workgroup> xs: array<vec4<f16>, 2304>;
var<workgroup> ws: array<vec4<f16>, 2304>;
// A 16 x 16 fragment of sums of each subgroup, on its way to y at the tile's edges.
var<workgroup> sums: array<f32, 2048>;

// Vec4 `e` of a slice of 64 depths (row `e / 16`, depths `4 (e % 16)..`) of x from row `m0` and
// depth `k0`; zeros past the ends.
fn load_x(m0: u32, k0: u32, e: u32) -> vec4<f32> {
    let row = m0 + e / 16u;
    let kk = k0 + 4u * (e % 16u);
    if row < p.m && kk < p.k {
        return x[(row * p.k + kk) / 4u];
    }
    return vec4<f32>();
}

// Chunk `e` of a slice of w (row `e / 8`, depths `8 (e % 8)..`), 8 halves as 4 words.
fn load_w(n0: u32, k0: u32, e: u32) -> vec4<u32> {
    let row = n0 + e / 8u;
    let kk = k0 + 8u * (e % 8u);
    if row < p.n && kk < p.k {
        return w_load((row * p.k + kk) / 8u);
    }
    return vec4<u32>();
}

fn halves(a: u32, b: u32) -> vec4<f16> {
    // (Through f32 and back, exactly: naga takes no bitcast from a u32 to two halves.)
    return vec4<f16>(vec4<f32>(unpack2x16float(a), unpack2x16float(b)));
}

// The sums of fragment `c` (rows `row0..`, columns `col0..` of y's tile) out through the
// subgroup's slot of `sums` at `own`, by its lanes, per element.
fn store_edge(c: coop_mat16x16<f32, C>, own: u32, lane: u32, row0: u32, col0: u32) {
    let s16 = 16u;
    workgroupBarrier();
    coopStoreT(c, &sums[own], s16);
    workgroupBarrier();
    for (var e = lane; e < 256u; e += 32u) {
        let row = row0 + e / 16u;
        let col = col0 + e % 16u;
        if row < p.m && col < p.n {
            var v = sums[own + e];
            if p.has_bias != 0u {
                v += bias(p.y_offset + col);
            }
            y[row * p.y_stride + p.y_offset + col] = v;
        }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n0 = wid.x * TILE_N;
    let m0 = wid.y * TILE_M;
    // The subgroup's part: rows `qm .. qm + 32`, columns `qn .. qn + 64` of the tile.
    let sg = lid / 32u;
    let lane = lid % 32u;
    let qm = (sg / 2u) * 32u;
    let qn = (sg % 2u) * 64u;
    var c00 = coop_mat16x16<f32, C>();
    var c01 = coop_mat16x16<f32, C>();
    var c02 = coop_mat16x16<f32, C>();
    var c03 = coop_mat16x16<f32, C>();
    var c10 = coop_mat16x16<f32, C>();
    var c11 = coop_mat16x16<f32, C>();
    var c12 = coop_mat16x16<f32, C>();
    var c13 = coop_mat16x16<f32, C>();
    // A slice is 2048 vec4s of x and 1024 chunks of w: eight and four a thread.
    var xa = array<vec4<f32>, 8>();
    var wa = array<vec4<u32>, 4>();
    for (var r = 0u; r < 8u; r++) {
        xa[r] = load_x(m0, 0u, lid + 256u * r);
    }
    for (var r = 0u; r < 4u; r++) {
        wa[r] = load_w(n0, 0u, lid + 256u * r);
    }
    for (var k0 = 0u; k0 < p.k; k0 += DEPTH) {
        workgroupBarrier();
        for (var r = 0u; r < 8u; r++) {
            let e = lid + 256u * r;
            xs[(e / 16u) * ROW4 + e % 16u] = vec4<f16>(xa[r]);
        }
        for (var r = 0u; r < 4u; r++) {
            let e = lid + 256u * r;
            let at = (e / 8u) * ROW4 + 2u * (e % 8u);
            ws[at] = halves(wa[r].x, wa[r].y);
            ws[at + 1u] = halves(wa[r].z, wa[r].w);
        }
        workgroupBarrier();
        let next = k0 + DEPTH;
        for (var r = 0u; r < 8u; r++) {
            xa[r] = load_x(m0, next, lid + 256u * r);
        }
        for (var r = 0u; r < 4u; r++) {
            wa[r] = load_w(n0, next, lid + 256u * r);
        }
        for (var kk = 0u; kk < DEPTH; kk += 16u) {
            // (Each index and stride a `let` of its own: naga's SPIR-V wants them named.)
            let ia0 = qm * ROW4 + kk / 4u;
            let ia1 = (qm + 16u) * ROW4 + kk / 4u;
            let ib0 = qn * ROW4 + kk / 4u;
            let ib1 = (qn + 16u) * ROW4 + kk / 4u;
            let ib2 = (qn + 32u) * ROW4 + kk / 4u;
            let ib3 = (qn + 48u) * ROW4 + kk / 4u;
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
    let row0 = m0 + qm;
    let col0 = n0 + qn;
    // (Uniform across the workgroup: every subgroup takes the same way.)
    if m0 + TILE_M <= p.m && n0 + TILE_N <= p.n && p.has_bias == 0u {
        let stride = p.y_stride;
        let at00 = row0 * stride + p.y_offset + col0;
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
        let own = sg * 256u;
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
