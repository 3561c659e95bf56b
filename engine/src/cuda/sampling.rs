//! The sampling shortlist on the CUDA backend (kernels/sampling.cu): a guided top-k draw's
//! candidates selected on the device, so only they travel to the host.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::context::gpu;
use super::{CudaBackend, CudaStorage};
use crate::device::{Candidates, DeviceShortlist, LayoutOps, Op, SamplingOps, Shortlist};
use crate::error::Result;
use crate::tensor::{Storage, Tensor};

impl CudaBackend {
    /// The shortlist of `logits [2, width]` from one block on the device, or `None` when it cannot
    /// stand for the rows (then every entry is read back).
    pub(super) fn shortlist(&self, logits: &Tensor, width: usize, shortlist: &Shortlist) -> Result<Option<Candidates>> {
        let Some(DeviceShortlist { mode, k, scale, lo, hi, extra, cap }) = shortlist.on_device(width) else {
            return Ok(None);
        };
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, 1 + 3 * cap)?;
        let (width32, k32, cap32, mode) = (width as i32, k as i32, cap as i32, mode as i32);
        let (lo, hi, extra) = (lo as i32, hi as i32, extra.map_or(-1, |e| e as i32));
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

impl SamplingOps for CudaBackend {
    fn candidates(&self, logits: &Tensor, shortlist: &Shortlist) -> Result<Candidates> {
        if let ([2, width], Storage::Cuda(CudaStorage::F32(_))) = (logits.shape(), logits.storage())
            && let Some(list) = self.shortlist(logits, *width, shortlist)?
        {
            return Ok(list);
        }
        Ok(Candidates::of_rows(self.to_host(logits)?))
    }
}
