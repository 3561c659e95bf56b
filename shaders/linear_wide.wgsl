// `y [m, n] = x [m, k] @ w [n, k]^T (+ bias)` for long inputs (DiT windows, prefill), k a multiple
// of 4: 128 x 128 output tiles, 16 x 16 threads of 8 x 8 outputs held in sixteen vec4 registers,
// 16-deep slices of x and w staged in workgroup memory, f32 accumulation. Global memory is read
// 16 bytes at a time (`x` as vec4s, the weight through `w4`, unpacked four values at a time), and
// the next slice's loads are issued before the current slice is multiplied, so they are in flight
// while it is. Eight rows and eight columns a thread make each value read from workgroup memory
// serve eight products.

// (The parameters `p` and the output `y` are product_params.wgsl's.)
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;

const TILE: u32 = 128u;
const DEPTH: u32 = 16u;
// [DEPTH][TILE / 4] vec4s: a thread reads its eight rows (or columns) of one depth as two vec4s.
var<workgroup> xs: array<vec4<f32>, 512>;
var<workgroup> ws: array<vec4<f32>, 512>;

// The two vec4s of x and of w this thread brings in for the slice at depth `k0`: element
// `lid + 256 r` of the slice is row `e / 4`, depths `4 (e % 4) .. + 4`.
fn load_x(m0: u32, k0: u32, lid: u32, r: u32) -> vec4<f32> {
    let e = lid + r * 256u;
    let row = m0 + e / 4u;
    let kk = k0 + 4u * (e % 4u);
    if row < p.m && kk < p.k {
        return x[(row * p.k + kk) / 4u];
    }
    return vec4<f32>();
}

fn load_w(n0: u32, k0: u32, lid: u32, r: u32) -> vec4<f32> {
    let e = lid + r * 256u;
    let row = n0 + e / 4u;
    let kk = k0 + 4u * (e % 4u);
    if row < p.n && kk < p.k {
        return w4(row * p.k + kk);
    }
    return vec4<f32>();
}

// Stores a loaded vec4 (four depths of one row) depth-major.
fn store(to_x: bool, lid: u32, r: u32, v: vec4<f32>) {
    let e = lid + r * 256u;
    let row = e / 4u;
    let d0 = 4u * (e % 4u);
    for (var j = 0u; j < 4u; j++) {
        if to_x {
            xs[(d0 + j) * 32u + row / 4u][row % 4u] = v[j];
        } else {
            ws[(d0 + j) * 32u + row / 4u][row % 4u] = v[j];
        }
    }
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) tid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let n0 = wid.x * TILE;
    let m0 = wid.y * TILE;
    // acc[2 * i + h]: row i of the thread's eight, columns 4h .. 4h + 4.
    var acc: array<vec4<f32>, 16>;
    var xa0 = load_x(m0, 0u, lid, 0u);
    var xa1 = load_x(m0, 0u, lid, 1u);
    var wa0 = load_w(n0, 0u, lid, 0u);
    var wa1 = load_w(n0, 0u, lid, 1u);
    for (var k0 = 0u; k0 < p.k; k0 += DEPTH) {
        workgroupBarrier();
        store(true, lid, 0u, xa0);
        store(true, lid, 1u, xa1);
        store(false, lid, 0u, wa0);
        store(false, lid, 1u, wa1);
        workgroupBarrier();
        // The next slice's loads go out before this one's products.
        let next = k0 + DEPTH;
        xa0 = load_x(m0, next, lid, 0u);
        xa1 = load_x(m0, next, lid, 1u);
        wa0 = load_w(n0, next, lid, 0u);
        wa1 = load_w(n0, next, lid, 1u);
        for (var kk = 0u; kk < DEPTH; kk++) {
            let a0 = xs[kk * 32u + tid.y * 2u];
            let a1 = xs[kk * 32u + tid.y * 2u + 1u];
            let b0 = ws[kk * 32u + tid.x * 2u];
            let b1 = ws[kk * 32u + tid.x * 2u + 1u];
            let a = array<f32, 8>(a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w);
            for (var i = 0u; i < 8u; i++) {
                acc[2u * i] = fma(vec4<f32>(a[i]), b0, acc[2u * i]);
                acc[2u * i + 1u] = fma(vec4<f32>(a[i]), b1, acc[2u * i + 1u]);
            }
        }
    }
    let col0 = n0 + tid.x * 8u;
    var bias8 = array<vec4<f32>, 2>();
    if p.has_bias != 0u {
        for (var j = 0u; j < 8u; j++) {
            if col0 + j < p.n {
                bias8[j / 4u][j % 4u] = bias(p.y_offset + col0 + j);
            }
        }
    }
    for (var i = 0u; i < 8u; i++) {
        let row = m0 + tid.y * 8u + i;
        if row < p.m {
            for (var h = 0u; h < 2u; h++) {
                let v = acc[2u * i + h] + bias8[h];
                for (var j = 0u; j < 4u; j++) {
                    let col = col0 + 4u * h + j;
                    if col < p.n {
                        y[row * p.y_stride + p.y_offset + col] = v[j];
                    }
                }
            }
        }
    }
}
