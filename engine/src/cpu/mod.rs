//! The CPU backend: all cores through rayon and the `gemm` crate.

mod attention;
mod conv;
pub mod gemm;
mod quant_dot;

use rayon::prelude::*;

use crate::device::{AttentionShape, Backend, DeviceKind, DeviceOptions, Op, Operand, Rotary, SENTINEL_BITS};
use crate::error::{Error, Result};
use crate::hash;
use crate::shapes;
use crate::tensor::{CpuStorage, DType, Storage, Tensor};

#[derive(Debug, Default)]
pub struct CpuBackend {
    /// What a fresh result buffer holds before an op writes it: 0, or the NaN sentinel.
    fresh: f32,
}

impl CpuBackend {
    pub fn new(options: DeviceOptions) -> Self {
        CpuBackend { fresh: if options.sentinel_fill { f32::from_bits(SENTINEL_BITS[0]) } else { 0.0 } }
    }
}

fn storage(t: &Tensor, op: Op) -> Result<&CpuStorage> {
    match t.storage() {
        Storage::Cpu(s) => Ok(s),
        other => Err(Error::WrongDevice { op, backend: DeviceKind::Cpu, found: other.kind() }),
    }
}

/// The f32 values of an activation, or an error naming the op.
fn f32s(t: &Tensor, op: Op) -> Result<&[f32]> {
    match storage(t, op)? {
        CpuStorage::F32(v) => Ok(v),
        other => Err(Error::unsupported(op, other.dtype(), DeviceKind::Cpu)),
    }
}

/// Keys or values in a dtype a cache takes.
fn kv_rows(t: &Tensor, op: Op) -> Result<attention::KvRows<'_>> {
    match storage(t, op)? {
        CpuStorage::F32(v) => Ok(attention::KvRows::F32(v)),
        CpuStorage::BF16(v) => Ok(attention::KvRows::BF16(v)),
        other => Err(Error::unsupported(op, other.dtype(), DeviceKind::Cpu)),
    }
}

/// A small parameter (norm weight, bias, alpha) or a weight widened to f32.
fn param(t: &Tensor, op: Op) -> Result<std::borrow::Cow<'_, [f32]>> {
    Ok(match storage(t, op)? {
        CpuStorage::F32(v) => std::borrow::Cow::Borrowed(v.as_slice()),
        other => std::borrow::Cow::Owned(other.to_f32_vec()),
    })
}

fn out(shape: &[usize], data: Vec<f32>) -> Result<Tensor> {
    Tensor::from_f32(shape, data)
}

fn same_shape(op: Op, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.shape() != b.shape() {
        return Err(Error::shape(op.name(), format!("{:?} vs {:?}", a.shape(), b.shape())));
    }
    Ok(())
}

fn map(x: &Tensor, op: Op, f: impl Fn(f32) -> f32 + Sync) -> Result<Tensor> {
    let v = f32s(x, op)?;
    out(x.shape(), v.par_iter().with_min_len(4096).map(|&a| f(a)).collect())
}

fn zip(a: &Tensor, b: &Tensor, op: Op, f: impl Fn(f32, f32) -> f32 + Sync) -> Result<Tensor> {
    same_shape(op, a, b)?;
    let (x, y) = (f32s(a, op)?, f32s(b, op)?);
    out(a.shape(), x.par_iter().zip(y).with_min_len(4096).map(|(&p, &q)| f(p, q)).collect())
}

fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

impl Backend for CpuBackend {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Cpu
    }

    fn description(&self) -> String {
        format!("{} threads", rayon::current_num_threads())
    }

    /// Weights, tables and parameters in any dtype, the quantized formats included (widened to f32
    /// as they are read); activations in f32.
    fn supports(&self, op: Op, dtype: DType) -> bool {
        match op.operand() {
            Operand::Activation => dtype == DType::F32,
            Operand::Cache => matches!(dtype, DType::F32 | DType::BF16),
            _ => true,
        }
    }

    fn upload(&self, t: Tensor) -> Result<Tensor> {
        match t.storage() {
            Storage::Cpu(_) => Ok(t),
            _ => Tensor::from_f32(t.shape(), t.to_host()?),
        }
    }

    fn to_host(&self, t: &Tensor) -> Result<Vec<f32>> {
        Ok(storage(t, Op::ToHost)?.to_f32_vec())
    }

    fn cast(&self, t: &Tensor, dtype: DType) -> Result<Tensor> {
        Tensor::new(t.shape(), Storage::Cpu(storage(t, Op::Cast)?.to_dtype(dtype)?))
    }

    fn linear(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let (m, k, n) = shapes::linear(x, w, bias)?;
        let mut y = gemm::linear(f32s(x, Op::Linear)?, m, k, storage(w, Op::Linear)?, n, self.fresh);
        if let Some(b) = bias {
            let b = param(b, Op::Linear)?;
            y.par_chunks_mut(n).for_each(|row| row.iter_mut().zip(b.iter()).for_each(|(v, b)| *v += b));
        }
        out(&[m, n], y)
    }

    fn embedding(&self, table: &Tensor, ids: &[u32]) -> Result<Tensor> {
        let (vocab, dim) = table.dims2("embedding")?;
        let table_values = storage(table, Op::Embedding)?;
        let mut y = vec![self.fresh; ids.len() * dim];
        for (row, &id) in y.chunks_mut(dim).zip(ids) {
            let id = id as usize;
            if id >= vocab {
                return Err(Error::Invalid(format!("token id {id} is outside the embedding table of {vocab} rows")));
            }
            match table_values {
                CpuStorage::F32(v) => row.copy_from_slice(&v[id * dim..(id + 1) * dim]),
                CpuStorage::BF16(v) => {
                    row.iter_mut().zip(&v[id * dim..(id + 1) * dim]).for_each(|(d, s)| *d = s.to_f32())
                }
                CpuStorage::F16(v) => {
                    row.iter_mut().zip(&v[id * dim..(id + 1) * dim]).for_each(|(d, s)| *d = s.to_f32())
                }
                CpuStorage::Quant(q) => crate::quant::dequantize_into(q, id * dim, row),
            }
        }
        out(&[ids.len(), dim], y)
    }

    fn rms_norm(&self, x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
        let (_, dim) = shapes::rows_with_params("rms_norm", x, &[w])?;
        let (v, w) = (f32s(x, Op::RmsNorm)?, param(w, Op::RmsNorm)?);
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
        let (v, w, b) = (f32s(x, Op::LayerNorm)?, param(w, Op::LayerNorm)?, param(b, Op::LayerNorm)?);
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
        let mut y = f32s(x, Op::Rope)?.to_vec();
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
        let (q, k, v) = (f32s(q, Op::Attention)?, kv_rows(k, Op::Attention)?, kv_rows(v, Op::Attention)?);
        let y = attention::attention(q, k, v, s, self.fresh);
        out(&[s.batch * s.q_len, s.heads * s.head_dim], y)
    }

    fn write_rows(&self, dst: &mut Tensor, src: &Tensor, batch: usize, row: usize) -> Result<()> {
        let (capacity, n, cols) = shapes::write_rows(dst, src, batch, row)?;
        let src = f32s(src, Op::WriteRows)?;
        let dtype = dst.dtype();
        let rows = |b: usize| &src[b * n * cols..(b + 1) * n * cols];
        let at = |b: usize| (b * capacity + row) * cols;
        match dst.storage_mut() {
            Storage::Cpu(CpuStorage::F32(d)) => {
                for b in 0..batch {
                    d[at(b)..at(b) + n * cols].copy_from_slice(rows(b));
                }
            }
            Storage::Cpu(CpuStorage::BF16(d)) => {
                for b in 0..batch {
                    for (to, &from) in d[at(b)..at(b) + n * cols].iter_mut().zip(rows(b)) {
                        *to = half::bf16::from_f32(from);
                    }
                }
            }
            _ => return Err(Error::unsupported(Op::WriteRows, dtype, DeviceKind::Cpu)),
        }
        Ok(())
    }

    fn silu_mul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        zip(a, b, Op::SiluMul, |p, q| silu(p) * q)
    }

    fn silu(&self, x: &Tensor) -> Result<Tensor> {
        map(x, Op::Silu, silu)
    }

    fn tanh(&self, x: &Tensor) -> Result<Tensor> {
        map(x, Op::Tanh, f32::tanh)
    }

    fn add(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        zip(a, b, Op::Add, |p, q| p + q)
    }

    fn scale(&self, x: &Tensor, factor: f32) -> Result<Tensor> {
        map(x, Op::Scale, |a| a * factor)
    }

    fn transpose(&self, x: &Tensor) -> Result<Tensor> {
        let (r, c) = x.dims2("transpose")?;
        f32s(x, Op::Transpose)?;
        if r == 0 || c == 0 {
            return out(&[c, r], Vec::new());
        }
        let v = f32s(x, Op::Transpose)?;
        let mut y = vec![self.fresh; r * c];
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
        let v = f32s(x, Op::SliceCols)?;
        let y = v.chunks(c.max(1)).take(r).flat_map(|row| row[start..end].iter().copied()).collect();
        out(&[r, end - start], y)
    }

    fn slice_rows(&self, x: &Tensor, start: usize, end: usize) -> Result<Tensor> {
        let (r, c) = x.dims2("slice_rows")?;
        shapes::range("slice_rows", start, end, r)?;
        out(&[end - start, c], f32s(x, Op::SliceRows)?[start * c..end * c].to_vec())
    }

    fn cat_rows(&self, parts: &[&Tensor]) -> Result<Tensor> {
        let (rows, cols) = shapes::cat_rows(parts)?;
        let mut y = Vec::with_capacity(rows * cols);
        for p in parts {
            y.extend_from_slice(f32s(p, Op::CatRows)?);
        }
        out(&[rows, cols], y)
    }

    fn conv1d(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>, padding: usize, dilation: usize) -> Result<Tensor> {
        let shapes::Conv { c_in, t, c_out, k, .. } = shapes::conv1d(x, w, padding, dilation)?;
        let bias = bias.map(|b| param(b, Op::Conv1d)).transpose()?;
        let (x, w) = (f32s(x, Op::Conv1d)?, param(w, Op::Conv1d)?);
        let (y, t_out) = conv::conv1d(x, c_in, t, &w, c_out, k, bias.as_deref(), padding, dilation);
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
        let bias = bias.map(|b| param(b, Op::ConvTranspose1d)).transpose()?;
        let (x, w) = (f32s(x, Op::ConvTranspose1d)?, param(w, Op::ConvTranspose1d)?);
        let (y, t_out) = conv::conv_transpose1d(x, c_in, t, &w, c_out, k, bias.as_deref(), stride, padding);
        out(&[c_out, t_out], y)
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

    fn fill_uniform(&self, shape: &[usize], dtype: DType, seed: u64, center: f32, half_width: f32) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        let values: Vec<f32> =
            (0..n).into_par_iter().map(|i| center + half_width * hash::uniform(seed, i as u64)).collect();
        self.cast(&Tensor::from_f32(shape, values)?, dtype)
    }

    fn resample_nearest(&self, x: &Tensor, out_len: usize) -> Result<Tensor> {
        let (c, t) = x.dims2("resample_nearest")?;
        let v = f32s(x, Op::ResampleNearest)?;
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
        let mut y = vec![self.fresh; c * out_len];
        for ch in 0..c {
            for i in 0..out_len {
                y[ch * out_len + i] = v[ch * t + index(i)];
            }
        }
        out(&[c, out_len], y)
    }

    fn count_non_finite(&self, x: &Tensor) -> Result<usize> {
        Ok(f32s(x, Op::CountNonFinite)?.par_iter().with_min_len(4096).filter(|v| !v.is_finite()).count())
    }
}
