//! The quantized weight formats, laid out so that the CPU, the CUDA kernels (kernels/gemv_quant.cu)
//! and a WGSL shader unpack them the same way: packed 32-bit words of weights, and the group
//! scales (and offsets) stored beside them in their own arrays.
//!
//! A matrix `[rows, cols]` is quantized in groups of [`GROUP`] consecutive weights along its rows
//! (the input dimension of a product); `cols` must be a multiple of the group.
//!
//! | format | a weight | a group of 32 | words | bits / weight | dequantized |
//! |---|---|---|---|---:|---|
//! | `q8` | int8, -127..=127 | f16 scale `max|w| / 127` | 4 weights a word, weight `j` in bits `8j..8j+8` | 8.5 | `q * scale` |
//! | `q4` | uint4, 0..=15 | f16 scale `(max - min) / 15`, f16 offset `min` | 8 weights a word, weight `j` in bits `4j..4j+4` | 5.0 | `q * scale + offset` |
//!
//! The weights of group `g` are words `g * 8 .. g * 8 + 8` (q8) or `g * 4 .. g * 4 + 4` (q4), so a
//! 16-byte load holds half a q8 group or a whole q4 group. Rounding is to nearest, ties to even,
//! in f32 with the scale already rounded to f16, the same on every device, so a checkpoint
//! quantized on one device loads bit for bit on another.
//!
//! Chosen by measurement (docs/BENCHMARKS.md, "Weight formats"): on random 1024 x 4096 matrices
//! the relative RMS error of a product is, for q8, 5.4e-3 at group 32 against 6.5e-3 at 128
//! (1.0e-2 against 2.1e-2 with outlier input channels); 4-bit with an offset gives 7.8e-2 at group
//! 32, symmetric 4-bit of about the same size (group 32, an f32 scale) 9.7e-2.

use half::f16;
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::tensor::DType;

/// Weights per scale.
pub const GROUP: usize = 32;

impl DType {
    /// Storage a weight takes, group scales and offsets included.
    pub fn bits_per_weight(self) -> f64 {
        match self {
            DType::F32 => 32.0,
            DType::BF16 | DType::F16 => 16.0,
            DType::Q8 => 8.0 + 16.0 / GROUP as f64,
            DType::Q4 => 4.0 + 32.0 / GROUP as f64,
            DType::F8E4M3 => 8.0,
        }
    }
}

/// A quantized tensor's data: `len` weights in groups of [`GROUP`].
#[derive(Debug, Clone, PartialEq)]
pub struct QuantData {
    pub dtype: DType,
    pub len: usize,
    pub words: Vec<u32>,
    pub scales: Vec<f16>,
    /// One per group for `q4`; empty for `q8`.
    pub offsets: Vec<f16>,
}

/// Weights a word holds.
pub fn per_word(dtype: DType) -> usize {
    match dtype {
        DType::Q8 => 4,
        DType::Q4 => 8,
        _ => 1,
    }
}

/// `values` in `dtype` (`q8` or `q4`); the length must be a multiple of [`GROUP`].
pub fn quantize(values: &[f32], dtype: DType) -> Result<QuantData> {
    check_quantizable(values.len(), dtype)?;
    let blocks: Vec<QuantData> = values.par_chunks(BLOCK).map(|block| quantize_block(block, dtype)).collect();
    Ok(joined(blocks, dtype, values.len()))
}

/// [`quantize`] of values widened to f32 by `widen` (bf16 or f16 ones) a block at a time, so the
/// whole tensor is never held in f32.
pub fn quantize_widened<T: Sync>(values: &[T], dtype: DType, widen: impl Fn(&T) -> f32 + Sync) -> Result<QuantData> {
    check_quantizable(values.len(), dtype)?;
    let blocks: Vec<QuantData> = values
        .par_chunks(BLOCK)
        .map_init(Vec::new, |wide: &mut Vec<f32>, block| {
            wide.clear();
            wide.extend(block.iter().map(&widen));
            quantize_block(wide, dtype)
        })
        .collect();
    Ok(joined(blocks, dtype, values.len()))
}

fn check_quantizable(len: usize, dtype: DType) -> Result<()> {
    if !dtype.is_quantized() {
        return Err(Error::Invalid(format!("{dtype} is not a quantized format")));
    }
    if !len.is_multiple_of(GROUP) {
        return Err(Error::shape("quantize", format!("{len} weights are not whole groups of {GROUP}")));
    }
    Ok(())
}

/// Groups are independent: blocks of them quantize in parallel and are joined in order.
const BLOCK: usize = 4096 * GROUP;

fn joined(blocks: Vec<QuantData>, dtype: DType, len: usize) -> QuantData {
    let groups = len / GROUP;
    let mut data = QuantData {
        dtype,
        len,
        words: Vec::with_capacity(len / per_word(dtype)),
        scales: Vec::with_capacity(groups),
        offsets: Vec::with_capacity(if dtype == DType::Q4 { groups } else { 0 }),
    };
    for block in blocks {
        data.words.extend(block.words);
        data.scales.extend(block.scales);
        data.offsets.extend(block.offsets);
    }
    data
}

fn quantize_block(values: &[f32], dtype: DType) -> QuantData {
    let groups = values.len() / GROUP;
    let mut data = QuantData {
        dtype,
        len: values.len(),
        words: Vec::with_capacity(values.len() / per_word(dtype)),
        scales: Vec::with_capacity(groups),
        offsets: Vec::with_capacity(if dtype == DType::Q4 { groups } else { 0 }),
    };
    for group in values.chunks(GROUP) {
        match dtype {
            DType::Q8 => {
                let (scale, q) = q8_group(group);
                data.scales.push(scale);
                data.words
                    .extend(q.chunks(4).map(|b| u32::from_le_bytes([b[0] as u8, b[1] as u8, b[2] as u8, b[3] as u8])));
            }
            _ => {
                let (scale, offset, q) = q4_group(group);
                data.scales.push(scale);
                data.offsets.push(offset);
                data.words.extend(
                    q.chunks(8).map(|n| n.iter().enumerate().fold(0u32, |w, (j, &v)| w | (v as u32) << (4 * j))),
                );
            }
        }
    }
    data
}

/// `x` rounded to the nearest integer, ties to even, as `f32::round_ties_even`, for `|x| < 2^22`:
/// adding and taking away 1.5 * 2^23 leaves no bits below the units, and the addition rounds to
/// nearest even. A code is within a few hundred; a larger `x` (an f16 offset far from a narrow
/// group) keeps its sign and size, so the clamp after it gives the same code. `round_ties_even`
/// is a call to libm's `rintf` on a target without SSE4.1, and was most of the time of
/// quantizing at load.
fn round_small(x: f32) -> f32 {
    const SHIFT: f32 = 12_582_912.0;
    (x + SHIFT) - SHIFT
}

/// One q8 group: its scale and weights. A group holding NaN or an infinity gets a NaN scale, so
/// every weight of it dequantizes to NaN: a broken weight stays visible, never a plausible number.
fn q8_group(group: &[f32]) -> (f16, [i8; GROUP]) {
    if !group.iter().all(|v| v.is_finite()) {
        return (f16::NAN, [0; GROUP]);
    }
    let amax = group.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let scale = f16::from_f32(amax / 127.0);
    let s = scale.to_f32();
    let mut q = [0i8; GROUP];
    if s > 0.0 {
        for (q, &v) in q.iter_mut().zip(group) {
            *q = round_small(v / s).clamp(-127.0, 127.0) as i8;
        }
    }
    (scale, q)
}

/// One q4 group: its scale, offset and weights (NaN scale and offset for a non-finite group).
fn q4_group(group: &[f32]) -> (f16, f16, [u8; GROUP]) {
    if !group.iter().all(|v| v.is_finite()) {
        return (f16::NAN, f16::NAN, [0; GROUP]);
    }
    let min = group.iter().copied().fold(f32::INFINITY, f32::min);
    let max = group.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let (scale, offset) = (f16::from_f32((max - min) / 15.0), f16::from_f32(min));
    let (s, o) = (scale.to_f32(), offset.to_f32());
    let mut q = [0u8; GROUP];
    if s > 0.0 {
        for (q, &v) in q.iter_mut().zip(group) {
            *q = round_small((v - o) / s).clamp(0.0, 15.0) as u8;
        }
    }
    (scale, offset, q)
}

/// Weight `i` of `data`, dequantized.
pub fn weight(data: &QuantData, i: usize) -> f32 {
    let g = i / GROUP;
    let word = data.words[i / per_word(data.dtype)];
    let s = data.scales[g].to_f32();
    match data.dtype {
        DType::Q8 => ((word >> (8 * (i % 4))) as u8 as i8) as f32 * s,
        _ => ((word >> (4 * (i % 8))) & 0xf) as f32 * s + data.offsets[g].to_f32(),
    }
}

/// Weights `[start, start + out.len())` dequantized into `out` (a row of a matrix, say); whole
/// groups at a time where the span is made of them (every row of a matrix is).
pub fn dequantize_into(data: &QuantData, start: usize, out: &mut [f32]) {
    dequantize_groups(data, start, out, None);
}

/// [`dequantize_into`] for whole groups of a q4 matrix, with each group's `offset + 7.5 * scale`
/// (the middle of its codes, which the decode products' rounding correction takes) into
/// `middles`, from the same conversion of the group's scale and offset.
pub fn dequantize_into_with_middles(data: &QuantData, start: usize, out: &mut [f32], middles: &mut [f32]) {
    dequantize_groups(data, start, out, Some(middles));
}

fn dequantize_groups(data: &QuantData, start: usize, out: &mut [f32], mut middles: Option<&mut [f32]>) {
    if !start.is_multiple_of(GROUP) || !out.len().is_multiple_of(GROUP) {
        assert!(middles.is_none(), "middles are of whole groups");
        for (j, o) in out.iter_mut().enumerate() {
            *o = weight(data, start + j);
        }
        return;
    }
    let first = start / GROUP;
    let per_group = GROUP / per_word(data.dtype);
    for (g, group) in out.chunks_exact_mut(GROUP).enumerate() {
        let g = first + g;
        let words = &data.words[g * per_group..(g + 1) * per_group];
        let s = data.scales[g].to_f32();
        match data.dtype {
            DType::Q8 => {
                for (four, word) in group.chunks_exact_mut(4).zip(words) {
                    for (j, o) in four.iter_mut().enumerate() {
                        *o = ((word >> (8 * j)) as u8 as i8) as f32 * s;
                    }
                }
            }
            _ => {
                let o = data.offsets[g].to_f32();
                if let Some(m) = middles.as_deref_mut() {
                    m[g - first] = o + 7.5 * s;
                }
                for (eight, word) in group.chunks_exact_mut(8).zip(words) {
                    for (j, v) in eight.iter_mut().enumerate() {
                        *v = ((word >> (4 * j)) & 0xf) as f32 * s + o;
                    }
                }
            }
        }
    }
}

pub fn dequantize(data: &QuantData) -> Vec<f32> {
    let mut out = vec![0.0; data.len];
    dequantize_into(data, 0, &mut out);
    out
}

/// `values` as they come back from `dtype`: quantized and dequantized.
pub fn round_trip(values: &[f32], dtype: DType) -> Result<Vec<f32>> {
    Ok(dequantize(&quantize(values, dtype)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(n: usize) -> Vec<f32> {
        (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) / 40.0).collect()
    }

    /// The fast rounding is `round_ties_even` over every code's range, ties included; a plain
    /// `round` (ties away from zero) is told apart.
    #[test]
    fn codes_round_to_nearest_even() {
        let ties: Vec<f32> = (-600..600).map(|i| i as f32 + 0.5).collect();
        let spread: Vec<f32> = (0..200_000).map(|i| (i as f32 - 100_000.0) * 0.003_1).collect();
        let near: Vec<f32> = ties.iter().flat_map(|&t| [t.next_down(), t.next_up()]).collect();
        for x in ties.iter().chain(&spread).chain(&near) {
            assert_eq!(round_small(*x) as i32, x.round_ties_even() as i32, "{x}");
        }
        assert_ne!(round_small(2.5), 2.5f32.round());
    }

    /// bf16 weights quantized a block at a time are those widened whole first, bit for bit, across
    /// a block's end.
    #[test]
    fn narrow_weights_quantize_as_widened_whole() {
        let values: Vec<half::bf16> = ramp(BLOCK + 5 * GROUP).into_iter().map(half::bf16::from_f32).collect();
        let wide: Vec<f32> = values.iter().map(|v| v.to_f32()).collect();
        for dtype in [DType::Q8, DType::Q4] {
            let whole = quantize(&wide, dtype).unwrap();
            let blocks = quantize_widened(&values, dtype, |v| v.to_f32()).unwrap();
            assert_eq!(
                (blocks.words, blocks.scales, blocks.offsets),
                (whole.words, whole.scales, whole.offsets),
                "{dtype}"
            );
        }
        assert!(quantize_widened(&values[..GROUP + 1], DType::Q8, |v| v.to_f32()).is_err());
    }

    #[test]
    fn the_layout_is_the_documented_one() {
        let mut values = vec![0.0f32; GROUP];
        values[0] = 1.27;
        values[1] = -1.27;
        values[5] = 0.635;
        let q = quantize(&values, DType::Q8).unwrap();
        assert_eq!(q.scales[0], f16::from_f32(0.01));
        let s = f16::from_f32(0.01).to_f32();
        let code = |v: f32| (v / s).round_ties_even() as i8 as u8 as u32;
        assert_eq!(q.words[0], code(1.27) | code(-1.27) << 8);
        assert_eq!(q.words[1] >> 8 & 0xff, code(0.635));
        assert_eq!(q.words.len(), GROUP / 4);
        let mut four = vec![0.5f32; GROUP];
        four[0] = 0.5;
        four[1] = 2.0;
        four[9] = 1.25;
        let q = quantize(&four, DType::Q4).unwrap();
        assert_eq!((q.scales[0], q.offsets[0]), (f16::from_f32(0.1), f16::from_f32(0.5)));
        assert_eq!(q.words[0] & 0xf, 0);
        assert_eq!(q.words[0] >> 4 & 0xf, 15);
        assert_eq!(q.words[1] >> 4 & 0xf, 8, "0.75 over the f16 step 0.09998");
    }

    #[test]
    fn dequantized_weights_lie_within_half_a_step() {
        let values = ramp(4 * GROUP);
        for dtype in [DType::Q8, DType::Q4] {
            let q = quantize(&values, dtype).unwrap();
            let back = dequantize(&q);
            for (g, (group, back)) in values.chunks(GROUP).zip(back.chunks(GROUP)).enumerate() {
                // Half a step, plus what rounding the scale and offset to f16 costs.
                let step = q.scales[g].to_f32();
                for (v, b) in group.iter().zip(back) {
                    assert!((v - b).abs() <= 0.5 * step + 1e-3 * v.abs().max(step), "{dtype}: {v} came back as {b}");
                }
            }
        }
    }

    #[test]
    fn whole_groups_dequantize_as_weight_by_weight() {
        let values = ramp(6 * GROUP);
        for dtype in [DType::Q8, DType::Q4] {
            let q = quantize(&values, dtype).unwrap();
            let one_by_one: Vec<f32> = (0..values.len()).map(|i| weight(&q, i)).collect();
            assert_eq!(dequantize(&q), one_by_one, "{dtype}");
            let mut part = vec![0.0; 2 * GROUP + 5];
            dequantize_into(&q, GROUP + 3, &mut part);
            assert_eq!(part, one_by_one[GROUP + 3..3 * GROUP + 8], "{dtype}: a span off the groups");
        }
    }

    #[test]
    fn a_non_finite_weight_makes_its_group_nan_and_no_other() {
        let mut values = ramp(2 * GROUP);
        values[3] = f32::INFINITY;
        for dtype in [DType::Q8, DType::Q4] {
            let back = round_trip(&values, dtype).unwrap();
            assert!(back[..GROUP].iter().all(|v| v.is_nan()), "{dtype}");
            assert!(back[GROUP..].iter().all(|v| v.is_finite()), "{dtype}");
        }
    }

    #[test]
    fn a_length_that_is_not_whole_groups_is_refused() {
        assert!(quantize(&ramp(GROUP + 1), DType::Q8).is_err());
        assert!(quantize(&ramp(GROUP), DType::BF16).is_err());
        let zeros = quantize(&[0.0; GROUP], DType::Q4).unwrap();
        assert!(dequantize(&zeros).iter().all(|&v| v == 0.0));
    }
}
