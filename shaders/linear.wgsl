// `y [m, n] = x [m, k] @ w [n, k]^T (+ bias)` for many rows: 64 x 64 output tiles, 16 x 16
// threads of 4 x 4 outputs, 16-deep slices of x and w staged in workgroup memory, f32
// accumulation. `w(i)` reads the weight's format (f32, bf16, f16, q8 or q4), unpacked as read.

struct Params {
    m: u32,
    n: u32,
    k: u32,
    has_bias: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

const TILE: u32 = 64u;
const DEPTH: u32 = 16u;
// Slices stored depth-major, [DEPTH][TILE], so the inner loop reads along the tile.
var<workgroup> xs: array<f32, 1024>;
var<workgroup> ws: array<f32, 1024>;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) tid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let n0 = wid.x * TILE;
    let m0 = wid.y * TILE;
    var acc: array<f32, 16>;
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
            xs[col * TILE + row] = xv;
            var wv = 0.0;
            if n0 + row < p.n && kk < p.k {
                wv = w((n0 + row) * p.k + kk);
            }
            ws[col * TILE + row] = wv;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < DEPTH; kk++) {
            var a: array<f32, 4>;
            var b: array<f32, 4>;
            for (var i = 0u; i < 4u; i++) {
                a[i] = xs[kk * TILE + tid.y * 4u + i];
                b[i] = ws[kk * TILE + tid.x * 4u + i];
            }
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) {
                    acc[i * 4u + j] = fma(a[i], b[j], acc[i * 4u + j]);
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let row = m0 + tid.y * 4u + i;
        for (var j = 0u; j < 4u; j++) {
            let col = n0 + tid.x * 4u + j;
            if row < p.m && col < p.n {
                var v = acc[i * 4u + j];
                if p.has_bias != 0u {
                    v += bias(col);
                }
                y[row * p.n + col] = v;
            }
        }
    }
}
