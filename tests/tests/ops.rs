//! The backend ops against plain reference loops, written once over `&Device` so every backend
//! runs the same cases (GPU backends are compared with these and with the CPU).

use songloom_engine::config::PipelineConstants;
use songloom_engine::device::{AttentionInputs, Candidates, KvSlot, RmsNorm, composed};
use songloom_engine::pipeline::sampling::{
    depth_probs, depth_shortlist, semantic_probs, semantic_shortlist, shortlist,
};
use songloom_engine::{AttentionShape, DType, Device, Rotary, Tensor};

fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn t(shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_f32(shape, noise(shape.iter().product(), seed)).unwrap()
}

fn assert_close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}[{i}]: {g} vs {w}");
    }
}

/// `w` with every value rounded to bf16, kept in f32.
fn rounded_copy(w: &Tensor) -> Tensor {
    let values = w.to_f32_vec().iter().map(|v| DType::BF16.round(*v)).collect();
    Tensor::from_f32(w.shape(), values).unwrap()
}

fn naive_linear(x: &[f32], m: usize, k: usize, w: &[f32], n: usize) -> Vec<f32> {
    let mut y = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            y[i * n + j] = (0..k).map(|p| x[i * k + p] * w[j * k + p]).sum();
        }
    }
    y
}

fn linear_cases(device: &Device) {
    let t = |shape: &[usize], seed: u64| device.upload(t(shape, seed)).unwrap();
    // On a GPU, up to 8 rows against bf16 weights whose rows are a multiple of 8 long take the
    // 4-rows-per-block decode kernel (row counts not a multiple of 4 included), others the general one.
    let shapes = [
        (1, 7, 5),
        (2, 64, 33),
        (1, 128, 7),
        (3, 264, 130),
        (5, 40, 9),
        (8, 256, 257),
        (2, 64, 4100),
        (9, 40, 70),
        (100, 130, 129),
    ];
    for (m, k, n) in shapes {
        let (x, w) = (t(&[m, k], 1), t(&[n, k], 2));
        let want = naive_linear(&x.to_f32_vec(), m, k, &w.to_f32_vec(), n);
        let got = device.linear(&x, &w, None).unwrap().to_f32_vec();
        assert_close(&format!("linear f32 {m}x{k}x{n}"), &got, &want, 1e-5);
        // bf16 weights: the product of the bf16-rounded weights.
        let w16 = device.cast(&w, DType::BF16).unwrap();
        let rounded: Vec<f32> = w.to_f32_vec().iter().map(|v| DType::BF16.round(*v)).collect();
        let want16 = naive_linear(&x.to_f32_vec(), m, k, &rounded, n);
        let got16 = device.linear(&x, &w16, None).unwrap().to_f32_vec();
        // The GPU's bf16 GEMM (more than 8 rows) also rounds the activations to bf16.
        let tol = if device.name() == "cuda" && m > 8 { 3e-2 } else { 1e-5 };
        assert_close(&format!("linear bf16 {m}x{k}x{n}"), &got16, &want16, tol);
        assert_eq!(w16.storage().dtype(), DType::BF16);
    }
}

fn conv_cases(device: &Device) {
    let t = |shape: &[usize], seed: u64| device.upload(t(shape, seed)).unwrap();
    let (c_in, c_out, len) = (5, 4, 23);
    for (k, dilation, padding) in [(1, 1, 0), (3, 1, 1), (7, 3, 9), (7, 9, 27)] {
        let (x, w, b) = (t(&[c_in, len], 3), t(&[c_out, c_in, k], 4), t(&[c_out], 5));
        let got = device.conv1d(&x, &w, Some(&b), padding, dilation).unwrap();
        let t_out = len + 2 * padding - dilation * (k - 1);
        let (xv, wv, bv) = (x.to_f32_vec(), w.to_f32_vec(), b.to_f32_vec());
        let mut want = vec![0.0f32; c_out * t_out];
        for co in 0..c_out {
            for to in 0..t_out {
                let mut acc = bv[co];
                for ci in 0..c_in {
                    for j in 0..k {
                        let src = to as isize + (j * dilation) as isize - padding as isize;
                        if src >= 0 && (src as usize) < len {
                            acc += wv[(co * c_in + ci) * k + j] * xv[ci * len + src as usize];
                        }
                    }
                }
                want[co * t_out + to] = acc;
            }
        }
        assert_eq!(got.shape(), [c_out, t_out]);
        assert_close(&format!("conv1d k{k} d{dilation}"), &got.to_f32_vec(), &want, 1e-5);
        let w16 = device.cast(&w, DType::BF16).unwrap();
        let rounded = device.conv1d(&x, &device.upload(rounded_copy(&w)).unwrap(), Some(&b), padding, dilation);
        let got16 = device.conv1d(&x, &w16, Some(&b), padding, dilation).unwrap();
        assert_close(&format!("conv1d bf16 k{k}"), &got16.to_f32_vec(), &rounded.unwrap().to_f32_vec(), 2e-2);
    }
    for stride in [2usize, 3, 4, 8] {
        let (k, padding) = (2 * stride, stride.div_ceil(2));
        let (x, w, b) = (t(&[c_in, len], 6), t(&[c_in, c_out, k], 7), t(&[c_out], 8));
        let got = device.conv_transpose1d(&x, &w, Some(&b), stride, padding).unwrap();
        let t_out = (len - 1) * stride + k - 2 * padding;
        let (xv, wv, bv) = (x.to_f32_vec(), w.to_f32_vec(), b.to_f32_vec());
        let mut want: Vec<f32> = (0..c_out * t_out).map(|i| bv[i / t_out]).collect();
        for ci in 0..c_in {
            for ti in 0..len {
                for co in 0..c_out {
                    for j in 0..k {
                        let pos = (ti * stride + j) as isize - padding as isize;
                        if pos >= 0 && (pos as usize) < t_out {
                            want[co * t_out + pos as usize] += wv[(ci * c_out + co) * k + j] * xv[ci * len + ti];
                        }
                    }
                }
            }
        }
        assert_close(&format!("conv_transpose1d s{stride}"), &got.to_f32_vec(), &want, 1e-5);
        // bf16 weights (the bf16 precision policy): the rounded weights' result; a GPU rounds the
        // activations to bf16 too, about 4e-3 relative per term.
        let w16 = device.cast(&w, DType::BF16).unwrap();
        let rounded = device.conv_transpose1d(&x, &device.upload(rounded_copy(&w)).unwrap(), Some(&b), stride, padding);
        let got16 = device.conv_transpose1d(&x, &w16, Some(&b), stride, padding).unwrap();
        assert_close(
            &format!("conv_transpose1d bf16 s{stride}"),
            &got16.to_f32_vec(),
            &rounded.unwrap().to_f32_vec(),
            2e-2,
        );
    }
}

fn attention_cases(device: &Device) {
    attention_cases_within(device, 1e-5);
}

/// The cases of [`attention_cases`] against the naive softmax within `tol`.
fn attention_cases_within(device: &Device, tol: f32) {
    let mut worst = 0.0f32;
    let t = |shape: &[usize], seed: u64| device.upload(t(shape, seed)).unwrap();
    // On a GPU: head dim 8 with several queries takes the one-warp-per-query kernel, head dim 64
    // with 64+ queries the tiled one, and a single query (a decode step) the split-key kernel,
    // here over 1 to 35 splits of 32 keys (more than a warp's worth to merge), a partial last
    // split, and 1, 2, 4 and 8 query heads per KV head (the LM's 32/8 among them).
    let cases = [
        (8, 5, 5, 5, false, 4, 2),
        (8, 5, 5, 9, true, 4, 2),
        (8, 1, 7, 9, true, 4, 2),
        (8, 3, 7, 7, true, 4, 2),
        (8, 40, 40, 40, false, 4, 2),
        (8, 40, 45, 50, true, 4, 2),
        (64, 70, 70, 70, false, 4, 2),
        (64, 70, 75, 80, true, 4, 2),
        (64, 130, 130, 130, false, 4, 2),
        (128, 1, 100, 120, true, 8, 2),
        (128, 1, 32, 40, true, 8, 1),
        (12, 1, 65, 70, true, 4, 2),
        (64, 1, 1, 4, true, 4, 4),
        (16, 1, 40, 40, true, 2, 1),
        (128, 1, 1100, 1200, true, 32, 8),
    ];
    for (d, q_len, kv_len, capacity, causal, heads, kv_heads) in cases {
        let batch = 2;
        let q = t(&[batch * q_len, heads * d], 9);
        let k = t(&[batch * capacity, kv_heads * d], 10);
        let v = t(&[batch * capacity, kv_heads * d], 11);
        let shape =
            AttentionShape { batch, q_len, kv_len, kv_capacity: capacity, heads, kv_heads, head_dim: d, causal };
        let got = device.attention(&q, &k, &v, shape).unwrap().to_f32_vec();
        let (qv, kv, vv) = (q.to_f32_vec(), k.to_f32_vec(), v.to_f32_vec());
        let mut want = vec![0.0f32; batch * q_len * heads * d];
        for b in 0..batch {
            for h in 0..heads {
                let g = h / (heads / kv_heads);
                for i in 0..q_len {
                    let visible = if causal { kv_len - q_len + i + 1 } else { kv_len };
                    let scores: Vec<f32> = (0..visible)
                        .map(|j| {
                            (0..d)
                                .map(|x| {
                                    qv[(b * q_len + i) * heads * d + h * d + x]
                                        * kv[(b * capacity + j) * kv_heads * d + g * d + x]
                                })
                                .sum::<f32>()
                                / (d as f32).sqrt()
                        })
                        .collect();
                    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let e: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
                    let sum: f32 = e.iter().sum();
                    for x in 0..d {
                        want[(b * q_len + i) * heads * d + h * d + x] =
                            (0..visible).map(|j| e[j] / sum * vv[(b * capacity + j) * kv_heads * d + g * d + x]).sum();
                    }
                }
            }
        }
        worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs() / (1.0 + w.abs())).fold(worst, f32::max);
        assert_close(
            &format!("attention d{d} q{q_len} kv{kv_len} causal={causal} heads {heads}/{kv_heads}"),
            &got,
            &want,
            tol,
        );
    }
    println!("{} attention: worst |d| / (1 + |want|) {worst:.3e}, tolerance {tol:.0e}", device.name());
}

fn norm_and_rope_cases(device: &Device) {
    let t = |shape: &[usize], seed: u64| device.upload(t(shape, seed)).unwrap();
    let x = t(&[3, 16], 12);
    let (w, b) = (t(&[16], 13), t(&[16], 14));
    let xv = x.to_f32_vec();
    let rms = device.rms_norm(&x, &w, 1e-6).unwrap().to_f32_vec();
    let ln = device.layer_norm(&x, &w, &b, 1e-5).unwrap().to_f32_vec();
    let (wv, bv) = (w.to_f32_vec(), b.to_f32_vec());
    for r in 0..3 {
        let row = &xv[r * 16..(r + 1) * 16];
        let ms = row.iter().map(|v| v * v).sum::<f32>() / 16.0;
        let mean = row.iter().sum::<f32>() / 16.0;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / 16.0;
        for c in 0..16 {
            let want_rms = row[c] / (ms + 1e-6).sqrt() * wv[c];
            let want_ln = (row[c] - mean) / (var + 1e-5).sqrt() * wv[c] + bv[c];
            assert!((rms[r * 16 + c] - want_rms).abs() < 1e-5);
            assert!((ln[r * 16 + c] - want_ln).abs() < 1e-5);
        }
    }
    // RMSNorm at the model's widths with bf16 weights (on a GPU: the register-resident kernel with a
    // block sized to the row), and at a width that is not a multiple of 4 (the general kernel).
    for (rows, dim) in [(2, 4096), (64, 128), (3, 16384), (2, 130)] {
        let x = t(&[rows, dim], 16);
        let w = device.cast(&t(&[dim], 17), DType::BF16).unwrap();
        let got = device.rms_norm(&x, &w, 1e-6).unwrap().to_f32_vec();
        let (xv, wv) = (x.to_f32_vec(), w.to_f32_vec());
        let want: Vec<f32> = xv
            .chunks(dim)
            .flat_map(|row| {
                let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f32>() / dim as f32 + 1e-6).sqrt();
                row.iter().zip(&wv).map(move |(v, g)| v * inv * g).collect::<Vec<_>>()
            })
            .collect();
        assert_close(&format!("rms_norm {rows}x{dim}"), &got, &want, 1e-5);
    }
    // Partial rotary: the leading 4 of 8 dims rotate (rotate-half), the rest pass through.
    let x = t(&[3, 16], 15);
    let r = Rotary { heads: 2, head_dim: 8, rotary_dim: 4, theta: 10000.0, first_position: 5, seq_len: 3 };
    let got = device.rope(&x, r).unwrap().to_f32_vec();
    let xv = x.to_f32_vec();
    for row in 0..3 {
        let pos = (5 + row) as f32;
        for h in 0..2 {
            let base = row * 16 + h * 8;
            for i in 0..2 {
                let f = pos / 10000f32.powf(2.0 * i as f32 / 4.0);
                let (a, bb) = (xv[base + i], xv[base + i + 2]);
                assert!((got[base + i] - (a * f.cos() - bb * f.sin())).abs() < 1e-5);
                assert!((got[base + i + 2] - (bb * f.cos() + a * f.sin())).abs() < 1e-5);
            }
            assert_eq!(&got[base + 4..base + 8], &xv[base + 4..base + 8]);
        }
    }
}

fn elementwise_cases(device: &Device) {
    let t = |shape: &[usize], seed: u64| device.upload(t(shape, seed)).unwrap();
    let (x, y) = (t(&[4, 6], 16), t(&[4, 6], 17));
    let (xv, yv) = (x.to_f32_vec(), y.to_f32_vec());
    let silu = |v: f32| v / (1.0 + (-v).exp());
    assert_close(
        "silu_mul",
        &device.silu_mul(&x, &y).unwrap().to_f32_vec(),
        &xv.iter().zip(&yv).map(|(a, b)| silu(*a) * b).collect::<Vec<_>>(),
        1e-6,
    );
    assert_close(
        "tanh",
        &device.tanh(&x).unwrap().to_f32_vec(),
        &xv.iter().map(|v| v.tanh()).collect::<Vec<_>>(),
        1e-6,
    );
    let alpha = t(&[4], 18);
    let av = alpha.to_f32_vec();
    let snake: Vec<f32> = xv
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let a = av[i / 6];
            v + (a * v).sin().powi(2) / (a + 1e-9)
        })
        .collect();
    assert_close("snake", &device.snake(&x, &alpha).unwrap().to_f32_vec(), &snake, 1e-5);
    let sm = device.softmax_rows(&x).unwrap().to_f32_vec();
    for r in 0..4 {
        assert!((sm[r * 6..(r + 1) * 6].iter().sum::<f32>() - 1.0).abs() < 1e-6);
    }
    // Nearest resampling with torch's f32 index rule, up and down.
    let sig = device.upload(Tensor::from_f32(&[1, 5], vec![0.0, 1.0, 2.0, 3.0, 4.0]).unwrap()).unwrap();
    assert_eq!(
        device.resample_nearest(&sig, 17).unwrap().to_f32_vec(),
        vec![0., 0., 0., 0., 1., 1., 1., 2., 2., 2., 2., 3., 3., 3., 4., 4., 4.]
    );
    assert_eq!(device.resample_nearest(&sig, 2).unwrap().to_f32_vec(), vec![0.0, 2.0]);
    assert_eq!(device.resample_nearest(&sig, 10).unwrap().to_f32_vec(), vec![0., 0., 1., 1., 2., 2., 3., 3., 4., 4.]);
}

fn shape_errors_are_errors(device: &Device) {
    let t = |shape: &[usize], seed: u64| device.upload(t(shape, seed)).unwrap();
    let err = device.linear(&t(&[2, 3], 1), &t(&[4, 5], 2), None).unwrap_err().to_string();
    assert!(err.contains("linear"), "{err}");
    assert!(device.conv1d(&t(&[3, 4], 1), &t(&[2, 5, 3], 2), None, 1, 1).is_err());
    assert!(device.add(&t(&[2, 3], 1), &t(&[3, 2], 2)).is_err());
    let bf = device.cast(&t(&[2, 2], 1), DType::BF16).unwrap();
    let err = device.tanh(&bf).unwrap_err().to_string();
    assert!(err.contains("tanh") && err.contains("bf16") && err.contains(device.name()), "{err}");
}

/// Every backend this machine has: the CPU always, GPUs where present.
/// The fused ops (a GPU's decode kernels, the CPU's compositions) against the basic ops on the
/// CPU, at decode shapes (1 to 8 rows, bf16 weights) and at a shape the fused kernels leave to
/// the composition (10 rows).
fn fused_cases(device: &Device) {
    let cpu = Device::Cpu(Default::default());
    let on = |d: &Device, x: &Tensor| d.upload(x.clone()).unwrap();
    // The DiT's GLU: f32 weights, a bias, f a multiple of 4 (fused on a GPU) and not (composed);
    // the fused kernel does the composition's arithmetic, so it matches it on the same device
    // exactly.
    for (m, k, two_f) in [(7, 24, 32), (3, 16, 10), (690, 64, 64)] {
        let (x, w, bias) = (on(device, &t(&[m, k], 40)), on(device, &t(&[two_f, k], 41)), on(device, &t(&[two_f], 42)));
        let got = device.linear_glu(&x, &w, Some(&bias)).unwrap();
        let composed = composed::linear_glu(&**device, &x, &w, Some(&bias)).unwrap();
        assert_eq!(got.shape(), [m, two_f / 2]);
        assert!(same_bits(&got.to_f32_vec(), &composed.to_f32_vec()), "linear_glu {m}x{k}x{two_f}");
        let (xs, ws, bs) = (x.to_f32_vec(), w.to_f32_vec(), bias.to_f32_vec());
        let h = |r: usize, c: usize| bs[c] + (0..k).map(|i| xs[r * k + i] * ws[c * k + i]).sum::<f32>();
        let f = two_f / 2;
        let want: Vec<f32> = (0..m * f)
            .map(|i| (i / f, i % f))
            .map(|(r, c)| h(r, f + c) / (1.0 + (-h(r, f + c)).exp()) * h(r, c))
            .collect();
        assert_close(&format!("linear_glu {m}x{k}x{two_f}"), &got.to_f32_vec(), &want, 1e-4);
    }
    let bf16 = |shape: &[usize], seed: u64| cpu.cast(&t(shape, seed), DType::BF16).unwrap();
    for (m, k, n) in [(1, 64, 33), (2, 256, 130), (8, 128, 4), (10, 64, 9)] {
        let (x, residual) = (t(&[m, k], 20), t(&[m, n], 21));
        let (w, gate, up) = (bf16(&[n, k], 22), bf16(&[n, k], 23), bf16(&[n, k], 24));
        let (w1, w2) = (bf16(&[n + 3, k], 25), bf16(&[2 * n, k], 26));
        let (dx, dres) = (on(device, &x), on(device, &residual));
        let (dw, dgate, dup, dw1, dw2) =
            (on(device, &w), on(device, &gate), on(device, &up), on(device, &w1), on(device, &w2));

        let want = cpu.add(&residual, &cpu.linear(&x, &w, None).unwrap()).unwrap().to_f32_vec();
        // More than 8 rows take the GPU's bf16 GEMM, which rounds the activations to bf16 too.
        let tol = if device.name() == "cuda" && m > 8 { 3e-2 } else { 1e-5 };
        let got = device.linear_add(&dx, &dw, &dres).unwrap().to_f32_vec();
        assert_close(&format!("linear_add {m}x{k}x{n}"), &got, &want, tol);

        // Without a norm, with a bf16 norm (fused on a GPU) and with an f32 one (composed).
        let (norm16, norm32) = (bf16(&[k], 29), t(&[k], 30));
        let (dnorm16, dnorm32) = (on(device, &norm16), on(device, &norm32));
        let norms = [
            (None, None, "no norm"),
            (Some(&norm16), Some(&dnorm16), "bf16 norm"),
            (Some(&norm32), Some(&dnorm32), "f32 norm"),
        ];
        for (host_norm, device_norm, label) in norms {
            let h = match host_norm {
                Some(g) => cpu.rms_norm(&x, g, 1e-6).unwrap(),
                None => x.clone(),
            };
            let norm = device_norm.map(|weight| RmsNorm { weight, eps: 1e-6 });
            let want = cpu
                .silu_mul(&cpu.linear(&h, &gate, None).unwrap(), &cpu.linear(&h, &up, None).unwrap())
                .unwrap()
                .to_f32_vec();
            let got = device.linear_swiglu(&dx, norm, &dgate, &dup).unwrap().to_f32_vec();
            assert_close(&format!("linear_swiglu {m}x{k}x{n} {label}"), &got, &want, tol);

            let got = device.linear3(&dx, norm, [&dw, &dw1, &dw2]).unwrap();
            for (g, weight) in got.iter().zip([&w, &w1, &w2]) {
                let want = cpu.linear(&h, weight, None).unwrap();
                assert_eq!(g.shape(), want.shape());
                assert_close(&format!("linear3 {m}x{k}x{n} {label}"), &g.to_f32_vec(), &want.to_f32_vec(), tol);
            }
        }
    }
    // A KV cache append: rows [3, 5) of each of 2 batch entries in a capacity of 6, keys and values.
    let (k, v) = (t(&[4, 8], 31), t(&[4, 8], 32));
    let (mut keys, mut values) = (on(device, &t(&[12, 8], 33)), on(device, &t(&[12, 8], 34)));
    let (before_k, before_v) = (keys.to_f32_vec(), values.to_f32_vec());
    device.write_kv(&mut keys, &on(device, &k), &mut values, &on(device, &v), 2, 3).unwrap();
    for (got, before, src) in [(keys, before_k, k), (values, before_v, v)] {
        let (got, src) = (got.to_f32_vec(), src.to_f32_vec());
        for row in 0..12 {
            let (b, j) = (row / 6, row % 6);
            let want = if (3..5).contains(&j) {
                &src[(b * 2 + j - 3) * 8..(b * 2 + j - 2) * 8]
            } else {
                &before[row * 8..(row + 1) * 8]
            };
            assert_eq!(&got[row * 8..(row + 1) * 8], want, "cache row {row}");
        }
    }
    // One layer's attention inputs: queries and keys normed and rotated, keys and values appended
    // (fused on a GPU at head dim 128, composed at 64), against the composition on the CPU.
    for head_dim in [128, 64] {
        let (batch, n, heads, kv_heads, capacity, row) = (2, 2, 4, 2, 6, 3);
        let (q, k, v) = (
            t(&[batch * n, heads * head_dim], 35),
            t(&[batch * n, kv_heads * head_dim], 36),
            t(&[batch * n, kv_heads * head_dim], 37),
        );
        let (q_norm, k_norm) = (bf16(&[head_dim], 38), bf16(&[head_dim], 39));
        let (keys0, values0) =
            (t(&[batch * capacity, kv_heads * head_dim], 40), t(&[batch * capacity, kv_heads * head_dim], 41));
        let rotary = Rotary { heads: 0, head_dim, rotary_dim: head_dim, theta: 1e6, first_position: row, seq_len: n };
        let run = |d: &Device| {
            let (mut keys, mut values) = (on(d, &keys0), on(d, &values0));
            let inputs = AttentionInputs {
                q: on(d, &q),
                k: on(d, &k),
                v: &on(d, &v),
                q_norm: &on(d, &q_norm),
                k_norm: &on(d, &k_norm),
                eps: 1e-6,
                rotary,
            };
            let slot = KvSlot { keys: &mut keys, values: &mut values, batch, row };
            let q = d.attention_inputs(inputs, slot).unwrap();
            (q.to_f32_vec(), keys.to_f32_vec(), values.to_f32_vec())
        };
        let (want, got) = (run(&cpu), run(device));
        assert_close(&format!("attention_inputs q d{head_dim}"), &got.0, &want.0, 1e-5);
        assert_close(&format!("attention_inputs keys d{head_dim}"), &got.1, &want.1, 1e-5);
        assert_eq!(got.2, want.2, "values appended as they are");
    }
    // Qwen3's query/key path as `attention_inputs` composes it where it does not fuse, at head
    // dims 128 and 64.
    for (rows, heads, head_dim) in [(2, 4, 128), (6, 2, 128), (3, 2, 64)] {
        let x = t(&[rows, heads * head_dim], 27);
        let w = bf16(&[head_dim], 28);
        let r = Rotary { heads, head_dim, rotary_dim: head_dim, theta: 1e6, first_position: 301, seq_len: rows / 2 };
        let want = cpu
            .rope(
                &cpu.rms_norm(&x.clone().reshape(&[rows * heads, head_dim]).unwrap(), &w, 1e-6)
                    .unwrap()
                    .reshape(&[rows, heads * head_dim])
                    .unwrap(),
                r,
            )
            .unwrap();
        let got = composed::head_norm_rope(&**device, on(device, &x), &on(device, &w), 1e-6, r).unwrap();
        assert_close(&format!("head_norm_rope {rows}x{heads}x{head_dim}"), &got.to_f32_vec(), &want.to_f32_vec(), 1e-5);
    }
}

/// A logit pair `width` wide in one of several awkward forms: plain, ties, signed zeros, non-finite
/// values, everything below the -1e9 floor, all equal.
fn logit_pair(width: usize, form: u64) -> (Vec<f32>, Vec<f32>) {
    let mut cond: Vec<f32> = noise(width, 40 + form).iter().map(|v| v * 8.0).collect();
    let mut uncond: Vec<f32> = noise(width, 90 + form).iter().map(|v| v * 8.0).collect();
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

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// A backend's shortlist of a logit pair gives the draw's probabilities of every entry, bit for bit,
/// and on a backend that shortlists it is the host rule's list whenever that list is short.
fn shortlist_cases(device: &Device) {
    let mut shortened = 0;
    for (width, code_offset) in [(16_389usize, 5u32), (1024, 1), (300, 2)] {
        let rows = 100..100 + width as u32;
        let c = PipelineConstants {
            audio_end_id: 100,
            code_offset: 100 + code_offset,
            semantic_vocab_size: width as u32 - code_offset - 3,
            ..Default::default()
        };
        for form in 0..8 {
            let (cond, uncond) = logit_pair(width, form);
            let pair = Tensor::from_f32(&[2, width], [cond.clone(), uncond.clone()].concat()).unwrap();
            let logits = device.upload(pair).unwrap();
            let every = Candidates::every(cond, uncond);
            let what = format!("{} shortlist, width {width}, form {form}", device.name());
            let semantic = device.candidates(&logits, &semantic_shortlist(&rows, &c)).unwrap();
            let want = semantic_probs(&every, rows.clone(), &c);
            assert!(same_bits(&semantic_probs(&semantic, rows.clone(), &c), &want), "{what}: semantic");
            let depth = device.candidates(&logits, &depth_shortlist(&c)).unwrap();
            assert!(same_bits(&depth_probs(&depth, &c), &depth_probs(&every, &c)), "{what}: depth");
            if device.name() == "cuda" {
                for (got, rule) in [(&semantic, semantic_shortlist(&rows, &c)), (&depth, depth_shortlist(&c))] {
                    let host = shortlist(&every, &rule);
                    if host.index.len() <= 256 && host.index.len() < width {
                        assert_eq!(got.index, host.index, "{what}: {rule:?}");
                        assert!(same_bits(&got.cond, &host.cond) && same_bits(&got.uncond, &host.uncond), "{what}");
                        shortened += 1;
                    }
                }
            }
        }
    }
    if device.name() == "cuda" {
        assert!(shortened >= 20, "only {shortened} lists were short");
    }
}

fn backends() -> Vec<Device> {
    songloom_tests::devices()
}

#[test]
fn linear_matches_naive_product() {
    backends().iter().for_each(linear_cases);
}

#[test]
fn convolutions_match_naive_loops() {
    backends().iter().for_each(conv_cases);
}

#[test]
fn attention_matches_naive_softmax() {
    backends().iter().for_each(attention_cases);
}

#[test]
fn norms_and_rotary_match_formulas() {
    backends().iter().for_each(norm_and_rope_cases);
}

#[test]
fn elementwise_ops_match_formulas() {
    backends().iter().for_each(elementwise_cases);
}

#[test]
fn bad_shapes_and_dtypes_are_errors() {
    backends().iter().for_each(shape_errors_are_errors);
}

#[test]
fn fused_ops_match_their_compositions() {
    backends().iter().for_each(fused_cases);
}

#[test]
fn shortlists_keep_the_draws_exact() {
    backends().iter().for_each(shortlist_cases);
}

/// The fast policies' attention at head dim 64 (the DiT's) runs on the tensor cores in TF32: inputs
/// rounded to a 10-bit mantissa, about 5e-4 relative, summed over 64 dims and the keys. Measured
/// worst on the H200: 1.9e-4 (docs/gpu-runs/2026-11-30-18-h200-tests-review.log).
#[test]
fn fast_precision_attention_matches_naive_softmax() {
    match Device::cuda(songloom_engine::device::F32Math::Tf32) {
        Ok(device) => attention_cases_within(&device, 4e-3),
        Err(e) => println!("tf32 attention skipped: {e}"),
    }
}
