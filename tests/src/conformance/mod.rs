//! The conformance suite, in the shape of ggml's `test-backend-ops`: every method of the engine's
//! `Backend` trait, on every backend this machine has, written once.
//!
//! A [`Case`] names its op, the dtype under test, its shapes and its seed, and holds fresh random
//! inputs. The CPU is judged against naive loops; every other backend against the CPU on the same
//! inputs, within the tolerance of [`tolerance::tolerance`] for the (op, dtype). Backends are
//! opened with a sentinel fill, so an element an op never writes fails; non-finite inputs check
//! that NaN and infinity propagate as the formula says. A (op, dtype) a backend says it does not
//! support must be refused with a typed error naming the op, the dtype and the backend, and is
//! printed as a skip. A new backend joins by being listed in `DeviceKind::ALL`; a new dtype (a
//! quantized weight format) by being added to [`WEIGHT_DTYPES`] and the tolerance table.

mod cases;
pub mod judge;
pub mod tolerance;

use std::collections::BTreeSet;

use songloom_engine::device::ThreadPriority;
use songloom_engine::quant::{self, QuantData};
use songloom_engine::{CpuStorage, DType, Device, DeviceKind, Error, Op, Precision, Storage, Tensor};

use self::judge::compare;
use self::tolerance::{Judge, tolerance};

pub use self::cases::{all_cases, draw_of, logit_rows};

/// Every dtype a case can put under test: the weight formats, quantized ones included, for the ops
/// that take weights (where a shape allows whole groups of [`GROUP`](songloom_engine::quant::GROUP)).
pub const WEIGHT_DTYPES: [DType; 5] = [DType::F32, DType::BF16, DType::F16, DType::Q8, DType::Q4];

/// The dtypes an activation could come in: f32, and the others every backend must refuse.
pub const FLOAT_DTYPES: [DType; 3] = [DType::F32, DType::BF16, DType::F16];

/// Whether a tensor of `len` values can be held in `dtype` (quantized formats take whole groups).
pub fn fits(dtype: DType, len: usize) -> bool {
    !dtype.is_quantized() || len.is_multiple_of(songloom_engine::quant::GROUP)
}

/// A host tensor a case starts from, its values exactly representable in its dtype.
#[derive(Debug, Clone)]
pub struct Input {
    pub shape: Vec<usize>,
    pub dtype: DType,
    /// What the tensor holds, as f32 (dequantized, for a quantized format).
    pub values: Vec<f32>,
    /// The quantized data, for a quantized format.
    pub quant: Option<QuantData>,
}

impl Input {
    /// Uniform values in [-1, 1) from `seed`, rounded to `dtype`.
    pub fn random(shape: &[usize], dtype: DType, seed: u64) -> Self {
        let n = shape.iter().product::<usize>() as u64;
        Self::new(shape, dtype, (0..n).map(|i| songloom_engine::hash::uniform(seed, i)).collect())
    }

    /// `values` rounded to `dtype` (quantized, for a quantized format: the case's shape must
    /// allow it, [`fits`]).
    pub fn new(shape: &[usize], dtype: DType, values: Vec<f32>) -> Self {
        assert_eq!(values.len(), shape.iter().product::<usize>(), "values for {shape:?}");
        let (values, quant) = if dtype.is_quantized() {
            let q = quant::quantize(&values, dtype).unwrap_or_else(|e| panic!("a case's {dtype} input: {e}"));
            (quant::dequantize(&q), Some(q))
        } else {
            (values.into_iter().map(|v| dtype.round(v)).collect(), None)
        };
        Input { shape: shape.to_vec(), dtype, values, quant }
    }

    /// The same input with `value` at the given positions (NaN, an infinity, a sentinel).
    pub fn with(mut self, value: f32, at: &[usize]) -> Self {
        assert!(self.quant.is_none(), "non-finite values go into activations, not quantized weights");
        for &i in at {
            self.values[i] = self.dtype.round(value);
        }
        self
    }

    /// The input as a host tensor in its dtype.
    pub fn tensor(&self) -> Tensor {
        let storage = match &self.quant {
            Some(q) => CpuStorage::Quant(q.clone()),
            None => CpuStorage::F32(self.values.clone()).to_dtype(self.dtype).expect("a float dtype"),
        };
        Tensor::new(&self.shape, Storage::Cpu(storage)).expect("shape and values agree")
    }
}

/// The random inputs of one case, each from its own stream of the case's seed.
pub struct Seeds {
    seed: u64,
    next: u64,
}

impl Seeds {
    pub fn new(seed: u64) -> Self {
        Seeds { seed, next: 0 }
    }

    /// Uniform values in [-1, 1) rounded to `dtype`, from the next stream.
    pub fn random(&mut self, shape: &[usize], dtype: DType) -> Input {
        self.next += 1;
        Input::random(shape, dtype, self.seed ^ songloom_engine::hash::mix64(self.next))
    }
}

/// What a case gives back: each output's values, read back as f32.
pub type Outputs = Vec<Vec<f32>>;

type Run = Box<dyn Fn(&Device, Vec<Tensor>) -> songloom_engine::Result<Vec<Tensor>> + Send + Sync>;
type Naive = Box<dyn Fn(&[Input]) -> Outputs + Send + Sync>;

/// One call of a backend method on fixed inputs, with the naive loops that say what it must give.
pub struct Case {
    pub op: Op,
    /// The dtype under test ([`Op::operand`] says of which operand).
    pub dtype: DType,
    /// The shapes and options, for the failure message.
    pub label: String,
    pub seed: u64,
    pub inputs: Vec<Input>,
    /// Runs the op on a device, given the inputs there (or on the host, for [`Op::Upload`]).
    pub run: Run,
    pub naive: Naive,
}

impl Case {
    /// A case whose inputs `inputs` makes from the case's seed (a hash of its op, dtype and label).
    pub fn new(
        op: Op,
        dtype: DType,
        label: impl Into<String>,
        inputs: impl FnOnce(&mut Seeds) -> Vec<Input>,
        run: impl Fn(&Device, Vec<Tensor>) -> songloom_engine::Result<Vec<Tensor>> + Send + Sync + 'static,
        naive: impl Fn(&[Input]) -> Outputs + Send + Sync + 'static,
    ) -> Self {
        let label = label.into();
        let seed = songloom_engine::hash::fnv1a(format!("{op} {dtype} {label}").into_bytes());
        let inputs = inputs(&mut Seeds::new(seed));
        Case { op, dtype, label, seed, inputs, run: Box::new(run), naive: Box::new(naive) }
    }

    /// Whether the case is on f32 alone (its dtype and every input's), which every backend runs.
    pub fn f32_only(&self) -> bool {
        self.dtype == DType::F32 && self.inputs.iter().all(|i| i.dtype == DType::F32)
    }

    fn describe(&self, device: DeviceKind) -> String {
        format!("{device} {} {} [{}] (seed {:#x})", self.op, self.dtype, self.label, self.seed)
    }

    /// The case's inputs on `device` (kept on the host for an upload case), and its outputs read back.
    pub fn execute(&self, device: &Device) -> songloom_engine::Result<Outputs> {
        let tensors = self
            .inputs
            .iter()
            .map(|input| if self.op == Op::Upload { Ok(input.tensor()) } else { device.upload(input.tensor()) })
            .collect::<songloom_engine::Result<Vec<_>>>()?;
        let outputs = (self.run)(device, tensors)?;
        outputs.iter().map(|t| device.to_host(t)).collect()
    }
}

/// What one device made of the suite.
#[derive(Debug, Default)]
pub struct Report {
    pub passed: usize,
    /// Cases the device refused as it says it would (op and dtype not supported).
    pub refused: Vec<String>,
    /// Cases whose inputs the device cannot hold in their dtype.
    pub skipped: Vec<String>,
    pub failures: Vec<String>,
    /// The `Backend` methods the cases called.
    pub covered: BTreeSet<&'static str>,
    /// How many cases on f32 alone passed (every backend must run all of them).
    pub f32_passed: usize,
    /// The worst `|got - want| / (1 + |want|)` of each (op, dtype) that ran, against its tolerance.
    pub worst: std::collections::BTreeMap<(&'static str, String), (f32, judge::Tolerance)>,
}

/// How a device answered a case it may or may not support.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// It ran, as it said it would: compare the outputs.
    Ran,
    /// It refused with the typed error, as it said it would.
    Refused,
    /// It could not hold an input's dtype.
    CannotHold,
    Wrong(String),
}

/// Whether `result` is what a backend that `supported` the case should answer.
pub fn verdict<T>(
    case_op: Op,
    case_dtype: DType,
    device: DeviceKind,
    supported: bool,
    result: &Result<T, Error>,
) -> Verdict {
    match (supported, result) {
        (_, Err(Error::Unsupported { op: Op::Upload, backend, .. })) if case_op != Op::Upload && *backend == device => {
            Verdict::CannotHold
        }
        (true, Ok(_)) => Verdict::Ran,
        (true, Err(e)) => Verdict::Wrong(format!("failed: {e}")),
        // A fused op composed of basic ones may be refused by the basic op it is made of.
        (false, Err(Error::Unsupported { dtype, backend, .. })) if *dtype == case_dtype && *backend == device => {
            Verdict::Refused
        }
        (false, Err(e)) => {
            Verdict::Wrong(format!("says it does not support this, but refused with another error: {e}"))
        }
        (false, Ok(_)) => Verdict::Wrong("says it does not support this, yet ran it".into()),
    }
}

/// Runs every case on `device`; the CPU judges every other backend.
pub fn run_suite(device: &Device, cases: &[Case]) -> Report {
    let cpu = Device::open(
        songloom_engine::DeviceChoice::Kind(DeviceKind::Cpu),
        songloom_engine::DeviceOptions { sentinel_fill: true, ..Default::default() },
    )
    .expect("the CPU is always there");
    let mut report = Report::default();
    for case in cases {
        report.covered.insert(case.op.name());
        let what = case.describe(device.kind());
        let result = case.execute(device);
        let outputs = match verdict(case.op, case.dtype, device.kind(), device.supports(case.op, case.dtype), &result) {
            Verdict::Ran => result.expect("ran"),
            Verdict::Refused => {
                report.refused.push(format!("{what}: not supported"));
                continue;
            }
            Verdict::CannotHold => {
                report.skipped.push(format!("{what}: the inputs' dtype cannot be held"));
                continue;
            }
            Verdict::Wrong(why) => {
                report.failures.push(format!("{what}: {why}"));
                continue;
            }
        };
        // The CPU judges the other backends where it runs the case; the naive loops judge the rest.
        let judged_by_cpu = device.kind() != DeviceKind::Cpu && cpu.supports(case.op, case.dtype);
        let (judge, want) = if judged_by_cpu {
            match case.execute(&cpu) {
                Ok(want) => (Judge::Cpu, want),
                Err(e) => {
                    report.failures.push(format!("{what}: the CPU, judging, failed: {e}"));
                    continue;
                }
            }
        } else {
            (Judge::Naive, (case.naive)(&case.inputs))
        };
        let tol = tolerance(case.op, case.dtype, judge);
        match check_outputs(&outputs, &want, tol) {
            Ok(worst) => {
                report.passed += 1;
                report.f32_passed += case.f32_only() as usize;
                let entry = report.worst.entry((case.op.name(), case.dtype.to_string())).or_insert((0.0, tol));
                entry.0 = entry.0.max(worst);
            }
            Err(why) => report.failures.push(format!("{what}, against {judge:?}: {why}")),
        }
    }
    report
}

/// Every output against its expected values; the worst error of them all.
pub fn check_outputs(got: &Outputs, want: &Outputs, tol: judge::Tolerance) -> Result<f32, String> {
    if got.len() != want.len() {
        return Err(format!("{} outputs, expected {}", got.len(), want.len()));
    }
    let mut worst = 0.0f32;
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        worst = worst.max(compare(g, w, tol).map_err(|m| format!("output {k}: {m}"))?);
    }
    Ok(worst)
}

/// A step recorded where the device records (and run op by op elsewhere) and replayed on fresh
/// inputs computes what the step computes op by op, bit for bit.
fn check_recorded_step(device: &Device) -> Result<(), String> {
    let mut recorded = songloom_engine::device::RecordedStep::Untried;
    for round in 0..4u32 {
        let values: Vec<f32> = (0..64).map(|i| (i as f32 + round as f32 * 0.37).sin()).collect();
        let input = device
            .upload(songloom_engine::Tensor::from_f32(&[4, 16], values).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        let step = |x: &songloom_engine::Tensor| device.add(&device.scale(x, 1.5)?, x);
        let want = step(&input).map_err(|e| e.to_string())?.to_f32_vec();
        let got =
            recorded.run(device, &[], &input, &[4, 16], &mut |x| step(x)).map_err(|e| e.to_string())?.to_f32_vec();
        if want.iter().zip(&got).any(|(a, b)| a.to_bits() != b.to_bits()) {
            return Err(format!("run {round} ({}) differs from the step run op by op", recorded.describe()));
        }
    }
    Ok(())
}

/// The `Backend` methods no case calls by itself, checked on `device`: what it is and says of
/// itself, waiting for it, the profiler's switch, the thread-priority hint (a case run on a
/// thread marked critical, then normal), a thread's end (a case run before it and after),
/// and what it supports (consulted by every case). Returns
/// the methods checked and what failed.
pub fn check_lifecycle(device: &Device, kind: DeviceKind, probe: &Case) -> (BTreeSet<&'static str>, Vec<String>) {
    let mut failures = Vec::new();
    let mut check = |what: &str, ok: Result<(), String>| {
        if let Err(why) = ok {
            failures.push(format!("{kind} {what}: {why}"));
        }
    };
    check("kind", if device.kind() == kind { Ok(()) } else { Err(format!("says it is {}", device.kind())) });
    check("description", if device.description().trim().is_empty() { Err("empty".into()) } else { Ok(()) });
    check("synchronize", device.synchronize().map_err(|e| e.to_string()));
    check("profiler", device.profiler(true).and_then(|()| device.profiler(false)).map_err(|e| e.to_string()));
    check(
        "precision",
        match device.precision() {
            Precision::Reference => Ok(()),
            other => Err(format!("opened with the reference precision, says {other}")),
        },
    );
    check("memory", check_memory(device));
    check("set_memory_limit", check_memory_limit(device));
    check(
        "release_unused_memory",
        device.release_unused_memory().map_err(|e| e.to_string()).and_then(|()| {
            let got = probe.execute(device).map_err(|e| e.to_string())?;
            check_outputs(&got, &(probe.naive)(&probe.inputs), tolerance(probe.op, probe.dtype, Judge::Naive))
                .map(|_| ())
        }),
    );
    let on_a_thread = std::thread::scope(|scope| {
        scope
            .spawn(|| -> Result<(), String> {
                let want = (probe.naive)(&probe.inputs);
                for priority in [
                    ThreadPriority::Critical,
                    ThreadPriority::Yielding,
                    ThreadPriority::Normal,
                    ThreadPriority::Yielding,
                ] {
                    device.set_thread_priority(priority).map_err(|e| e.to_string())?;
                    let got = probe.execute(device).map_err(|e| e.to_string())?;
                    check_outputs(&got, &want, tolerance(probe.op, probe.dtype, Judge::Naive))
                        .map_err(|why| format!("after {priority:?}: {why}"))?;
                }
                Ok(())
            })
            .join()
            .unwrap_or_else(|_| Err("the thread panicked".into()))
    });
    check("set_thread_priority", on_a_thread);
    // A thread that ended its ops may begin again (it gets what a new thread would).
    let ended = std::thread::scope(|scope| {
        scope
            .spawn(|| -> Result<(), String> {
                let want = (probe.naive)(&probe.inputs);
                for round in ["before", "after"] {
                    let got = probe.execute(device).map_err(|e| e.to_string())?;
                    check_outputs(&got, &want, tolerance(probe.op, probe.dtype, Judge::Naive))
                        .map_err(|why| format!("{round} the thread's end: {why}"))?;
                    device.end_thread().map_err(|e| e.to_string())?;
                }
                Ok(())
            })
            .join()
            .unwrap_or_else(|_| Err("the thread panicked".into()))
    });
    check("end_thread", ended);
    check("record_step", check_recorded_step(device));
    let methods = [
        "record_step",
        "replay_step",
        "kind",
        "description",
        "synchronize",
        "profiler",
        "set_thread_priority",
        "end_thread",
        "supports",
        "precision",
        "memory",
        "set_memory_limit",
        "release_unused_memory",
    ];
    (methods.into_iter().collect(), failures)
}

/// A memory account, where the backend keeps one, is consistent.
fn check_memory(device: &Device) -> Result<(), String> {
    let Some(m) = device.memory() else { return Ok(()) };
    let big = device.fill_uniform(&[1 << 22], DType::F32, 1, 0.0, 1.0).map_err(|e| e.to_string())?;
    let after = device.memory().ok_or("the account went away")?;
    drop(big);
    if !(m.free <= m.total && after.in_use >= m.in_use + (16 << 20) && after.peak >= after.in_use) {
        return Err(format!("inconsistent: {m:?}, then {after:?} holding 16 MiB more"));
    }
    Ok(())
}

/// Under a cap just above what is held, a 64 MiB buffer is refused as over the budget (where the
/// backend keeps an account); without the cap it is made, and the backend goes on working.
fn check_memory_limit(device: &Device) -> Result<(), String> {
    let big = || device.fill_uniform(&[1 << 24], DType::F32, 1, 0.0, 1.0);
    let held = device.memory().map(|m| m.in_use);
    device.set_memory_limit(Some(held.unwrap_or(0) + (8 << 20))).map_err(|e| e.to_string())?;
    let capped = big();
    device.set_memory_limit(None).map_err(|e| e.to_string())?;
    match (held, capped) {
        (Some(_), Ok(_)) => return Err("a 64 MiB buffer was made under an 8 MiB cap".into()),
        (Some(_), Err(Error::OverBudget { .. })) | (None, Ok(_)) => {}
        (_, Err(e)) => return Err(format!("under the cap: {e}, not an over-budget error")),
    }
    big().map(|_| ()).map_err(|e| format!("after the cap was lifted: {e}"))
}

/// The names of the `Backend` trait's methods, read from its source, so that a method added to
/// the trait without a case shows as uncovered.
pub fn backend_methods() -> BTreeSet<String> {
    let source = include_str!("../../../engine/src/device/backend.rs");
    let body = &source[source.find("pub trait Backend").expect("the trait is declared there")..];
    body.lines()
        .filter_map(|line| line.trim_start().strip_prefix("fn "))
        .map(|rest| rest.split(['(', '<']).next().unwrap_or_default().to_string())
        .collect()
}
