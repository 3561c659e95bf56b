//! What the conformance suite does not ask of every op: error messages that name the op, the
//! dtype and the backend; fused kernels that do the composition's arithmetic bit for bit; a
//! shortlisting backend's lists against the host rule; the fast precisions' attention bound.

use songloom_engine::device::{Candidates, Conv1dParams, composed};
use songloom_engine::pipeline::sampling::{depth_shortlist, semantic_shortlist, shortlist};
use songloom_engine::{DType, DeviceKind, Op, Precision, Tensor};
use songloom_tests::conformance::judge::Tolerance;
use songloom_tests::conformance::{Seeds, all_cases, check_outputs, draw_of, logit_rows};
use songloom_tests::devices;

fn noise(n: usize, seed: u64) -> Vec<f32> {
    (0..n as u64).map(|i| songloom_engine::hash::uniform(seed, i)).collect()
}

fn t(shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_f32(shape, noise(shape.iter().product(), seed)).unwrap()
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn bad_shapes_and_dtypes_are_errors_that_name_what_is_wrong() {
    for device in devices() {
        let t = |shape: &[usize], seed: u64| device.upload(t(shape, seed)).unwrap();
        let err = device.linear(&t(&[2, 3], 1), &t(&[4, 5], 2), None).unwrap_err().to_string();
        assert!(err.contains("linear"), "{err}");
        let (x, w) = (t(&[3, 4], 1), t(&[2, 5, 3], 2));
        assert!(Conv1dParams::new(&x, &w, 1, 1).and_then(|p| device.conv1d(&x, &w, None, &p)).is_err());
        // Parameters read from other tensors are refused, not trusted.
        let (x2, w2) = (t(&[5, 4], 1), t(&[2, 5, 3], 2));
        let params = Conv1dParams::new(&x2, &w2, 1, 1).unwrap();
        let err = device.conv1d(&x, &w, None, &params).unwrap_err().to_string();
        assert!(err.contains("conv1d"), "{err}");
        assert!(device.add(&t(&[2, 3], 1), &t(&[3, 2], 2)).is_err());
        let bf = device.cast(&t(&[2, 2], 1), DType::BF16).unwrap();
        let err = device.tanh(&bf).unwrap_err().to_string();
        assert!(err.contains("tanh") && err.contains("bf16") && err.contains(device.kind().name()), "{err}");
        let err = device.embedding(&t(&[4, 3], 1), &[4]).unwrap_err().to_string();
        assert!(err.contains("token id 4") && err.contains("4 rows"), "{err}");
    }
}

/// A tensor of one backend given to another is refused, naming both.
#[test]
fn a_tensor_of_another_backend_is_refused() {
    let all = devices();
    let Some(gpu) = all.iter().find(|d| d.kind() != DeviceKind::Cpu) else {
        println!("skipped: no backend besides the CPU here");
        return;
    };
    let on_gpu = gpu.upload(t(&[2, 2], 1)).unwrap();
    let err = all[0].add(&on_gpu, &on_gpu).unwrap_err().to_string();
    assert!(err.contains("add") && err.contains(gpu.kind().name()) && err.contains("cpu"), "{err}");
}

/// The fused GLU does the composition's arithmetic, so on one device it matches it exactly: f32
/// weights with a bias, `f` a multiple of 4 (fused on a GPU) and not (composed).
#[test]
fn the_fused_glu_is_its_composition_bit_for_bit() {
    for device in devices() {
        for (m, k, two_f) in [(7, 24, 32), (3, 16, 10), (690, 64, 64)] {
            let on = |x: Tensor| device.upload(x).unwrap();
            let (x, w, bias) = (on(t(&[m, k], 40)), on(t(&[two_f, k], 41)), on(t(&[two_f], 42)));
            let fused = device.linear_glu(&x, &w, Some(&bias)).unwrap();
            let composition = composed::linear_glu(&*device, &x, &w, Some(&bias)).unwrap();
            assert!(
                same_bits(&fused.to_f32_vec(), &composition.to_f32_vec()),
                "{} linear_glu {m}x{k}x{two_f}",
                device.kind()
            );
        }
    }
}

/// The DiT's attention with its queries and keys rotated inside the kernels (CUDA's bf16 attention
/// rotates them as they load, or stages the keys rotated once a call) does the rotary pass's
/// arithmetic, so it is the rotary pass and then the attention bit for bit: over query blocks and
/// key tiles that end part-way (150 rows), rotary dims 32 and 64, at position 0 and further on.
/// Rotated one position further, the composition differs, so the check can fail.
#[test]
fn the_rotated_attention_is_its_composition_bit_for_bit() {
    use songloom_engine::device::{AttentionShape, Rotary};
    for kind in [DeviceKind::Cuda, DeviceKind::Wgpu] {
        let device = match songloom_tests::gpu_with(kind, Precision::Bf16) {
            Ok(device) => device,
            Err(e) => {
                println!("{kind} rotated attention skipped: {e}");
                continue;
            }
        };
        let (batch, len, heads, head_dim) = (2, 150, 4, 64);
        let shape = AttentionShape {
            batch,
            q_len: len,
            kv_len: len,
            kv_capacity: len,
            heads,
            kv_heads: heads,
            head_dim,
            causal: false,
        };
        let on = |x: Tensor| device.upload(x).unwrap();
        let [q, k, v] = [50, 51, 52].map(|seed| on(t(&[batch * len, heads * head_dim], seed)));
        for (rotary_dim, first_position) in [(32, 0), (64, 0), (32, 3)] {
            let rotary = Rotary { heads, head_dim, rotary_dim, theta: 10_000.0, first_position, seq_len: len };
            let fused = device.attention_rotated(&q, &k, &v, shape, rotary).unwrap().to_f32_vec();
            let composed_at = |first_position| {
                let r = Rotary { first_position, ..rotary };
                composed::attention_rotated(&*device, &q, &k, &v, shape, r).unwrap().to_f32_vec()
            };
            let what = format!("{kind}: rotary dims {rotary_dim} from position {first_position}");
            assert!(same_bits(&fused, &composed_at(first_position)), "{what}");
            assert!(!same_bits(&fused, &composed_at(first_position + 1)), "{what}: the control matched");
        }
    }
}

/// A float cast on wgpu (made on the device) holds the bits the host's cast gives: f32 and bf16
/// to f32, bf16 and f16, over values that round every way: ties at each format's last place
/// (to even, and above it), f16's subnormals and its overflow, f32's subnormals, signed zeros,
/// the infinities and NaNs with payloads; an odd count, so the last word is half empty.
#[test]
fn a_float_cast_on_wgpu_is_the_hosts_bit_for_bit() {
    use songloom_engine::{CpuStorage, Storage};
    let mut values: Vec<f32> = vec![
        0.0,
        -0.0,
        1.0,
        -1.5,
        65504.0,
        65519.99,
        65520.0,
        -65536.0,
        1e-40,
        -1e-45,
        6.0e-8,
        2.98e-8,
        5.96e-8,
        3.0e-5,
        -6.1e-5,
        f32::MAX,
        f32::MIN_POSITIVE,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xffc1_2345),
    ];
    for base in [1.0f32, 3.0e-6, 1.0e-7, -7.0e4] {
        for k in 0..8u32 {
            values.push(f32::from_bits(base.to_bits() + (k << 12)));
            values.push(f32::from_bits(base.to_bits() + (k << 15)));
        }
    }
    values.extend(noise(301, 60).iter().map(|v| v * 1000.0));
    assert!(values.len() % 2 == 1);
    let Some(device) = devices().into_iter().find(|d| d.kind() == DeviceKind::Wgpu) else {
        println!("skipped: no wgpu adapter here");
        return;
    };
    for from in [DType::F32, DType::BF16] {
        let stored = CpuStorage::F32(values.clone()).to_dtype(from).unwrap();
        let on_host = Tensor::new(&[values.len()], Storage::Cpu(stored.clone())).unwrap();
        let on_device = device.upload(on_host).unwrap();
        for to in [DType::F32, DType::BF16, DType::F16].into_iter().filter(|&to| to != from) {
            let want = Tensor::new(&[values.len()], Storage::Cpu(stored.to_dtype(to).unwrap())).unwrap();
            let got = device.cast(&on_device, to).unwrap();
            assert_eq!(got.dtype(), to);
            let (got, want) = (got.to_f32_vec(), want.to_f32_vec());
            let first_difference = got.iter().zip(&want).position(|(a, b)| a.to_bits() != b.to_bits());
            assert!(
                same_bits(&got, &want),
                "{from} to {to}: value {:?} ({:?}) cast to {:?} on the device, {:?} on the host",
                first_difference.map(|i| values[i]),
                first_difference.map(|i| values[i].to_bits()),
                first_difference.map(|i| got[i]),
                first_difference.map(|i| want[i])
            );
        }
    }
}

/// A backend that sends back a shortened list sends exactly the host rule's list (the suite checks
/// the probabilities), for logit pairs with ties, signed zeros, non-finite values and values below
/// the floor; a GPU backend shortens most of these lists.
#[test]
fn shortened_lists_are_the_host_rule() {
    for device in devices() {
        let mut shortened = 0;
        for (width, code_offset) in [(16_389usize, 5u32), (1024, 1), (300, 2)] {
            let (rows, c) = draw_of(width, code_offset);
            for form in 0..8u64 {
                let (cond, uncond) = logit_rows(&mut Seeds::new(form), width, form);
                let logits = device
                    .upload(Tensor::from_f32(&[2, width], [cond.clone(), uncond.clone()].concat()).unwrap())
                    .unwrap();
                let every = Candidates::every(cond, uncond);
                for rule in [semantic_shortlist(&rows, &c), depth_shortlist(&c)] {
                    let got = device.candidates(&logits, &rule).unwrap();
                    if got.index.len() < width {
                        let host = shortlist(&every, &rule);
                        assert_eq!(got.index, host.index, "{} width {width} form {form}: {rule:?}", device.kind());
                        assert!(same_bits(&got.cond, &host.cond) && same_bits(&got.uncond, &host.uncond));
                        shortened += 1;
                    }
                }
            }
        }
        println!("{}: {shortened} of 48 lists shortened", device.kind());
        if device.kind() != DeviceKind::Cpu {
            assert!(shortened >= 20, "only {shortened} lists were short on {}", device.kind());
        }
    }
}

/// A batch's lists, read back together, are each pair's own list: logit pairs of 8 forms stacked
/// as one `[16, width]` tensor give, pair by pair, what each pair alone gives (the forms differ, so
/// lists taken from the wrong rows do not pass).
#[test]
fn the_lists_of_a_batch_are_each_pair_alone() {
    for device in devices() {
        for (width, code_offset) in [(16_389usize, 5u32), (300, 2)] {
            let (rows, c) = draw_of(width, code_offset);
            let pairs: Vec<Vec<f32>> = (0..8u64)
                .map(|form| {
                    let (cond, uncond) = logit_rows(&mut Seeds::new(form + 10), width, form);
                    [cond, uncond].concat()
                })
                .collect();
            let logits = device.upload(Tensor::from_f32(&[16, width], pairs.concat()).unwrap()).unwrap();
            for rule in [semantic_shortlist(&rows, &c), depth_shortlist(&c)] {
                let each = device.candidates_each(&logits, &rule).unwrap();
                assert_eq!(each.len(), 8);
                for (form, (got, pair)) in each.iter().zip(&pairs).enumerate() {
                    let pair = device.upload(Tensor::from_f32(&[2, width], pair.clone()).unwrap()).unwrap();
                    let alone = device.candidates(&pair, &rule).unwrap();
                    let what = format!("{} width {width} form {form}: {rule:?}", device.kind());
                    assert_eq!(got.index, alone.index, "{what}");
                    assert!(same_bits(&got.cond, &alone.cond) && same_bits(&got.uncond, &alone.uncond), "{what}");
                }
            }
        }
    }
}

/// A backend's draws are the host's, draw for draw: for logit pairs of 8 forms at the depth
/// decoder's width (a shortlist) and at a narrow one (every entry), with uniforms spread over
/// `[0, 1)` and placed just below and above the boundaries between codes (where an ulp's difference
/// in a probability would change the draw). Only a pair whose list cannot stand for its rows (form
/// 4, every guided value below the floor) may come back as -1. The control: the uniforms either
/// side of a boundary draw different codes on the host, so a device whose probabilities were an ulp
/// off, or whose running sum stopped one entry early or late, would fail.
#[test]
fn draws_on_the_device_are_the_hosts() {
    use songloom_engine::pipeline::rng::categorical_at;
    use songloom_engine::pipeline::sampling::depth_probs;
    for device in devices() {
        for width in [1024usize, 32] {
            let (_, c) = draw_of(width, 2);
            let rule = depth_shortlist(&c);
            let pairs: Vec<(Vec<f32>, Vec<f32>)> =
                (0..8u64).map(|form| logit_rows(&mut Seeds::new(form + 20), width, form)).collect();
            let probs: Vec<Vec<f32>> = pairs
                .iter()
                .map(|(cond, uncond)| depth_probs(&Candidates::every(cond.clone(), uncond.clone()), &c))
                .collect();
            // Per pair: spread uniforms, and ones a hair either side of each cumulative boundary.
            let mut trials: Vec<Vec<f64>> = (0..16).map(|j| vec![j as f64 / 16.0 + 0.01; 8]).collect();
            for round in 0..8 {
                trials.push(
                    probs
                        .iter()
                        .map(|p| {
                            let total: f64 = p.iter().map(|&w| w as f64).sum();
                            let mut acc = 0.0;
                            let cut: Vec<f64> = p
                                .iter()
                                .filter(|&&w| w > 0.0)
                                .map(|&w| {
                                    acc += w as f64;
                                    acc / total
                                })
                                .collect();
                            let at = cut[(round / 2) % cut.len()];
                            (if round % 2 == 0 { at * (1.0 - 1e-12) } else { at * (1.0 + 1e-12) })
                                .clamp(0.0, 1.0 - f64::EPSILON)
                        })
                        .collect(),
                );
            }
            let logits: Vec<f32> =
                pairs.iter().flat_map(|(cond, uncond)| [cond.clone(), uncond.clone()].concat()).collect();
            let logits = device.upload(Tensor::from_f32(&[16, width], logits).unwrap()).unwrap();
            for u in &trials {
                let got = device.to_host(&device.draw_each(&logits, &rule, u).unwrap()).unwrap();
                for (form, ((code, p), &u)) in got.iter().zip(&probs).zip(u).enumerate() {
                    let what = format!("{} width {width} form {form} u {u}", device.kind());
                    if *code < 0.0 {
                        assert!(form == 4 && width > 256, "{what}: drawn on the host");
                        continue;
                    }
                    assert_eq!(*code as usize, categorical_at(u, p), "{what}");
                }
            }
            let split = trials[16..]
                .chunks(2)
                .flat_map(|pair| pair[0].iter().zip(&pair[1]).zip(&probs))
                .filter(|((below, above), p)| categorical_at(**below, p) != categorical_at(**above, p))
                .count();
            assert!(split >= 24, "only {split} of 32 boundaries split the host's draws");
        }
    }
}

/// The fast policies' attention at head dim 64 (the DiT's) runs on the tensor cores: in TF32 under
/// `tf32` (inputs rounded to a 10-bit mantissa, about 5e-4 relative, summed over 64 dims and the
/// keys; measured worst on the H200: 1.9e-4, docs/gpu-runs/2026-11-30-18-h200-tests-review.log), in
/// bf16 under `bf16` and `fp8` on CUDA (queries, keys, values and probabilities rounded to an 8-bit
/// mantissa, four times coarser). On wgpu, where the adapter has cooperative matrices, the DiT's (no
/// mask) runs on them in f16, the same 10-bit mantissa; elsewhere wgpu keeps f32 there.
#[test]
fn fast_precision_attention_matches_naive_softmax() {
    for kind in [DeviceKind::Cuda, DeviceKind::Wgpu] {
        for (precision, tol) in [(Precision::Tf32, 4e-3), (Precision::Bf16, 1.6e-2)] {
            let device = match songloom_tests::gpu_with(kind, precision) {
                Ok(device) => device,
                Err(e) => {
                    println!("{kind} {precision} attention skipped: {e}");
                    continue;
                }
            };
            let mut worst = 0.0f32;
            let attention = |c: &songloom_tests::conformance::Case| {
                matches!(c.op, Op::Attention | Op::AttentionRotated) && c.dtype == DType::F32
            };
            for case in all_cases().into_iter().filter(attention) {
                let (got, want) = (case.execute(&device).unwrap(), (case.naive)(&case.inputs));
                let case_worst = check_outputs(&got, &want, Tolerance::Close(tol))
                    .unwrap_or_else(|why| panic!("{kind} {precision} {}: {why}", case.label));
                worst = worst.max(case_worst);
            }
            println!("{kind} {precision} attention: worst |d| / (1 + |want|) {worst:.3e}, tolerance {tol:.0e}");
        }
    }
}

/// A matrix kept in pieces of whole rows (what wgpu does with one larger than a binding, the
/// embedding table on most adapters) gives the products and lookups of the whole matrix bit for
/// bit, in every weight format, through the GEMV, the GEMM and the wide GEMM; any other op refuses
/// it with an error saying why.
#[test]
fn a_wgpu_matrix_in_pieces_computes_what_the_whole_one_does() {
    let Some(songloom_engine::Device::Wgpu(gpu)) = devices().into_iter().find(|d| d.kind() == DeviceKind::Wgpu) else {
        println!("skipped: no wgpu adapter here");
        return;
    };
    let device = songloom_engine::Device::Wgpu(gpu);
    let songloom_engine::Device::Wgpu(backend) = &device else { unreachable!() };
    let (rows, cols) = (70, 64);
    for dtype in [DType::F32, DType::BF16, DType::F16, DType::Q8, DType::Q4] {
        let host = songloom_engine::CpuStorage::F32(noise(rows * cols, 7)).to_dtype(dtype).unwrap();
        let host = Tensor::new(&[rows, cols], songloom_engine::Storage::Cpu(host)).unwrap();
        let whole = device.upload(host.clone()).unwrap();
        // Pieces of 16 rows: four whole ones and a last of 6.
        let pieces = backend.upload_in_pieces(host, 16).unwrap();
        assert!(same_bits(&whole.to_f32_vec(), &pieces.to_f32_vec()), "{dtype}: read back");
        let bias = device.upload(t(&[rows], 9)).unwrap();
        for m in [2, 20, 300] {
            let x = device.upload(t(&[m, cols], m as u64)).unwrap();
            let want = device.linear(&x, &whole, Some(&bias)).unwrap().to_f32_vec();
            let got = device.linear(&x, &pieces, Some(&bias)).unwrap().to_f32_vec();
            assert!(same_bits(&want, &got), "{dtype}: a product of {m} rows");
        }
        // The decode step's fused products read the pieces too (the norm in the GEMV where the
        // weights are floats, before it where they are quantized).
        let x = device.upload(t(&[2, cols], 3)).unwrap();
        let residual = device.upload(t(&[2, rows], 4)).unwrap();
        let want = device.linear_add(&x, &whole, &residual).unwrap().to_f32_vec();
        let got = device.linear_add(&x, &pieces, &residual).unwrap().to_f32_vec();
        assert!(same_bits(&want, &got), "{dtype}: a product with the residual added");
        let gain = device.upload(t(&[cols], 5)).unwrap();
        let norm = Some(songloom_engine::device::RmsNorm { weight: &gain, eps: 1e-6 });
        let want = device.linear3(&x, norm, [&whole, &whole, &whole]).unwrap();
        let got = device.linear3(&x, norm, [&pieces, &pieces, &pieces]).unwrap();
        for (w, g) in want.iter().zip(&got) {
            assert!(same_bits(&w.to_f32_vec(), &g.to_f32_vec()), "{dtype}: q, k and v with the norm");
        }
        let ids = [0u32, 69, 15, 16, 33, 64, 64, 2];
        let want = device.embedding(&whole, &ids).unwrap().to_f32_vec();
        assert!(same_bits(&want, &device.embedding(&pieces, &ids).unwrap().to_f32_vec()), "{dtype}: lookup");
        if dtype == DType::F32 {
            let err = device.tanh(&pieces).unwrap_err();
            assert!(err.to_string().contains("larger than one binding"), "{err}");
        }
    }
    // Past the adapter's own largest binding (lavapipe's is 128 MiB), synthetic weights are made in
    // pieces too, the CPU's values bit for bit.
    let (rows, cols) = (35, 1 << 20);
    let big = device.fill_uniform(&[rows, cols], DType::F32, 5, 0.0, 1.0).unwrap();
    let on_cpu = songloom_tests::cpu().fill_uniform(&[rows, cols], DType::F32, 5, 0.0, 1.0).unwrap();
    assert!(same_bits(&big.to_f32_vec(), &on_cpu.to_f32_vec()), "a synthetic matrix of 147 MB");
    let ids = [0u32, 34, 17];
    let want = songloom_tests::cpu().embedding(&on_cpu, &ids).unwrap().to_f32_vec();
    assert!(same_bits(&device.embedding(&big, &ids).unwrap().to_f32_vec(), &want), "its rows looked up");
}
