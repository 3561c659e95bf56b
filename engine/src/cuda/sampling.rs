//! The sampling shortlist on the CUDA backend (kernels/sampling.cu): a guided top-k draw's
//! candidates selected on the device, so only they travel to the host.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::context::gpu;
use super::{CudaBackend, CudaStorage};
use crate::device::{Candidates, DeviceShortlist, LayoutOps, Op, SamplingOps, Shortlist};
use crate::error::Result;
use crate::tensor::{Storage, Tensor};

impl CudaBackend {
    /// The shortlists of each pair of rows of `logits [2 * pairs, width]`, a block a pair, read
    /// back at once; `None` for a pair whose list cannot stand for its rows (then every entry of
    /// that pair is read back), and no lists at all where the rule keeps every entry.
    pub(super) fn shortlists(
        &self,
        logits: &Tensor,
        pairs: usize,
        width: usize,
        shortlist: &Shortlist,
    ) -> Result<Option<Vec<Option<Candidates>>>> {
        let Some(DeviceShortlist { mode, k, scale, lo, hi, extra, cap }) = shortlist.on_device(width) else {
            return Ok(None);
        };
        let lane = self.lane()?;
        let packed_len = 1 + 3 * cap;
        let mut out = self.alloc(&lane, pairs * packed_len)?;
        let (width32, k32, cap32, mode) = (width as i32, k as i32, cap as i32, mode as i32);
        let (lo, hi, extra) = (lo as i32, hi as i32, extra.map_or(-1, |e| e as i32));
        let cfg = LaunchConfig { grid_dim: (pairs as u32, 1, 1), block_dim: (1024, 1, 1), shared_mem_bytes: 0 };
        let mut b = lane.stream.launch_builder(self.kernels.get("shortlist_top_k")?);
        b.arg(self.f32s(logits, Op::CandidatesEach)?).arg(&width32).arg(&mode).arg(&scale).arg(&k32);
        b.arg(&lo).arg(&hi).arg(&extra).arg(&cap32).arg(&mut out);
        // SAFETY: logits hold 2 * width floats a pair; block i writes at most 1 + 3 * cap floats of
        // `out` from i * (1 + 3 * cap).
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        let packed = lane.stream.clone_dtoh(&out).map_err(gpu)?;
        Ok(Some(packed.chunks(packed_len).map(|list| Candidates::unpack(width, cap, list)).collect()))
    }
}

impl SamplingOps for CudaBackend {
    fn candidates_each(&self, logits: &Tensor, shortlist: &Shortlist) -> Result<Vec<Candidates>> {
        let rows = logits.shape().first().copied().unwrap_or(0);
        if let (&[_, width], Storage::Cuda(CudaStorage::F32(_))) = (logits.shape(), logits.storage())
            && rows > 0
            && rows.is_multiple_of(2)
            && let Some(lists) = self.shortlists(logits, rows / 2, width, shortlist)?
        {
            // A pair whose list cannot stand for its rows comes back whole.
            let pair =
                |i: usize| Ok(Candidates::of_rows(self.to_host(&self.slice_rows(logits, 2 * i, 2 * i + 2)?)?));
            return lists.into_iter().enumerate().map(|(i, list)| list.map_or_else(|| pair(i), Ok)).collect();
        }
        Candidates::of_pairs(self.to_host(logits)?, rows)
    }
}
