//! The sampling shortlist: whatever candidates a backend sends back, the draw's probabilities of
//! every entry must come out bit for bit as from the whole rows. Logit pairs in awkward forms:
//! plain, ties, signed zeros, non-finite values, everything below the -1e9 floor, all equal, a
//! NaN in the last entry.

use std::ops::Range;

use songloom_engine::config::PipelineConstants;
use songloom_engine::device::Candidates;
use songloom_engine::pipeline::sampling::{depth_probs, depth_shortlist, semantic_probs, semantic_shortlist};
use songloom_engine::{DType, Op, Tensor};

use crate::conformance::{Case, FLOAT_DTYPES, Input, Seeds};

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (width, code_offset) in [(16_389usize, 5u32), (1024, 1), (300, 2)] {
        for form in 0..8 {
            for semantic in [true, false] {
                cases.push(candidates(width, code_offset, form, semantic, DType::F32));
            }
        }
    }
    for dtype in FLOAT_DTYPES.into_iter().filter(|&d| d != DType::F32) {
        cases.push(candidates(300, 2, 0, true, dtype));
    }
    for (width, code_offset) in [(16_389usize, 5u32), (300, 2)] {
        for semantic in [true, false] {
            cases.push(candidates_each(width, code_offset, semantic, DType::F32));
        }
    }
    for dtype in FLOAT_DTYPES.into_iter().filter(|&d| d != DType::F32) {
        cases.push(candidates_each(300, 2, true, dtype));
    }
    cases
}

/// A logit pair `width` wide in one of several forms.
fn logit_pair(s: &mut Seeds, width: usize, form: u64, dtype: DType) -> Input {
    let (cond, uncond) = logit_rows(s, width, form);
    Input::new(&[2, width], dtype, [cond, uncond].concat())
}

/// The conditional and unconditional rows of a logit pair in `form` (0 to 7).
pub fn logit_rows(s: &mut Seeds, width: usize, form: u64) -> (Vec<f32>, Vec<f32>) {
    let scaled =
        |s: &mut Seeds| -> Vec<f32> { s.random(&[width], DType::F32).values.iter().map(|v| v * 8.0).collect() };
    let (mut cond, mut uncond) = (scaled(s), scaled(s));
    match form {
        1 => cond.iter_mut().for_each(|v| *v = v.round()),
        2 => cond.iter_mut().step_by(2).for_each(|v| *v = if *v > 0.0 { 0.0 } else { -0.0 }),
        3 => {
            cond[7] = f32::INFINITY;
            uncond[3] = f32::NEG_INFINITY;
            uncond[width / 2] = f32::NAN;
        }
        4 => {
            cond.iter_mut().for_each(|v| *v = -2e9 - v.abs() * 1e8);
            uncond.clone_from(&cond);
        }
        5 => cond.iter_mut().for_each(|v| *v = 0.5),
        6 => cond[width - 1] = f32::NAN,
        _ => {}
    }
    (cond, uncond)
}

/// The sampleable rows and constants of a logit pair `width` wide.
pub fn draw_of(width: usize, code_offset: u32) -> (Range<u32>, PipelineConstants) {
    let constants = PipelineConstants {
        audio_end_id: 100,
        code_offset: 100 + code_offset,
        semantic_vocab_size: width as u32 - code_offset - 3,
        ..Default::default()
    };
    (100..100 + width as u32, constants)
}

fn probabilities(candidates: &Candidates, semantic: bool, rows: &Range<u32>, c: &PipelineConstants) -> Vec<f32> {
    if semantic { semantic_probs(candidates, rows.clone(), c) } else { depth_probs(candidates, c) }
}

fn candidates(width: usize, code_offset: u32, form: u64, semantic: bool, dtype: DType) -> Case {
    let kind = if semantic { "semantic" } else { "depth" };
    Case::new(
        Op::Candidates,
        dtype,
        format!("{kind} draw, width {width}, form {form}"),
        |s| vec![logit_pair(s, width, form, dtype)],
        move |d, t| {
            let (rows, c) = draw_of(width, code_offset);
            let rule = if semantic { semantic_shortlist(&rows, &c) } else { depth_shortlist(&c) };
            let probs = probabilities(&d.candidates(&t[0], &rule)?, semantic, &rows, &c);
            Ok(vec![Tensor::from_f32(&[probs.len()], probs)?])
        },
        move |i| {
            let (rows, c) = draw_of(width, code_offset);
            let mut cond = i[0].values.clone();
            let uncond = cond.split_off(width);
            vec![probabilities(&Candidates::every(cond, uncond), semantic, &rows, &c)]
        },
    )
}

/// A batch's pairs, one of each form, stacked as `[16, width]`: each pair's probabilities as from
/// its whole rows.
fn candidates_each(width: usize, code_offset: u32, semantic: bool, dtype: DType) -> Case {
    let kind = if semantic { "semantic" } else { "depth" };
    Case::new(
        Op::CandidatesEach,
        dtype,
        format!("{kind} draws of 8 pairs, width {width}"),
        move |s| {
            let rows: Vec<f32> = (0..8).flat_map(|form| logit_pair(s, width, form, dtype).values).collect();
            vec![Input::new(&[16, width], dtype, rows)]
        },
        move |d, t| {
            let (rows, c) = draw_of(width, code_offset);
            let rule = if semantic { semantic_shortlist(&rows, &c) } else { depth_shortlist(&c) };
            let mut probs = Vec::new();
            for pair in d.candidates_each(&t[0], &rule)? {
                probs.extend(probabilities(&pair, semantic, &rows, &c));
            }
            Ok(vec![Tensor::from_f32(&[probs.len()], probs)?])
        },
        move |i| {
            let (rows, c) = draw_of(width, code_offset);
            let pairs = i[0].values.chunks(2 * width);
            vec![
                pairs
                    .flat_map(|pair| {
                        let every = Candidates::every(pair[..width].to_vec(), pair[width..].to_vec());
                        probabilities(&every, semantic, &rows, &c)
                    })
                    .collect(),
            ]
        },
    )
}
