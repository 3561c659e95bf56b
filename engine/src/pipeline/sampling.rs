//! The two sampling distributions of the AR loop, as the reference computes them (diffusers
//! 0.42.1 `encoders.py`: the masking and guidance in `MiniMaxMusic3AutoregressiveStep`,
//! `_generate_depth_codes` and `_sample_top_k`), evaluated in f32.

use std::ops::Range;

use crate::config::PipelineConstants;
use crate::cpu::exp::exp;
use crate::device::{Candidates, Shortlist};

/// What a non-finite value counts as (`_sample_top_k`: NaN and -inf to -1e9, +inf to 1e9), and
/// what an entry off a shortlist counts as.
const FLOOR: f32 = -1e9;

fn finite(v: f32) -> f32 {
    if v.is_nan() || v == f32::NEG_INFINITY {
        FLOOR
    } else if v == f32::INFINITY {
        1e9
    } else {
        v
    }
}

/// `_sample_top_k` up to the draw over a whole vector: non-finite values to ±1e9, keep values at
/// or above the `top_k`-th largest, softmax, renormalise.
pub fn top_k_probs(logits: &[f32], top_k: usize) -> Vec<f32> {
    let index: Vec<u32> = (0..logits.len() as u32).collect();
    shortlist_top_k_probs(logits.len(), &index, logits, top_k)
}

/// [`top_k_probs`] of a vector of `width` values given by its entries at `index` (ascending), every
/// other entry counting as -1e9. The probabilities are those of the whole vector, bit for bit:
/// entries off the list get zero unless -1e9 reaches the threshold, and then the whole vector is
/// built and decides.
fn shortlist_top_k_probs(width: usize, index: &[u32], values: &[f32], top_k: usize) -> Vec<f32> {
    let values: Vec<f32> = values.iter().copied().map(finite).collect();
    let threshold = kth_largest(&values, top_k);
    let partial = index.len() < width;
    if partial && (values.len() < top_k || threshold <= FLOOR) {
        let mut dense = vec![FLOOR; width];
        index.iter().zip(&values).for_each(|(&i, &v)| dense[i as usize] = v);
        return top_k_probs(&dense, top_k);
    }
    let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    // Summed in index order, as over the whole vector (its other entries add zeros). The exp is
    // ours rather than libm's so that a GPU's draw (kernels/sampling.cu `draw_guided`) computes
    // the same bits.
    let mut kept: Vec<f32> = values.iter().map(|&v| if v < threshold { 0.0 } else { exp(v - max) }).collect();
    let sum: f32 = kept.iter().sum();
    kept.iter_mut().for_each(|p| *p /= sum);
    let total: f32 = kept.iter().sum::<f32>().max(1e-12);
    let mut probs = vec![0.0; width];
    index.iter().zip(&kept).for_each(|(&i, &p)| probs[i as usize] = p / total);
    probs
}

/// The `k`-th largest value (torch's `topk(values, k).values[-1]`), in linear time.
fn kth_largest(values: &[f32], k: usize) -> f32 {
    let k = k.min(values.len()).max(1);
    let mut scratch = values.to_vec();
    *scratch.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a)).1
}

/// Whether row `i` of the semantic logits (ids from `rows.start`) can be sampled: the end token
/// (when it ends songs) and the semantic codes.
fn semantic_rows(rows: &Range<u32>, c: &PipelineConstants) -> (Range<usize>, Option<usize>) {
    let start = rows.start as usize;
    let codes = (c.code_offset as usize).saturating_sub(start)
        ..((c.code_offset + c.semantic_vocab_size) as usize).saturating_sub(start);
    let end = (c.stop_on_end_token && c.audio_end_id >= rows.start).then(|| (c.audio_end_id - rows.start) as usize);
    (codes, end)
}

/// What the device may shortlist of the semantic logits over `rows`: the conditional row's CFG
/// top-k over the sampleable ids.
pub fn semantic_shortlist(rows: &Range<u32>, c: &PipelineConstants) -> Shortlist {
    let (codes, end) = semantic_rows(rows, c);
    Shortlist::Conditional { k: c.ar_cfg_top_k, sampleable: codes, extra: end }
}

/// What the device may shortlist of a residual codebook's logits: the guided top-k.
pub fn depth_shortlist(c: &PipelineConstants) -> Shortlist {
    Shortlist::Guided { k: c.ar_sampling_top_k, scale: c.ar_cfg_scale }
}

/// `rule` applied on the host to every entry of a logit pair: what a backend's shortlist must hold.
/// Every entry when the rule cannot stand for the rows: a NaN among the masked conditional values,
/// or a threshold at the floor (`-inf` masked, -1e9 guided), where entries off the list would count.
/// Applied to a superset of the shortlist (entries by their `index`, holding every entry at or
/// above the threshold), it gives the same list.
pub fn shortlist(every: &Candidates, rule: &Shortlist) -> Candidates {
    let (ranked, floor): (Vec<f32>, f32) = match rule {
        Shortlist::Conditional { sampleable, extra, .. } => {
            let keep = |i: usize| sampleable.contains(&i) || *extra == Some(i);
            let ranked = every
                .index
                .iter()
                .zip(&every.cond)
                .map(|(&i, &x)| if keep(i as usize) { x } else { f32::NEG_INFINITY });
            (ranked.collect(), f32::NEG_INFINITY)
        }
        Shortlist::Guided { scale, .. } => {
            let guided = every.cond.iter().zip(&every.uncond).map(|(&cv, &uv)| finite(uv + (cv - uv) * scale));
            (guided.collect(), FLOOR)
        }
    };
    let k = match rule {
        Shortlist::Conditional { k, .. } | Shortlist::Guided { k, .. } => *k,
    };
    let threshold = kth_largest(&ranked, k);
    if ranked.iter().any(|v| v.is_nan()) || threshold <= floor {
        return every.clone();
    }
    let kept: Vec<usize> = (0..ranked.len()).filter(|&i| ranked[i] >= threshold).collect();
    Candidates {
        width: every.width,
        index: kept.iter().map(|&i| every.index[i]).collect(),
        cond: kept.iter().map(|&i| every.cond[i]).collect(),
        uncond: kept.iter().map(|&i| every.uncond[i]).collect(),
    }
}

/// The semantic-code distribution over `rows` (the sampleable ids, `[audio_end_id, code_offset +
/// semantic_vocab)`), from the conditional and unconditional logits over `rows` (a shortlist from
/// [`semantic_shortlist`] or every entry). Masks every id that is neither the end token nor a
/// semantic code, guides with the AR CFG scale, restricts to the conditional row's top candidates,
/// re-masks, then `top_k_probs`.
pub fn semantic_probs(logits: &Candidates, rows: Range<u32>, c: &PipelineConstants) -> Vec<f32> {
    let (codes, end) = semantic_rows(&rows, c);
    let sampleable = |i: u32| codes.contains(&(i as usize)) || end == Some(i as usize);
    let cond: Vec<f32> = logits
        .index
        .iter()
        .zip(&logits.cond)
        .map(|(&i, &x)| if sampleable(i) { x } else { f32::NEG_INFINITY })
        .collect();
    let threshold = kth_largest(&cond, c.ar_cfg_top_k);
    let guided: Vec<f32> = logits
        .index
        .iter()
        .zip(cond.iter().zip(&logits.uncond))
        .map(
            |(&i, (&cv, &uv))| {
                if cv < threshold || !sampleable(i) { f32::NEG_INFINITY } else { uv + (cv - uv) * c.ar_cfg_scale }
            },
        )
        .collect();
    shortlist_top_k_probs(logits.width, &logits.index, &guided, c.ar_sampling_top_k)
}

/// The distribution of one residual codebook: guidance between the two rows, then `top_k_probs`
/// (from a shortlist from [`depth_shortlist`] or every entry).
pub fn depth_probs(logits: &Candidates, c: &PipelineConstants) -> Vec<f32> {
    guided_probs(logits, c.ar_sampling_top_k, c.ar_cfg_scale)
}

/// `top_k_probs` of the guided values `u + (c - u) * scale` of `logits` (a shortlist from a
/// [`Shortlist::Guided`] rule of the same `top_k` and `scale`, or every entry).
pub fn guided_probs(logits: &Candidates, top_k: usize, scale: f32) -> Vec<f32> {
    let guided: Vec<f32> = logits.cond.iter().zip(&logits.uncond).map(|(&cv, &uv)| uv + (cv - uv) * scale).collect();
    shortlist_top_k_probs(logits.width, &logits.index, &guided, top_k)
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

    use crate::pipeline::rng::Rng;

    /// Logit pairs with what breaks a careless shortlist: ties at the threshold, signed zeros,
    /// infinities, NaN, and values at and below the -1e9 floor.
    fn awkward_pairs(width: usize) -> Vec<(Vec<f32>, Vec<f32>)> {
        let mut pairs = Vec::new();
        for seed in 0..40u64 {
            let mut rng = Rng::derive(seed, "shortlist-test", 0);
            let mut cond: Vec<f32> = rng.normals(width).iter().map(|v| v * 3.0).collect();
            let mut uncond: Vec<f32> = rng.normals(width).iter().map(|v| v * 3.0).collect();
            match seed % 8 {
                1 => cond.iter_mut().for_each(|v| *v = (*v * 2.0).round() / 2.0),
                2 => cond.iter_mut().step_by(3).for_each(|v| *v = if *v > 0.0 { 0.0 } else { -0.0 }),
                3 => {
                    cond[5] = f32::INFINITY;
                    uncond[9] = f32::NEG_INFINITY;
                    cond[11] = f32::NAN;
                }
                4 => {
                    cond.iter_mut().for_each(|v| *v = -2e9 - v.abs() * 1e8);
                    uncond.clone_from(&cond);
                }
                5 => cond.iter_mut().for_each(|v| *v = 1.0),
                6 => uncond.iter_mut().for_each(|v| *v = f32::NAN),
                7 => cond.iter_mut().skip(4).for_each(|v| *v = f32::NEG_INFINITY),
                _ => {}
            }
            pairs.push((cond, uncond));
        }
        pairs
    }

    fn same_bits(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
    }

    #[test]
    fn a_shortlist_gives_the_probabilities_of_every_entry_bit_for_bit() {
        let (width, rows) = (300, 100u32..400);
        let c = PipelineConstants {
            audio_end_id: 100,
            code_offset: 105,
            semantic_vocab_size: 295,
            ar_cfg_top_k: 20,
            ar_sampling_top_k: 7,
            ..Default::default()
        };
        let mut shortened = 0;
        for (cond, uncond) in awkward_pairs(width) {
            let every = Candidates::every(cond, uncond);
            let semantic = shortlist(&every, &semantic_shortlist(&rows, &c));
            assert!(same_bits(&semantic_probs(&semantic, rows.clone(), &c), &semantic_probs(&every, rows.clone(), &c)));
            let depth = shortlist(&every, &depth_shortlist(&c));
            assert!(same_bits(&depth_probs(&depth, &c), &depth_probs(&every, &c)));
            shortened += (semantic.index.len() < width) as usize + (depth.index.len() < width) as usize;
        }
        // The test means something only if most lists were short.
        assert!(shortened > 50, "only {shortened} short lists");
    }

    #[test]
    fn a_list_missing_an_entry_above_the_threshold_changes_the_probabilities() {
        let c = PipelineConstants { ar_sampling_top_k: 7, ..Default::default() };
        let (cond, uncond) = awkward_pairs(300).swap_remove(0);
        let every = Candidates::every(cond, uncond);
        let mut broken = shortlist(&every, &depth_shortlist(&c));
        broken.index.remove(0);
        broken.cond.remove(0);
        broken.uncond.remove(0);
        assert!(!same_bits(&depth_probs(&broken, &c), &depth_probs(&every, &c)));
    }

    #[test]
    fn semantic_masks_everything_but_codes_and_end() {
        let c = PipelineConstants { audio_end_id: 10, code_offset: 12, semantic_vocab_size: 4, ..Default::default() };
        // rows 10..16: the end token, one id that is neither, four codes
        let p = semantic_probs(&Candidates::every(vec![0.0, 9.0, 1.0, 2.0, 3.0, 4.0], vec![0.0; 6]), 10..16, &c);
        assert_eq!(p[1], 0.0);
        assert!(p[5] > p[4] && p[4] > p[3] && p[3] > p[2] && p[2] > p[0]);
    }
}
