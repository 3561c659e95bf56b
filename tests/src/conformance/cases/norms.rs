//! Row-wise normalisations (norm weights in every dtype) and the rotary embedding. RMSNorm at the
//! model's widths takes a GPU's register-resident kernel with a block sized to the row, and at a
//! width that is not a multiple of 4 the general one.

use songloom_engine::{DType, Op, Rotary};

use super::{naive_rms_norm, naive_rope};
use crate::conformance::{Case, FLOAT_DTYPES, Input, Seeds, WEIGHT_DTYPES, fits};

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for dtype in WEIGHT_DTYPES {
        for (rows, dim) in
            [(3, 16), (2, 4096), (64, 128), (3, 16384), (2, 130)].into_iter().filter(|s| fits(dtype, s.1))
        {
            cases.push(rms_norm(rows, dim, dtype, false));
        }
        cases.push(rms_norm(2, 4096, dtype, true));
        for (rows, dim) in [(3, 16), (5, 130), (690, 2048), (3, 32)].into_iter().filter(|s| fits(dtype, s.1)) {
            cases.push(layer_norm(rows, dim, dtype, false));
        }
        cases.push(layer_norm(3, 32, dtype, true));
    }
    // Partial rotary (the DiT's leading 32 of 64), full rotary at the LM's head dim, and a small odd
    // case; the input dtype is under test (only f32 runs).
    for dtype in FLOAT_DTYPES {
        cases.push(rope(3, 2, 8, 4, 1e4, 5, 3, dtype, false));
        cases.push(rope(4, 2, 128, 128, 1e6, 301, 2, dtype, false));
        cases.push(rope(6, 3, 64, 32, 1e4, 0, 6, dtype, false));
    }
    cases.push(rope(3, 2, 8, 4, 1e4, 5, 3, DType::F32, true));
    cases
}

/// Rows with a NaN in the first and an infinity in the second.
fn rows_input(s: &mut Seeds, rows: usize, dim: usize, poison: bool) -> Input {
    let x = s.random(&[rows, dim], DType::F32);
    if poison { x.with(f32::NAN, &[dim / 3]).with(f32::INFINITY, &[dim + 1]) } else { x }
}

fn poison_label(poison: bool) -> &'static str {
    if poison { ", non-finite" } else { "" }
}

fn rms_norm(rows: usize, dim: usize, dtype: DType, poison: bool) -> Case {
    Case::new(
        Op::RmsNorm,
        dtype,
        format!("{rows}x{dim}{}", poison_label(poison)),
        |s| vec![rows_input(s, rows, dim, poison), s.random(&[dim], dtype)],
        |d, t| Ok(vec![d.rms_norm(&t[0], &t[1], 1e-6)?]),
        move |i| vec![naive_rms_norm(&i[0].values, &i[1].values, dim, 1e-6)],
    )
}

fn layer_norm(rows: usize, dim: usize, dtype: DType, poison: bool) -> Case {
    Case::new(
        Op::LayerNorm,
        dtype,
        format!("{rows}x{dim}{}", poison_label(poison)),
        |s| vec![rows_input(s, rows, dim, poison), s.random(&[dim], dtype), s.random(&[dim], dtype)],
        |d, t| Ok(vec![d.layer_norm(&t[0], &t[1], &t[2], 1e-5)?]),
        move |i| {
            let (w, b) = (&i[1].values, &i[2].values);
            let y = i[0]
                .values
                .chunks(dim)
                .flat_map(|row| {
                    let mean = row.iter().sum::<f32>() / dim as f32;
                    let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / dim as f32;
                    let inv = 1.0 / (var + 1e-5).sqrt();
                    row.iter().enumerate().map(move |(c, v)| (v - mean) * inv * w[c] + b[c]).collect::<Vec<_>>()
                })
                .collect();
            vec![y]
        },
    )
}

#[allow(clippy::too_many_arguments)]
fn rope(
    rows: usize,
    heads: usize,
    head_dim: usize,
    rotary_dim: usize,
    theta: f32,
    first_position: usize,
    seq_len: usize,
    dtype: DType,
    poison: bool,
) -> Case {
    let r = Rotary { heads, head_dim, rotary_dim, theta, first_position, seq_len };
    let width = heads * head_dim;
    Case::new(
        Op::Rope,
        dtype,
        format!(
            "{rows}x{heads}x{head_dim}, rotary {rotary_dim}, theta {theta}, from {first_position}{}",
            poison_label(poison)
        ),
        |s| {
            let x = s.random(&[rows, width], dtype);
            vec![if poison { x.with(f32::NAN, &[1]).with(f32::NEG_INFINITY, &[width + 2]) } else { x }]
        },
        move |d, t| Ok(vec![d.rope(&t[0], r)?]),
        move |i| vec![naive_rope(&i[0].values, head_dim, rotary_dim, theta, first_position, seq_len, width)],
    )
}
