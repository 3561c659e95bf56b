//! Quantized weights on the CUDA backend (kernels/quant.cu, engine/src/quant.rs): moved up as they
//! are, made from f32 or bf16 weights on the device (bit for bit as the host makes them),
//! dequantized for the products beyond the decode shapes, and gathered for embeddings.

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::CudaBackend;
use super::context::{Lane, gpu};
use super::launch::grid_1d;
use super::storage::{CudaQuant, Float};
use crate::error::{Error, Result};
use crate::quant::{GROUP, QuantData, per_word};
use crate::tensor::DType;

impl CudaBackend {
    /// Host quantized data on the device, array by array.
    pub(super) fn upload_quant(&self, lane: &Lane, q: &QuantData) -> Result<CudaQuant> {
        let bits = |v: &[half::f16]| v.iter().map(|h| h.to_bits()).collect::<Vec<u16>>();
        Ok(CudaQuant {
            dtype: q.dtype,
            len: q.len,
            words: lane.stream.clone_htod(&q.words).map_err(gpu)?,
            scales: lane.stream.clone_htod(&bits(&q.scales)).map_err(gpu)?,
            offsets: match q.dtype {
                DType::Q4 => Some(lane.stream.clone_htod(&bits(&q.offsets)).map_err(gpu)?),
                _ => None,
            },
        })
    }

    /// `len` weights of `src` in `dtype` (`q8` or `q4`), quantized on the device.
    pub(super) fn quantize(&self, lane: &Lane, src: Float, len: usize, dtype: DType) -> Result<CudaQuant> {
        if !len.is_multiple_of(GROUP) {
            return Err(Error::shape("quantize", format!("{len} weights are not whole groups of {GROUP}")));
        }
        let groups = len / GROUP;
        let mut words = self.alloc_as::<u32>(lane, len / per_word(dtype))?;
        let mut scales = self.alloc_as::<u16>(lane, groups)?;
        let mut offsets = if dtype == DType::Q4 { Some(self.alloc_as::<u16>(lane, groups)?) } else { None };
        let source = match src {
            Float::F32(_) => "f32",
            Float::BF16(_) => "bf16",
        };
        let bits = if dtype == DType::Q8 { 8 } else { 4 };
        let mut b = lane.stream.launch_builder(self.kernels.get(&format!("quantize_q{bits}_{source}"))?);
        match src {
            Float::F32(s) => b.arg(s),
            Float::BF16(s) => b.arg(s),
        };
        b.arg(&mut words).arg(&mut scales);
        if let Some(o) = offsets.as_mut() {
            b.arg(o);
        }
        let groups64 = groups as i64;
        b.arg(&groups64);
        // SAFETY: one thread per group reads its 32 values of `src` (len of them) and writes its
        // words, scale (and offset), all sized for `groups` groups.
        unsafe { b.launch(grid_1d(groups)) }.map_err(gpu)?;
        Ok(CudaQuant { dtype, len, words, scales, offsets })
    }

    pub(super) fn dequantize_bf16(&self, lane: &Lane, q: &CudaQuant) -> Result<CudaSlice<u16>> {
        let out = self.alloc_as::<u16>(lane, q.len)?;
        self.dequantize_into(lane, q, "bf16", out)
    }

    pub(super) fn dequantize_f32(&self, lane: &Lane, q: &CudaQuant) -> Result<CudaSlice<f32>> {
        let out = self.alloc(lane, q.len)?;
        self.dequantize_into(lane, q, "f32", out)
    }

    /// Every weight of `q` into `out` (q.len values of the kernel's `to` type).
    fn dequantize_into<T: cudarc::driver::DeviceRepr>(
        &self,
        lane: &Lane,
        q: &CudaQuant,
        to: &str,
        mut out: CudaSlice<T>,
    ) -> Result<CudaSlice<T>> {
        let mut b = lane.stream.launch_builder(self.kernels.get(&format!("dequantize_{}_{to}", q.dtype))?);
        b.arg(&q.words).arg(&q.scales);
        if let Some(o) = &q.offsets {
            b.arg(o);
        }
        let n64 = q.len as i64;
        b.arg(&mut out).arg(&n64);
        // The bf16 kernels take eight weights a thread (q.len is whole groups of 32).
        let threads = if to == "bf16" { q.len / 8 } else { q.len };
        // SAFETY: the kernel reads the q.len weights' words, scales (offsets) and writes q.len values
        // of `out`, which holds q.len (16-byte aligned, as every fresh allocation).
        unsafe { b.launch(grid_1d(threads)) }.map_err(gpu)?;
        Ok(out)
    }

    /// Rows `ids` (already on the device, checked against the table) of a quantized `[vocab, dim]`
    /// table into `out [ids, dim]`.
    pub(super) fn embedding_quant(
        &self,
        lane: &Lane,
        q: &CudaQuant,
        ids: &CudaSlice<u32>,
        count: usize,
        dim: usize,
        out: &mut CudaSlice<f32>,
    ) -> Result<()> {
        let mut b = lane.stream.launch_builder(self.kernels.get(&format!("embedding_{}", q.dtype))?);
        b.arg(&q.words).arg(&q.scales);
        if let Some(o) = &q.offsets {
            b.arg(o);
        }
        let (dim32, n64) = (dim as i32, count as i64);
        b.arg(ids).arg(out).arg(&dim32).arg(&n64);
        // SAFETY: ids index rows of the table; out holds count * dim floats.
        unsafe { b.launch(grid_1d(count * dim)) }.map_err(gpu)?;
        Ok(())
    }
}
