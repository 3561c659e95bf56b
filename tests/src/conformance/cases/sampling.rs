//! The sampling shortlist: whatever candidates a backend sends back, the draw's probabilities of
//! every entry must come out bit for bit as from the whole rows. Logit pairs in awkward forms:
//! plain, ties, signed zeros, non-finite values, everything below the -1e9 floor, all equal, a
//! NaN in the last entry.

use std::ops::Range;

use songloom_engine::config::PipelineConstants;
use songloom_engine::device::Candidates;
use songloom_engine::pipeline::rng::categorical_at;
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
    // A real depth decoder's codebook (1024 codes: from a shortlist), and narrow rows (every entry).
    for width in [1024, 300, 32] {
        cases.push(draw_each(width));
    }
    for dtype in FLOAT_DTYPES {
        cases.push(embedding_drawn(dtype));
    }
    cases
}

/// The uniforms of the draws of `pairs` pairs: both ends of `[0, 1)` and values between.
fn uniforms(pairs: usize) -> Vec<f64> {
    let some = [0.0, 1.0 - f64::EPSILON, 0.5, 0.123_456_789, 0.999, 0.25, 0.75, 0.618_033_988_7];
    (0..pairs).map(|i| some[i % some.len()]).collect()
}

/// 8 pairs, one of each form, drawn with the depth decoder's rule: each the host's draw from the
/// whole rows. A pair the backend sends back as `-1` (its list cannot stand for its rows) is drawn
/// on the host from its candidates, as the AR loop does (tests/tests/ops.rs holds a GPU to which
/// pairs those are).
fn draw_each(width: usize) -> Case {
    let pairs = 8;
    Case::new(
        Op::DrawEach,
        DType::F32,
        format!("depth draws of {pairs} pairs, width {width}"),
        move |s| {
            let rows: Vec<f32> =
                (0..pairs as u64).flat_map(|form| logit_pair(s, width, form, DType::F32).values).collect();
            vec![Input::new(&[2 * pairs, width], DType::F32, rows)]
        },
        move |d, t| {
            let (_, c) = draw_of(width, 2);
            let rule = depth_shortlist(&c);
            let u = uniforms(pairs);
            let mut codes = d.to_host(&d.draw_each(&t[0], &rule, &u)?)?;
            for (i, code) in codes.iter_mut().enumerate().filter(|(_, code)| **code < 0.0) {
                let pair = d.candidates(&d.slice_rows(&t[0], 2 * i, 2 * i + 2)?, &rule)?;
                *code = categorical_at(u[i], &depth_probs(&pair, &c)) as f32;
            }
            Ok(vec![Tensor::from_f32(&[pairs], codes)?])
        },
        move |i| {
            let (_, c) = draw_of(width, 2);
            let u = uniforms(pairs);
            let codes = i[0]
                .values
                .chunks(2 * width)
                .zip(&u)
                .map(|(pair, &u)| {
                    let every = Candidates::every(pair[..width].to_vec(), pair[width..].to_vec());
                    categorical_at(u, &depth_probs(&every, &c)) as f32
                })
                .collect();
            vec![codes]
        },
    )
}

/// Rows of a 3-codebook table of 40 codes picked by codes drawn on the device, offset to
/// codebook 2 and each taken twice (a CFG pair's two entries).
fn embedding_drawn(dtype: DType) -> Case {
    let (codes_per_book, dim, offset) = (40usize, 32usize, 40u32);
    let codes = [0u32, 39, 7, 7, 13];
    Case::new(
        Op::EmbeddingDrawn,
        dtype,
        format!("{}x{dim}, codes {codes:?} from row {offset}, twice", 3 * codes_per_book),
        |s| vec![s.random(&[3 * codes_per_book, dim], dtype)],
        move |d, t| {
            let (width, pairs) = (codes_per_book, codes.len());
            // Rows whose draw is certain: the code's entry far above the rest.
            let mut rows = vec![0.0f32; 2 * pairs * width];
            for (p, &code) in codes.iter().enumerate() {
                rows[2 * p * width + code as usize] = 1e4;
                rows[(2 * p + 1) * width + code as usize] = 1e4;
            }
            let logits = d.upload(Tensor::from_f32(&[2 * pairs, width], rows)?)?;
            let rule = songloom_engine::device::Shortlist::Guided { k: 5, scale: 1.5 };
            let drawn = d.draw_each(&logits, &rule, &uniforms(pairs))?;
            Ok(vec![d.embedding_drawn(&t[0], &drawn, offset, 2)?])
        },
        move |i| {
            let rows = |code: u32| {
                let row = (code + offset) as usize;
                i[0].values[row * dim..(row + 1) * dim].to_vec()
            };
            vec![codes.iter().flat_map(|&code| [rows(code), rows(code)].concat()).collect()]
        },
    )
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
