//! Where a tensor's data lives: the enum at the boundary between the tensor and the backends (as
//! `Device` is for the backends themselves), so that `tensor.rs` names no backend.

use super::DeviceKind;
use crate::error::Result;
use crate::tensor::{CpuStorage, DType};

/// Where a tensor's data lives.
#[derive(Debug, Clone)]
pub enum Storage {
    Cpu(CpuStorage),
    Cuda(crate::cuda::CudaStorage),
    Wgpu(crate::wgpu_backend::WgpuStorage),
}

impl Storage {
    pub fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(s) => s.dtype(),
            Storage::Cuda(s) => s.dtype(),
            Storage::Wgpu(s) => s.dtype(),
        }
    }

    /// The backend whose memory holds the data.
    pub fn kind(&self) -> DeviceKind {
        match self {
            Storage::Cpu(_) => DeviceKind::Cpu,
            Storage::Cuda(_) => DeviceKind::Cuda,
            Storage::Wgpu(_) => DeviceKind::Wgpu,
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Storage::Cpu(s) => s.len(),
            Storage::Cuda(s) => s.len(),
            Storage::Wgpu(s) => s.len(),
        }
    }

    /// A copy of the values as f32 in host memory (device buffers may hold padding at the end).
    pub(crate) fn to_host(&self) -> Result<Vec<f32>> {
        match self {
            Storage::Cpu(s) => Ok(s.to_f32_vec()),
            Storage::Cuda(s) => s.to_host(),
            Storage::Wgpu(s) => s.to_host(),
        }
    }
}
