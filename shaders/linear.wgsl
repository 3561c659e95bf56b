// `y [m, n] = x [m, k] @ w [n, k]^T (+ bias)` for many rows: 64 x 64 output tiles, 16 x 16
// threads of 4 x 4 outputs held in four vec4 registers, 16-deep slices of x and w staged in
// workgroup memory, f32 accumulation. `w(i)` reads the weight's format (f32, bf16, f16, q8 or q4),
// unpacked as read.

// (The parameters `p` and the output `y` are product_params.wgsl's.)
@group(0) @binding(1) var<storage, read> x: array<f32>;

const TILE: u32 = 64u;
const DEPTH: u32 = 16u;
// Slices stored depth-major, [DEPTH][TILE / 4] vec4s, so a thread reads its four rows (or
// columns) of one depth as one vec4.
var<workgroup> xs: array<vec4<f32>, 256>;
var<workgroup> ws: array<vec4<f32>, 256>;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) tid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let n0 = wid.x * TILE;
    let m0 = wid.y * TILE;
    var acc0 = vec4<f32>();
    var acc1 = vec4<f32>();
    var acc2 = vec4<f32>();
    var acc3 = vec4<f32>();
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
            xs[col * 16u + row / 4u][row % 4u] = xv;
            var wv = 0.0;
            if n0 + row < p.n && kk < p.k {
                wv = w((n0 + row) * p.k + kk);
            }
            ws[col * 16u + row / 4u][row % 4u] = wv;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < DEPTH; kk++) {
            let a = xs[kk * 16u + tid.y];
            let b = ws[kk * 16u + tid.x];
            acc0 = fma(vec4<f32>(a.x), b, acc0);
            acc1 = fma(vec4<f32>(a.y), b, acc1);
            acc2 = fma(vec4<f32>(a.z), b, acc2);
            acc3 = fma(vec4<f32>(a.w), b, acc3);
        }
        workgroupBarrier();
    }
    let col0 = n0 + tid.x * 4u;
    var bias4 = vec4<f32>();
    if p.has_bias != 0u {
        for (var j = 0u; j < 4u; j++) {
            if col0 + j < p.n {
                bias4[j] = bias(p.y_offset + col0 + j);
            }
        }
    }
    let rows = array<vec4<f32>, 4>(acc0 + bias4, acc1 + bias4, acc2 + bias4, acc3 + bias4);
    for (var i = 0u; i < 4u; i++) {
        let row = m0 + tid.y * 4u + i;
        for (var j = 0u; j < 4u; j++) {
            if row < p.m && col0 + j < p.n {
                y[row * p.y_stride + p.y_offset + col0 + j] = rows[i][j];
            }
        }
    }
}
