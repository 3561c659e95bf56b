//! Every case of the suite, by op family, and the naive loops they share.

mod attention;
mod conv;
mod elementwise;
mod layout;
mod norms;
mod products;
mod sampling;

pub use sampling::logit_rows;

use super::Case;

/// Every case, in the order of the families.
pub fn all_cases() -> Vec<Case> {
    [
        products::cases(),
        attention::cases(),
        norms::cases(),
        conv::cases(),
        elementwise::cases(),
        layout::cases(),
        sampling::cases(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

pub(crate) fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// `x [m, k] @ w [n, k]^T`, summed in order.
pub(crate) fn naive_linear(x: &[f32], m: usize, k: usize, w: &[f32], n: usize) -> Vec<f32> {
    let mut y = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            y[i * n + j] = (0..k).map(|p| x[i * k + p] * w[j * k + p]).sum();
        }
    }
    y
}

/// RMSNorm of each `dim`-long row of `x` with weight `w`.
pub(crate) fn naive_rms_norm(x: &[f32], w: &[f32], dim: usize, eps: f32) -> Vec<f32> {
    x.chunks(dim)
        .flat_map(|row| {
            let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f32>() / dim as f32 + eps).sqrt();
            row.iter().zip(w).map(move |(v, g)| v * inv * g).collect::<Vec<_>>()
        })
        .collect()
}

/// Rotate-half rotary embedding of `x [rows, heads * head_dim]` on the leading `rotary_dim` dims
/// of each head; row `r` sits at position `first + r % seq_len`.
pub(crate) fn naive_rope(
    x: &[f32],
    head_dim: usize,
    rotary_dim: usize,
    theta: f32,
    first: usize,
    seq_len: usize,
    width: usize,
) -> Vec<f32> {
    let half = rotary_dim / 2;
    let mut y = x.to_vec();
    for (r, row) in y.chunks_mut(width).enumerate() {
        let pos = (first + r % seq_len) as f32;
        for head in row.chunks_mut(head_dim) {
            for i in 0..half {
                let angle = pos * (1.0 / theta.powf((2 * i) as f32 / rotary_dim as f32));
                let (a, b) = (head[i], head[i + half]);
                head[i] = a * angle.cos() - b * angle.sin();
                head[i + half] = b * angle.cos() + a * angle.sin();
            }
        }
    }
    y
}
