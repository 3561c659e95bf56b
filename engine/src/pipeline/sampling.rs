//! The two sampling distributions of the AR loop, as the reference computes them (diffusers
//! 0.42.1 `encoders.py`: the masking and guidance in `MiniMaxMusic3AutoregressiveStep`,
//! `_generate_depth_codes` and `_sample_top_k`), evaluated in f32.

use std::ops::Range;

use crate::config::PipelineConstants;

/// `_sample_top_k` up to the draw: non-finite values to ±1e9 (NaN to -1e9), keep values at or above
/// the `top_k`-th largest, softmax, renormalise.
pub fn top_k_probs(logits: &[f32], top_k: usize) -> Vec<f32> {
    let values: Vec<f32> = logits
        .iter()
        .map(|&v| {
            if v.is_nan() {
                -1e9
            } else if v == f32::INFINITY {
                1e9
            } else if v == f32::NEG_INFINITY {
                -1e9
            } else {
                v
            }
        })
        .collect();
    let threshold = kth_largest(&values, top_k);
    let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut probs: Vec<f32> = values.iter().map(|&v| if v < threshold { 0.0 } else { (v - max).exp() }).collect();
    let sum: f32 = probs.iter().sum();
    probs.iter_mut().for_each(|p| *p /= sum);
    let total: f32 = probs.iter().sum::<f32>().max(1e-12);
    probs.iter_mut().for_each(|p| *p /= total);
    probs
}

/// The `k`-th largest value (torch's `topk(values, k).values[-1]`), in linear time.
fn kth_largest(values: &[f32], k: usize) -> f32 {
    let k = k.min(values.len()).max(1);
    let mut scratch = values.to_vec();
    *scratch.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a)).1
}

/// The semantic-code distribution over `rows` (the sampleable ids, `[audio_end_id, code_offset +
/// semantic_vocab)`), from the logits of the conditional and unconditional rows over `rows`.
/// Masks every id that is neither the end token nor a semantic code, guides with the AR CFG scale,
/// restricts to the conditional row's top candidates, re-masks, then `top_k_probs`.
pub fn semantic_probs(cond: &[f32], uncond: &[f32], rows: Range<u32>, c: &PipelineConstants) -> Vec<f32> {
    let sampleable = |i: usize| {
        let id = rows.start + i as u32;
        (id == c.audio_end_id && c.stop_on_end_token)
            || (c.code_offset..c.code_offset + c.semantic_vocab_size).contains(&id)
    };
    let masked = |v: &[f32]| -> Vec<f32> {
        v.iter().enumerate().map(|(i, &x)| if sampleable(i) { x } else { f32::NEG_INFINITY }).collect()
    };
    let (cond, uncond) = (masked(cond), masked(uncond));
    let threshold = kth_largest(&cond, c.ar_cfg_top_k);
    let guided: Vec<f32> = cond
        .iter()
        .zip(&uncond)
        .enumerate()
        .map(
            |(i, (&cv, &uv))| {
                if cv < threshold || !sampleable(i) { f32::NEG_INFINITY } else { uv + (cv - uv) * c.ar_cfg_scale }
            },
        )
        .collect();
    top_k_probs(&guided, c.ar_sampling_top_k)
}

/// The distribution of one residual codebook: guidance between the two rows, then `top_k_probs`.
pub fn depth_probs(cond: &[f32], uncond: &[f32], c: &PipelineConstants) -> Vec<f32> {
    let guided: Vec<f32> = cond.iter().zip(uncond).map(|(&cv, &uv)| uv + (cv - uv) * c.ar_cfg_scale).collect();
    top_k_probs(&guided, c.ar_sampling_top_k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_keeps_k_largest_and_handles_non_finite() {
        let p = top_k_probs(&[1.0, f32::NAN, 3.0, f32::NEG_INFINITY, 2.0], 2);
        assert_eq!(p[1], 0.0);
        assert_eq!(p[3], 0.0);
        assert_eq!(p[0], 0.0);
        assert!((p[2] - 1.0 / (1.0 + (-1.0f32).exp())).abs() < 1e-6);
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-6);
    }

    #[test]
    fn semantic_masks_everything_but_codes_and_end() {
        let c = PipelineConstants { audio_end_id: 10, code_offset: 12, semantic_vocab_size: 4, ..Default::default() };
        // rows 10..16: the end token, one id that is neither, four codes
        let p = semantic_probs(&[0.0, 9.0, 1.0, 2.0, 3.0, 4.0], &[0.0; 6], 10..16, &c);
        assert_eq!(p[1], 0.0);
        assert!(p[5] > p[4] && p[4] > p[3] && p[3] > p[2] && p[2] > p[0]);
    }
}
