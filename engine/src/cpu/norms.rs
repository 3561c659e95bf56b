//! The CPU backend's norms and the rotary embedding.

use super::*;

impl NormOps for CpuBackend {
    fn rms_norm(&self, x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
        let (_, dim) = shapes::rows_with_params("rms_norm", x, &[w])?;
        let (v, w) = (f32s(x, Op::RmsNorm)?, param(w, Op::RmsNorm)?);
        let mut y = v.to_vec();
        pool::for_chunks(&mut y, dim, v.len(), |_, row| {
            let mean_sq = row.iter().map(|a| a * a).sum::<f32>() / dim as f32;
            let inv = 1.0 / (mean_sq + eps).sqrt();
            row.iter_mut().zip(w.iter()).for_each(|(a, w)| *a = *a * inv * w);
        });
        out(x.shape(), y)
    }

    fn layer_norm(&self, x: &Tensor, w: &Tensor, b: &Tensor, eps: f32) -> Result<Tensor> {
        let (_, dim) = shapes::rows_with_params("layer_norm", x, &[w, b])?;
        let (v, w, b) = (f32s(x, Op::LayerNorm)?, param(w, Op::LayerNorm)?, param(b, Op::LayerNorm)?);
        let mut y = v.to_vec();
        pool::for_chunks(&mut y, dim, v.len(), |_, row| {
            let mean = row.iter().sum::<f32>() / dim as f32;
            let var = row.iter().map(|a| (a - mean) * (a - mean)).sum::<f32>() / dim as f32;
            let inv = 1.0 / (var + eps).sqrt();
            for ((a, w), b) in row.iter_mut().zip(w.iter()).zip(b.iter()) {
                *a = (*a - mean) * inv * w + b;
            }
        });
        out(x.shape(), y)
    }

    fn rope(&self, x: &Tensor, r: Rotary) -> Result<Tensor> {
        let (_, width) = shapes::rope(x, &r)?;
        let half = r.rotary_dim / 2;
        // inv_freq and the angles in f32, as the reference computes them.
        let inv_freq: Vec<f32> = (0..half).map(|i| 1.0 / r.theta.powf((2 * i) as f32 / r.rotary_dim as f32)).collect();
        let mut y = f32s(x, Op::Rope)?.to_vec();
        let work = y.len();
        pool::for_chunks(&mut y, width, work, |row, data| {
            let pos = (r.first_position + row % r.seq_len) as f32;
            for head in data.chunks_mut(r.head_dim) {
                for i in 0..half {
                    let angle = pos * inv_freq[i];
                    let (sin, cos) = (angle.sin(), angle.cos());
                    let (a, b) = (head[i], head[i + half]);
                    head[i] = a * cos - b * sin;
                    head[i + half] = b * cos + a * sin;
                }
            }
        });
        out(x.shape(), y)
    }
}
