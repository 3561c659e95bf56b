//! Device memory of one tensor, and how the backend's ops reach it.

use cudarc::driver::CudaSlice;

use super::CudaBackend;
use super::context::gpu;
pub use super::fp8::CudaFp8;
use crate::device::{DeviceKind, Op};
use crate::error::{Error, Result};
use crate::quant::QuantData;
use crate::tensor::{DType, Storage, Tensor};

#[derive(Debug, Clone)]
pub enum CudaStorage {
    F32(CudaSlice<f32>),
    /// bf16 as raw bits.
    BF16(CudaSlice<u16>),
    /// `q8` or `q4` weights (`crate::quant`).
    Quant(CudaQuant),
    /// FP8 e4m3 rows with a scale each (`crate::fp8`).
    Fp8(CudaFp8),
}

/// Quantized weights on the device: the host's `QuantData`, array by array.
#[derive(Debug, Clone)]
pub struct CudaQuant {
    pub dtype: DType,
    pub len: usize,
    pub words: CudaSlice<u32>,
    /// f16 bits, one per group.
    pub scales: CudaSlice<u16>,
    /// f16 bits, one per group, for `q4`.
    pub offsets: Option<CudaSlice<u16>>,
}

impl CudaQuant {
    /// The offsets, or (for `q8`, whose kernels take the argument unread) the scales again.
    pub fn offsets_or_scales(&self) -> &CudaSlice<u16> {
        self.offsets.as_ref().unwrap_or(&self.scales)
    }

    /// Weights a 16-byte load of the decode kernels holds (kernels/gemv_quant.cu).
    pub fn per_load(&self) -> usize {
        if self.dtype == DType::Q8 { 16 } else { 32 }
    }

    /// Copies back to the host.
    pub fn to_host(&self) -> Result<QuantData> {
        let stream = self.words.stream();
        let half = |bits: Vec<u16>| bits.into_iter().map(half::f16::from_bits).collect::<Vec<_>>();
        Ok(QuantData {
            dtype: self.dtype,
            len: self.len,
            words: stream.clone_dtoh(&self.words).map_err(gpu)?,
            scales: half(stream.clone_dtoh(&self.scales).map_err(gpu)?),
            offsets: match &self.offsets {
                Some(o) => half(stream.clone_dtoh(o).map_err(gpu)?),
                None => Vec::new(),
            },
        })
    }
}

impl CudaStorage {
    /// A copy, failing where `Clone` would panic (out of memory, or a step being recorded whose
    /// recording already failed).
    pub fn try_clone(&self) -> Result<Self> {
        Ok(match self {
            CudaStorage::F32(s) => CudaStorage::F32(s.try_clone().map_err(gpu)?),
            CudaStorage::BF16(s) => CudaStorage::BF16(s.try_clone().map_err(gpu)?),
            CudaStorage::Quant(q) => CudaStorage::Quant(CudaQuant {
                dtype: q.dtype,
                len: q.len,
                words: q.words.try_clone().map_err(gpu)?,
                scales: q.scales.try_clone().map_err(gpu)?,
                offsets: q.offsets.as_ref().map(|o| o.try_clone()).transpose().map_err(gpu)?,
            }),
            CudaStorage::Fp8(f) => CudaStorage::Fp8(f.try_clone()?),
        })
    }

    pub fn dtype(&self) -> DType {
        match self {
            CudaStorage::F32(_) => DType::F32,
            CudaStorage::BF16(_) => DType::BF16,
            CudaStorage::Quant(q) => q.dtype,
            CudaStorage::Fp8(_) => DType::F8E4M3,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            CudaStorage::F32(s) => s.len(),
            CudaStorage::BF16(s) => s.len(),
            CudaStorage::Quant(q) => q.len,
            CudaStorage::Fp8(f) => f.rows * f.cols,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies back to host memory as f32.
    pub fn to_host(&self) -> Result<Vec<f32>> {
        match self {
            CudaStorage::F32(s) => s.stream().clone_dtoh(s).map_err(gpu),
            CudaStorage::BF16(s) => {
                let bits = s.stream().clone_dtoh(s).map_err(gpu)?;
                Ok(bits.into_iter().map(|b| f32::from_bits((b as u32) << 16)).collect())
            }
            CudaStorage::Quant(q) => Ok(crate::quant::dequantize(&q.to_host()?)),
            CudaStorage::Fp8(f) => f.to_host(),
        }
    }
}

/// A parameter in one of the float forms (a norm weight, a bias, an alpha, a convolution's weight).
#[derive(Clone, Copy)]
pub(super) enum Float<'a> {
    F32(&'a CudaSlice<f32>),
    BF16(&'a CudaSlice<u16>),
}

impl Float<'_> {
    pub(super) fn dtype(&self) -> DType {
        match self {
            Float::F32(_) => DType::F32,
            Float::BF16(_) => DType::BF16,
        }
    }
}

impl CudaBackend {
    /// A parameter's float buffer, or an error naming the op and the parameter's dtype.
    pub(super) fn float<'a>(&self, t: &'a Tensor, op: Op) -> Result<Float<'a>> {
        match self.storage(t, op)? {
            CudaStorage::F32(s) => Ok(Float::F32(s)),
            CudaStorage::BF16(s) => Ok(Float::BF16(s)),
            other => Err(Error::unsupported(op, other.dtype(), DeviceKind::Cuda)),
        }
    }

    /// The f32 buffer of an activation, or an error naming the op.
    pub(super) fn f32s<'a>(&self, t: &'a Tensor, op: Op) -> Result<&'a CudaSlice<f32>> {
        match self.storage(t, op)? {
            CudaStorage::F32(s) => Ok(s),
            other => Err(Error::unsupported(op, other.dtype(), DeviceKind::Cuda)),
        }
    }

    pub(super) fn storage<'a>(&self, t: &'a Tensor, op: Op) -> Result<&'a CudaStorage> {
        match t.storage() {
            Storage::Cuda(s) => Ok(s),
            other => Err(Error::WrongDevice { op, backend: DeviceKind::Cuda, found: other.kind() }),
        }
    }

    /// An f32 result; its buffer may be one element longer than the shape when the shape is empty.
    pub(super) fn wrap(&self, shape: &[usize], s: CudaSlice<f32>) -> Result<Tensor> {
        Ok(Tensor::new_unchecked(shape, Storage::Cuda(CudaStorage::F32(s))))
    }
}
