//! Sampling on the CUDA backend (kernels/sampling.cu): a top-k draw's candidates selected on the
//! device, so only they travel to the host, and a guided draw made there outright, so only its
//! code does.

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use super::context::{Lane, gpu};
use super::launch::grid_1d;
use super::{CudaBackend, CudaStorage};
use crate::device::{Candidates, DeviceShortlist, LayoutOps, Op, SamplingOps, Shortlist, composed};
use crate::error::{Error, Result};
use crate::tensor::{Storage, Tensor};

/// The most entries `draw_guided` takes a pair (kernels/sampling.cu `DRAW_MAX`).
const DRAW_MAX: usize = 1024;

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
        let Some(rule) = shortlist.on_device(width) else {
            return Ok(None);
        };
        let lane = self.lane()?;
        let out = self.packed_shortlists(&lane, logits, pairs, width, &rule)?;
        let packed = lane.stream.clone_dtoh(&out).map_err(gpu)?;
        Ok(Some(packed.chunks(1 + 3 * rule.cap).map(|list| Candidates::unpack(width, rule.cap, list)).collect()))
    }

    /// Each pair's list, packed as [`Candidates::unpack`] reads them, left on the device.
    fn packed_shortlists(
        &self,
        lane: &Lane,
        logits: &Tensor,
        pairs: usize,
        width: usize,
        rule: &DeviceShortlist,
    ) -> Result<CudaSlice<f32>> {
        let &DeviceShortlist { mode, k, scale, lo, hi, extra, cap } = rule;
        let mut out = self.alloc(lane, pairs * (1 + 3 * cap))?;
        let (width32, k32, cap32, mode) = (width as i32, k as i32, cap as i32, mode as i32);
        let (lo, hi, extra) = (lo as i32, hi as i32, extra.map_or(-1, |e| e as i32));
        let cfg = LaunchConfig { grid_dim: (pairs as u32, 1, 1), block_dim: (1024, 1, 1), shared_mem_bytes: 0 };
        let mut b = lane.stream.launch_builder(self.kernels.get("shortlist_top_k")?);
        b.arg(self.f32s(logits, Op::CandidatesEach)?).arg(&width32).arg(&mode).arg(&scale).arg(&k32);
        b.arg(&lo).arg(&hi).arg(&extra).arg(&cap32).arg(&mut out);
        // SAFETY: logits hold 2 * width floats a pair; block i writes at most 1 + 3 * cap floats of
        // `out` from i * (1 + 3 * cap).
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        Ok(out)
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

    /// The draw on the device (kernels/sampling.cu `draw_guided`): from the pair's shortlist where
    /// the rule makes one, else from every entry of rows up to `DRAW_MAX` wide; wider rows without
    /// a list draw on the host.
    fn draw_each(&self, logits: &Tensor, rule: &Shortlist, uniforms: &[f64]) -> Result<Tensor> {
        let (rows, width) = logits.dims2("draw_each")?;
        let (k, scale) = rule.guided()?;
        if rows != 2 * uniforms.len() {
            return Err(Error::Invalid(format!("{rows} rows of logits drawn with {} uniforms", uniforms.len())));
        }
        let listed = rule.on_device(width);
        if uniforms.is_empty() || (listed.is_none() && width > DRAW_MAX) || listed.is_some_and(|l| l.cap > DRAW_MAX) {
            return composed::draw_each(self, logits, rule, uniforms);
        }
        let lane = self.lane()?;
        let pairs = uniforms.len();
        let lists = listed.map(|l| self.packed_shortlists(&lane, logits, pairs, width, &l)).transpose()?;
        let uniforms_dev = lane.stream.clone_htod(uniforms).map_err(gpu)?;
        let mut codes = self.alloc(&lane, pairs)?;
        let (width32, cap32, k32) = (width as i32, listed.map_or(0, |l| l.cap) as i32, k as i32);
        let null = 0u64;
        let mut b = lane.stream.launch_builder(self.kernels.get("draw_guided")?);
        b.arg(self.f32s(logits, Op::DrawEach)?).arg(&width32);
        match &lists {
            Some(lists) => b.arg(lists),
            None => b.arg(&null),
        };
        b.arg(&cap32).arg(&k32).arg(&scale).arg(&uniforms_dev).arg(&mut codes);
        let cfg = LaunchConfig { grid_dim: (pairs as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: logits hold 2 * width floats a pair (width <= DRAW_MAX without lists), the lists
        // 1 + 3 * cap floats a pair (cap <= DRAW_MAX), uniforms and codes one a pair.
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        self.wrap(&[pairs, 1], codes)
    }

    fn embedding_drawn(&self, table: &Tensor, codes: &Tensor, offset: u32, repeat: usize) -> Result<Tensor> {
        let (vocab, _) = table.dims2("embedding_drawn")?;
        let n = codes.elem_count();
        let Storage::Cuda(CudaStorage::F32(codes_dev)) = codes.storage() else {
            return composed::embedding_drawn(self, table, codes, offset, repeat);
        };
        if offset as usize >= vocab {
            return Err(Error::Invalid(format!("drawn codes from row {offset} of a table of {vocab} rows")));
        }
        let lane = self.lane()?;
        let count = n * repeat;
        let mut ids = self.alloc_as::<u32>(&lane, count)?;
        if count > 0 {
            let (n32, repeat32, rows) = (n as i32, repeat as i32, vocab as u32);
            let mut b = lane.stream.launch_builder(self.kernels.get("drawn_ids")?);
            b.arg(codes_dev).arg(&n32).arg(&repeat32).arg(&offset).arg(&rows).arg(&mut ids);
            // SAFETY: codes hold n floats, ids n * repeat; every id is below the table's rows.
            unsafe { b.launch(grid_1d(count)) }.map_err(gpu)?;
        }
        self.embedding_ids(&lane, table, &ids, count)
    }
}
