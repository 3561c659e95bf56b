//! Decode products against quantized weights as integer dot products, the arithmetic of the CUDA
//! kernels (kernels/gemv_quant.cu): each activation row is quantized per group of 32 to int8 with
//! an f32 scale (the group's largest magnitude / 127; NaN when the group holds a non-finite value)
//! and its f32 sum, then a group's products are one exact integer dot of bytes, scaled once; for q4 the
//! group's offset times the activations' sum is added, and the nibbles' share of the activations'
//! rounding is counted about their middle (7.5), as if they were centred, which halves the error a
//! 0..=15 code would otherwise multiply.

use crate::quant::{GROUP, QuantData};

/// One activation row, quantized.
struct QuantRow {
    values: Vec<i8>,
    scales: Vec<f32>,
    /// What rounding lost from each group's sum: `sum(x) - scale * sum(q)`.
    lost: Vec<f32>,
}

fn quantize_row(x: &[f32]) -> QuantRow {
    let groups = x.len() / GROUP;
    let mut row = QuantRow { values: vec![0; x.len()], scales: vec![0.0; groups], lost: vec![0.0; groups] };
    for (g, group) in x.chunks_exact(GROUP).enumerate() {
        let finite = group.iter().all(|v| v.is_finite());
        let amax = group.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let to_q = if finite && amax > 0.0 { 127.0 / amax } else { 0.0 };
        for (q, &v) in row.values[g * GROUP..(g + 1) * GROUP].iter_mut().zip(group) {
            *q = (v * to_q).round_ties_even() as i8;
        }
        let scale = if finite { amax / 127.0 } else { f32::NAN };
        let codes: i32 = row.values[g * GROUP..(g + 1) * GROUP].iter().map(|&q| q as i32).sum();
        row.scales[g] = scale;
        row.lost[g] = group.iter().sum::<f32>() - scale * codes as f32;
    }
    row
}

/// `y [m, n] = x [m, k] . w [n, k]^T` for few rows `m`, with `k` whole groups. The kernels' sum
/// over groups of `scale * sx * (q . qx)` is the dequantized weights against the dequantized
/// activations, so the CPU streams each weight row once through its f32 SIMD dot as before, with
/// the rounded activations; for q4, `offset * sum(x) + 7.5 * scale * lost` adds, per group, the
/// rounding loss at the middle of the codes: `(offset + 7.5 * scale) * lost`.
pub fn quant_gemv(x: &[f32], m: usize, k: usize, q: &QuantData, n: usize, out: &mut [f32]) {
    let rows: Vec<QuantRow> = (0..m).map(|i| quantize_row(&x[i * k..(i + 1) * k])).collect();
    let rounded: Vec<Vec<f32>> = rows
        .iter()
        .map(|row| row.values.iter().enumerate().map(|(j, &v)| v as f32 * row.scales[j / GROUP]).collect())
        .collect();
    let groups = k / GROUP;
    let q4 = !q.offsets.is_empty();
    let columns: Vec<[f32; super::gemm::GEMV_MAX_ROWS]> = super::pool::map_indices(
        n,
        m * n * k,
        16,
        || (vec![0.0f32; k], vec![0.0f32; groups]),
        |(weights, middles), r| {
            if q4 {
                crate::quant::dequantize_into_with_middles(q, r * k, weights, middles);
            } else {
                crate::quant::dequantize_into(q, r * k, weights);
            }
            let mut dots = [0.0f32; super::gemm::GEMV_MAX_ROWS];
            for ((dot, row), x) in dots.iter_mut().zip(&rows).zip(&rounded) {
                *dot = super::gemm::dot_f32(x, weights);
                if q4 {
                    *dot += middles.iter().zip(&row.lost).map(|(m, l)| m * l).sum::<f32>();
                }
            }
            dots
        },
    );
    for (r, dots) in columns.iter().enumerate() {
        for i in 0..m {
            out[i * n + r] = dots[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dequantize, quantize};
    use crate::tensor::DType;

    #[test]
    fn the_integer_product_is_the_dequantized_one_within_the_activations_rounding() {
        let (m, k, n) = (2, 128, 24);
        let w: Vec<f32> = (0..n * k).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect();
        let x: Vec<f32> = (0..m * k).map(|i| ((i * 104_729) % 997) as f32 / 498.5 - 1.0).collect();
        for dtype in [DType::Q8, DType::Q4] {
            let q = quantize(&w, dtype).unwrap();
            let wide = dequantize(&q);
            let mut got = vec![0.0; m * n];
            quant_gemv(&x, m, k, &q, n, &mut got);
            let (mut err, mut norm) = (0.0f64, 0.0f64);
            for i in 0..m {
                for r in 0..n {
                    let want: f32 = (0..k).map(|j| x[i * k + j] * wide[r * k + j]).sum();
                    err += ((got[i * n + r] - want) as f64).powi(2);
                    norm += (want as f64).powi(2);
                }
            }
            // int8 activations in groups of 32 round each value by at most half of max / 127.
            let rel = (err / norm).sqrt();
            assert!(rel < 1e-2, "{dtype:?}: {rel}");
            assert!(rel > 0.0, "{dtype:?}: the activations were not quantized");
        }
    }

    #[test]
    fn a_non_finite_activation_makes_its_row_nan() {
        let (k, n) = (64, 4);
        let q = quantize(&vec![0.5; n * k], DType::Q8).unwrap();
        let mut x = vec![1.0; 2 * k];
        x[3] = f32::INFINITY;
        let mut out = vec![0.0; 2 * n];
        quant_gemv(&x, 2, k, &q, n, &mut out);
        assert!(out[..n].iter().all(|v| v.is_nan()), "{out:?}");
        assert!(out[n..].iter().all(|v| (*v - 32.0).abs() < 0.5), "{out:?}");
    }
}
