//! Device memory of one tensor, and how the backend's ops reach it.

use cudarc::driver::CudaSlice;

use super::CudaBackend;
use super::context::gpu;
use crate::device::{DeviceKind, Op};
use crate::error::{Error, Result};
use crate::tensor::{DType, Storage, Tensor};

#[derive(Debug, Clone)]
pub enum CudaStorage {
    F32(CudaSlice<f32>),
    /// bf16 as raw bits.
    BF16(CudaSlice<u16>),
}

impl CudaStorage {
    pub fn dtype(&self) -> DType {
        match self {
            CudaStorage::F32(_) => DType::F32,
            CudaStorage::BF16(_) => DType::BF16,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            CudaStorage::F32(s) => s.len(),
            CudaStorage::BF16(s) => s.len(),
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
        }
    }
}

impl CudaBackend {
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
