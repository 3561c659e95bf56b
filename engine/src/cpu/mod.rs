//! The CPU backend: all cores through rayon and the `gemm` crate. A file per op family
//! (`products`, `attention`, `norms`, `conv`, `elementwise`, `layout`), each implementing that
//! family's trait; the helpers below read tensors as the ops take them.

mod attention;
mod conv;
mod elementwise;
pub mod exp;
pub mod gemm;
mod layout;
mod norms;
mod pool;
mod products;
mod quant_dot;

use rayon::prelude::*;

use crate::device::{
    Backend, DeviceKind, DeviceOptions, ElementwiseOps, LayoutOps, NormOps, Op, Operand, ProductOps, Rotary,
    SENTINEL_BITS, SamplingOps,
};
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

pub(super) fn storage(t: &Tensor, op: Op) -> Result<&CpuStorage> {
    match t.storage() {
        Storage::Cpu(s) => Ok(s),
        other => Err(Error::WrongDevice { op, backend: DeviceKind::Cpu, found: other.kind() }),
    }
}

/// The f32 values of an activation, or an error naming the op.
pub(super) fn f32s(t: &Tensor, op: Op) -> Result<&[f32]> {
    match storage(t, op)? {
        CpuStorage::F32(v) => Ok(v),
        other => Err(Error::unsupported(op, other.dtype(), DeviceKind::Cpu)),
    }
}

/// Keys or values in a dtype a cache takes.
pub(super) fn kv_rows(t: &Tensor, op: Op) -> Result<attention::KvRows<'_>> {
    match storage(t, op)? {
        CpuStorage::F32(v) => Ok(attention::KvRows::F32(v)),
        CpuStorage::BF16(v) => Ok(attention::KvRows::BF16(v)),
        other => Err(Error::unsupported(op, other.dtype(), DeviceKind::Cpu)),
    }
}

/// A small parameter (norm weight, bias, alpha) or a weight widened to f32.
pub(super) fn param(t: &Tensor, op: Op) -> Result<std::borrow::Cow<'_, [f32]>> {
    Ok(match storage(t, op)? {
        CpuStorage::F32(v) => std::borrow::Cow::Borrowed(v.as_slice()),
        other => std::borrow::Cow::Owned(other.to_f32_vec()),
    })
}

pub(super) fn out(shape: &[usize], data: Vec<f32>) -> Result<Tensor> {
    Tensor::from_f32(shape, data)
}

pub(super) fn same_shape(op: Op, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.shape() != b.shape() {
        return Err(Error::shape(op.name(), format!("{:?} vs {:?}", a.shape(), b.shape())));
    }
    Ok(())
}

pub(super) fn map(x: &Tensor, op: Op, f: impl Fn(f32) -> f32 + Sync + Send) -> Result<Tensor> {
    let v = f32s(x, op)?;
    let mut y = vec![0.0f32; v.len()];
    pool::for_chunks(&mut y, elementwise::CHUNK, v.len(), |i, y| {
        let at = i * elementwise::CHUNK;
        y.iter_mut().zip(&v[at..]).for_each(|(y, &a)| *y = f(a));
    });
    out(x.shape(), y)
}

pub(super) fn zip(a: &Tensor, b: &Tensor, op: Op, f: impl Fn(f32, f32) -> f32 + Sync + Send) -> Result<Tensor> {
    same_shape(op, a, b)?;
    let (x, y) = (f32s(a, op)?, f32s(b, op)?);
    let mut z = vec![0.0f32; x.len()];
    pool::for_chunks(&mut z, elementwise::CHUNK, x.len(), |i, z| {
        let at = i * elementwise::CHUNK;
        z.iter_mut().zip(&x[at..]).zip(&y[at..]).for_each(|((z, &p), &q)| *z = f(p, q));
    });
    out(a.shape(), z)
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
}

impl SamplingOps for CpuBackend {}
