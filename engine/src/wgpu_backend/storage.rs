//! Tensors in wgpu buffers: f32 as it is, bf16 and f16 two to a word (low half first), the
//! quantized formats as their words with the f16 scales (and offsets) two to a word in buffers of
//! their own. The layout is the host's, so moving a tensor either way is a copy of its bytes. A
//! matrix larger than one binding holds (the embedding table, on most adapters) is kept in pieces
//! of whole rows, each a tensor of its own; the products and the gather run piece by piece.

use std::sync::Arc;

use half::f16;

use super::Shared;
use super::memory::GpuBuffer;
use crate::error::{Error, Result};
use crate::quant::QuantData;
use crate::tensor::{CpuStorage, DType};

/// A tensor's data on a wgpu device; clones share the buffers.
#[derive(Clone)]
pub struct WgpuStorage {
    pub(super) dtype: DType,
    pub(super) len: usize,
    /// The data, then the group scales and the offsets of a quantized format; for a matrix in
    /// pieces, empty.
    pub(super) buffers: Vec<Arc<GpuBuffer>>,
    /// A matrix kept in pieces of whole rows: each piece's first row and its data.
    pub(super) pieces: Vec<(usize, WgpuStorage)>,
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
        // Never held here ([`WgpuBackend::supports`]); a byte a value, should that change.
        DType::F8E4M3 => vec![len as u64],
    }
}

/// Rows `[r0, r1)` of a host matrix `cols` wide (for a quantized one, `cols` whole groups).
pub(super) fn host_rows(cpu: &CpuStorage, cols: usize, r0: usize, r1: usize) -> CpuStorage {
    let span = r0 * cols..r1 * cols;
    match cpu {
        CpuStorage::F32(v) => CpuStorage::F32(v[span].to_vec()),
        CpuStorage::BF16(v) => CpuStorage::BF16(v[span].to_vec()),
        CpuStorage::F16(v) => CpuStorage::F16(v[span].to_vec()),
        CpuStorage::Quant(q) => {
            let (per_word, group) = (crate::quant::per_word(q.dtype), crate::quant::GROUP);
            let groups = span.start / group..span.end / group;
            CpuStorage::Quant(QuantData {
                dtype: q.dtype,
                len: span.len(),
                words: q.words[span.start / per_word..span.end / per_word].to_vec(),
                scales: q.scales[groups.clone()].to_vec(),
                offsets: if q.offsets.is_empty() { Vec::new() } else { q.offsets[groups].to_vec() },
            })
        }
    }
}

/// Host matrices of whole rows stacked, in order.
fn concat(dtype: DType, parts: Vec<CpuStorage>) -> CpuStorage {
    let mut parts = parts.into_iter();
    let Some(mut all) = parts.next() else { return CpuStorage::F32(Vec::new()).to_dtype(dtype).expect("empty") };
    for part in parts {
        match (&mut all, part) {
            (CpuStorage::F32(a), CpuStorage::F32(b)) => a.extend(b),
            (CpuStorage::BF16(a), CpuStorage::BF16(b)) => a.extend(b),
            (CpuStorage::F16(a), CpuStorage::F16(b)) => a.extend(b),
            (CpuStorage::Quant(a), CpuStorage::Quant(b)) => {
                a.len += b.len;
                a.words.extend(b.words);
                a.scales.extend(b.scales);
                a.offsets.extend(b.offsets);
            }
            _ => unreachable!("the pieces of one tensor share its dtype"),
        }
    }
    all
}

impl WgpuStorage {
    /// Each piece's first row and data; a whole tensor is its own one piece.
    pub(super) fn pieces(&self) -> Vec<(usize, &WgpuStorage)> {
        if self.pieces.is_empty() { vec![(0, self)] } else { self.pieces.iter().map(|(r, p)| (*r, p)).collect() }
    }

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
        if !self.pieces.is_empty() {
            let parts = self.pieces.iter().map(|(_, p)| p.to_cpu()).collect::<Result<Vec<_>>>()?;
            return Ok(concat(self.dtype, parts));
        }
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
            DType::F8E4M3 => return Err(Error::Invalid("wgpu holds no fp8 tensor".into())),
        })
    }

    /// The values as f32 in host memory.
    pub fn to_host(&self) -> Result<Vec<f32>> {
        Ok(self.to_cpu()?.to_f32_vec())
    }
}
