//! Scaled dot-product attention on the CPU: one task per (batch, head, block of queries), scores
//! kept per query row, so memory stays O(kv_len) per task.

use rayon::prelude::*;

use super::gemm::{MatRef, dot_f32, gemm_f32};
use crate::device::AttentionShape;

const QUERY_BLOCK: usize = 16;
/// From this many queries on, scores and outputs are computed as two GEMMs per head.
const GEMM_MIN_QUERIES: usize = 32;

/// The attention output `[batch * q_len, heads * head_dim]`, in a buffer that starts out holding
/// `fill` (every element is then overwritten).
pub fn attention(q: &[f32], k: &[f32], v: &[f32], s: AttentionShape, fill: f32) -> Vec<f32> {
    if s.q_len >= GEMM_MIN_QUERIES { attention_gemm(q, k, v, s, fill) } else { attention_rows(q, k, v, s, fill) }
}

/// Long sequences (DiT windows, prefill): `softmax(Q K^T * scale) V` per (batch, head) with the
/// score matrix in memory, `q_len x kv_len` floats per task.
fn attention_gemm(q: &[f32], k: &[f32], v: &[f32], s: AttentionShape, fill: f32) -> Vec<f32> {
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
            let k_t = MatRef { data: &k[kv_base..], row_stride: 1, col_stride: kv_width };
            let mut scores = vec![0.0f32; q_len * kv_len];
            gemm_f32(q_len, kv_len, d, q_view, k_t, &mut scores, false);
            for (i, row) in scores.chunks_mut(kv_len).enumerate() {
                let visible = if causal { kv_len - q_len + i + 1 } else { kv_len };
                let max = row[..visible].iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x * scale));
                let mut sum = 0.0f32;
                for x in &mut row[..visible] {
                    *x = (*x * scale - max).exp();
                    sum += *x;
                }
                let inv = 1.0 / sum;
                row[..visible].iter_mut().for_each(|x| *x *= inv);
                row[visible..].fill(0.0);
            }
            let p = MatRef { data: &scores, row_stride: kv_len, col_stride: 1 };
            let v_view = MatRef { data: &v[kv_base..], row_stride: kv_width, col_stride: 1 };
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

/// Few queries (decode steps): one dot product per key, no score matrix.
fn attention_rows(q: &[f32], k: &[f32], v: &[f32], s: AttentionShape, fill: f32) -> Vec<f32> {
    let AttentionShape { batch, q_len, kv_len, kv_capacity, heads, kv_heads, head_dim: d, causal } = s;
    let q_width = heads * d;
    let kv_width = kv_heads * d;
    let group = heads / kv_heads;
    let scale = (d as f32).powf(-0.5);
    let blocks = q_len.div_ceil(QUERY_BLOCK);
    let results: Vec<(usize, usize, usize, Vec<f32>)> = (0..batch * heads * blocks)
        .into_par_iter()
        .map(|task| {
            let (b, rest) = (task / (heads * blocks), task % (heads * blocks));
            let (h, blk) = (rest / blocks, rest % blocks);
            let kvh = h / group;
            let q0 = blk * QUERY_BLOCK;
            let q1 = (q0 + QUERY_BLOCK).min(q_len);
            let mut out = vec![0.0f32; (q1 - q0) * d];
            let mut scores = vec![0.0f32; kv_len];
            for (qi, out_row) in (q0..q1).zip(out.chunks_mut(d)) {
                let q_row = &q[(b * q_len + qi) * q_width + h * d..][..d];
                let visible = if causal { kv_len - q_len + qi + 1 } else { kv_len };
                let mut max = f32::NEG_INFINITY;
                for (j, score) in scores.iter_mut().enumerate().take(visible) {
                    let k_row = &k[(b * kv_capacity + j) * kv_width + kvh * d..][..d];
                    *score = dot_f32(q_row, k_row) * scale;
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
                    let v_row = &v[(b * kv_capacity + j) * kv_width + kvh * d..][..d];
                    for (o, vv) in out_row.iter_mut().zip(v_row) {
                        *o += p * vv;
                    }
                }
            }
            (b, h, q0, out)
        })
        .collect();
    let mut out = vec![fill; batch * q_len * q_width];
    for (b, h, q0, block) in results {
        for (i, row) in block.chunks(d).enumerate() {
            let at = (b * q_len + q0 + i) * q_width + h * d;
            out[at..at + d].copy_from_slice(row);
        }
    }
    out
}
