//! The CUDA backend's attention (kernels/attention.cu): a tiled kernel for the DiT's long
//! sequences at head dim 64 (on the tensor cores under the fast precision policies), a single-query
//! kernel over splits of the KV cache for a decode step, and a general one-warp-per-query kernel.

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use super::CudaBackend;
use super::context::{Lane, gpu};
use super::launch::Overlapped;
use super::storage::Float;
use crate::device::{AttentionOps, AttentionShape, DeviceKind, Op, Rotary, composed};
use crate::error::{Error, Result};
use crate::precision::Precision;
use crate::shapes;
use crate::tensor::{DType, Tensor};

/// What single-query attention reuses from launch to launch on one stream: the splits' partials
/// and one ticket per (batch, KV head), which the kernel leaves at zero.
#[derive(Default)]
pub struct DecodeScratch {
    partials: Option<CudaSlice<f32>>,
    tickets: Option<CudaSlice<u32>>,
}

impl CudaBackend {
    /// Single-query attention (a decode step): one launch over splits of the keys, whose last block
    /// per (batch, KV head) merges the splits.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attention_decode(
        &self,
        lane: &Lane,
        q: &Tensor,
        (k, v): (Float, Float),
        s: &AttentionShape,
        scale: f32,
        out: &mut CudaSlice<f32>,
    ) -> Result<()> {
        // Splits of 32 keys: a 2-batch, 8-KV-head step at 500 keys runs 256 blocks.
        const SPLIT: usize = 32;
        // A step recorded to replay at later positions covers the whole cache: the kernel learns
        // the length at replay.
        let shift = lane.shift();
        let keys_covered = if shift != 0 { s.kv_capacity } else { s.kv_len };
        let splits = keys_covered.div_ceil(SPLIT).max(1);
        let slots = s.batch * s.heads * splits;
        let pairs = s.batch * s.kv_heads;
        // The unnormalised outputs start 16-byte aligned: the merge reads them as float4.
        let acc_at = (2 * slots).next_multiple_of(4);
        let need = acc_at + slots * s.head_dim;
        let mut scratch = lane.decode.lock().map_err(|_| Error::Gpu("the decode scratch was poisoned".into()))?;
        let mut own = DecodeScratch::default();
        // A recorded step keeps its scratch to itself: memory allocated while recording belongs to
        // the graph, which frees it before it ends.
        let scratch = if lane.recording() { &mut own } else { &mut *scratch };
        if scratch.partials.as_ref().is_none_or(|p| p.len() < need) {
            // Grown by half again, so a growing cache reallocates a few times per song, not per step.
            let spare = if lane.recording() { 0 } else { need / 2 };
            scratch.partials = Some(self.alloc(lane, need + spare)?);
        }
        if scratch.tickets.as_ref().is_none_or(|t| t.len() < pairs) {
            scratch.tickets = Some(lane.stream.alloc_zeros::<u32>(pairs).map_err(gpu)?);
        }
        let DecodeScratch { partials: Some(partials), tickets: Some(tickets) } = scratch else {
            unreachable!("both were just made");
        };
        let (mut part_ml, mut part_acc) = partials.split_at_mut(acc_at);
        let (mut part_m, mut part_l) = part_ml.split_at_mut(slots);
        let (kv_len, cap, heads, kv_heads, hd, split) =
            (s.kv_len as i32, s.kv_capacity as i32, s.heads as i32, s.kv_heads as i32, s.head_dim as i32, SPLIT as i32);
        let cfg = LaunchConfig {
            grid_dim: (splits as u32, s.kv_heads as u32, s.batch as u32),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        let group = s.heads / s.kv_heads;
        let dtype = if k.dtype() == DType::BF16 { "bf16" } else { "f32" };
        let mut b = Overlapped::new(&lane.stream, self.kernels.get(&format!("attention_decode_g{group}_{dtype}"))?);
        b.input(self.f32s(q, Op::Attention)?);
        for rows in [k, v] {
            match rows {
                Float::F32(x) => b.input(x),
                Float::BF16(x) => b.input(x),
            };
        }
        b.output(&mut part_m).output(&mut part_l).output(&mut part_acc).output(tickets).output(out);
        b.int(kv_len).int(cap).int(heads).int(kv_heads).int(hd).int(split).float(scale).address(shift);
        // SAFETY: shapes checked by the caller (head dim <= 128 and a multiple of 4, 1, 2, 4 or 8
        // query heads per KV head); every (head, split) slot is written once, then merged into
        // [batch, heads * head_dim] by one block per (batch, KV head). Launches on this stream run in
        // order (an overlapped one waits before it touches memory), so the scratch is never shared
        // by two at once.
        unsafe { b.launch(cfg, self.overlap) }?;
        Ok(())
    }
}

impl CudaBackend {
    /// Whether attention of this shape runs on the bf16 tensor cores (kernels/attention.cu's
    /// `attention_bf16_d64`): the DiT's (head dim 64, long, no mask, f32 keys and values) under the
    /// policies that round its products' inputs to bf16 or coarser, on GPUs that have them (sm_80 on).
    fn bf16_attention_takes(&self, q: &Tensor, k: &Tensor, v: &Tensor, s: &AttentionShape) -> bool {
        matches!(self.precision, Precision::Bf16 | Precision::Fp8)
            && self.tf32_mma
            && s.head_dim == 64
            && s.q_len >= 64
            && !s.causal
            && [q, k, v].iter().all(|t| t.dtype() == DType::F32)
    }

    /// The bf16 attention, with `q` and `k` rotated by `rotary` (its half 16 or 32): the keys and
    /// values rotated and rounded once (`attention_stage_kv`), the queries as they load.
    fn attention_bf16(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        s: &AttentionShape,
        rotary: Option<Rotary>,
    ) -> Result<Tensor> {
        shapes::attention(q, k, v, s)?;
        let lane = self.lane()?;
        if lane.shift() != 0 {
            return Err(Error::Gpu(format!("attention over {} queries cannot be recorded to replay", s.q_len)));
        }
        let mut out = self.alloc(&lane, s.batch * s.q_len * s.heads * s.head_dim)?;
        let scale = (s.head_dim as f32).powf(-0.5);
        let (q_len, kv_len, cap, heads, kv_heads) =
            (s.q_len as i32, s.kv_len as i32, s.kv_capacity as i32, s.heads as i32, s.kv_heads as i32);
        let (half, theta, first) = match rotary {
            Some(r) if matches!(r.rotary_dim, 32 | 64) => (r.rotary_dim / 2, r.theta, r.first_position as i32),
            Some(r) => return Err(Error::Gpu(format!("no bf16 attention rotating {} dims", r.rotary_dim))),
            None => (0, 0.0, 0),
        };
        let rot = match half {
            0 => "",
            16 => "_rot16",
            _ => "_rot32",
        };
        // The keys rotated and both rounded to bf16 once, not by every block of queries.
        let kv_pad = s.kv_len.div_ceil(64) * 64;
        let staged = s.batch * s.kv_heads * kv_pad * s.head_dim;
        let (mut keys, mut values) = (self.alloc_as::<u16>(&lane, staged)?, self.alloc_as::<u16>(&lane, staged)?);
        let pad = kv_pad as i32;
        let cfg = LaunchConfig {
            grid_dim: ((kv_pad / 64) as u32, s.kv_heads as u32, s.batch as u32),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = lane.stream.launch_builder(self.kernels.get(&format!("attention_stage_kv{rot}"))?);
        b.arg(self.f32s(k, Op::Attention)?).arg(self.f32s(v, Op::Attention)?).arg(&mut keys).arg(&mut values);
        b.arg(&kv_len).arg(&cap).arg(&kv_heads).arg(&pad).arg(&theta).arg(&first);
        // SAFETY: shapes checked above (head dim 64); the grid writes every key of both, padding
        // included (zeros past kv_len).
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        // Blocks of 4 warps, 16 queries each.
        let cfg = LaunchConfig {
            grid_dim: (s.q_len.div_ceil(64) as u32, s.heads as u32, s.batch as u32),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        let kernel = format!("attention_bf16_d64{rot}");
        let mut b = lane.stream.launch_builder(self.kernels.get(&kernel)?);
        b.arg(self.f32s(q, Op::Attention)?).arg(&keys).arg(&values).arg(&mut out);
        b.arg(&q_len).arg(&kv_len).arg(&pad).arg(&heads).arg(&kv_heads).arg(&scale);
        b.arg(&theta).arg(&first);
        // SAFETY: the staged keys and values hold kv_pad keys of every (batch, KV head); every
        // query row of the grid is written once. The scratch is freed in stream order after.
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        self.wrap(&[s.batch * s.q_len, s.heads * s.head_dim], out)
    }
}

impl AttentionOps for CudaBackend {
    fn attention_rotated(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        s: AttentionShape,
        rotary: Rotary,
    ) -> Result<Tensor> {
        let rotates_as_it_loads = rotary.head_dim == s.head_dim && matches!(rotary.rotary_dim, 32 | 64);
        if rotates_as_it_loads && self.bf16_attention_takes(q, k, v, &s) {
            return self.attention_bf16(q, k, v, &s, Some(rotary));
        }
        composed::attention_rotated(self, q, k, v, s, rotary)
    }

    fn attention(&self, q: &Tensor, k: &Tensor, v: &Tensor, s: AttentionShape) -> Result<Tensor> {
        shapes::attention(q, k, v, &s)?;
        if s.head_dim > 256 {
            return Err(Error::BackendLimit {
                op: Op::Attention,
                backend: DeviceKind::Cuda,
                detail: format!("head dim {} is over the 256 its kernels take", s.head_dim),
            });
        }
        let (keys, values) = (self.float(k, Op::Attention)?, self.float(v, Op::Attention)?);
        let kv_bf16 = keys.dtype() == DType::BF16;
        let lane = self.lane()?;
        let group = s.heads / s.kv_heads;
        let single_query =
            s.q_len == 1 && s.head_dim <= 128 && s.head_dim.is_multiple_of(4) && [1, 2, 4, 8].contains(&group);
        if lane.shift() != 0 && !single_query {
            return Err(Error::Gpu(format!(
                "attention over {} queries of head dim {} cannot be recorded to replay at other positions",
                s.q_len, s.head_dim
            )));
        }
        if self.bf16_attention_takes(q, k, v, &s) {
            return self.attention_bf16(q, k, v, &s, None);
        }
        let mut out = self.alloc(&lane, s.batch * s.q_len * s.heads * s.head_dim)?;
        let scale = (s.head_dim as f32).powf(-0.5);
        let (q_len, kv_len, cap, heads, kv_heads, hd, causal) = (
            s.q_len as i32,
            s.kv_len as i32,
            s.kv_capacity as i32,
            s.heads as i32,
            s.kv_heads as i32,
            s.head_dim as i32,
            s.causal as i32,
        );
        if s.head_dim == 64 && s.q_len >= 64 && !kv_bf16 {
            // Long sequences at head dim 64 (the DiT, whose keys and values are f32): the tiled kernel.
            let cfg = LaunchConfig {
                grid_dim: (s.q_len.div_ceil(64) as u32, s.heads as u32, s.batch as u32),
                block_dim: (128, 1, 1),
                shared_mem_bytes: 0,
            };
            // The fast policies take the scores and weighted values on the tensor cores (TF32).
            let kernel =
                if self.precision.is_fast() && self.tf32_mma { "attention_mma_d64" } else { "attention_tiled_d64" };
            let mut b = lane.stream.launch_builder(self.kernels.get(kernel)?);
            b.arg(self.f32s(q, Op::Attention)?)
                .arg(self.f32s(k, Op::Attention)?)
                .arg(self.f32s(v, Op::Attention)?)
                .arg(&mut out);
            b.arg(&q_len).arg(&kv_len).arg(&cap).arg(&heads).arg(&kv_heads).arg(&causal).arg(&scale);
            // SAFETY: shapes checked above; every query row of the grid is written once.
            unsafe { b.launch(cfg) }.map_err(gpu)?;
            return self.wrap(&[s.batch * s.q_len, s.heads * s.head_dim], out);
        }
        if single_query {
            self.attention_decode(&lane, q, (keys, values), &s, scale, &mut out)?;
            return self.wrap(&[s.batch, s.heads * s.head_dim], out);
        }
        let tile: i32 = if s.head_dim <= 128 { 32 } else { 16 };
        let warps = 4u32;
        let cfg = LaunchConfig {
            grid_dim: (s.q_len.div_ceil(warps as usize) as u32, s.heads as u32, s.batch as u32),
            block_dim: (32 * warps, 1, 1),
            shared_mem_bytes: (2 * tile as usize * s.head_dim * 4) as u32,
        };
        let kernel = if kv_bf16 { "attention_kv_bf16" } else { "attention_f32" };
        let mut b = lane.stream.launch_builder(self.kernels.get(kernel)?);
        b.arg(self.f32s(q, Op::Attention)?);
        for rows in [&keys, &values] {
            match rows {
                Float::F32(x) => b.arg(*x),
                Float::BF16(x) => b.arg(*x),
            };
        }
        b.arg(&mut out);
        b.arg(&q_len).arg(&kv_len).arg(&cap).arg(&heads).arg(&kv_heads).arg(&hd).arg(&causal).arg(&scale).arg(&tile);
        // SAFETY: shapes checked above; shared memory sized for two tiles of keys and values.
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        self.wrap(&[s.batch * s.q_len, s.heads * s.head_dim], out)
    }
}
