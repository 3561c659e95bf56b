//! RMSNorm and LayerNorm (norms.wgsl), one workgroup a row.

use super::shaders::Program;
use super::{WgpuBackend, bits, tensor_bindings, word};
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
        let weight = self.storage(w, op)?;
        // RMSNorm binds its weight where LayerNorm's bias goes; the shader does not read it.
        let bias = match b {
            Some(b) => self.storage(b, op)?,
            None => weight,
        };
        let out = self.alloc(op, rows * dim)?;
        let mut buffers = vec![(1, src.buffer()), (2, out.buffer())];
        buffers.extend(tensor_bindings(3, weight));
        buffers.extend(tensor_bindings(6, bias));
        let params = [word(op, rows)?, word(op, dim)?, bits(eps), b.is_some() as u32];
        self.run(Program::Norms, &[weight.dtype, bias.dtype], &params, &buffers, word(op, rows)?)?;
        Ok(self.wrap(x.shape(), out))
    }

    pub(super) fn rms_norm(&self, x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
        self.norm(Op::RmsNorm, x, w, None, eps)
    }

    pub(super) fn layer_norm(&self, x: &Tensor, w: &Tensor, b: &Tensor, eps: f32) -> Result<Tensor> {
        self.norm(Op::LayerNorm, x, w, Some(b), eps)
    }
}
