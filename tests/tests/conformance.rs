//! The conformance suite on every backend this machine has (see `songloom_tests::conformance`):
//! every `Backend` method, the CPU against naive loops, every other backend against the CPU, with
//! the comparison helpers and the suite's own rules shown to catch what they are there to catch.

use songloom_engine::{DType, Device, DeviceKind, DeviceOptions, Error, Op};
use songloom_tests::conformance::tolerance::{Judge, tolerance};
use songloom_tests::conformance::{
    Case, Verdict, all_cases, backend_methods, check_lifecycle, check_outputs, run_suite, verdict,
};
use songloom_tests::devices_with;

fn sentinel_devices() -> Vec<Device> {
    devices_with(DeviceOptions { sentinel_fill: true, ..DeviceOptions::default() })
}

/// A small case to run where a whole suite is too much.
fn probe_case() -> Case {
    all_cases().into_iter().find(|c| c.op == Op::Add && c.dtype == DType::F32).expect("an add case")
}

#[test]
fn every_backend_method_conforms_on_every_device() {
    let cases = all_cases();
    let methods = backend_methods();
    for device in sentinel_devices() {
        let kind = device.kind();
        let report = run_suite(&device, &cases);
        let (lifecycle, lifecycle_failures) = check_lifecycle(&device, kind, &probe_case());
        for line in report.refused.iter().chain(&report.skipped) {
            println!("skip: {line}");
        }
        let covered: std::collections::BTreeSet<String> =
            report.covered.iter().chain(&lifecycle).map(|m| m.to_string()).collect();
        println!(
            "{kind} ({}): {} cases passed, {} refused as declared, {} skipped; {} of the {} Backend methods covered",
            device.description(),
            report.passed,
            report.refused.len(),
            report.skipped.len(),
            covered.intersection(&methods).count(),
            methods.len()
        );
        for ((op, dtype), (worst, tol)) in &report.worst {
            println!("  {op:<17} {dtype:<4} worst {worst:.2e} (tolerance {tol:?})");
        }
        let failures: Vec<&String> = report.failures.iter().chain(&lifecycle_failures).collect();
        assert!(
            failures.is_empty(),
            "{} failures on {kind}:\n{}",
            failures.len(),
            failures.iter().map(|f| f.as_str()).collect::<Vec<_>>().join("\n")
        );
        let uncovered: Vec<&String> = methods.difference(&covered).collect();
        assert!(uncovered.is_empty(), "Backend methods without a case: {uncovered:?}");
        let accounted = report.passed + report.refused.len() + report.skipped.len();
        assert_eq!(accounted, cases.len(), "cases unaccounted for on {kind}");
        // f32 is the activations' dtype: every backend runs every case on f32 alone.
        let f32_cases = cases.iter().filter(|c| c.f32_only()).count();
        let f32_passed = report.f32_passed;
        assert_eq!(f32_passed, f32_cases, "only {f32_passed} of the {f32_cases} f32 cases ran on {kind}");
    }
}

/// The method list the coverage count is held against is the trait's own.
#[test]
fn the_trait_method_list_is_read_from_the_trait() {
    let methods = backend_methods();
    for name in ["kind", "supports", "linear", "attention_inputs", "candidates", "resample_nearest"] {
        assert!(methods.contains(name), "{name} missing from {methods:?}");
    }
    assert!(methods.len() >= Op::ALL.len() + 6, "{methods:?}");
    for op in Op::ALL {
        assert!(methods.contains(op.name()), "Op::{op:?} names no Backend method");
    }
}

/// Negative controls of the suite as a whole: a case whose expected values are off by a little, or
/// whose op forgets an element, fails on the CPU.
#[test]
fn a_wrong_result_fails_the_suite() {
    let cpu = sentinel_devices().into_iter().find(|d| d.kind() == DeviceKind::Cpu).expect("the CPU");
    let linear = all_cases().into_iter().find(|c| c.op == Op::Linear && c.dtype == DType::BF16).expect("a case");
    let off = Case {
        naive: Box::new(move |i| {
            let mut want = (linear.naive)(i);
            want[0][3] += 1e-3;
            want
        }),
        ..linear
    };
    let report = run_suite(&cpu, std::slice::from_ref(&off));
    assert_eq!(report.failures.len(), 1, "{report:?}");
    assert!(report.failures[0].contains("element 3") && report.failures[0].contains("seed"), "{}", report.failures[0]);

    // An op that leaves its last element unwritten: a fresh sentinel-filled buffer with every
    // element but the last copied in (as a kernel with an off-by-one grid would).
    let add = probe_case();
    let unwritten = Case {
        run: Box::new(|d, t| {
            let sum = d.add(&t[0], &t[1])?;
            let n = sum.elem_count();
            let mut values = d.to_host(&sum)?;
            values[n - 1] = f32::from_bits(songloom_engine::device::SENTINEL_BITS[0]);
            Ok(vec![d.upload(songloom_engine::Tensor::from_f32(sum.shape(), values)?)?])
        }),
        ..add
    };
    let report = run_suite(&cpu, std::slice::from_ref(&unwritten));
    assert!(report.failures.first().is_some_and(|f| f.contains("never written")), "{report:?}");
}

/// The rule a backend's answers are held to: support what it says, refuse the rest with the typed
/// error naming the op, the dtype and itself.
#[test]
fn a_backend_that_misstates_what_it_supports_is_caught() {
    let (op, dtype, kind) = (Op::Tanh, DType::BF16, DeviceKind::Cpu);
    let refusal: Result<(), Error> = Err(Error::Unsupported { op, dtype, backend: kind });
    assert_eq!(verdict(op, dtype, kind, false, &refusal), Verdict::Refused);
    assert!(matches!(verdict(op, dtype, kind, true, &refusal), Verdict::Wrong(_)), "claimed support, refused");
    assert!(matches!(verdict(op, dtype, kind, false, &Ok(())), Verdict::Wrong(_)), "claimed no support, ran");
    let other: Result<(), Error> = Err(Error::Invalid("no".into()));
    assert!(matches!(verdict(op, dtype, kind, false, &other), Verdict::Wrong(_)), "refused untyped");
    let wrong_dtype: Result<(), Error> = Err(Error::Unsupported { op, dtype: DType::F16, backend: kind });
    assert!(matches!(verdict(op, dtype, kind, false, &wrong_dtype), Verdict::Wrong(_)), "named another dtype");
    let wrong_backend: Result<(), Error> = Err(Error::Unsupported { op, dtype, backend: DeviceKind::Cuda });
    assert!(matches!(verdict(op, dtype, kind, false, &wrong_backend), Verdict::Wrong(_)), "named another backend");
    let cannot_hold: Result<(), Error> = Err(Error::Unsupported { op: Op::Upload, dtype, backend: kind });
    assert_eq!(verdict(op, dtype, kind, true, &cannot_hold), Verdict::CannotHold);
}

/// The negative control of the f16 products' bound against the CPU (wgpu's products on the matrix
/// units round the activations to f16): on the deepest f16 product case beyond 8 rows (300 rows,
/// 260 deep, with a bias), the naive product of activations rounded to f16 lies within it (3.1e-3
/// here, as the H200's 3.4e-3 worst), and of activations rounded to bf16 (three mantissa bits
/// coarser, as a program that lost precision on the way would give) does not (1.4e-2).
#[test]
fn the_f16_products_bound_takes_f16_rounding_and_rejects_bf16s() {
    let tol = tolerance(Op::Linear, DType::F16, Judge::Cpu);
    let case = all_cases()
        .into_iter()
        .find(|c| c.op == Op::Linear && c.dtype == DType::F16 && c.label == "300x260 by 130x260 + bias")
        .expect("the f16 case of 300 rows");
    let want = (case.naive)(&case.inputs);
    let with_rounded_activations = |round: fn(f32) -> f32| {
        let mut inputs = case.inputs.clone();
        inputs[0].values.iter_mut().for_each(|v| *v = round(*v));
        (case.naive)(&inputs)
    };
    let f16 = with_rounded_activations(|v| half::f16::from_f32(v).to_f32());
    let worst = check_outputs(&f16, &want, tol).unwrap_or_else(|why| panic!("f16 rounding refused: {why}"));
    let bf16 = with_rounded_activations(|v| half::bf16::from_f32(v).to_f32());
    let refused = check_outputs(&bf16, &want, tol).expect_err("bf16 rounding passed the f16 bound");
    println!("f16 rounding worst {worst:.2e} within {tol:?}; bf16 rounding refused: {refused}");
}
