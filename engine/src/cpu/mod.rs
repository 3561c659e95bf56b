//! The CPU backend: all cores through rayon and the `gemm` crate.

mod attention;
mod conv;
pub mod gemm;

use rayon::prelude::*;

use crate::device::{AttentionShape, Backend, Rotary};
use crate::error::{Error, Result};
use crate::shapes;
use crate::tensor::{CpuStorage, DType, Storage, Tensor};

#[derive(Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    pub fn new() -> Self {
        CpuBackend
    }
}

fn storage(t: &Tensor) -> Result<&CpuStorage> {
    match t.storage() {
        Storage::Cpu(s) => Ok(s),
        Storage::Cuda(_) => Err(Error::Invalid("a GPU tensor was given to the CPU backend".into())),
    }
}

/// The f32 values of an activation, or an error naming the op.
fn f32s<'a>(t: &'a Tensor, op: &'static str) -> Result<&'a [f32]> {
    match storage(t)? {
        CpuStorage::F32(v) => Ok(v),
        other => Err(Error::Unsupported { op, dtype: other.dtype().to_string(), backend: "cpu" }),
    }
}

/// A small parameter (norm weight, bias, alpha) widened to f32.
fn param(t: &Tensor) -> std::borrow::Cow<'_, [f32]> {
    match t.storage() {
        Storage::Cpu(CpuStorage::F32(v)) => std::borrow::Cow::Borrowed(v.as_slice()),
        _ => std::borrow::Cow::Owned(t.to_f32_vec()),
    }
}

fn out(shape: &[usize], data: Vec<f32>) -> Result<Tensor> {
    Tensor::from_f32(shape, data)
}

fn same_shape(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.shape() != b.shape() {
        return Err(Error::shape(op, format!("{:?} vs {:?}", a.shape(), b.shape())));
    }
    Ok(())
}

fn map(x: &Tensor, op: &'static str, f: impl Fn(f32) -> f32 + Sync) -> Result<Tensor> {
    let v = f32s(x, op)?;
    out(x.shape(), v.par_iter().with_min_len(4096).map(|&a| f(a)).collect())
}

fn zip(a: &Tensor, b: &Tensor, op: &'static str, f: impl Fn(f32, f32) -> f32 + Sync) -> Result<Tensor> {
    same_shape(op, a, b)?;
    let (x, y) = (f32s(a, op)?, f32s(b, op)?);
    out(a.shape(), x.par_iter().zip(y).with_min_len(4096).map(|(&p, &q)| f(p, q)).collect())
}

fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn upload(&self, t: Tensor) -> Result<Tensor> {
        match t.storage() {
            Storage::Cpu(_) => Ok(t),
            Storage::Cuda(_) => Tensor::from_f32(t.shape(), t.to_f32_vec()),
        }
    }

    fn to_host(&self, t: &Tensor) -> Result<Vec<f32>> {
        Ok(t.to_f32_vec())
    }

    fn cast(&self, t: &Tensor, dtype: DType) -> Result<Tensor> {
        Tensor::new(t.shape(), Storage::Cpu(storage(t)?.to_dtype(dtype)))
    }

    fn linear(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let (m, k, n) = shapes::linear(x, w, bias)?;
        let mut y = gemm::linear(f32s(x, "linear")?, m, k, storage(w)?, n);
        if let Some(b) = bias {
            let b = param(b);
            y.par_chunks_mut(n).for_each(|row| row.iter_mut().zip(b.iter()).for_each(|(v, b)| *v += b));
        }
        out(&[m, n], y)
    }

    fn embedding(&self, table: &Tensor, ids: &[u32]) -> Result<Tensor> {
        let (vocab, dim) = table.dims2("embedding")?;
        let mut y = vec![0.0f32; ids.len() * dim];
        for (row, &id) in y.chunks_mut(dim).zip(ids) {
            let id = id as usize;
            if id >= vocab {
                return Err(Error::Invalid(format!("token id {id} is outside the embedding table of {vocab} rows")));
            }
            match storage(table)? {
                CpuStorage::F32(v) => row.copy_from_slice(&v[id * dim..(id + 1) * dim]),
                CpuStorage::BF16(v) => {
                    row.iter_mut().zip(&v[id * dim..(id + 1) * dim]).for_each(|(d, s)| *d = s.to_f32())
                }
                CpuStorage::F16(v) => {
                    row.iter_mut().zip(&v[id * dim..(id + 1) * dim]).for_each(|(d, s)| *d = s.to_f32())
                }
            }
        }
        out(&[ids.len(), dim], y)
    }

    fn rms_norm(&self, x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
        let (_, dim) = shapes::rows_with_params("rms_norm", x, &[w])?;
        let (v, w) = (f32s(x, "rms_norm")?, param(w));
        let mut y = v.to_vec();
        y.par_chunks_mut(dim).for_each(|row| {
            let mean_sq = row.iter().map(|a| a * a).sum::<f32>() / dim as f32;
            let inv = 1.0 / (mean_sq + eps).sqrt();
            row.iter_mut().zip(w.iter()).for_each(|(a, w)| *a = *a * inv * w);
        });
        out(x.shape(), y)
    }

    fn layer_norm(&self, x: &Tensor, w: &Tensor, b: &Tensor, eps: f32) -> Result<Tensor> {
        let (_, dim) = shapes::rows_with_params("layer_norm", x, &[w, b])?;
        let (v, w, b) = (f32s(x, "layer_norm")?, param(w), param(b));
        let mut y = v.to_vec();
        y.par_chunks_mut(dim).for_each(|row| {
            let mean = row.iter().sum::<f32>() / dim as f32;
            let var = row.iter().map(|a| (a - mean) * (a - mean)).sum::<f32>() / dim as f32;
            let inv = 1.0 / (var + eps).sqrt();
            for ((a, w), b) in row.iter_mut().zip(w.iter()).zip(b.iter()) {
                *a = (*a - mean) * inv * w + b;
            }
        });
        out(x.shape(), y)
    }

    fn rope(&self, x: &Tensor, r: Rotary) -> Result<Tensor> {
        let (_, width) = shapes::rope(x, &r)?;
        let half = r.rotary_dim / 2;
        // inv_freq and the angles in f32, as the reference computes them.
        let inv_freq: Vec<f32> = (0..half).map(|i| 1.0 / r.theta.powf((2 * i) as f32 / r.rotary_dim as f32)).collect();
        let mut y = f32s(x, "rope")?.to_vec();
        y.par_chunks_mut(width).enumerate().for_each(|(row, data)| {
            let pos = (r.first_position + row % r.seq_len) as f32;
            for head in data.chunks_mut(r.head_dim) {
                for i in 0..half {
                    let angle = pos * inv_freq[i];
                    let (sin, cos) = (angle.sin(), angle.cos());
                    let (a, b) = (head[i], head[i + half]);
                    head[i] = a * cos - b * sin;
                    head[i + half] = b * cos + a * sin;
                }
            }
        });
        out(x.shape(), y)
    }

    fn attention(&self, q: &Tensor, k: &Tensor, v: &Tensor, s: AttentionShape) -> Result<Tensor> {
        shapes::attention(q, k, v, &s)?;
        let y = attention::attention(f32s(q, "attention")?, f32s(k, "attention")?, f32s(v, "attention")?, s);
        out(&[s.batch * s.q_len, s.heads * s.head_dim], y)
    }

    fn write_rows(&self, dst: &mut Tensor, src: &Tensor, batch: usize, row: usize) -> Result<()> {
        let (capacity, n, cols) = shapes::write_rows(dst, src, batch, row)?;
        let src = f32s(src, "write_rows")?.to_vec();
        let Storage::Cpu(CpuStorage::F32(d)) = dst.storage_mut() else {
            return Err(Error::Unsupported { op: "write_rows", dtype: "non-f32".into(), backend: "cpu" });
        };
        for b in 0..batch {
            let at = (b * capacity + row) * cols;
            d[at..at + n * cols].copy_from_slice(&src[b * n * cols..(b + 1) * n * cols]);
        }
        Ok(())
    }

    fn silu_mul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        zip(a, b, "silu_mul", |p, q| silu(p) * q)
    }

    fn silu(&self, x: &Tensor) -> Result<Tensor> {
        map(x, "silu", silu)
    }

    fn tanh(&self, x: &Tensor) -> Result<Tensor> {
        map(x, "tanh", f32::tanh)
    }

    fn add(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        zip(a, b, "add", |p, q| p + q)
    }

    fn mul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        zip(a, b, "mul", |p, q| p * q)
    }

    fn scale(&self, x: &Tensor, factor: f32) -> Result<Tensor> {
        map(x, "scale", |a| a * factor)
    }

    fn softmax_rows(&self, x: &Tensor) -> Result<Tensor> {
        let (_, cols) = x.dims2("softmax_rows")?;
        if cols == 0 {
            return Err(Error::shape("softmax_rows", "rows of zero columns"));
        }
        let mut y = f32s(x, "softmax_rows")?.to_vec();
        y.par_chunks_mut(cols).for_each(|row| {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0;
            row.iter_mut().for_each(|a| {
                *a = (*a - max).exp();
                sum += *a;
            });
            row.iter_mut().for_each(|a| *a /= sum);
        });
        out(x.shape(), y)
    }

    fn round_to(&self, x: &Tensor, dtype: DType) -> Result<Tensor> {
        map(x, "round_to", move |a| dtype.round(a))
    }

    fn transpose(&self, x: &Tensor) -> Result<Tensor> {
        let (r, c) = x.dims2("transpose")?;
        if r == 0 || c == 0 {
            return out(&[c, r], Vec::new());
        }
        let v = f32s(x, "transpose")?;
        let mut y = vec![0.0f32; r * c];
        y.par_chunks_mut(r).enumerate().for_each(|(j, col)| {
            for (i, d) in col.iter_mut().enumerate() {
                *d = v[i * c + j];
            }
        });
        out(&[c, r], y)
    }

    fn slice_cols(&self, x: &Tensor, start: usize, end: usize) -> Result<Tensor> {
        let (r, c) = x.dims2("slice_cols")?;
        shapes::range("slice_cols", start, end, c)?;
        let v = f32s(x, "slice_cols")?;
        let y = v.chunks(c.max(1)).take(r).flat_map(|row| row[start..end].iter().copied()).collect();
        out(&[r, end - start], y)
    }

    fn slice_rows(&self, x: &Tensor, start: usize, end: usize) -> Result<Tensor> {
        let (r, c) = x.dims2("slice_rows")?;
        shapes::range("slice_rows", start, end, r)?;
        out(&[end - start, c], f32s(x, "slice_rows")?[start * c..end * c].to_vec())
    }

    fn cat_rows(&self, parts: &[&Tensor]) -> Result<Tensor> {
        let (rows, cols) = shapes::cat_rows(parts)?;
        let mut y = Vec::with_capacity(rows * cols);
        for p in parts {
            y.extend_from_slice(f32s(p, "cat_rows")?);
        }
        out(&[rows, cols], y)
    }

    fn conv1d(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>, padding: usize, dilation: usize) -> Result<Tensor> {
        let shapes::Conv { c_in, t, c_out, k, .. } = shapes::conv1d(x, w, padding, dilation)?;
        let bias = bias.map(param);
        let (y, t_out) =
            conv::conv1d(f32s(x, "conv1d")?, c_in, t, &param(w), c_out, k, bias.as_deref(), padding, dilation);
        out(&[c_out, t_out], y)
    }

    fn conv_transpose1d(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        stride: usize,
        padding: usize,
    ) -> Result<Tensor> {
        let shapes::Conv { c_in, t, c_out, k, .. } = shapes::conv_transpose1d(x, w, stride, padding)?;
        let bias = bias.map(param);
        let (y, t_out) = conv::conv_transpose1d(
            f32s(x, "conv_transpose1d")?,
            c_in,
            t,
            &param(w),
            c_out,
            k,
            bias.as_deref(),
            stride,
            padding,
        );
        out(&[c_out, t_out], y)
    }

    fn snake(&self, x: &Tensor, alpha: &Tensor) -> Result<Tensor> {
        let (_, t) = shapes::snake(x, alpha)?;
        let alpha = param(alpha);
        let mut y = f32s(x, "snake")?.to_vec();
        y.par_chunks_mut(t.max(1)).zip(alpha.par_iter()).for_each(|(row, &a)| {
            let inv = 1.0 / (a + 1e-9);
            for v in row {
                let s = (a * *v).sin();
                *v += inv * (s * s);
            }
        });
        out(x.shape(), y)
    }

    fn fill_uniform(&self, shape: &[usize], dtype: DType, seed: u64, center: f32, half_width: f32) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        let values: Vec<f32> =
            (0..n).into_par_iter().map(|i| center + half_width * hash_uniform(seed, i as u64)).collect();
        self.cast(&Tensor::from_f32(shape, values)?, dtype)
    }

    fn resample_nearest(&self, x: &Tensor, out_len: usize) -> Result<Tensor> {
        let (c, t) = x.dims2("resample_nearest")?;
        let v = f32s(x, "resample_nearest")?;
        let index = |i: usize| -> usize {
            if out_len == t {
                i
            } else if out_len == 2 * t {
                i >> 1
            } else {
                // torch computes the source index in f32: floor(i * (in / out)).
                let scale = t as f32 / out_len as f32;
                (((i as f32) * scale).floor() as usize).min(t - 1)
            }
        };
        let mut y = vec![0.0f32; c * out_len];
        for ch in 0..c {
            for i in 0..out_len {
                y[ch * out_len + i] = v[ch * t + index(i)];
            }
        }
        out(&[c, out_len], y)
    }
}

/// The same hash as the GPU's `fill_uniform` kernels: uniform in [-1, 1).
fn hash_uniform(seed: u64, i: u64) -> f32 {
    let mut z = seed.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 40) as f32 * (1.0 / 16_777_216.0) * 2.0 - 1.0
}
