//! Attention and a decoder layer's attention inputs, with f32 queries and the keys and values
//! in the case's dtype (f32, or bf16 as the KV caches keep them). The shapes reach each kernel a GPU
//! dispatches to: head dim 8 with several queries (one warp per query), head dim 64 with 64+
//! queries (the DiT's tiled kernel), head dim 128 with a partial last block of 16 queries (wgpu's
//! tiled shader on a prefill), and a single query (a decode step) over 1 to 35 splits of 32 keys,
//! a partial last split, and 1, 2, 4 and 8 query heads per KV head (the LM's 32/8 among them;
//! wgpu's split shader takes chunks of 64 keys, the last of 65 keys a single one).
//! Non-finite values: a NaN every query sees poisons its batch entry; NaNs in the cache rows
//! beyond the valid keys must not reach any output.

use songloom_engine::device::{AttentionInputs, KvSlot, SENTINEL_BITS};
use songloom_engine::{AttentionShape, DType, Op, Rotary};

use super::{naive_rms_norm, naive_rope};
use crate::conformance::{Case, FLOAT_DTYPES, Input};

/// (head dim, queries, valid keys, capacity, causal, heads, KV heads)
const SHAPES: [(usize, usize, usize, usize, bool, usize, usize); 19] = [
    (8, 5, 5, 5, false, 4, 2),
    (8, 5, 5, 9, true, 4, 2),
    (8, 1, 7, 9, true, 4, 2),
    (8, 3, 7, 7, true, 4, 2),
    (8, 40, 40, 40, false, 4, 2),
    (8, 40, 45, 50, true, 4, 2),
    (64, 70, 70, 70, false, 4, 2),
    (64, 70, 75, 80, true, 4, 2),
    (64, 130, 130, 130, false, 4, 2),
    (128, 1, 100, 120, true, 8, 2),
    (128, 1, 32, 40, true, 8, 1),
    (12, 1, 65, 70, true, 4, 2),
    (64, 1, 1, 4, true, 4, 4),
    (16, 1, 40, 40, true, 2, 1),
    (128, 1, 1100, 1200, true, 32, 8),
    (128, 33, 40, 48, true, 8, 2),
    (64, 1, 200, 210, true, 8, 1),
    // No mask, with cache rows past the valid keys (the DiT's kernels on a GPU stage none of them).
    (64, 70, 75, 80, false, 4, 2),
    // A last key tile of 36: valid keys end in its second half of 32.
    (64, 70, 100, 100, false, 4, 2),
];

#[derive(Clone, Copy, PartialEq)]
enum Poison {
    None,
    /// A NaN in the first value row of the first batch entry, which every query sees.
    SeenNan,
    /// NaN in every cache row past the valid keys, which no query may see.
    UnseenNan,
}

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for dtype in FLOAT_DTYPES {
        for shape in SHAPES {
            cases.push(attention(shape, dtype, Poison::None));
        }
    }
    for dtype in [DType::F32, DType::BF16] {
        for shape in [SHAPES[1], SHAPES[7], SHAPES[9], SHAPES[14], SHAPES[17]] {
            cases.push(attention(shape, dtype, Poison::SeenNan));
            cases.push(attention(shape, dtype, Poison::UnseenNan));
        }
    }
    // Rotated as they load: the DiT's (no mask, partial rotary), a fully rotated one from a later
    // position, and a masked one (which a GPU composes).
    // Keys and values in f32, as rotated keys come out.
    for (shape, rotary_dim, first) in [(SHAPES[0], 4, 0), (SHAPES[6], 32, 0), (SHAPES[8], 64, 3), (SHAPES[5], 4, 0)] {
        cases.push(attention_rotated(shape, rotary_dim, first));
    }
    // The norms in the dtypes every backend takes for a parameter (the others are the norms' own
    // cases).
    for cache in FLOAT_DTYPES {
        for norm in [DType::F32, DType::BF16] {
            for head_dim in [128, 64] {
                cases.push(attention_inputs(head_dim, cache, norm));
            }
        }
    }
    cases
}

fn attention(
    (d, q_len, kv_len, capacity, causal, heads, kv_heads): (usize, usize, usize, usize, bool, usize, usize),
    dtype: DType,
    poison: Poison,
) -> Case {
    let batch = 2;
    let shape = AttentionShape { batch, q_len, kv_len, kv_capacity: capacity, heads, kv_heads, head_dim: d, causal };
    let what = match poison {
        Poison::None => "",
        Poison::SeenNan => ", a NaN every query sees",
        Poison::UnseenNan => ", NaN past the valid keys",
    };
    let label = format!("d{d} q{q_len} kv{kv_len}/{capacity} causal={causal} heads {heads}/{kv_heads}{what}");
    let kv_width = kv_heads * d;
    let unseen: Vec<usize> =
        (0..batch).flat_map(|b| (b * capacity + kv_len) * kv_width..(b + 1) * capacity * kv_width).collect();
    Case::new(
        Op::Attention,
        dtype,
        label,
        |s| {
            let q = s.random(&[batch * q_len, heads * d], DType::F32);
            let (mut k, mut v) =
                (s.random(&[batch * capacity, kv_width], dtype), s.random(&[batch * capacity, kv_width], dtype));
            match poison {
                Poison::None => {}
                Poison::SeenNan => v = v.with(f32::NAN, &[1]),
                Poison::UnseenNan => {
                    k = k.with(f32::NAN, &unseen);
                    v = v.with(f32::NAN, &unseen);
                }
            }
            vec![q, k, v]
        },
        move |dev, t| Ok(vec![dev.attention(&t[0], &t[1], &t[2], shape)?]),
        move |i| vec![naive_attention(&i[0].values, &i[1].values, &i[2].values, shape)],
    )
}

fn attention_rotated(
    (d, q_len, kv_len, capacity, causal, heads, kv_heads): (usize, usize, usize, usize, bool, usize, usize),
    rotary_dim: usize,
    first_position: usize,
) -> Case {
    let batch = 2;
    let shape = AttentionShape { batch, q_len, kv_len, kv_capacity: capacity, heads, kv_heads, head_dim: d, causal };
    let rotary = Rotary { heads, head_dim: d, rotary_dim, theta: 10000.0, first_position, seq_len: q_len };
    let label = format!(
        "d{d} q{q_len} kv{kv_len}/{capacity} causal={causal} heads {heads}/{kv_heads}, rotary {rotary_dim} from {first_position}"
    );
    let kv_width = kv_heads * d;
    Case::new(
        Op::AttentionRotated,
        DType::F32,
        label,
        |s| {
            let q = s.random(&[batch * q_len, heads * d], DType::F32);
            let k = s.random(&[batch * capacity, kv_width], DType::F32);
            vec![q, k, s.random(&[batch * capacity, kv_width], DType::F32)]
        },
        move |dev, t| Ok(vec![dev.attention_rotated(&t[0], &t[1], &t[2], shape, rotary)?]),
        move |i| {
            let q = naive_rope(&i[0].values, d, rotary_dim, rotary.theta, first_position, q_len, heads * d);
            let k = naive_rope(&i[1].values, d, rotary_dim, rotary.theta, first_position, capacity, kv_width);
            vec![naive_attention(&q, &k, &i[2].values, shape)]
        },
    )
}

fn naive_attention(q: &[f32], k: &[f32], v: &[f32], s: AttentionShape) -> Vec<f32> {
    let AttentionShape { batch, q_len, kv_len, kv_capacity: capacity, heads, kv_heads, head_dim: d, causal } = s;
    let mut out = vec![0.0f32; batch * q_len * heads * d];
    for b in 0..batch {
        for h in 0..heads {
            let g = h / (heads / kv_heads);
            for i in 0..q_len {
                let visible = if causal { kv_len - q_len + i + 1 } else { kv_len };
                let key = |j: usize, x: usize| k[(b * capacity + j) * kv_heads * d + g * d + x];
                let value = |j: usize, x: usize| v[(b * capacity + j) * kv_heads * d + g * d + x];
                let query = |x: usize| q[(b * q_len + i) * heads * d + h * d + x];
                let scores: Vec<f32> = (0..visible)
                    .map(|j| (0..d).map(|x| query(x) * key(j, x)).sum::<f32>() / (d as f32).sqrt())
                    .collect();
                let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let e: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
                let sum: f32 = e.iter().sum();
                for x in 0..d {
                    out[(b * q_len + i) * heads * d + h * d + x] = (0..visible).map(|j| e[j] / sum * value(j, x)).sum();
                }
            }
        }
    }
    out
}

/// One layer's attention inputs: rows [3, 5) of each of 2 batch entries in a cache of 6 in
/// `cache`'s dtype, the cache's other rows holding the sentinel, which they must keep, and the
/// norms in `norm`'s. A GPU fuses head dim 128 and composes 64.
fn attention_inputs(head_dim: usize, cache: DType, norm: DType) -> Case {
    let (batch, n, heads, kv_heads, capacity, row) = (2, 2, 4, 2, 6, 3);
    let rotary = Rotary { heads: 0, head_dim, rotary_dim: head_dim, theta: 1e6, first_position: row, seq_len: n };
    let (q_width, kv_width) = (heads * head_dim, kv_heads * head_dim);
    let sentinel = f32::from_bits(SENTINEL_BITS[0]);
    Case::new(
        Op::AttentionInputs,
        cache,
        format!("head dim {head_dim}, rows {row}..{} of {capacity}, heads {heads}/{kv_heads}, {norm} norms", row + n),
        |s| {
            let rows = Input::new(&[batch * capacity, kv_width], cache, vec![sentinel; batch * capacity * kv_width]);
            vec![
                s.random(&[batch * n, q_width], DType::F32),
                s.random(&[batch * n, kv_width], DType::F32),
                s.random(&[batch * n, kv_width], DType::F32),
                s.random(&[head_dim], norm),
                s.random(&[head_dim], norm),
                rows.clone(),
                rows,
            ]
        },
        move |d, mut t| {
            let (mut values, mut keys) = (t.pop().expect("values"), t.pop().expect("keys"));
            let (k_norm, q_norm, v, k, q) = (t.pop(), t.pop(), t.pop(), t.pop(), t.pop());
            let (k_norm, q_norm, v) = (k_norm.expect("k norm"), q_norm.expect("q norm"), v.expect("v"));
            let inputs = AttentionInputs {
                q: q.expect("q"),
                k: k.expect("k"),
                v: &v,
                q_norm: &q_norm,
                k_norm: &k_norm,
                eps: 1e-6,
                rotary,
            };
            let q = d.attention_inputs(inputs, KvSlot { keys: &mut keys, values: &mut values, batch, row })?;
            Ok(vec![q, keys, values])
        },
        move |i| {
            let norm_rope = |x: &[f32], w: &[f32], width: usize| {
                let normed = naive_rms_norm(x, w, head_dim, 1e-6);
                naive_rope(&normed, head_dim, head_dim, rotary.theta, row, n, width)
            };
            let q = norm_rope(&i[0].values, &i[3].values, q_width);
            let k = norm_rope(&i[1].values, &i[4].values, kv_width);
            let append = |held: &[f32], rows: &[f32]| {
                let mut held = held.to_vec();
                for b in 0..batch {
                    let at = (b * capacity + row) * kv_width;
                    for (to, from) in held[at..at + n * kv_width].iter_mut().zip(&rows[b * n * kv_width..]) {
                        *to = cache.round(*from);
                    }
                }
                held
            };
            vec![q, append(&i[5].values, &k), append(&i[6].values, &i[2].values)]
        },
    )
}
