//! The CUDA backend's single-query work of a decode step: attention over the KV cache in one
//! launch, and the shortlist of a guided top-k draw.

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use super::launch::Overlapped;
use super::{CudaBackend, Lane, gpu};
use crate::device::{AttentionShape, Candidates, Shortlist};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// What single-query attention reuses from launch to launch on one stream: the splits' partials
/// and one ticket per (batch, KV head), which the kernel leaves at zero.
#[derive(Default)]
pub(super) struct DecodeScratch {
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
        k: &Tensor,
        v: &Tensor,
        s: &AttentionShape,
        scale: f32,
        out: &mut CudaSlice<f32>,
    ) -> Result<()> {
        // Splits of 32 keys: a 2-batch, 8-KV-head step at 500 keys runs 256 blocks.
        const SPLIT: usize = 32;
        let splits = s.kv_len.div_ceil(SPLIT).max(1);
        let slots = s.batch * s.heads * splits;
        let pairs = s.batch * s.kv_heads;
        let mut scratch = lane.decode.lock().map_err(|_| Error::Gpu("the decode scratch was poisoned".into()))?;
        // The unnormalised outputs start 16-byte aligned: the merge reads them as float4.
        let acc_at = (2 * slots).next_multiple_of(4);
        let need = acc_at + slots * s.head_dim;
        if scratch.partials.as_ref().is_none_or(|p| p.len() < need) {
            // Grown by half again, so a growing cache reallocates a few times per song, not per step.
            scratch.partials = Some(self.alloc(lane, need + need / 2)?);
        }
        if scratch.tickets.as_ref().is_none_or(|t| t.len() < pairs) {
            scratch.tickets = Some(lane.stream.alloc_zeros::<u32>(pairs).map_err(gpu)?);
        }
        let DecodeScratch { partials: Some(partials), tickets: Some(tickets) } = &mut *scratch else {
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
        let mut b = Overlapped::new(&lane.stream, self.kernels.get(&format!("attention_decode_g{group}")));
        b.input(self.f32s(q, "attention")?).input(self.f32s(k, "attention")?).input(self.f32s(v, "attention")?);
        b.output(&mut part_m).output(&mut part_l).output(&mut part_acc).output(tickets).output(out);
        b.int(kv_len).int(cap).int(heads).int(kv_heads).int(hd).int(split).float(scale);
        // SAFETY: shapes checked by the caller (head dim <= 128 and a multiple of 4, 1, 2, 4 or 8
        // query heads per KV head); every (head, split) slot is written once, then merged into
        // [batch, heads * head_dim] by one block per (batch, KV head). Launches on this stream run in
        // order (an overlapped one waits before it touches memory), so the scratch is never shared
        // by two at once.
        unsafe { b.launch(cfg, self.overlap) }?;
        Ok(())
    }

    /// The shortlist of `logits [2, width]` from one block on the device, or `None` when it cannot
    /// stand for the rows (then every entry is read back).
    pub(super) fn shortlist(&self, logits: &Tensor, width: usize, shortlist: &Shortlist) -> Result<Option<Candidates>> {
        let (mode, k, scale, lo, hi, extra) = match shortlist {
            Shortlist::Conditional { k, sampleable, extra } => {
                let clip = |i: usize| i.min(width) as i32;
                (0i32, *k, 0.0f32, clip(sampleable.start), clip(sampleable.end), extra.map_or(-1, clip))
            }
            Shortlist::Guided { k, scale } => (1i32, *k, *scale, 0, 0, -1),
        };
        let k = k.clamp(1, width);
        // Room for ties at the threshold; a list as long as the rows would save nothing.
        let cap = (4 * k).max(256);
        if cap >= width || width >= 1 << 24 {
            return Ok(None);
        }
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, 1 + 3 * cap)?;
        let (width32, k32, cap32) = (width as i32, k as i32, cap as i32);
        let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1024, 1, 1), shared_mem_bytes: 0 };
        let mut b = lane.stream.launch_builder(self.kernels.get("shortlist_top_k"));
        b.arg(self.f32s(logits, "candidates")?).arg(&width32).arg(&mode).arg(&scale).arg(&k32);
        b.arg(&lo).arg(&hi).arg(&extra).arg(&cap32).arg(&mut out);
        // SAFETY: logits hold 2 * width floats; the kernel writes at most 1 + 3 * cap floats of `out`.
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        let packed = lane.stream.clone_dtoh(&out).map_err(gpu)?;
        if packed[0] < 0.0 {
            return Ok(None);
        }
        let count = packed[0] as usize;
        let mut entries: Vec<(u32, f32, f32)> =
            (0..count).map(|j| (packed[1 + j] as u32, packed[1 + cap + j], packed[1 + 2 * cap + j])).collect();
        entries.sort_unstable_by_key(|e| e.0);
        Ok(Some(Candidates {
            width,
            index: entries.iter().map(|e| e.0).collect(),
            cond: entries.iter().map(|e| e.1).collect(),
            uncond: entries.iter().map(|e| e.2).collect(),
        }))
    }
}
