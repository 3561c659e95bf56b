//! `--precision fp8`: refused where there are no FP8 tensor cores, and on CUDA GPUs that have them
//! (compute capability 8.9 on) the encoding and the products checked against the host's own
//! (`songloom_engine::fp8`). The DiT's distance to the reference under it is in parity.rs.

use songloom_engine::fp8::{dequantize_rows, encode_e4m3, quantize_rows};
use songloom_engine::pipeline::rng::Rng;
use songloom_engine::{DType, Device, DeviceChoice, DeviceKind, DeviceOptions, Precision, Tensor};
use songloom_tests::{Bound, distance};

fn fp8_options() -> DeviceOptions {
    DeviceOptions { precision: Precision::Fp8, ..DeviceOptions::default() }
}

#[test]
fn fp8_is_refused_without_fp8_tensor_cores_and_says_what_to_use() {
    let mut kinds = vec![DeviceKind::Cpu];
    // wgpu where an adapter exists (lavapipe in CI): refused before any adapter is asked.
    if Device::open(DeviceChoice::Kind(DeviceKind::Wgpu), DeviceOptions::default()).is_ok() {
        kinds.push(DeviceKind::Wgpu);
    }
    for kind in kinds {
        let err = Device::open(DeviceChoice::Kind(kind), fp8_options()).err().expect("fp8 opened without FP8 cores");
        let text = err.to_string();
        assert!(text.contains("fp8") && text.contains("--precision bf16") && text.contains("8.9"), "{kind}: {text}");
    }
    // `auto` under fp8 means CUDA: where CUDA cannot run, the error says so instead of falling back.
    if let Err(e) = Device::open(DeviceChoice::Kind(DeviceKind::Cuda), DeviceOptions::default()) {
        let err = Device::open(DeviceChoice::Auto, fp8_options()).err().expect("auto fp8 without CUDA");
        assert!(err.to_string().contains("CUDA is not available"), "{err} (CUDA: {e})");
    }
    // Nor can the host hold an FP8 matrix.
    let cast = Device::cpu().cast(&Tensor::from_f32(&[1, 16], vec![1.0; 16]).unwrap(), DType::F8E4M3);
    assert!(cast.unwrap_err().to_string().contains("CUDA"));
}

/// A CUDA device under fp8, or `None` (printed why) where there is none with FP8 tensor cores.
fn cuda_fp8() -> Option<Device> {
    match songloom_tests::gpu_with(DeviceKind::Cuda, Precision::Fp8) {
        Ok(device) => Some(device),
        Err(e) => {
            println!("skipped: {e}");
            None
        }
    }
}

/// Values that probe the encoding: ties between codes, subnormals, the saturating largest value,
/// zeros, negative zero, and normals; rows of different magnitudes.
fn probe_rows(rows: usize, cols: usize) -> Vec<f32> {
    let mut rng = Rng::derive(5, "fp8-test", 0);
    let mut values = rng.normals(rows * cols);
    let specials = [0.0, -0.0, 448.0, -448.0, 1.0625, 1.1875, -3.3, 1.5 / 512.0, 0.5 / 512.0, 1e-8, 2.0];
    for (i, v) in specials.iter().enumerate() {
        values[i] = *v;
    }
    for (r, row) in values.chunks_mut(cols).enumerate() {
        let magnitude = [1.0, 1e-3, 37.0, 1e4][r % 4];
        if r > 0 {
            row.iter_mut().for_each(|v| *v *= magnitude);
        }
    }
    values[cols..2 * cols].fill(0.0); // a row of zeros keeps scale 1
    values
}

#[test]
fn the_gpu_encodes_rows_as_the_host_does_bit_for_bit() {
    let Some(device) = cuda_fp8() else { return };
    for (rows, cols) in [(6, 18), (9, 64), (4, 1000)] {
        let values = probe_rows(rows, cols);
        let padded = cols.next_multiple_of(16);
        let (codes, scales) = quantize_rows(&values, cols, padded);
        let expected = dequantize_rows(&codes, &scales, cols, padded);
        for dtype in [DType::F32, DType::BF16] {
            let source =
                device.cast(&device.upload(Tensor::from_f32(&[rows, cols], values.clone()).unwrap()).unwrap(), dtype);
            let source = source.unwrap();
            let expected = if dtype == DType::F32 {
                expected.clone()
            } else {
                let rounded: Vec<f32> = values.iter().map(|v| DType::BF16.round(*v)).collect();
                let (codes, scales) = quantize_rows(&rounded, cols, padded);
                dequantize_rows(&codes, &scales, cols, padded)
            };
            let fp8 = device.cast(&source, DType::F8E4M3).unwrap();
            assert_eq!(fp8.dtype(), DType::F8E4M3);
            let ours = device.to_host(&fp8).unwrap();
            let differ = ours.iter().zip(&expected).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
            assert_eq!(differ, 0, "{rows}x{cols} from {dtype}: {differ} values differ from the host's encoding");
        }
    }
    // The control: the comparison sees one code off.
    let values = probe_rows(6, 18);
    let (mut codes, scales) = quantize_rows(&values, 18, 32);
    let expected = dequantize_rows(&codes, &scales, 18, 32);
    codes[40] = codes[40].wrapping_add(1);
    let off_by_one = dequantize_rows(&codes, &scales, 18, 32);
    assert_eq!(off_by_one.iter().zip(&expected).filter(|(a, b)| a.to_bits() != b.to_bits()).count(), 1);
    assert_ne!(encode_e4m3(1.0625), encode_e4m3(1.0626));
}

/// Products of FP8 matrices are the f32 products of the values their codes stand for (the tensor
/// cores' accumulation order aside), with and without padding, with the bias, the GLU or neither
/// taken in the pass that scales; a weight with its rows out of order is caught.
#[test]
fn fp8_products_are_the_products_of_their_encoded_values() {
    let Some(device) = cuda_fp8() else { return };
    let bound = Bound { rel: 1e-3 };
    for (m, k, n) in [(3, 18, 20), (37, 64, 48), (130, 256, 512), (1380, 2048, 256)] {
        let mut rng = Rng::derive(6, "fp8-products", (m * k * n) as u64);
        let (x, w, bias) = (rng.normals(m * k), rng.normals(n * k), rng.normals(n));
        let kp = k.next_multiple_of(16);
        let decoded = |values: &[f32], cols: usize, padded: usize| {
            let (codes, scales) = quantize_rows(values, cols, padded);
            dequantize_rows(&codes, &scales, cols, padded)
        };
        let (xq, wq) = (decoded(&x, k, kp), decoded(&w, k, kp));
        let expected: Vec<f32> = (0..m * n)
            .map(|i| {
                let (r, c) = (i / n, i % n);
                let dot: f64 = (0..k).map(|j| xq[r * k + j] as f64 * wq[c * k + j] as f64).sum();
                dot as f32 + bias[c]
            })
            .collect();
        let up = |shape: &[usize], v: &[f32]| device.upload(Tensor::from_f32(shape, v.to_vec()).unwrap()).unwrap();
        let (x_t, bias_t) = (up(&[m, k], &x), up(&[n], &bias));
        let w8 = device.cast(&up(&[n, k], &w), DType::F8E4M3).unwrap();
        let ours = device.linear(&x_t, &w8, Some(&bias_t)).unwrap().to_f32_vec();
        bound.check(&format!("fp8 product {m}x{k} by {n}x{k}"), &ours, &expected);

        // The GLU of the product (its first half the value), fused into the pass that scales.
        let f = n / 2;
        let glu: Vec<f32> = (0..m * f)
            .map(|i| {
                let (r, c) = (i / f, i % f);
                let (value, gate) = (expected[r * n + c], expected[r * n + f + c]);
                gate / (1.0 + (-gate).exp()) * value
            })
            .collect();
        let ours_glu = device.linear_glu(&x_t, &w8, Some(&bias_t)).unwrap().to_f32_vec();
        bound.check(&format!("fp8 GLU of {m}x{k} by {n}x{k}"), &ours_glu, &glu);

        // Three products of one input, encoded once, are the three products.
        let plain = device.linear(&x_t, &w8, None).unwrap().to_f32_vec();
        let three = device.linear3(&x_t, None, [&w8, &w8, &w8]).unwrap();
        for product in three {
            assert_eq!(product.to_f32_vec(), plain, "{m}x{k}x{n}: linear3 differs from linear");
        }

        // The control: the weight's rows rotated by one.
        let rotated: Vec<f32> = w[k..].iter().chain(&w[..k]).copied().collect();
        let wrong = device.linear(&x_t, &device.cast(&up(&[n, k], &rotated), DType::F8E4M3).unwrap(), Some(&bias_t));
        bound.rejects(&format!("fp8 product {m}x{k}x{n} with rows rotated"), &wrong.unwrap().to_f32_vec(), &expected);
        println!("{m}x{k}x{n}: {:?}", distance(&ours, &expected));
    }
}
