// `y [m, n] = x [m, k] @ w [n, k]^T (+ bias)` on the matrix units (tensor cores) through wgpu's
// cooperative matrices: 16 x 16 x 16 products of f16 inputs into f32 sums, a subgroup of 32 lanes
// each. The host takes this program only where the adapter offers that shape with subgroups of 32
// and the weight is f16 (the DiT's matrices under the bf16 policy on such an adapter): x is
// rounded to f16 as it is staged, as the CUDA backend rounds it to bf16 for its tensor cores.
//
// A workgroup of 8 subgroups computes a 128 x 64 tile of y, each subgroup a 32 x 32 part of it as
// 2 x 2 fragments. Slices of 64 depths of x and w are staged in workgroup memory as f16 (rows
// padded to 72 halves against bank conflicts), zeros past the ends, and the next slice's loads are
// issued before the current slice is multiplied. Each fragment of sums goes through workgroup
// memory to y, so the tile's edges, the bias and a piece's column offset are handled per element.
// (The preamble that enables f16 and cooperative matrices is put first by the host.)

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
const TILE_N: u32 = 64u;
const DEPTH: u32 = 64u;
// A staged row: 64 halves and 8 of padding, as vec4s (the fragments' loads count in vec4s).
const ROW4: u32 = 18u;
var<workgroup> xs: array<vec4<f16>, 2304>;
var<workgroup> ws: array<vec4<f16>, 1152>;
// A 16 x 16 fragment of sums of each subgroup, on its way to y.
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

fn load_w(n0: u32, k0: u32, e: u32) -> vec4<f32> {
    let row = n0 + e / 16u;
    let kk = k0 + 4u * (e % 16u);
    if row < p.n && kk < p.k {
        return w4(row * p.k + kk);
    }
    return vec4<f32>();
}

// Where vec4 `e` of a slice is staged.
fn staged(e: u32) -> u32 {
    return (e / 16u) * ROW4 + e % 16u;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n0 = wid.x * TILE_N;
    let m0 = wid.y * TILE_M;
    // The subgroup's part: rows `qm .. qm + 32`, columns `qn .. qn + 32` of the tile.
    let sg = lid / 32u;
    let lane = lid % 32u;
    let qm = (sg / 2u) * 32u;
    let qn = (sg % 2u) * 32u;
    var c00 = coop_mat16x16<f32, C>();
    var c01 = coop_mat16x16<f32, C>();
    var c10 = coop_mat16x16<f32, C>();
    var c11 = coop_mat16x16<f32, C>();
    // A slice is 2048 vec4s of x and 1024 of w: eight and four a thread.
    var xa = array<vec4<f32>, 8>();
    var wa = array<vec4<f32>, 4>();
    for (var r = 0u; r < 8u; r++) {
        xa[r] = load_x(m0, 0u, lid + 256u * r);
    }
    for (var r = 0u; r < 4u; r++) {
        wa[r] = load_w(n0, 0u, lid + 256u * r);
    }
    for (var k0 = 0u; k0 < p.k; k0 += DEPTH) {
        workgroupBarrier();
        for (var r = 0u; r < 8u; r++) {
            xs[staged(lid + 256u * r)] = vec4<f16>(xa[r]);
        }
        for (var r = 0u; r < 4u; r++) {
            ws[staged(lid + 256u * r)] = vec4<f16>(wa[r]);
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
            let stride = ROW4;
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[ia0], stride);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[ia1], stride);
            // B [k][n] is w's row n at depth k: column-major in the staged rows.
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[ib0], stride);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[ib1], stride);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
        }
    }
    // The four fragments one at a time through the subgroup's slot of `sums`, then out by its
    // lanes: fragment f covers rows qm + 16 (f / 2) and columns qn + 16 (f % 2).
    let own = sg * 256u;
    let s16 = 16u;
    for (var f = 0u; f < 4u; f++) {
        workgroupBarrier();
        switch f {
            case 0u: {
                coopStoreT(c00, &sums[own], s16);
            }
            case 1u: {
                coopStoreT(c01, &sums[own], s16);
            }
            case 2u: {
                coopStoreT(c10, &sums[own], s16);
            }
            default: {
                coopStoreT(c11, &sums[own], s16);
            }
        }
        workgroupBarrier();
        for (var e = lane; e < 256u; e += 32u) {
            let row = m0 + qm + 16u * (f / 2u) + e / 16u;
            let col = n0 + qn + 16u * (f % 2u) + e % 16u;
            if row < p.m && col < p.n {
                var v = sums[own + e];
                if p.has_bias != 0u {
                    v += bias(p.y_offset + col);
                }
                y[row * p.y_stride + p.y_offset + col] = v;
            }
        }
    }
}
