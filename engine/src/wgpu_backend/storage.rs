//! Tensors in wgpu buffers: f32 as it is, bf16 and f16 two to a word (low half first), the
//! quantized formats as their words with the f16 scales (and offsets) two to a word in buffers of
//! their own. The layout is the host's, so moving a tensor either way is a copy of its bytes.

use std::sync::Arc;

use half::f16;

use super::Shared;
use super::memory::GpuBuffer;
use crate::error::Result;
use crate::quant::QuantData;
use crate::tensor::{CpuStorage, DType};

/// A tensor's data on a wgpu device; clones share the buffers.
#[derive(Clone)]
pub struct WgpuStorage {
    pub(super) dtype: DType,
    pub(super) len: usize,
    /// The data, then the group scales and the offsets of a quantized format.
    pub(super) buffers: Vec<Arc<GpuBuffer>>,
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for WgpuStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WgpuStorage({} x {})", self.len, self.dtype)
    }
}

fn halves_to_bytes(values: impl Iterator<Item = u16>) -> Vec<u8> {
    values.flat_map(u16::to_le_bytes).collect()
}

fn bytes_to_halves(bytes: &[u8], n: usize) -> Vec<u16> {
    bytes.chunks_exact(2).take(n).map(|b| u16::from_le_bytes([b[0], b[1]])).collect()
}

/// The bytes of each buffer a host tensor takes on the device.
pub(super) fn to_bytes(storage: &CpuStorage) -> Vec<Vec<u8>> {
    match storage {
        CpuStorage::F32(v) => vec![bytemuck::cast_slice(v).to_vec()],
        CpuStorage::BF16(v) => vec![halves_to_bytes(v.iter().map(|x| x.to_bits()))],
        CpuStorage::F16(v) => vec![halves_to_bytes(v.iter().map(|x| x.to_bits()))],
        CpuStorage::Quant(q) => {
            let mut buffers =
                vec![bytemuck::cast_slice(&q.words).to_vec(), halves_to_bytes(q.scales.iter().map(|s| s.to_bits()))];
            if q.dtype == DType::Q4 {
                buffers.push(halves_to_bytes(q.offsets.iter().map(|s| s.to_bits())));
            }
            buffers
        }
    }
}

/// The bytes a tensor of `len` values in `dtype` takes in each of its buffers.
pub(super) fn byte_sizes(dtype: DType, len: usize) -> Vec<u64> {
    let groups = len.div_ceil(crate::quant::GROUP) as u64;
    match dtype {
        DType::F32 => vec![4 * len as u64],
        DType::BF16 | DType::F16 => vec![2 * len as u64],
        DType::Q8 => vec![len as u64, 2 * groups],
        DType::Q4 => vec![len as u64 / 2, 2 * groups, 2 * groups],
    }
}

impl WgpuStorage {
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The buffer holding the data (the first of a quantized tensor's).
    pub(super) fn buffer(&self) -> &wgpu::Buffer {
        self.buffers[0].raw()
    }

    /// The tensor back in host memory, in its dtype.
    pub fn to_cpu(&self) -> Result<CpuStorage> {
        let sizes = byte_sizes(self.dtype, self.len);
        let mut bytes = Vec::with_capacity(self.buffers.len());
        for (buffer, &size) in self.buffers.iter().zip(&sizes) {
            bytes.push(self.shared.queue.read(buffer.raw(), size)?);
        }
        let n = self.len;
        Ok(match self.dtype {
            DType::F32 => CpuStorage::F32(bytemuck::pod_collect_to_vec(&bytes[0])),
            DType::BF16 => {
                CpuStorage::BF16(bytes_to_halves(&bytes[0], n).into_iter().map(half::bf16::from_bits).collect())
            }
            DType::F16 => CpuStorage::F16(bytes_to_halves(&bytes[0], n).into_iter().map(f16::from_bits).collect()),
            DType::Q8 | DType::Q4 => {
                let groups = n.div_ceil(crate::quant::GROUP);
                let halves = |b: &[u8]| bytes_to_halves(b, groups).into_iter().map(f16::from_bits).collect();
                CpuStorage::Quant(QuantData {
                    dtype: self.dtype,
                    len: n,
                    words: bytemuck::pod_collect_to_vec(&bytes[0]),
                    scales: halves(&bytes[1]),
                    offsets: if self.dtype == DType::Q4 { halves(&bytes[2]) } else { Vec::new() },
                })
            }
        })
    }

    /// The values as f32 in host memory.
    pub fn to_host(&self) -> Result<Vec<f32>> {
        Ok(self.to_cpu()?.to_f32_vec())
    }
}
