//! Element-wise arithmetic: activations, sums and scaling (f32 activations; any other input dtype
//! is to be refused), Snake (alpha in every dtype), dtype conversion from and to every dtype, and
//! synthetic weights made on the device. Each has a case with NaN and the infinities in its inputs.

use songloom_engine::{DType, Op, Tensor};

use super::silu;
use crate::conformance::{Case, FLOAT_DTYPES, Input, Seeds, WEIGHT_DTYPES};

const SHAPES: [[usize; 2]; 2] = [[4, 6], [3, 1025]];

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for dtype in FLOAT_DTYPES {
        for shape in SHAPES {
            for poison in [false, true] {
                cases.push(unary(Op::Silu, shape, dtype, poison));
                cases.push(unary(Op::Tanh, shape, dtype, poison));
                cases.push(unary(Op::Scale, shape, dtype, poison));
                cases.push(binary(Op::Add, shape, dtype, poison));
                cases.push(binary(Op::SiluMul, shape, dtype, poison));
                cases.push(snake(shape, dtype, poison));
                cases.push(count_non_finite(shape, dtype, poison));
            }
        }
    }
    for dtype in WEIGHT_DTYPES {
        cases.push(fill_uniform(dtype));
        for from in WEIGHT_DTYPES {
            cases.push(cast(from, dtype));
        }
    }
    cases
}

/// Values with NaN, +inf and -inf among them when `poison`.
fn values(s: &mut Seeds, shape: [usize; 2], dtype: DType, poison: bool) -> Input {
    let x = s.random(&shape, dtype);
    if poison { x.with(f32::NAN, &[1]).with(f32::INFINITY, &[2]).with(f32::NEG_INFINITY, &[5]) } else { x }
}

fn label(shape: [usize; 2], poison: bool) -> String {
    format!("{}x{}{}", shape[0], shape[1], if poison { ", non-finite" } else { "" })
}

fn unary(op: Op, shape: [usize; 2], dtype: DType, poison: bool) -> Case {
    let f = match op {
        Op::Silu => silu,
        Op::Tanh => f32::tanh,
        _ => |x: f32| x * -0.75,
    };
    Case::new(
        op,
        dtype,
        label(shape, poison),
        |s| vec![values(s, shape, dtype, poison)],
        move |d, t| {
            Ok(vec![match op {
                Op::Silu => d.silu(&t[0])?,
                Op::Tanh => d.tanh(&t[0])?,
                _ => d.scale(&t[0], -0.75)?,
            }])
        },
        move |i| vec![i[0].values.iter().map(|&x| f(x)).collect()],
    )
}

fn binary(op: Op, shape: [usize; 2], dtype: DType, poison: bool) -> Case {
    let f = if op == Op::Add { |a: f32, b: f32| a + b } else { |a: f32, b: f32| silu(a) * b };
    Case::new(
        op,
        dtype,
        label(shape, poison),
        |s| {
            vec![
                values(s, shape, dtype, poison),
                s.random(&shape, dtype).with(f32::NAN, if poison { &[4] } else { &[] }),
            ]
        },
        move |d, t| Ok(vec![if op == Op::Add { d.add(&t[0], &t[1])? } else { d.silu_mul(&t[0], &t[1])? }]),
        move |i| vec![i[0].values.iter().zip(&i[1].values).map(|(&a, &b)| f(a, b)).collect()],
    )
}

/// `x + sin(alpha * x)^2 / (alpha + 1e-9)` with one alpha per channel.
fn snake(shape: [usize; 2], dtype: DType, poison: bool) -> Case {
    let time = shape[1];
    Case::new(
        Op::Snake,
        dtype,
        label(shape, poison),
        |s| vec![values(s, shape, DType::F32, poison), s.random(&[shape[0]], dtype)],
        |d, t| Ok(vec![d.snake(&t[0], &t[1])?]),
        move |i| {
            let alpha = &i[1].values;
            let y = i[0]
                .values
                .iter()
                .enumerate()
                .map(|(at, &x)| {
                    let a = alpha[at / time];
                    x + (a * x).sin().powi(2) / (a + 1e-9)
                })
                .collect();
            vec![y]
        },
    )
}

/// The count of NaN and infinite values, read back as one number.
fn count_non_finite(shape: [usize; 2], dtype: DType, poison: bool) -> Case {
    Case::new(
        Op::CountNonFinite,
        dtype,
        label(shape, poison),
        |s| vec![values(s, shape, dtype, poison)],
        |d, t| Ok(vec![Tensor::from_f32(&[1], vec![d.count_non_finite(&t[0])? as f32])?]),
        |i| vec![vec![i[0].values.iter().filter(|v| !v.is_finite()).count() as f32]],
    )
}

/// The synthetic weights of benchmarks: `center + half_width * u` with `u` a hash of seed and index.
fn fill_uniform(dtype: DType) -> Case {
    let (shape, seed, center, half_width) = ([5usize, 1024], 77u64, 0.5f32, 0.25f32);
    Case::new(
        Op::FillUniform,
        dtype,
        format!("{}x{}, seed {seed}", shape[0], shape[1]),
        |_| Vec::new(),
        move |d, _| Ok(vec![d.fill_uniform(&shape, dtype, seed, center, half_width)?]),
        move |_| {
            let n = (shape[0] * shape[1]) as u64;
            let values: Vec<f32> =
                (0..n).map(|i| center + half_width * songloom_engine::hash::uniform(seed, i)).collect();
            vec![stored_as(&values, dtype)]
        },
    )
}

/// `values` as `dtype` holds them: rounded to nearest even, or quantized group by group.
fn stored_as(values: &[f32], dtype: DType) -> Vec<f32> {
    if dtype.is_quantized() {
        songloom_engine::quant::round_trip(values, dtype).expect("whole groups")
    } else {
        values.iter().map(|&v| dtype.round(v)).collect()
    }
}

/// `from` to the dtype under test, rounding to nearest even (quantizing group by group); NaN and
/// the infinities survive (a group holding one becomes NaN in a quantized format, never a number).
fn cast(from: DType, to: DType) -> Case {
    Case::new(
        Op::Cast,
        to,
        format!("7x32 from {from}"),
        |s| {
            if from.is_quantized() {
                vec![s.random(&[7, 32], from)]
            } else {
                vec![values(s, [7, 32], from, true).with(1e-40, &[9]).with(-3.0e38, &[40])]
            }
        },
        move |d, t| Ok(vec![d.cast(&t[0], to)?]),
        move |i| vec![stored_as(&i[0].values, to)],
    )
}
