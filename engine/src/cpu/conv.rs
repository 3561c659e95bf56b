//! 1-D convolutions on the CPU as tiled im2col + GEMM (forward) and GEMM + col2im (transposed).
//! Tiles over time keep the column buffer small even for a vocoder window of 350k samples.

use rayon::prelude::*;

use super::gemm::{MatRef, gemm_f32};
use super::{CpuBackend, f32s, out, param};
use crate::device::{Conv1dParams, ConvOps, ConvTranspose1dParams, Op};
use crate::error::Result;
use crate::shapes;
use crate::tensor::Tensor;

const TIME_TILE: usize = 2048;

/// `x [c_in, t]`, `w [c_out, c_in * k]` -> `[c_out, t_out]`, stride 1.
fn conv1d(x: &[f32], w: &[f32], bias: Option<&[f32]>, p: &Conv1dParams) -> Vec<f32> {
    let Conv1dParams { c_in, t_in: t, c_out, kernel: k, padding, dilation } = *p;
    let t_out = p.t_out();
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
    y
}

/// `x [c_in, t]`, `w [c_in, c_out, k]` (torch's ConvTranspose1d layout) -> `[c_out, t_out]`.
fn conv_transpose1d(x: &[f32], w: &[f32], bias: Option<&[f32]>, p: &ConvTranspose1dParams) -> Vec<f32> {
    let ConvTranspose1dParams { c_in, t_in: t, c_out, kernel: k, stride, padding } = *p;
    let t_out = p.t_out();
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
    y
}

impl ConvOps for CpuBackend {
    fn conv1d(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>, p: &Conv1dParams) -> Result<Tensor> {
        p.check(x, w, bias)?;
        let bias = bias.map(|b| param(b, Op::Conv1d)).transpose()?;
        let (x, w) = (f32s(x, Op::Conv1d)?, param(w, Op::Conv1d)?);
        let y = conv1d(x, &w, bias.as_deref(), p);
        out(&[p.c_out, p.t_out()], y)
    }

    fn conv_transpose1d(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        p: &ConvTranspose1dParams,
    ) -> Result<Tensor> {
        p.check(x, w, bias)?;
        let bias = bias.map(|b| param(b, Op::ConvTranspose1d)).transpose()?;
        let (x, w) = (f32s(x, Op::ConvTranspose1d)?, param(w, Op::ConvTranspose1d)?);
        let y = conv_transpose1d(x, &w, bias.as_deref(), p);
        out(&[p.c_out, p.t_out()], y)
    }

    fn snake(&self, x: &Tensor, alpha: &Tensor) -> Result<Tensor> {
        let (_, t) = shapes::snake(x, alpha)?;
        let alpha = param(alpha, Op::Snake)?;
        let mut y = f32s(x, Op::Snake)?.to_vec();
        y.par_chunks_mut(t.max(1)).zip(alpha.par_iter()).for_each(|(row, &a)| {
            let inv = 1.0 / (a + 1e-9);
            for v in row {
                let s = (a * *v).sin();
                *v += inv * (s * s);
            }
        });
        out(x.shape(), y)
    }
}
