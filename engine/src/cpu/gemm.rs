//! Matrix products on the CPU through the `gemm` crate, f32 accumulation. Half-precision weights
//! are widened tile by tile, so a bf16 model stays bf16 in memory.

use gemm::Parallelism;
use half::{bf16, f16};
use rayon::prelude::*;

use crate::tensor::CpuStorage;

/// Strided view of a matrix: element `(r, c)` is at `r * row_stride + c * col_stride`.
#[derive(Clone, Copy)]
pub struct MatRef<'a> {
    pub data: &'a [f32],
    pub row_stride: usize,
    pub col_stride: usize,
}

/// `dst[m, n]` (row-major) `= a[m, k] @ b[k, n]`.
pub fn gemm_f32(m: usize, n: usize, k: usize, a: MatRef, b: MatRef, dst: &mut [f32], parallel: bool) {
    assert!(dst.len() >= m * n, "gemm destination too small");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        dst[..m * n].fill(0.0);
        return;
    }
    let last = |v: MatRef, rows: usize, cols: usize| (rows - 1) * v.row_stride + (cols - 1) * v.col_stride;
    assert!(last(a, m, k) < a.data.len() && last(b, k, n) < b.data.len(), "gemm operand out of bounds");
    let parallelism = if parallel { Parallelism::Rayon(0) } else { Parallelism::None };
    // SAFETY: the asserts above keep every index of `a`, `b` and `dst` in bounds, and `dst` is a
    // unique borrow that does not alias the operands.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.data.as_ptr(),
            a.col_stride as isize,
            a.row_stride as isize,
            b.data.as_ptr(),
            b.col_stride as isize,
            b.row_stride as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        )
    }
}

/// Rows of the weight matrix widened per parallel task when the activation has many rows.
const WEIGHT_TILE_ROWS: usize = 64;
/// Up to this many activation rows a product is a memory-bound matrix-vector product, each row's
/// dot products computed alone: a row's result does not depend on the rows beside it, so a song's
/// decode rows in a batch (up to 8 songs' depth-frame starts, 4 rows each) come out as alone.
pub const GEMV_MAX_ROWS: usize = 32;

/// `x [m, k] @ w[n, k]^T` into a fresh `[m, n]` buffer, which starts out holding `fill` (every
/// element is then overwritten).
pub fn linear(x: &[f32], m: usize, k: usize, w: &CpuStorage, n: usize, fill: f32) -> Vec<f32> {
    let mut out = vec![fill; m * n];
    match w {
        CpuStorage::F32(w) if m > GEMV_MAX_ROWS => {
            let a = MatRef { data: x, row_stride: k, col_stride: 1 };
            let b = MatRef { data: w, row_stride: 1, col_stride: k };
            gemm_f32(m, n, k, a, b, &mut out, true);
        }
        CpuStorage::F32(w) => gemv(x, m, k, n, &mut out, |row, dst| dst.copy_from_slice(&w[row * k..(row + 1) * k])),
        CpuStorage::BF16(w) => {
            half_linear(x, m, k, n, &mut out, |row, dst| widen_bf16(&w[row * k..(row + 1) * k], dst))
        }
        CpuStorage::F16(w) => half_linear(x, m, k, n, &mut out, |row, dst| widen_f16(&w[row * k..(row + 1) * k], dst)),
        CpuStorage::Quant(q) if m <= GEMV_MAX_ROWS && k.is_multiple_of(crate::quant::GROUP) => {
            super::quant_dot::quant_gemv(x, m, k, q, n, &mut out)
        }
        CpuStorage::Quant(q) => {
            half_linear(x, m, k, n, &mut out, |row, dst| crate::quant::dequantize_into(q, row * k, dst))
        }
    }
    out
}

fn widen_bf16(src: &[bf16], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = f32::from_bits((s.to_bits() as u32) << 16);
    }
}

fn widen_f16(src: &[f16], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = s.to_f32();
    }
}

fn half_linear(x: &[f32], m: usize, k: usize, n: usize, out: &mut [f32], widen_row: impl Fn(usize, &mut [f32]) + Sync) {
    if m <= GEMV_MAX_ROWS {
        return gemv(x, m, k, n, out, widen_row);
    }
    // Each task widens a tile of weight rows and writes the matching output columns, so tasks write
    // disjoint columns of `out`: they collect into per-tile buffers and are scattered afterwards.
    let tiles: Vec<(usize, Vec<f32>)> = (0..n.div_ceil(WEIGHT_TILE_ROWS))
        .into_par_iter()
        .map(|t| {
            let n0 = t * WEIGHT_TILE_ROWS;
            let rows = WEIGHT_TILE_ROWS.min(n - n0);
            let mut wide = vec![0.0f32; rows * k];
            for r in 0..rows {
                widen_row(n0 + r, &mut wide[r * k..(r + 1) * k]);
            }
            let mut tile = vec![0.0f32; m * rows];
            let a = MatRef { data: x, row_stride: k, col_stride: 1 };
            let b = MatRef { data: &wide, row_stride: 1, col_stride: k };
            gemm_f32(m, rows, k, a, b, &mut tile, false);
            (n0, tile)
        })
        .collect();
    for (n0, tile) in tiles {
        let rows = tile.len() / m;
        for i in 0..m {
            out[i * n + n0..i * n + n0 + rows].copy_from_slice(&tile[i * rows..(i + 1) * rows]);
        }
    }
}

/// Few activation rows: stream each weight row once and dot it with every activation row.
fn gemv(x: &[f32], m: usize, k: usize, n: usize, out: &mut [f32], widen_row: impl Fn(usize, &mut [f32]) + Sync) {
    let columns: Vec<[f32; GEMV_MAX_ROWS]> = super::pool::map_indices(
        n,
        m * n * k,
        16,
        || vec![0.0f32; k],
        |row_buf, row| {
            widen_row(row, row_buf);
            let mut dots = [0.0f32; GEMV_MAX_ROWS];
            for (i, dot) in dots.iter_mut().enumerate().take(m) {
                *dot = dot_f32(&x[i * k..(i + 1) * k], row_buf);
            }
            dots
        },
    );
    for (row, dots) in columns.iter().enumerate() {
        for i in 0..m {
            out[i * n + row] = dots[i];
        }
    }
}

/// Dot product with eight independent accumulators so the compiler vectorises it.
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let chunks = a.len() / 8;
    for c in 0..chunks {
        let (a8, b8) = (&a[c * 8..c * 8 + 8], &b[c * 8..c * 8 + 8]);
        for j in 0..8 {
            acc[j] += a8[j] * b8[j];
        }
    }
    let mut sum = acc.iter().sum::<f32>();
    for j in chunks * 8..a.len() {
        sum += a[j] * b[j];
    }
    sum
}
