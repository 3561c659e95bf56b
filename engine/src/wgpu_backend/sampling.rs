//! The sampling shortlist on the wgpu backend (shortlist.wgsl): the device sends back the entries
//! near and above the k-th largest, and the host applies the exact rule to them.

use super::shaders::Program;
use super::{WgpuBackend, bits, word};
use crate::device::{Candidates, DeviceShortlist, Op, SamplingOps, Shortlist};
use crate::error::Result;
use crate::pipeline::sampling::shortlist;
use crate::tensor::{DType, Tensor};

/// Keys (ulps) below the k-th largest that still come back: a guided value's rounding on the
/// device may differ from the host's in its last bit.
const MARGIN: u32 = 64;

impl WgpuBackend {
    /// The entries the device keeps, ascending, or `None` where every entry must come back.
    fn superset(&self, logits: &Tensor, width: usize, rule: &Shortlist) -> Result<Option<Candidates>> {
        let op = Op::Candidates;
        let Some(DeviceShortlist { mode, k, scale, lo, hi, extra, cap }) = rule.on_device(width) else {
            return Ok(None);
        };
        let (lo, hi, extra) = (word(op, lo)?, word(op, hi)?, extra.map_or(Ok(u32::MAX), |e| word(op, e))?);
        let src = self.f32s(logits, op)?;
        let out = self.alloc(op, 1 + 3 * cap)?;
        let params = [word(op, width)?, mode, bits(scale), word(op, k)?, lo, hi, extra, word(op, cap)?, MARGIN];
        self.run(Program::Shortlist, &[], &params, &[(1, src.buffer()), (2, out.buffer())], 1)?;
        let packed = out.to_host()?;
        Ok(Candidates::unpack(width, cap, &packed))
    }
}

impl SamplingOps for WgpuBackend {
    fn candidates(&self, logits: &Tensor, rule: &Shortlist) -> Result<Candidates> {
        if let [2, width] = *logits.shape()
            && logits.dtype() == DType::F32
            && let Some(superset) = self.superset(logits, width, rule)?
        {
            return Ok(shortlist(&superset, rule));
        }
        Ok(Candidates::of_rows(logits.to_host()?))
    }
}
