//! The convolutions (weights in every dtype) of the vocoder and the condition encoder.

use songloom_engine::device::{Conv1dParams, ConvTranspose1dParams};
use songloom_engine::{DType, Op};

use crate::conformance::{Case, WEIGHT_DTYPES, fits};

const C_IN: usize = 5;
const C_OUT: usize = 4;
const LEN: usize = 23;

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for dtype in WEIGHT_DTYPES {
        for (k, dilation, padding) in [(1, 1, 0), (3, 1, 1), (7, 3, 9), (7, 9, 27), (8, 1, 4)] {
            if fits(dtype, C_OUT * C_IN * k) {
                cases.push(conv1d(Sizes::SMALL, k, dilation, padding, dtype, false));
            }
        }
        for stride in [2usize, 3, 4, 8] {
            if fits(dtype, C_IN * C_OUT * 2 * stride) {
                cases.push(conv_transpose1d(Sizes::SMALL, stride, 2 * stride, stride.div_ceil(2), dtype));
            }
        }
    }
    cases.push(conv1d(Sizes::SMALL, 3, 1, 1, DType::F32, true));
    // Across a GPU's tiles of output channels and times, and its slices of c_in x k; transposed,
    // its phases too, with a kernel the vocoder's (2 x stride) and one that is not a multiple of
    // the stride.
    cases.push(conv1d(Sizes { c_in: 3, len: 150, c_out: 70 }, 7, 3, 9, DType::F32, false));
    cases.push(conv_transpose1d(Sizes { c_in: 20, len: 150, c_out: 70 }, 4, 8, 2, DType::F32));
    cases.push(conv_transpose1d(Sizes { c_in: 9, len: 90, c_out: 40 }, 3, 7, 1, DType::BF16));
    cases
}

/// A convolution's input channels and length, and its output channels.
#[derive(Clone, Copy)]
struct Sizes {
    c_in: usize,
    len: usize,
    c_out: usize,
}

impl Sizes {
    const SMALL: Sizes = Sizes { c_in: C_IN, len: LEN, c_out: C_OUT };
}

fn conv1d(sizes: Sizes, k: usize, dilation: usize, padding: usize, dtype: DType, poison: bool) -> Case {
    let Sizes { c_in, len, c_out } = sizes;
    let t_out = len + 2 * padding - dilation * (k - 1);
    Case::new(
        Op::Conv1d,
        dtype,
        format!(
            "{c_in}x{len} by {c_out}x{c_in}x{k}, dilation {dilation}, padding {padding}{}",
            if poison { ", a NaN" } else { "" }
        ),
        move |s| {
            let x = s.random(&[c_in, len], DType::F32);
            vec![
                if poison { x.with(f32::NAN, &[len + 11]) } else { x },
                s.random(&[c_out, c_in, k], dtype),
                s.random(&[c_out], DType::F32),
            ]
        },
        move |d, t| {
            Ok(vec![d.conv1d(&t[0], &t[1], Some(&t[2]), &Conv1dParams::new(&t[0], &t[1], padding, dilation)?)?])
        },
        move |i| {
            let (x, w, b) = (&i[0].values, &i[1].values, &i[2].values);
            let mut y = vec![0.0f32; c_out * t_out];
            for co in 0..c_out {
                for to in 0..t_out {
                    let mut acc = b[co];
                    for ci in 0..c_in {
                        for j in 0..k {
                            let src = to as isize + (j * dilation) as isize - padding as isize;
                            if src >= 0 && (src as usize) < len {
                                acc += w[(co * c_in + ci) * k + j] * x[ci * len + src as usize];
                            }
                        }
                    }
                    y[co * t_out + to] = acc;
                }
            }
            vec![y]
        },
    )
}

/// A transposed convolution (the vocoder's upsampling ones: kernel `2 * stride`, padding
/// `ceil(stride / 2)`).
fn conv_transpose1d(sizes: Sizes, stride: usize, k: usize, padding: usize, dtype: DType) -> Case {
    let Sizes { c_in, len, c_out } = sizes;
    let t_out = (len - 1) * stride + k - 2 * padding;
    Case::new(
        Op::ConvTranspose1d,
        dtype,
        format!("{c_in}x{len} by {c_in}x{c_out}x{k}, stride {stride}, padding {padding}"),
        move |s| {
            vec![s.random(&[c_in, len], DType::F32), s.random(&[c_in, c_out, k], dtype), s.random(&[c_out], DType::F32)]
        },
        move |d, t| {
            let params = ConvTranspose1dParams::new(&t[0], &t[1], stride, padding)?;
            Ok(vec![d.conv_transpose1d(&t[0], &t[1], Some(&t[2]), &params)?])
        },
        move |i| {
            let (x, w, b) = (&i[0].values, &i[1].values, &i[2].values);
            let mut y: Vec<f32> = (0..c_out * t_out).map(|at| b[at / t_out]).collect();
            for ci in 0..c_in {
                for ti in 0..len {
                    for co in 0..c_out {
                        for j in 0..k {
                            let pos = (ti * stride + j) as isize - padding as isize;
                            if pos >= 0 && (pos as usize) < t_out {
                                y[co * t_out + pos as usize] += w[(ci * c_out + co) * k + j] * x[ci * len + ti];
                            }
                        }
                    }
                }
            }
            vec![y]
        },
    )
}
