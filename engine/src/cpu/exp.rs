//! `e^x` over slices in a form the compiler vectorizes, and the softmax and SiLU built on it.
//!
//! libm's `expf` is a call per element, which no loop around it can vectorize: it was 12 % of an
//! 8 s song on the CPU, most of it in the DiT's attention scores. This is Cephes' `expf` (its
//! range reduction and polynomial), within 2 ulp of the exact value where libm is within 1: far
//! below the rounding of the f32 products around it. Every step is branch-free, so a loop of them
//! becomes SIMD code.

/// Above this `e^x` overflows f32.
const MAX_ARG: f32 = 88.722_84;
/// Below this `e^x` is under f32's smallest normal; the result is flushed to 0.
const MIN_ARG: f32 = -87.336_55;
const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split in two so `n * LN2_HI` is exact for the `n` that occur.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5 * 2^23: adding it rounds an f32 of magnitude below 2^22 to an integer, held in the low bits.
const ROUNDER: f32 = 12_582_912.0;

/// `e^x`, branch-free; NaN stays NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let clamped = x.clamp(MIN_ARG, MAX_ARG);
    let shifted = clamped * LOG2_E + ROUNDER;
    let n = shifted - ROUNDER;
    let r = clamped - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let e_r = p * r * r + r + 1.0;
    // n (-126..=128) sits in the low bits of `shifted`. 2^128 is not an f32, so the scaling is
    // by 2^(n/2) twice over, exact but where the result is subnormal.
    let n_int = shifted.to_bits().wrapping_sub(ROUNDER.to_bits()) as i32;
    let half = n_int >> 1;
    // Wrapping arithmetic, never out of range here, keeps overflow checks out of the SIMD loop.
    let pow2 = |k: i32| f32::from_bits((k.wrapping_add(127) as u32) << 23);
    let y = e_r * pow2(half) * pow2(n_int.wrapping_sub(half));
    if x > MAX_ARG {
        f32::INFINITY
    } else if x < MIN_ARG {
        0.0
    } else {
        y
    }
}

/// `x[i] = e^(x[i])`.
pub fn exp_in_place(x: &mut [f32]) {
    for v in x {
        *v = exp(*v);
    }
}

/// A row of raw scores to `softmax(row * scale)`, in place (`scale` > 0).
pub fn softmax_scaled(row: &mut [f32], scale: f32) {
    // Rounding is monotone, so the largest scaled score is the largest score scaled.
    let max = lanes_max(row) * scale;
    for v in row.iter_mut() {
        *v = *v * scale - max;
    }
    exp_in_place(row);
    let inv = 1.0 / lanes_sum(row);
    for v in row.iter_mut() {
        *v *= inv;
    }
}

/// `y[i] = silu(a[i]) * b[i]`, with `silu(a) = a / (1 + e^-a)`.
pub fn silu_mul_into(y: &mut [f32], a: &[f32], b: &[f32]) {
    silu_into(y, a);
    for (y, &b) in y.iter_mut().zip(b) {
        *y *= b;
    }
}

/// `y[i] = silu(a[i])`.
pub fn silu_into(y: &mut [f32], a: &[f32]) {
    for (y, &a) in y.iter_mut().zip(a) {
        *y = -a;
    }
    exp_in_place(y);
    for (y, &a) in y.iter_mut().zip(a) {
        *y = a / (1.0 + *y);
    }
}

const LANES: usize = 8;

/// The largest value (NaNs ignored, as `f32::max` does), in lanes the compiler vectorizes.
fn lanes_max(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = x.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = a.max(v);
        }
    }
    tail.iter().chain(&acc).fold(f32::NEG_INFINITY, |m, &v| m.max(v))
}

/// The sum, in lanes the compiler vectorizes.
fn lanes_sum(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = x.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += v;
        }
    }
    acc.iter().sum::<f32>() + tail.iter().sum::<f32>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f32, b: f32) -> u32 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
    }

    #[test]
    fn exp_is_within_two_ulp_of_the_exact_value_over_its_range() {
        let mut worst = (0, 0.0f32);
        // Every 331st f32 of each sign up to the ends of the range, the ends themselves included.
        let negative =
            (0..MIN_ARG.to_bits() - (-0.0f32).to_bits()).step_by(331).map(|i| f32::from_bits(0x8000_0000 + i));
        let positive = (0..MAX_ARG.to_bits()).step_by(331).map(f32::from_bits);
        for x in negative.chain(positive).chain([MIN_ARG, MAX_ARG]) {
            let exact = (x as f64).exp() as f32;
            let ours = exp(x);
            if exact.is_normal() && ulps(ours, exact) > worst.0 {
                worst = (ulps(ours, exact), x);
            }
        }
        assert!(worst.0 <= 2, "{} ulp at x = {}", worst.0, worst.1);
    }

    #[test]
    fn exp_keeps_the_edges() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(100.0), f32::INFINITY);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(-100.0), 0.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert!(exp(f32::NAN).is_nan());
        assert!(ulps(exp(MAX_ARG), (MAX_ARG as f64).exp() as f32) <= 2);
        assert!(exp(MIN_ARG) > 0.0);
    }

    #[test]
    fn softmax_and_silu_match_their_definitions() {
        let row: Vec<f32> = (0..37).map(|i| ((i * 7919) % 101) as f32 * 0.37 - 18.0).collect();
        let scale = 0.125;
        let mut ours = row.clone();
        softmax_scaled(&mut ours, scale);
        let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64 * scale as f64));
        let exps: Vec<f64> = row.iter().map(|&v| (v as f64 * scale as f64 - max).exp()).collect();
        let sum: f64 = exps.iter().sum();
        for (o, e) in ours.iter().zip(&exps) {
            assert!((*o as f64 - e / sum).abs() <= 1e-6 * (e / sum) + 1e-12, "{o} vs {}", e / sum);
        }
        let b: Vec<f32> = row.iter().map(|v| v * 0.5 - 1.0).collect();
        let mut y = vec![0.0; row.len()];
        silu_mul_into(&mut y, &row, &b);
        let mut s = vec![0.0; row.len()];
        silu_into(&mut s, &row);
        for i in 0..row.len() {
            let exact = row[i] as f64 / (1.0 + (-row[i] as f64).exp());
            assert!((s[i] as f64 - exact).abs() <= 1e-6 * exact.abs() + 1e-30, "silu({}) = {}", row[i], s[i]);
            assert!((y[i] as f64 - exact * b[i] as f64).abs() <= 1e-6 * (exact * b[i] as f64).abs() + 1e-30);
        }
    }
}
