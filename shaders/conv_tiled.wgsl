// A forward 1-D convolution as an implicit matrix product: y[co, t] is the sum over kk = ci * k + j
// of w[co, ci, j] * x[ci, t + j * dilation - padding], in that order of kk (the order conv.wgsl
// sums in, so the two give the same bits; a tap that falls in the padding adds w * 0). A workgroup
// makes a 64 x 64 tile of y (output channels by times), each of its 256 threads a 4 x 4 block,
// and stages the tile's weights and its im2col columns 16 kk at a time in workgroup memory: each
// value read from storage serves 64 products instead of one.
// `w(i)` and `bias(i)` read the parameters' format.

// conv.wgsl's parameters: `op` is always 0 (forward) here.
struct Params {
    op: u32,
    c_in: u32,
    t: u32,
    c_out: u32,
    k: u32,
    t_out: u32,
    padding: u32,
    dilation: u32,
    has_bias: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

const TILE: u32 = 64u;
const SLICE: u32 = 16u;

// [SLICE][TILE]: the slice's weights of the tile's output channels, and its columns of x.
var<workgroup> ws: array<f32, 1024>;
var<workgroup> xs: array<f32, 1024>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t0 = wid.x * TILE;
    let co0 = wid.y * TILE;
    let depth = p.c_in * p.k;
    // The thread's block: channels co0 + 4 row .. + 3, times t0 + 4 col .. + 3.
    let row = lid / 16u;
    let col = lid % 16u;
    var acc: array<f32, 16>;
    for (var s = 0u; s < depth; s += SLICE) {
        for (var i = 0u; i < 4u; i++) {
            let e = lid + i * 256u;
            // Neighbouring threads read neighbouring taps of a weight row, and neighbouring times
            // of an input row.
            let w_kk = s + e % SLICE;
            let w_co = co0 + e / SLICE;
            var wv = 0.0;
            if w_kk < depth && w_co < p.c_out {
                wv = w(w_co * depth + w_kk);
            }
            ws[(e % SLICE) * TILE + e / SLICE] = wv;
            let kk = s + e / TILE;
            let lane = e % TILE;
            var xv = 0.0;
            if kk < depth {
                let src = i32(t0 + lane + (kk % p.k) * p.dilation) - i32(p.padding);
                if t0 + lane < p.t_out && src >= 0 && u32(src) < p.t {
                    xv = x[(kk / p.k) * p.t + u32(src)];
                }
            }
            xs[e] = xv;
        }
        workgroupBarrier();
        let slice = min(SLICE, depth - s);
        for (var j = 0u; j < slice; j++) {
            for (var r = 0u; r < 4u; r++) {
                let a = ws[j * TILE + row * 4u + r];
                for (var c = 0u; c < 4u; c++) {
                    acc[r * 4u + c] = fma(a, xs[j * TILE + col * 4u + c], acc[r * 4u + c]);
                }
            }
        }
        workgroupBarrier();
    }
    for (var r = 0u; r < 4u; r++) {
        let co = co0 + row * 4u + r;
        if co >= p.c_out {
            continue;
        }
        var b = 0.0;
        if p.has_bias != 0u {
            b = bias(co);
        }
        for (var c = 0u; c < 4u; c++) {
            let t = t0 + col * 4u + c;
            if t < p.t_out {
                var v = acc[r * 4u + c];
                if p.has_bias != 0u {
                    v += b;
                }
                y[co * p.t_out + t] = v;
            }
        }
    }
}
