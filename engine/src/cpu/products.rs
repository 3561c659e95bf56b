//! The CPU backend's products: the `gemm` crate over f32, bf16, f16 and the quantized formats;
//! the fused products take the composed defaults.

use super::*;

impl ProductOps for CpuBackend {
    fn linear(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let (m, k, n) = shapes::linear(x, w, bias)?;
        let mut y = gemm::linear(f32s(x, Op::Linear)?, m, k, storage(w, Op::Linear)?, n, self.fresh);
        if let Some(b) = bias {
            let b = param(b, Op::Linear)?;
            let work = y.len();
            pool::for_chunks(&mut y, n, work, |_, row| row.iter_mut().zip(b.iter()).for_each(|(v, b)| *v += b));
        }
        out(&[m, n], y)
    }
}
