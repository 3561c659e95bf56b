//! The CUDA backend's row-wise normalisations and rotary embedding (kernels/norm.cu), and a
//! decoder layer's attention inputs in one launch: per-head norm and rotary of the queries and
//! keys, keys and values appended to the cache.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::context::gpu;
use super::launch::{BLOCK, Overlapped, grid_1d, rows_config};
use super::storage::Float;
use super::{CudaBackend, CudaStorage};
use crate::device::{AttentionInputs, DeviceKind, KvSlot, NormOps, Op, Rotary, composed};
use crate::error::{Error, Result};
use crate::shapes;
use crate::tensor::{DType, Storage, Tensor};

impl NormOps for CudaBackend {
    fn rms_norm(&self, x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
        let (rows, dim) = shapes::rows_with_params("rms_norm", x, &[w])?;
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, rows * dim)?;
        let ws = self.float(w, Op::RmsNorm)?;
        // Rows a multiple of 4 long (all of the model's) take the register-resident kernel with a
        // block sized to the row: at most 4 float4 chunks a thread.
        let vectorized = dim.is_multiple_of(4) && dim <= 4 * 4 * 1024;
        let kernel = match (vectorized, ws.dtype() == DType::F32) {
            (true, true) => "rms_norm_vec_f32",
            (true, false) => "rms_norm_vec_bf16",
            (false, true) => "rms_norm_f32",
            (false, false) => "rms_norm_bf16",
        };
        let threads = if vectorized { (dim / 4).next_multiple_of(32).min(1024) as u32 } else { BLOCK };
        let mut b = Overlapped::new(&lane.stream, self.kernels.get(kernel)?);
        b.input(self.f32s(x, Op::RmsNorm)?);
        match ws {
            Float::F32(s) => b.input(s),
            Float::BF16(s) => b.input(s),
        };
        b.output(&mut out).int(dim as i32).float(eps);
        let cfg = LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: one block per row of `dim` floats (16-byte aligned rows when vectorized); the
        // vectorized kernels wait before they read x or write out.
        unsafe { b.launch(cfg, self.overlap && vectorized) }?;
        self.wrap(x.shape(), out)
    }

    fn layer_norm(&self, x: &Tensor, w: &Tensor, bias: &Tensor, eps: f32) -> Result<Tensor> {
        let (rows, dim) = shapes::rows_with_params("layer_norm", x, &[w, bias])?;
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, rows * dim)?;
        let (ws, bs) = (self.float(w, Op::LayerNorm)?, self.float(bias, Op::LayerNorm)?);
        let dim32 = dim as i32;
        // Rows of whole fours take four values a load.
        let quads = if dim.is_multiple_of(4) { "4" } else { "" };
        let mut b = match (ws, bs) {
            (Float::F32(w), Float::F32(bb)) => {
                let mut l = lane.stream.launch_builder(self.kernels.get(&format!("layer_norm{quads}_f32"))?);
                l.arg(self.f32s(x, Op::LayerNorm)?).arg(w).arg(bb);
                l
            }
            (Float::BF16(w), Float::BF16(bb)) => {
                let mut l = lane.stream.launch_builder(self.kernels.get(&format!("layer_norm{quads}_bf16"))?);
                l.arg(self.f32s(x, Op::LayerNorm)?).arg(w).arg(bb);
                l
            }
            (w, bb) => {
                return Err(Error::Invalid(format!(
                    "layer_norm: the weight is {} and the bias {}; they must share a dtype",
                    w.dtype(),
                    bb.dtype()
                )));
            }
        };
        b.arg(&mut out).arg(&dim32).arg(&eps);
        // SAFETY: one block per row (rows of whole fours start 16-byte aligned: fresh allocations are).
        unsafe { b.launch(rows_config(rows)) }.map_err(gpu)?;
        self.wrap(x.shape(), out)
    }

    fn rope(&self, x: &Tensor, r: Rotary) -> Result<Tensor> {
        let (rows, width) = shapes::rope(x, &r)?;
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, rows * width)?;
        let (rows64, heads, hd, rd, first, seq) = (
            rows as i64,
            r.heads as i32,
            r.head_dim as i32,
            r.rotary_dim as i32,
            r.first_position as i32,
            r.seq_len as i32,
        );
        let shift = lane.shift();
        // A block a row computes the row's angles once for all its heads (rotary dims up to 256).
        let by_rows = r.rotary_dim <= 256 && rows <= i32::MAX as usize;
        let mut b = lane.stream.launch_builder(self.kernels.get(if by_rows { "rope_rows_f32" } else { "rope_f32" })?);
        b.arg(self.f32s(x, Op::Rope)?).arg(&mut out);
        if !by_rows {
            b.arg(&rows64);
        }
        b.arg(&heads).arg(&hd).arg(&rd).arg(&r.theta).arg(&first).arg(&seq).arg(&shift);
        let cfg = if by_rows {
            LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 }
        } else {
            grid_1d(rows * width)
        };
        // SAFETY: rows * width floats each side; a block a row with its angles in shared memory.
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        self.wrap(x.shape(), out)
    }

    fn attention_inputs(&self, inputs: AttentionInputs, slot: KvSlot) -> Result<Tensor> {
        let r = inputs.rotary;
        let (q_rows, q_width) = inputs.q.dims2("attention_inputs")?;
        let (k_rows, k_width) = inputs.k.dims2("attention_inputs")?;
        let n = k_rows.checked_div(slot.batch).unwrap_or(0);
        let norms = (inputs.q_norm.storage(), inputs.k_norm.storage());
        let same_norm_dtype = matches!(
            norms,
            (Storage::Cuda(CudaStorage::F32(_)), Storage::Cuda(CudaStorage::F32(_)))
                | (Storage::Cuda(CudaStorage::BF16(_)), Storage::Cuda(CudaStorage::BF16(_)))
        );
        let fused = r.head_dim == 128
            && r.rotary_dim == 128
            && q_rows == k_rows
            && q_width.is_multiple_of(128)
            && k_width.is_multiple_of(128)
            && inputs.v.shape() == inputs.k.shape()
            && inputs.q_norm.elem_count() == 128
            && inputs.k_norm.elem_count() == 128
            && same_norm_dtype
            && r.seq_len == n
            && slot.keys.shape() == slot.values.shape()
            && slot.keys.dtype() == slot.values.dtype();
        let placement = shapes::write_rows(slot.keys, &inputs.k, slot.batch, slot.row).ok();
        let Some((capacity, _, _)) = placement.filter(|_| fused) else {
            return composed::attention_inputs(self, inputs, slot);
        };
        let lane = self.lane()?;
        let mut q_out = self.alloc(&lane, inputs.q.elem_count())?;
        let (q, k, v) = (
            self.f32s(&inputs.q, Op::AttentionInputs)?,
            self.f32s(&inputs.k, Op::AttentionInputs)?,
            self.f32s(inputs.v, Op::AttentionInputs)?,
        );
        let cache_dtype = slot.keys.dtype();
        let norm_dtype = if matches!(norms.0, Storage::Cuda(CudaStorage::F32(_))) { "f32" } else { "bf16" };
        let cache_suffix = if cache_dtype == DType::BF16 { "_kv_bf16" } else { "" };
        let kernel = format!("qk_norm_rope_append128_{norm_dtype}{cache_suffix}");
        let (heads, kv_heads) = (q_width / 128, k_width / 128);
        let mut b = Overlapped::new(&lane.stream, self.kernels.get(&kernel)?);
        b.input(q).input(k).input(v);
        for norm in [inputs.q_norm, inputs.k_norm] {
            match self.float(norm, Op::AttentionInputs)? {
                Float::F32(s) => b.input(s),
                Float::BF16(s) => b.input(s),
            };
        }
        b.output(&mut q_out);
        match (slot.keys.storage_mut(), slot.values.storage_mut()) {
            (Storage::Cuda(CudaStorage::F32(keys)), Storage::Cuda(CudaStorage::F32(values))) => {
                b.output(keys).output(values)
            }
            (Storage::Cuda(CudaStorage::BF16(keys)), Storage::Cuda(CudaStorage::BF16(values))) => {
                b.output(keys).output(values)
            }
            _ => return Err(Error::unsupported(Op::AttentionInputs, cache_dtype, DeviceKind::Cuda)),
        };
        b.int(q_rows as i32).int(heads as i32).int(kv_heads as i32);
        b.float(inputs.eps).float(r.theta).int(r.first_position as i32).int(n as i32).int(capacity as i32);
        b.int(slot.row as i32).address(lane.shift());
        let warps = q_rows * (heads + kv_heads);
        let cfg =
            LaunchConfig { grid_dim: (warps.div_ceil(8) as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: one warp per (row, head) of 128 floats in q, k and v; the cache rows written lie
        // inside both caches (checked above), and q_out holds as many floats as q; the kernel waits
        // before it touches any of them.
        unsafe { b.launch(cfg, self.overlap) }?;
        self.wrap(inputs.q.shape(), q_out)
    }
}
