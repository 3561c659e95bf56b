// 1-D convolutions as implicit matrix products, in conv.wgsl's order of sums (so the two give the
// same bits; a tap that falls outside x adds w * 0). A workgroup makes a 64 x 64 tile of the
// product (output channels by columns), each of its 256 threads a 4 x 4 block, and stages the
// tile's weights and its im2col columns 16 deep at a time in workgroup memory: each value read
// from storage serves 64 products instead of one.
// - Forward (`op` 0): y[co, t] is the sum over kk = ci * k + j of w[co, ci, j] *
//   x[ci, t + j * dilation - padding]; a column is a time.
// - Transposed (`op` 1, stride s): the outputs t with (t + padding) % s = r (a phase, one per
//   y-row of tiles) take the taps j = r + tap * s < k alone, at x[ci, m - tap] for t = s * m + r -
//   padding; a column is an m, and kk = tap * c_in + ci (conv.wgsl's order: j, then ci).
// `w(i)` and `bias(i)` read the parameters' format; the parameters are conv_params.wgsl's.

const TILE: u32 = 64u;
const SLICE: u32 = 16u;

// [SLICE][TILE]: the slice's weights of the tile's output channels, and its columns of x.
var<workgroup> ws: array<f32, 1024>;
var<workgroup> xs: array<f32, 1024>;

// The taps of a transposed convolution's phase (its kernel over its stride, rounded up).
fn taps() -> u32 {
    return (p.k + p.step - 1u) / p.step;
}

// Weight `kk` of output channel `co` (of phase `r` where transposed), 0 where there is none.
fn weight_at(co: u32, kk: u32, r: u32) -> f32 {
    if co >= p.c_out {
        return 0.0;
    }
    if p.op == 0u {
        if kk >= p.c_in * p.k {
            return 0.0;
        }
        return w(co * p.c_in * p.k + kk);
    }
    let j = r + (kk / p.c_in) * p.step;
    if kk >= p.c_in * taps() || j >= p.k {
        return 0.0;
    }
    return w(((kk % p.c_in) * p.c_out + co) * p.k + j);
}

// The output time of column `col` (of phase `r` where transposed), as i32: outside [0, t_out)
// where the column makes no output.
fn time_of(col: u32, r: u32) -> i32 {
    if p.op == 0u {
        return i32(col);
    }
    return i32(col * p.step + r) - i32(p.padding);
}

// x's value for `kk` of column `col` (of phase `r` where transposed), 0 outside x.
fn input_at(kk: u32, col: u32, r: u32) -> f32 {
    let t = time_of(col, r);
    if t < 0 || u32(t) >= p.t_out {
        return 0.0;
    }
    var ci = kk / p.k;
    var src = i32(col + (kk % p.k) * p.step) - i32(p.padding);
    if p.op == 1u {
        ci = kk % p.c_in;
        src = i32(col) - i32(kk / p.c_in);
    }
    if ci >= p.c_in || src < 0 || u32(src) >= p.t {
        return 0.0;
    }
    return x[ci * p.t + u32(src)];
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let col0 = wid.x * TILE;
    // Transposed, the y-rows of tiles run over the phases, each over the output channels.
    let co_tiles = (p.c_out + TILE - 1u) / TILE;
    let co0 = (wid.y % co_tiles) * TILE;
    let r = wid.y / co_tiles;
    var depth = p.c_in * p.k;
    if p.op == 1u {
        depth = p.c_in * taps();
    }
    // The thread's block: channels co0 + 4 row .. + 3, columns col0 + 4 col .. + 3.
    let row = lid / 16u;
    let col = lid % 16u;
    var acc: array<f32, 16>;
    for (var s = 0u; s < depth; s += SLICE) {
        for (var i = 0u; i < 4u; i++) {
            let e = lid + i * 256u;
            // Neighbouring threads read neighbouring taps of a weight row, and neighbouring times
            // of an input row.
            ws[(e % SLICE) * TILE + e / SLICE] = weight_at(co0 + e / SLICE, s + e % SLICE, r);
            var xv = 0.0;
            if s + e / TILE < depth {
                xv = input_at(s + e / TILE, col0 + e % TILE, r);
            }
            xs[e] = xv;
        }
        workgroupBarrier();
        let slice = min(SLICE, depth - s);
        for (var j = 0u; j < slice; j++) {
            for (var a = 0u; a < 4u; a++) {
                let wa = ws[j * TILE + row * 4u + a];
                for (var c = 0u; c < 4u; c++) {
                    acc[a * 4u + c] = fma(wa, xs[j * TILE + col * 4u + c], acc[a * 4u + c]);
                }
            }
        }
        workgroupBarrier();
    }
    for (var a = 0u; a < 4u; a++) {
        let co = co0 + row * 4u + a;
        if co >= p.c_out {
            continue;
        }
        var b = 0.0;
        if p.has_bias != 0u {
            b = bias(co);
        }
        for (var c = 0u; c < 4u; c++) {
            let t = time_of(col0 + col * 4u + c, r);
            if t >= 0 && u32(t) < p.t_out {
                var v = acc[a * 4u + c];
                if p.has_bias != 0u {
                    v += b;
                }
                y[co * p.t_out + u32(t)] = v;
            }
        }
    }
}
