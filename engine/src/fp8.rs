//! FP8 e4m3 (the `e4m3fn` of torch and of NVIDIA's tensor cores: 4 exponent bits with bias 7, 3
//! mantissa bits, no infinities, 448 the largest value) and the row-scaled matrices the DiT's
//! block products take under `--precision fp8`. The CUDA kernels (kernels/fp8.cu) encode exactly
//! as [`encode_e4m3`] does, so the host can check them bit for bit.

/// The largest finite e4m3 value.
pub const E4M3_MAX: f32 = 448.0;

/// The e4m3 code nearest `x` (ties to even), saturated to ±448; NaN gives NaN's code.
pub fn encode_e4m3(x: f32) -> u8 {
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    if x.is_nan() {
        return 0x7f;
    }
    let a = x.abs();
    if a >= E4M3_MAX {
        return sign | 0x7e;
    }
    // Below the smallest normal (2^-6) the codes are multiples of 2^-9; 8 of them is 2^-6 itself.
    if a < 1.0 / 64.0 {
        return sign | (a * 512.0).round_ties_even() as u8;
    }
    let bits = a.to_bits();
    let exponent = (bits >> 23) as i32 - 127;
    let mantissa = bits & 0x7f_ffff;
    let (kept, rest, half) = (mantissa >> 20, mantissa & 0xf_ffff, 0x8_0000);
    let mut code = (((exponent + 7) as u32) << 3) | kept;
    if rest > half || (rest == half && kept & 1 == 1) {
        code += 1; // a carry out of the mantissa steps the exponent, as it should
    }
    sign | code.min(0x7e) as u8
}

/// The value of e4m3 code `code`.
pub fn decode_e4m3(code: u8) -> f32 {
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let (exponent, mantissa) = ((code >> 3) & 0xf, code & 7);
    if exponent == 0xf && mantissa == 7 {
        return f32::NAN;
    }
    let magnitude = if exponent == 0 {
        mantissa as f32 / 512.0
    } else {
        (1.0 + mantissa as f32 / 8.0) * 2f32.powi(exponent as i32 - 7)
    };
    sign * magnitude
}

/// `x` rounded to the nearest e4m3 value.
pub fn round_e4m3(x: f32) -> f32 {
    decode_e4m3(encode_e4m3(x))
}

/// The scale of a row whose largest magnitude is `max_abs`: its largest value becomes 448 (a row
/// of zeros, or one with no finite maximum, keeps scale 1 and encodes as it is).
pub fn row_scale(max_abs: f32) -> f32 {
    if max_abs > 0.0 && max_abs.is_finite() { max_abs / E4M3_MAX } else { 1.0 }
}

/// Rows of `cols` values encoded one scale a row: the codes `[rows, padded_cols]` (a row's tail
/// past `cols` zero) and the scales. What kernels/fp8.cu's `quantize_rows_e4m3` writes.
pub fn quantize_rows(values: &[f32], cols: usize, padded_cols: usize) -> (Vec<u8>, Vec<f32>) {
    let rows = values.len() / cols.max(1);
    let mut codes = vec![0u8; rows * padded_cols];
    let mut scales = Vec::with_capacity(rows);
    for (row, out) in values.chunks(cols).zip(codes.chunks_mut(padded_cols)) {
        let scale = row_scale(row.iter().fold(0.0f32, |m, v| m.max(v.abs())));
        for (code, v) in out.iter_mut().zip(row) {
            *code = encode_e4m3(v / scale);
        }
        scales.push(scale);
    }
    (codes, scales)
}

/// The values rows of codes and their scales stand for, `[rows, cols]`.
pub fn dequantize_rows(codes: &[u8], scales: &[f32], cols: usize, padded_cols: usize) -> Vec<f32> {
    codes
        .chunks(padded_cols)
        .zip(scales)
        .flat_map(|(row, scale)| row[..cols].iter().map(move |&c| decode_e4m3(c) * scale))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_decodes_and_encodes_back_to_itself() {
        for code in 0..=255u8 {
            let v = decode_e4m3(code);
            if v.is_nan() {
                assert_eq!(code & 0x7f, 0x7f);
                continue;
            }
            // Negative zero encodes as itself too.
            assert_eq!(encode_e4m3(v), code, "code {code:#04x} = {v}");
        }
        assert_eq!(decode_e4m3(0x7e), 448.0);
        assert_eq!(decode_e4m3(0x01), 2f32.powi(-9));
        assert_eq!(decode_e4m3(0x08), 2f32.powi(-6));
    }

    #[test]
    fn rounding_is_to_nearest_with_ties_to_even_and_saturates() {
        // 1.0625 lies halfway between 1.0 (mantissa 0, even) and 1.125: to 1.0.
        assert_eq!(round_e4m3(1.0625), 1.0);
        // 1.1875 between 1.125 (odd) and 1.25 (even): to 1.25.
        assert_eq!(round_e4m3(1.1875), 1.25);
        assert_eq!(round_e4m3(1.07), 1.125);
        // A mantissa that rounds up carries into the exponent.
        assert_eq!(round_e4m3(1.97), 2.0);
        // Halfway between two subnormals: 1.5 * 2^-9 goes to 2 * 2^-9.
        assert_eq!(round_e4m3(1.5 / 512.0), 2.0 / 512.0);
        assert_eq!(round_e4m3(0.5 / 512.0), 0.0);
        assert_eq!(round_e4m3(1e6), 448.0);
        assert_eq!(round_e4m3(-460.0), -448.0);
        assert_eq!(round_e4m3(-3.3), -3.25);
        assert!(round_e4m3(f32::NAN).is_nan());
    }

    #[test]
    fn a_row_scaled_matrix_keeps_each_value_within_a_sixteenth() {
        let values: Vec<f32> =
            (0..6 * 40).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013 * (1 + i / 40) as f32).collect();
        let (codes, scales) = quantize_rows(&values, 40, 48);
        assert_eq!((codes.len(), scales.len()), (6 * 48, 6));
        assert!(codes.chunks(48).all(|row| row[40..].iter().all(|&c| c == 0)));
        let back = dequantize_rows(&codes, &scales, 40, 48);
        for (row, (a, b)) in values.chunks(40).zip(back.chunks(40)).enumerate() {
            let max = a.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let back_max = b.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            assert!((back_max - max).abs() <= max * 1e-6, "row {row}: its largest value {max} came back {back_max}");
            for (x, y) in a.iter().zip(b) {
                // Three mantissa bits: within 2^-4 of the value, or of the subnormal step.
                assert!((x - y).abs() <= (x.abs() / 16.0).max(scales[row] / 512.0), "{x} -> {y}");
            }
        }
        let (zeros, zero_scales) = quantize_rows(&[0.0; 8], 8, 16);
        assert!(zeros.iter().all(|&c| c == 0) && zero_scales == [1.0]);
    }
}
