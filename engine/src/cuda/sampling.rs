//! The sampling shortlist on the CUDA backend (kernels/sampling.cu): a guided top-k draw's
//! candidates selected on the device, so only they travel to the host.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::context::gpu;
use super::{CudaBackend, CudaStorage};
use crate::device::{Candidates, Op, Shortlist};
use crate::error::Result;
use crate::tensor::{Storage, Tensor};

impl CudaBackend {
    pub(super) fn candidates(&self, logits: &Tensor, shortlist: &Shortlist) -> Result<Candidates> {
        if let ([2, width], Storage::Cuda(CudaStorage::F32(_))) = (logits.shape(), logits.storage())
            && let Some(list) = self.shortlist(logits, *width, shortlist)?
        {
            return Ok(list);
        }
        Ok(Candidates::of_rows(self.to_host(logits)?))
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
        let mut b = lane.stream.launch_builder(self.kernels.get("shortlist_top_k")?);
        b.arg(self.f32s(logits, Op::Candidates)?).arg(&width32).arg(&mode).arg(&scale).arg(&k32);
        b.arg(&lo).arg(&hi).arg(&extra).arg(&cap32).arg(&mut out);
        // SAFETY: logits hold 2 * width floats; the kernel writes at most 1 + 3 * cap floats of `out`.
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        let packed = lane.stream.clone_dtoh(&out).map_err(gpu)?;
        Ok(Candidates::unpack(width, cap, &packed))
    }
}
