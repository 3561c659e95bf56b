// `y [m, n] = x [m, k] @ w [n, k]^T (+ bias)` for long inputs (DiT windows, prefill): 128 x 128
// output tiles, 16 x 16 threads of 8 x 8 outputs held in sixteen vec4 registers, 8-deep slices of
// x and w staged in workgroup memory, f32 accumulation. Eight rows and eight columns a thread
// make each value read from workgroup memory serve eight products (linear.wgsl's 4 x 4: four).
// `w(i)` reads the weight's format, unpacked as read.

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
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

const TILE: u32 = 128u;
const DEPTH: u32 = 8u;
// [DEPTH][TILE / 4] vec4s: a thread reads its eight rows (or columns) of one depth as two vec4s.
var<workgroup> xs: array<vec4<f32>, 256>;
var<workgroup> ws: array<vec4<f32>, 256>;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) tid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let n0 = wid.x * TILE;
    let m0 = wid.y * TILE;
    // acc[2 * i + h]: row i of the thread's eight, columns 4h .. 4h + 4.
    var acc: array<vec4<f32>, 16>;
    for (var k0 = 0u; k0 < p.k; k0 += DEPTH) {
        for (var r = 0u; r < 4u; r++) {
            let e = lid + r * 256u;
            let row = e / DEPTH;
            let col = e % DEPTH;
            let kk = k0 + col;
            var xv = 0.0;
            if m0 + row < p.m && kk < p.k {
                xv = x[(m0 + row) * p.k + kk];
            }
            xs[col * 32u + row / 4u][row % 4u] = xv;
            var wv = 0.0;
            if n0 + row < p.n && kk < p.k {
                wv = w((n0 + row) * p.k + kk);
            }
            ws[col * 32u + row / 4u][row % 4u] = wv;
        }
        workgroupBarrier();
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
        workgroupBarrier();
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
