//! The sampling shortlist on the wgpu backend (shortlist.wgsl): the device sends back the entries
//! near and above the k-th largest, and the host applies the exact rule to them.

use super::shaders::Program;
use super::{WgpuBackend, bits, word};
use crate::device::{Candidates, DeviceShortlist, LayoutOps, Op, SamplingOps, Shortlist};
use crate::error::Result;
use crate::pipeline::sampling::shortlist;
use crate::tensor::{DType, Tensor};

/// Keys (ulps) below the k-th largest that still come back: a guided value's rounding on the
/// device may differ from the host's in its last bit.
const MARGIN: u32 = 64;

impl WgpuBackend {
    /// The entries the device keeps of each pair of rows of `logits [2 * pairs, width]`, ascending
    /// (`None` for a pair whose every entry must come back), a workgroup a pair, read back at once;
    /// no lists at all where the rule keeps every entry.
    fn supersets(
        &self,
        logits: &Tensor,
        pairs: usize,
        width: usize,
        rule: &Shortlist,
    ) -> Result<Option<Vec<Option<Candidates>>>> {
        let op = Op::CandidatesEach;
        let Some(DeviceShortlist { mode, k, scale, lo, hi, extra, cap }) = rule.on_device(width) else {
            return Ok(None);
        };
        let (lo, hi, extra) = (word(op, lo)?, word(op, hi)?, extra.map_or(Ok(u32::MAX), |e| word(op, e))?);
        let src = self.f32s(logits, op)?;
        let packed_len = 1 + 3 * cap;
        let out = self.alloc(op, pairs * packed_len)?;
        let params = [word(op, width)?, mode, bits(scale), word(op, k)?, lo, hi, extra, word(op, cap)?, MARGIN];
        self.run(Program::Shortlist, &[], &params, &[(1, src.buffer()), (2, out.buffer())], word(op, pairs)?)?;
        let packed = out.to_host()?;
        Ok(Some(packed.chunks(packed_len).map(|list| Candidates::unpack(width, cap, list)).collect()))
    }
}

impl SamplingOps for WgpuBackend {
    fn candidates_each(&self, logits: &Tensor, rule: &Shortlist) -> Result<Vec<Candidates>> {
        let rows = logits.shape().first().copied().unwrap_or(0);
        if let [_, width] = *logits.shape()
            && rows > 0
            && rows.is_multiple_of(2)
            && logits.dtype() == DType::F32
            && let Some(lists) = self.supersets(logits, rows / 2, width, rule)?
        {
            // A pair whose list cannot stand for its rows comes back whole.
            let pair = |i: usize| Ok(Candidates::of_rows(self.slice_rows(logits, 2 * i, 2 * i + 2)?.to_host()?));
            let exact =
                |(i, list): (usize, Option<Candidates>)| list.map_or_else(|| pair(i), |s| Ok(shortlist(&s, rule)));
            return lists.into_iter().enumerate().map(exact).collect();
        }
        Candidates::of_pairs(logits.to_host()?, rows)
    }
}
