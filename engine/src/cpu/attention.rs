//! Scaled dot-product attention on the CPU: long sequences as two GEMMs per (batch, head), a few
//! queries as dot products per (batch, KV head, block of queries) with the scores kept per query
//! row. Keys and values come in f32 or in bf16 (a KV cache); a bf16 head's rows are widened once
//! per task.

use std::borrow::Cow;

use half::bf16;
use rayon::prelude::*;

use super::exp;
use super::gemm::{MatRef, dot_f32, gemm_f32};
use super::{CpuBackend, f32s, kv_rows, out};
use crate::device::{AttentionOps, AttentionShape, Op};
use crate::error::Result;
use crate::shapes;
use crate::tensor::Tensor;

const QUERY_BLOCK: usize = 16;
/// From this many queries on, scores and outputs are computed as two GEMMs per head.
const GEMM_MIN_QUERIES: usize = 32;

/// Keys or values, `[batch * kv_capacity, kv_heads * head_dim]`.
#[derive(Clone, Copy)]
pub enum KvRows<'a> {
    F32(&'a [f32]),
    BF16(&'a [bf16]),
}

/// The first `rows` keys (or values) of one (batch entry, KV head) starting at element `base`, as
/// f32 rows `stride` apart: a view of an f32 tensor, a widened copy of a bf16 one.
fn head_rows(kv: KvRows<'_>, base: usize, rows: usize, kv_width: usize, d: usize) -> (Cow<'_, [f32]>, usize) {
    match kv {
        KvRows::F32(x) => (Cow::Borrowed(&x[base..]), kv_width),
        KvRows::BF16(x) => {
            let mut out = Vec::with_capacity(rows * d);
            for j in 0..rows {
                out.extend(x[base + j * kv_width..][..d].iter().map(|v| v.to_f32()));
            }
            (Cow::Owned(out), d)
        }
    }
}

/// The attention output `[batch * q_len, heads * head_dim]`, in a buffer that starts out holding
/// `fill` (every element is then overwritten).
pub fn attention(q: &[f32], k: KvRows<'_>, v: KvRows<'_>, s: AttentionShape, fill: f32) -> Vec<f32> {
    if s.q_len >= GEMM_MIN_QUERIES { attention_gemm(q, k, v, s, fill) } else { attention_rows(q, k, v, s, fill) }
}

/// Long sequences (DiT windows, prefill): `softmax(Q K^T * scale) V` per (batch, head) with the
/// score matrix in memory, `q_len x kv_len` floats per task.
fn attention_gemm(q: &[f32], k: KvRows<'_>, v: KvRows<'_>, s: AttentionShape, fill: f32) -> Vec<f32> {
    let AttentionShape { batch, q_len, kv_len, kv_capacity, heads, kv_heads, head_dim: d, causal } = s;
    let (q_width, kv_width) = (heads * d, kv_heads * d);
    let group = heads / kv_heads;
    let scale = (d as f32).powf(-0.5);
    let results: Vec<(usize, usize, Vec<f32>)> = (0..batch * heads)
        .into_par_iter()
        .map(|task| {
            let (b, h) = (task / heads, task % heads);
            let kvh = h / group;
            let q_view = MatRef { data: &q[b * q_len * q_width + h * d..], row_stride: q_width, col_stride: 1 };
            let kv_base = b * kv_capacity * kv_width + kvh * d;
            let (keys, key_stride) = head_rows(k, kv_base, kv_len, kv_width, d);
            let (values, value_stride) = head_rows(v, kv_base, kv_len, kv_width, d);
            let k_t = MatRef { data: &keys, row_stride: 1, col_stride: key_stride };
            let mut scores = vec![0.0f32; q_len * kv_len];
            gemm_f32(q_len, kv_len, d, q_view, k_t, &mut scores, false);
            for (i, row) in scores.chunks_mut(kv_len).enumerate() {
                let visible = if causal { kv_len - q_len + i + 1 } else { kv_len };
                let (seen, unseen) = row.split_at_mut(visible);
                exp::softmax_scaled(seen, scale);
                unseen.fill(0.0);
            }
            let p = MatRef { data: &scores, row_stride: kv_len, col_stride: 1 };
            let v_view = MatRef { data: &values, row_stride: value_stride, col_stride: 1 };
            let mut out = vec![0.0f32; q_len * d];
            gemm_f32(q_len, d, kv_len, p, v_view, &mut out, false);
            (b, h, out)
        })
        .collect();
    let mut out = vec![fill; batch * q_len * q_width];
    for (b, h, block) in results {
        for (i, row) in block.chunks(d).enumerate() {
            let at = (b * q_len + i) * q_width + h * d;
            out[at..at + d].copy_from_slice(row);
        }
    }
    out
}

/// Few queries (decode steps): one dot product per key, no score matrix. A task is a (batch
/// entry, KV head, block of queries) and runs every query head of the group, so each key and value
/// row is read (or widened) once per task.
fn attention_rows(q: &[f32], k: KvRows<'_>, v: KvRows<'_>, s: AttentionShape, fill: f32) -> Vec<f32> {
    let AttentionShape { batch, q_len, kv_len, kv_capacity, heads, kv_heads, head_dim: d, causal } = s;
    let q_width = heads * d;
    let kv_width = kv_heads * d;
    let group = heads / kv_heads;
    let scale = (d as f32).powf(-0.5);
    let blocks = q_len.div_ceil(QUERY_BLOCK);
    let work = batch * heads * q_len * kv_len * d * 2;
    let results = super::pool::map_indices(
        batch * kv_heads * blocks,
        work,
        1,
        || (),
        |_, task| {
            let (b, rest) = (task / (kv_heads * blocks), task % (kv_heads * blocks));
            let (kvh, blk) = (rest / blocks, rest % blocks);
            let q0 = blk * QUERY_BLOCK;
            let q1 = (q0 + QUERY_BLOCK).min(q_len);
            let kv_base = b * kv_capacity * kv_width + kvh * d;
            let (keys, key_stride) = head_rows(k, kv_base, kv_len, kv_width, d);
            let (values, value_stride) = head_rows(v, kv_base, kv_len, kv_width, d);
            let mut scores = vec![0.0f32; kv_len];
            let mut done = Vec::with_capacity(group);
            for h in kvh * group..(kvh + 1) * group {
                let mut out = vec![0.0f32; (q1 - q0) * d];
                for (qi, out_row) in (q0..q1).zip(out.chunks_mut(d)) {
                    let q_row = &q[(b * q_len + qi) * q_width + h * d..][..d];
                    let visible = if causal { kv_len - q_len + qi + 1 } else { kv_len };
                    let mut max = f32::NEG_INFINITY;
                    for (j, score) in scores.iter_mut().enumerate().take(visible) {
                        *score = dot_f32(q_row, &keys[j * key_stride..][..d]) * scale;
                        max = max.max(*score);
                    }
                    let mut sum = 0.0f32;
                    for score in scores.iter_mut().take(visible) {
                        *score = (*score - max).exp();
                        sum += *score;
                    }
                    let inv = 1.0 / sum;
                    for (j, score) in scores.iter().enumerate().take(visible) {
                        let p = score * inv;
                        for (o, vv) in out_row.iter_mut().zip(&values[j * value_stride..][..d]) {
                            *o += p * vv;
                        }
                    }
                }
                done.push((b, h, q0, out));
            }
            done
        },
    );
    let mut out = vec![fill; batch * q_len * q_width];
    for (b, h, q0, block) in results.into_iter().flatten() {
        for (i, row) in block.chunks(d).enumerate() {
            let at = (b * q_len + q0 + i) * q_width + h * d;
            out[at..at + d].copy_from_slice(row);
        }
    }
    out
}

impl AttentionOps for CpuBackend {
    fn attention(&self, q: &Tensor, k: &Tensor, v: &Tensor, s: AttentionShape) -> Result<Tensor> {
        shapes::attention(q, k, v, &s)?;
        let (q, k, v) = (f32s(q, Op::Attention)?, kv_rows(k, Op::Attention)?, kv_rows(v, Op::Attention)?);
        let y = attention(q, k, v, s, self.fresh);
        out(&[s.batch * s.q_len, s.heads * s.head_dim], y)
    }
}
