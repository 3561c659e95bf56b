//! RMSNorm and LayerNorm (norms.wgsl), one workgroup a row.

use super::shaders::Program;
use super::{WgpuBackend, bits, weight_and_bias_bindings, word};
use crate::device::Op;
use crate::error::Result;
use crate::shapes;
use crate::tensor::Tensor;

impl WgpuBackend {
    fn norm(&self, op: Op, x: &Tensor, w: &Tensor, b: Option<&Tensor>, eps: f32) -> Result<Tensor> {
        let (rows, dim) = match b {
            Some(b) => shapes::rows_with_params(op.name(), x, &[w, b])?,
            None => shapes::rows_with_params(op.name(), x, &[w])?,
        };
        let src = self.f32s(x, op)?;
        // RMSNorm's weight stands in for LayerNorm's bias; the shader does not read it.
        let readers = self.weight_and_bias(op, w, b)?;
        let out = self.alloc(op, rows * dim)?;
        let mut buffers = vec![(1, src.buffer()), (2, out.buffer())];
        buffers.extend(weight_and_bias_bindings(readers));
        let params = [word(op, rows)?, word(op, dim)?, bits(eps), b.is_some() as u32];
        self.run(Program::Norms, &[readers.0.dtype, readers.1.dtype], &params, &buffers, word(op, rows)?)?;
        Ok(self.wrap(x.shape(), out))
    }

    pub(super) fn rms_norm(&self, x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
        self.norm(Op::RmsNorm, x, w, None, eps)
    }

    pub(super) fn layer_norm(&self, x: &Tensor, w: &Tensor, b: &Tensor, eps: f32) -> Result<Tensor> {
        self.norm(Op::LayerNorm, x, w, Some(b), eps)
    }
}
