//! The CPU backend's element-by-element ops, over all cores.

use super::*;

/// Elements a task takes: enough to vectorize and to outweigh handing work to another core.
pub(super) const CHUNK: usize = 4096;

impl ElementwiseOps for CpuBackend {
    fn cast(&self, t: &Tensor, dtype: DType) -> Result<Tensor> {
        Tensor::new(t.shape(), Storage::Cpu(storage(t, Op::Cast)?.to_dtype(dtype)?))
    }

    fn silu_mul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        same_shape(Op::SiluMul, a, b)?;
        let (x, y) = (f32s(a, Op::SiluMul)?, f32s(b, Op::SiluMul)?);
        let mut z = vec![self.fresh; x.len()];
        pool::for_chunks(&mut z, CHUNK, x.len(), |i, z| {
            let at = i * CHUNK;
            exp::silu_mul_into(z, &x[at..at + z.len()], &y[at..at + z.len()]);
        });
        out(a.shape(), z)
    }

    fn silu(&self, x: &Tensor) -> Result<Tensor> {
        let v = f32s(x, Op::Silu)?;
        let mut y = vec![self.fresh; v.len()];
        pool::for_chunks(&mut y, CHUNK, v.len(), |i, y| {
            let at = i * CHUNK;
            exp::silu_into(y, &v[at..at + y.len()]);
        });
        out(x.shape(), y)
    }

    fn tanh(&self, x: &Tensor) -> Result<Tensor> {
        map(x, Op::Tanh, f32::tanh)
    }

    fn add(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        zip(a, b, Op::Add, |p, q| p + q)
    }

    fn scale(&self, x: &Tensor, factor: f32) -> Result<Tensor> {
        map(x, Op::Scale, |a| a * factor)
    }

    fn fill_uniform(&self, shape: &[usize], dtype: DType, seed: u64, center: f32, half_width: f32) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        let values: Vec<f32> =
            (0..n).into_par_iter().map(|i| center + half_width * hash::uniform(seed, i as u64)).collect();
        self.cast(&Tensor::from_f32(shape, values)?, dtype)
    }

    fn count_non_finite(&self, x: &Tensor) -> Result<usize> {
        Ok(f32s(x, Op::CountNonFinite)?.par_iter().with_min_len(4096).filter(|v| !v.is_finite()).count())
    }
}
