//! Every case of the suite, by op family, and the naive loops they share.

mod attention;
mod conv;
mod elementwise;
mod layout;
mod norms;
mod products;
mod sampling;

pub use sampling::{draw_of, logit_rows};

use super::{Case, Input};

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

/// `x [m, k] @ w [n, k]^T` as the CPU defines it for `w`: for a quantized weight at its decode
/// shapes (at most 32 rows, a batch's, whole groups of 32) each activation group is rounded to int8
/// against its largest magnitude / 127 first, and for q4 the group's rounding loss is counted at
/// the middle of its weights' range (engine/src/cpu/quant_dot.rs); otherwise the plain product of
/// the values. (A GPU's decode shapes stop at 8 rows; it is judged against the CPU.)
pub(crate) fn naive_product(x: &[f32], m: usize, k: usize, w: &Input, n: usize) -> Vec<f32> {
    if w.quant.is_none() || m > 32 || !k.is_multiple_of(32) {
        return naive_linear(x, m, k, &w.values, n);
    }
    let q4 = w.dtype == songloom_engine::tensor::DType::Q4;
    let mut y = vec![0.0; m * n];
    for i in 0..m {
        for (g, group) in x[i * k..(i + 1) * k].chunks(32).enumerate() {
            let amax = group.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            let finite = group.iter().all(|v| v.is_finite());
            let to_q = if finite && amax > 0.0 { 127.0 / amax } else { 0.0 };
            let scale = if finite { amax / 127.0 } else { f32::NAN };
            let rounded: Vec<f32> = group.iter().map(|v| (v * to_q).round_ties_even() * scale).collect();
            let lost: f32 = group.iter().sum::<f32>() - rounded.iter().sum::<f32>();
            for j in 0..n {
                let weights = &w.values[j * k + g * 32..j * k + g * 32 + 32];
                let dot: f32 = weights.iter().zip(&rounded).map(|(w, v)| w * v).sum();
                let middle = if q4 {
                    let (lo, hi) =
                        weights.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), w| (l.min(*w), h.max(*w)));
                    (lo + hi) / 2.0
                } else {
                    0.0
                };
                y[i * n + j] += dot + middle * lost;
            }
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
