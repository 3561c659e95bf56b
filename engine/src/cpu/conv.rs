//! 1-D convolutions on the CPU as tiled im2col + GEMM (forward) and GEMM + col2im (transposed).
//! Tiles over time keep the column buffer small even for a vocoder window of 350k samples.

use rayon::prelude::*;

use super::gemm::{MatRef, gemm_f32};

const TIME_TILE: usize = 2048;

/// `x [c_in, t]`, `w [c_out, c_in * k]` -> `[c_out, t_out]`, stride 1.
#[allow(clippy::too_many_arguments)]
pub fn conv1d(
    x: &[f32],
    c_in: usize,
    t: usize,
    w: &[f32],
    c_out: usize,
    k: usize,
    bias: Option<&[f32]>,
    padding: usize,
    dilation: usize,
) -> (Vec<f32>, usize) {
    let t_out = (t + 2 * padding).saturating_sub(dilation * (k - 1));
    let tiles: Vec<(usize, Vec<f32>)> = (0..t_out.div_ceil(TIME_TILE))
        .into_par_iter()
        .map(|tile| {
            let t0 = tile * TIME_TILE;
            let width = TIME_TILE.min(t_out - t0);
            // cols[(ci * k + j), tt] = x[ci, t0 + tt + j * dilation - padding]
            let mut cols = vec![0.0f32; c_in * k * width];
            for ci in 0..c_in {
                let x_row = &x[ci * t..(ci + 1) * t];
                for j in 0..k {
                    let dst = &mut cols[(ci * k + j) * width..(ci * k + j + 1) * width];
                    let shift = (j * dilation) as isize - padding as isize;
                    for (tt, d) in dst.iter_mut().enumerate() {
                        let src = (t0 + tt) as isize + shift;
                        if src >= 0 && (src as usize) < t {
                            *d = x_row[src as usize];
                        }
                    }
                }
            }
            let mut out = vec![0.0f32; c_out * width];
            let a = MatRef { data: w, row_stride: c_in * k, col_stride: 1 };
            let b = MatRef { data: &cols, row_stride: width, col_stride: 1 };
            gemm_f32(c_out, width, c_in * k, a, b, &mut out, false);
            (t0, out)
        })
        .collect();
    let mut y = vec![0.0f32; c_out * t_out];
    for (t0, out) in tiles {
        let width = out.len() / c_out.max(1);
        for co in 0..c_out {
            let b = bias.map_or(0.0, |b| b[co]);
            let dst = &mut y[co * t_out + t0..co * t_out + t0 + width];
            for (d, s) in dst.iter_mut().zip(&out[co * width..(co + 1) * width]) {
                *d = s + b;
            }
        }
    }
    (y, t_out)
}

/// `x [c_in, t]`, `w [c_in, c_out, k]` (torch's ConvTranspose1d layout) -> `[c_out, t_out]`.
#[allow(clippy::too_many_arguments)]
pub fn conv_transpose1d(
    x: &[f32],
    c_in: usize,
    t: usize,
    w: &[f32],
    c_out: usize,
    k: usize,
    bias: Option<&[f32]>,
    stride: usize,
    padding: usize,
) -> (Vec<f32>, usize) {
    let full = (t - 1) * stride + k;
    let t_out = full - 2 * padding;
    // cols[co * k + j, ti] = sum_ci w[ci, co, j] * x[ci, ti]
    let mut cols = vec![0.0f32; c_out * k * t];
    let a = MatRef { data: w, row_stride: 1, col_stride: c_out * k };
    let b = MatRef { data: x, row_stride: t, col_stride: 1 };
    gemm_f32(c_out * k, t, c_in, a, b, &mut cols, true);
    let mut y = vec![0.0f32; c_out * t_out];
    y.par_chunks_mut(t_out).enumerate().for_each(|(co, row)| {
        row.fill(bias.map_or(0.0, |b| b[co]));
        for j in 0..k {
            let src = &cols[(co * k + j) * t..(co * k + j + 1) * t];
            for (ti, v) in src.iter().enumerate() {
                let pos = ti * stride + j;
                if pos >= padding && pos - padding < t_out {
                    row[pos - padding] += v;
                }
            }
        }
    });
    (y, t_out)
}
