//! The fused operations of the op families written with their basic ones: the default every backend
//! starts from, and the fallback of a backend's fused kernels for shapes they do not cover.

use super::{
    AttentionInputs, AttentionOps, AttentionShape, KvSlot, NormOps, ProductOps, RmsNorm, Rotary, SamplingOps, Shortlist,
};
use crate::error::{Error, Result};
use crate::pipeline::rng::categorical_at;
use crate::pipeline::sampling::guided_probs;
use crate::tensor::Tensor;

/// The host's draw of each pair, from the backend's shortlists: what a GPU's `draw_each` must match.
pub fn draw_each<B: SamplingOps + ?Sized>(
    b: &B,
    logits: &Tensor,
    rule: &Shortlist,
    uniforms: &[f64],
) -> Result<Tensor> {
    let (k, scale) = rule.guided()?;
    let pairs = b.candidates_each(logits, rule)?;
    if pairs.len() != uniforms.len() {
        return Err(Error::Invalid(format!("{} pairs of logits drawn with {} uniforms", pairs.len(), uniforms.len())));
    }
    let codes: Vec<f32> =
        pairs.iter().zip(uniforms).map(|(pair, &u)| categorical_at(u, &guided_probs(pair, k, scale)) as f32).collect();
    Tensor::from_f32(&[codes.len(), 1], codes)
}

/// The embedding of drawn codes, through the host.
pub fn embedding_drawn<B: SamplingOps + ?Sized>(
    b: &B,
    table: &Tensor,
    codes: &Tensor,
    offset: u32,
    repeat: usize,
) -> Result<Tensor> {
    let codes = b.to_host(codes)?;
    let ids: Vec<u32> =
        codes.iter().flat_map(|&code| std::iter::repeat_n(code.max(0.0) as u32 + offset, repeat)).collect();
    b.embedding(table, &ids)
}

pub fn attention_rotated<B: AttentionOps + ?Sized>(
    b: &B,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    shape: AttentionShape,
    rotary: Rotary,
) -> Result<Tensor> {
    let q = b.rope(q, Rotary { heads: shape.heads, seq_len: shape.q_len, ..rotary })?;
    let k = b.rope(k, Rotary { heads: shape.kv_heads, seq_len: shape.kv_capacity, ..rotary })?;
    b.attention(&q, &k, v, shape)
}

pub fn linear_add<B: ProductOps + ?Sized>(b: &B, x: &Tensor, w: &Tensor, residual: &Tensor) -> Result<Tensor> {
    b.add(residual, &b.linear(x, w, None)?)
}

pub fn linear_glu<B: ProductOps + ?Sized>(b: &B, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let both = b.linear(x, w, bias)?;
    let f = both.shape().get(1).copied().unwrap_or(0) / 2;
    b.silu_mul(&b.slice_cols(&both, f, 2 * f)?, &b.slice_cols(&both, 0, f)?)
}

/// `x` after `norm`, or `x` itself.
fn normed<B: NormOps + ?Sized>(b: &B, x: &Tensor, norm: Option<RmsNorm>) -> Result<Option<Tensor>> {
    norm.map(|n| b.rms_norm(x, n.weight, n.eps)).transpose()
}

pub fn linear_swiglu<B: ProductOps + ?Sized>(
    b: &B,
    x: &Tensor,
    norm: Option<RmsNorm>,
    gate: &Tensor,
    up: &Tensor,
) -> Result<Tensor> {
    let normed = normed(b, x, norm)?;
    let h = normed.as_ref().unwrap_or(x);
    b.silu_mul(&b.linear(h, gate, None)?, &b.linear(h, up, None)?)
}

pub fn linear3<B: ProductOps + ?Sized>(
    b: &B,
    x: &Tensor,
    norm: Option<RmsNorm>,
    w: [&Tensor; 3],
) -> Result<[Tensor; 3]> {
    let normed = normed(b, x, norm)?;
    let h = normed.as_ref().unwrap_or(x);
    Ok([b.linear(h, w[0], None)?, b.linear(h, w[1], None)?, b.linear(h, w[2], None)?])
}

pub fn attention_inputs<B: NormOps + ?Sized>(b: &B, inputs: AttentionInputs, slot: KvSlot) -> Result<Tensor> {
    let AttentionInputs { q, k, v, q_norm, k_norm, eps, rotary } = inputs;
    let heads = |t: &Tensor| t.shape().get(1).copied().unwrap_or(0) / rotary.head_dim.max(1);
    let (q_heads, k_heads) = (heads(&q), heads(&k));
    let q = head_norm_rope(b, q, q_norm, eps, Rotary { heads: q_heads, ..rotary })?;
    let k = head_norm_rope(b, k, k_norm, eps, Rotary { heads: k_heads, ..rotary })?;
    b.write_kv(slot.keys, &k, slot.values, v, slot.batch, slot.row)?;
    Ok(q)
}

/// Per-head RMSNorm of `x [rows, heads * head_dim]` with `w [head_dim]`, then the rotary
/// embedding (Qwen3's query and key path); backends fuse it in
/// [`attention_inputs`](NormOps::attention_inputs).
pub fn head_norm_rope<B: NormOps + ?Sized>(b: &B, x: Tensor, w: &Tensor, eps: f32, rotary: Rotary) -> Result<Tensor> {
    let rows = x.shape()[0];
    let d = rotary.head_dim;
    let normed = b.rms_norm(&x.reshape(&[rows * rotary.heads, d])?, w, eps)?;
    b.rope(&normed.reshape(&[rows, rotary.heads * d])?, rotary)
}
