//! Memory tiers on the tiny checkpoint: plans under a budget, quantized copies, phase by phase,
//! and the budget enforced by the GPU's allocator (skipped, with the reason, where there is none).

use std::sync::Mutex;

use songloom_engine::pipeline::{Cancel, Event, MemoryRequest, Observer, Pipeline, Request, Stage};
use songloom_engine::plan::{ArFormats, Mode, Plan, WeightsChoice};
use songloom_engine::{DeviceKind, Error};
use songloom_tests::{cpu, device_kinds, device_of, tiny_model_dir};

fn request(seed: u64, duration_s: f64) -> Request {
    Request {
        description: "warm lo-fi piano".into(),
        lyrics: "[verse]\nla la la".into(),
        duration_s,
        seed,
        steps: 2,
        guidance: None,
    }
}

/// The song's interleaved audio and the halves loaded while it ran.
fn song(pipeline: &Pipeline, req: &Request) -> (Vec<f32>, Vec<Stage>) {
    let audio = Mutex::new(Vec::new());
    let loads = Mutex::new(Vec::new());
    let events = |e: Event| match e {
        Event::Audio { samples, .. } => audio.lock().unwrap().extend(samples),
        Event::Stage { stage: stage @ Stage::Load { .. }, done: 0, .. } => loads.lock().unwrap().push(stage),
        _ => {}
    };
    pipeline.generate(req, Observer { events: &events, cancel: &Cancel::default() }).unwrap();
    (audio.into_inner().unwrap(), loads.into_inner().unwrap())
}

fn forced(weights: WeightsChoice) -> MemoryRequest {
    MemoryRequest { weights, max_memory_bytes: None, mode: None }
}

fn plan_for(weights: WeightsChoice, model: &std::path::Path) -> Plan {
    Pipeline::plan(model, &cpu(), forced(weights), Some(&request(1, 10.08))).unwrap()
}

#[test]
fn a_budget_too_small_is_refused_before_anything_loads() {
    let model = tiny_model_dir();
    let tiny = MemoryRequest { weights: WeightsChoice::Auto, max_memory_bytes: Some(1_000), mode: None };
    let err = Pipeline::plan(&model, &cpu(), tiny, Some(&request(1, 10.08))).unwrap_err().to_string();
    assert!(err.contains("no plan fits in 0 MB") && err.contains("the smallest") && err.contains("needs"), "{err}");
    // The smallest plan is named: phase by phase (on the tiny model the acoustic half's workspace
    // outweighs the AR half in every format, so the most exact of the equals is named).
    assert!(err.contains("phase by phase"), "{err}");
    // A budget that holds the bf16 plan takes it, streamed.
    let roomy = MemoryRequest { weights: WeightsChoice::Auto, max_memory_bytes: Some(12_000_000_000), mode: None };
    let plan = Pipeline::plan(&model, &cpu(), roomy, Some(&request(1, 10.08))).unwrap();
    assert_eq!((plan.formats, plan.mode), (ArFormats::BF16, Mode::Streamed));
    assert!(plan.describe().contains("12.0 GB budget"), "{}", plan.describe());
}

#[test]
fn a_quantized_copy_loads_to_the_same_audio_as_quantizing_at_load() {
    let model = tiny_model_dir();
    for (weights, flag, formats) in
        [(WeightsChoice::EightBit, "8bit", ArFormats::Q8), (WeightsChoice::FourBit, "4bit-all", ArFormats::Q4)]
    {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join(format!("tiny-{flag}"));
        songloom_engine::quantized_copy::write(&model, &copy, formats, &|_| {}).unwrap();
        // The copy holds packed words, not bf16 matrices.
        let copy_dir = songloom_engine::model_dir::ModelDir::open(&copy).unwrap();
        assert_eq!(copy_dir.stored_formats().unwrap(), Some(formats));

        let at_load = Plan { formats, ..plan_for(weights, &model) };
        let from_copy = plan_for(WeightsChoice::Auto, &copy);
        assert_eq!(from_copy.formats, formats, "a copy plans its own formats");
        let quantized = Pipeline::load_planned(&model, cpu(), &at_load, &|_| {}).unwrap();
        let loaded = Pipeline::load_planned(&copy, cpu(), &from_copy, &|_| {}).unwrap();
        let (a, _) = song(&quantized, &request(3, 10.08));
        let (b, _) = song(&loaded, &request(3, 10.08));
        assert!(a == b, "{flag}: the copy's song differs from quantizing at load");
        let bf16 = Pipeline::load(&model, cpu()).unwrap();
        let (c, _) = song(&bf16, &request(3, 10.08));
        assert!(a != c, "{flag}: the quantized song is the bf16 one (were the weights quantized?)");

        // A copy refuses other weights by name, and is never written over.
        let err = Pipeline::plan(&copy, &cpu(), forced(WeightsChoice::Bf16), None).unwrap_err().to_string();
        assert!(err.contains("quantized copy") && err.contains("--weights bf16"), "{err}");
        let err = songloom_engine::quantized_copy::write(&model, &copy, formats, &|_| {}).unwrap_err().to_string();
        assert!(err.contains("already exists"), "{err}");
    }
}

#[test]
fn phase_by_phase_gives_the_streamed_audio() {
    let model = tiny_model_dir();
    for weights in [WeightsChoice::Bf16, WeightsChoice::FourBit] {
        let streamed = plan_for(weights, &model);
        let phased = Plan { mode: Mode::Phased, ..streamed.clone() };
        let a = Pipeline::load_planned(&model, cpu(), &streamed, &|_| {}).unwrap();
        let b = Pipeline::load_planned(&model, cpu(), &phased, &|_| {}).unwrap();
        let req = request(5, 10.08);
        let (streamed_audio, streamed_loads) = song(&a, &req);
        let (phased_audio, phased_loads) = song(&b, &req);
        assert!(streamed_audio == phased_audio, "{weights:?}: phase by phase made other audio");
        assert!(streamed_audio.iter().any(|v| v.abs() > 1e-3), "silent");
        // Streamed, both halves stay loaded; phase by phase, each song loads the acoustic half,
        // then the AR half again for the next song.
        assert!(streamed_loads.is_empty(), "{streamed_loads:?}");
        assert_eq!(phased_loads.len(), 1, "{phased_loads:?}");
        let (again, loads) = song(&b, &req);
        assert!(again == phased_audio, "the second phased song differs");
        assert_eq!(loads.len(), 2, "the AR half, then the acoustic half: {loads:?}");
    }
}

/// Under a cap just above the loaded model, a long song's KV cache (2.3 MB a layer, over the 1 MiB
/// the allocator checks) is an out-of-memory error, not a crash; the next song under a fitting
/// budget runs.
#[test]
fn an_allocation_over_the_budget_is_an_error_and_the_next_song_runs() {
    let mut ran = false;
    for kind in device_kinds() {
        let device = device_of(kind);
        if kind == DeviceKind::Cpu || device.memory().is_none() {
            println!("{kind} skipped: the backend keeps no memory account to enforce a budget with");
            continue;
        }
        let plan = Pipeline::plan(&tiny_model_dir(), &device, forced(WeightsChoice::Bf16), None).unwrap();
        let pipeline = Pipeline::load_planned(&tiny_model_dir(), device, &plan, &|_| {}).unwrap();
        let held = pipeline.device.memory().unwrap().in_use;
        pipeline.device.set_memory_limit(Some(held + (1 << 20))).unwrap();
        let long = Request { duration_s: 360.0, ..request(1, 360.0) };
        let err = pipeline.generate(&long, Observer { events: &|_| {}, cancel: &Cancel::default() }).unwrap_err();
        assert!(matches!(err, Error::OverBudget { .. }), "{kind}: {err}");
        assert!(err.to_string().contains("--max-memory"), "{err}");
        pipeline.device.set_memory_limit(Some(held + (64 << 20))).unwrap();
        let (audio, _) = song(&pipeline, &request(1, 10.08));
        assert!(audio.iter().any(|v| v.abs() > 1e-3), "{kind}: the next song is silent");
        ran = true;
    }
    if !ran {
        println!("skipped: no GPU here");
    }
}
