//! Recorded steps (CUDA graphs): the AR loop's decode steps and depth frames, recorded once and
//! replayed, compute what running them op by op computes, bit for bit; a recording that does not
//! move with the cache position is caught by the same comparison. Where the device records no
//! steps (the CPU, wgpu), the same calls run op by op and the comparisons hold trivially.

use songloom_engine::config::LmConfig;
use songloom_engine::device::{AttentionShape, RecordedStep};
use songloom_engine::model_dir::ModelDir;
use songloom_engine::models::kv_cache::KvCache;
use songloom_engine::models::lm::LanguageModel;
use songloom_engine::weights::VarBuilder;
use songloom_engine::{DType, Device, DeviceKind, Tensor};
use songloom_tests::{devices, tiny_model_dir};

fn noise(shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product::<usize>() as u64;
    Tensor::from_f32(shape, (0..n).map(|i| songloom_engine::hash::uniform(seed, i)).collect()).unwrap()
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// One query per batch entry of 2 at `position`, over a cache of `capacity`.
fn decode_shape(position: usize, capacity: usize, heads: usize, head_dim: usize) -> AttentionShape {
    AttentionShape {
        batch: 2,
        q_len: 1,
        kv_len: position + 1,
        kv_capacity: capacity,
        heads,
        kv_heads: heads,
        head_dim,
        causal: true,
    }
}

/// A decode-shaped step: `x` appended to the cache's one layer as keys and values, then attended
/// over the cache.
fn append_and_attend(
    device: &Device,
    cache: &mut KvCache,
    x: &Tensor,
    shape: AttentionShape,
) -> songloom_engine::Result<Tensor> {
    cache.write(device, 0, x, x, 1)?;
    let (keys, values) = cache.layer(0);
    device.attention(x, keys, values, shape)
}

/// Whether `device` must replay what it recorded (so a recording that silently failed fails).
fn records(device: &Device) -> bool {
    device.kind() == DeviceKind::Cuda
}

/// A language model at head dim 128, the real model's (the fused attention-inputs kernel), with
/// made-up weights in `format`.
fn lm_at_head_dim_128(device: &Device, format: DType) -> LanguageModel {
    let cfg: LmConfig = serde_json::from_value(serde_json::json!({
        "vocab_size": 64, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128, "rms_norm_eps": 1e-6,
        "max_position_embeddings": 512, "tie_word_embeddings": false, "rope_theta": 1e6
    }))
    .unwrap();
    let vb = VarBuilder::synthetic(11, device, DType::BF16).with_format(format);
    LanguageModel::new(&cfg, &vb, 0..64).unwrap()
}

/// Hidden states of `steps` decode steps after a prefill, through [`LanguageModel::decode`] on a
/// cache that records or one that runs op by op, and how the cache ran its step.
fn decode_run(device: &Device, lm: &LanguageModel, op_by_op: bool, steps: usize) -> (Vec<f32>, String) {
    let h = lm.config().hidden_size;
    let mut cache = lm.new_cache(device, 2, 8 + steps).unwrap();
    if op_by_op {
        cache = cache.op_by_op();
    }
    let mut out = lm.forward(device, &device.upload(noise(&[16, h], 1)).unwrap(), &mut cache).unwrap().to_f32_vec();
    for s in 0..steps {
        let input = device.upload(noise(&[2, h], 100 + s as u64)).unwrap();
        out.extend(lm.decode(device, &input, &mut cache).unwrap().to_f32_vec());
    }
    (out, cache.step_mode())
}

fn assert_decode_replays(device: &Device, lm: &LanguageModel, what: &str) {
    let (direct, _) = decode_run(device, lm, true, 12);
    let (recorded, mode) = decode_run(device, lm, false, 12);
    println!("{} {what}: decode step {mode}", device.kind());
    if records(device) {
        assert!(mode.contains("replayed"), "{what}: the decode step was not recorded: {mode}");
    }
    assert!(same_bits(&direct, &recorded), "{what} on {}: the recorded decode steps differ", device.kind());
}

#[test]
fn recorded_decode_steps_equal_op_by_op() {
    let model = ModelDir::open(&tiny_model_dir()).unwrap();
    for device in devices() {
        for format in [DType::BF16, DType::Q8] {
            let tiny = model.language_model(&device, None, format).unwrap();
            assert_decode_replays(&device, &tiny, &format!("tiny model, {format}"));
            assert_decode_replays(&device, &lm_at_head_dim_128(&device, format), &format!("head dim 128, {format}"));
        }
    }
}

/// Hidden states of `steps` decode steps of three sequences at different lengths (a batch's
/// songs), through [`LanguageModel::decode_many`] with a step that records or one that runs op by
/// op, and whether the step was replayed.
fn decode_many_run(device: &Device, lm: &LanguageModel, op_by_op: bool, steps: usize) -> (Vec<f32>, bool) {
    let h = lm.config().hidden_size;
    let mut caches: Vec<KvCache> = [9, 5, 2]
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let mut cache = lm.new_cache(device, 2, len + steps + 1).unwrap();
            let prompt = device.upload(noise(&[2 * len, h], 40 + i as u64)).unwrap();
            lm.forward(device, &prompt, &mut cache).unwrap();
            cache
        })
        .collect();
    let mut step = if op_by_op { RecordedStep::op_by_op() } else { RecordedStep::Untried };
    let mut out = Vec::new();
    for s in 0..steps {
        let input = device.upload(noise(&[6, h], 200 + s as u64)).unwrap();
        let mut each: Vec<&mut KvCache> = caches.iter_mut().collect();
        out.extend(lm.decode_many(device, &input, &mut each, &mut step).unwrap().to_f32_vec());
    }
    (out, step.is_replayed())
}

/// Two caches decoded together, then one of them alone, then together again: what each step
/// gives, and whether the steps together were replayed when one cache moved on alone.
fn moved_apart_run(device: &Device, lm: &LanguageModel, op_by_op: bool) -> (Vec<f32>, bool) {
    let h = lm.config().hidden_size;
    let mut caches: Vec<KvCache> = (0..2).map(|_| lm.new_cache(device, 2, 16).unwrap()).collect();
    let mut step = if op_by_op { RecordedStep::op_by_op() } else { RecordedStep::Untried };
    let mut out = Vec::new();
    let mut replayed_before = false;
    for s in 0..6u64 {
        if s == 3 {
            replayed_before = step.is_replayed();
            let alone = lm.decode(device, &device.upload(noise(&[2, h], 400)).unwrap(), &mut caches[1]).unwrap();
            out.extend(alone.to_f32_vec());
        }
        let input = device.upload(noise(&[4, h], 300 + s)).unwrap();
        let mut each: Vec<&mut KvCache> = caches.iter_mut().collect();
        out.extend(lm.decode_many(device, &input, &mut each, &mut step).unwrap().to_f32_vec());
        if s == 3 {
            // The recording stood for caches that have since moved apart.
            assert!(op_by_op || !step.is_replayed(), "a recording of caches that moved apart was replayed");
        }
    }
    (out, replayed_before)
}

/// A batch's decode step, recorded once over the caches of three songs at different lengths and
/// replayed, computes what running it op by op computes. After one of the caches moves on alone,
/// the recording no longer stands for the step: it is dropped and the step runs op by op, so the
/// steps still equal op by op's (a replay at the wrong positions would not: see the control of
/// `a_recording_that_does_not_move_with_the_cache_is_caught`).
#[test]
fn a_decode_step_of_several_caches_records_and_replays() {
    let model = ModelDir::open(&tiny_model_dir()).unwrap();
    for device in devices() {
        for format in [DType::BF16, DType::Q8] {
            let lm = model.language_model(&device, None, format).unwrap();
            let (direct, _) = decode_many_run(&device, &lm, true, 10);
            let (recorded, replayed) = decode_many_run(&device, &lm, false, 10);
            println!("{} {format}: several caches' decode step replayed: {replayed}", device.kind());
            assert!(same_bits(&direct, &recorded), "{format} on {}: the recorded batch steps differ", device.kind());
            let (direct, _) = moved_apart_run(&device, &lm, true);
            let (recorded, replayed_before) = moved_apart_run(&device, &lm, false);
            assert!(
                same_bits(&direct, &recorded),
                "{format} on {}: steps after a cache moved alone differ",
                device.kind()
            );
            if records(&device) {
                assert!(replayed, "{format}: the batch's decode step was not recorded");
                assert!(replayed_before, "{format}: the two caches' step was not recorded before one moved");
            }
        }
    }
}

#[test]
fn recorded_depth_frames_equal_op_by_op() {
    let model = ModelDir::open(&tiny_model_dir()).unwrap();
    for device in devices() {
        let depth = model.depth_decoder(&device, DType::BF16).unwrap();
        let cfg = depth.config().clone();
        let h = cfg.hidden_size;
        let run = |op_by_op: bool| {
            let mut frame = depth.new_frame(&device, 2).unwrap();
            if op_by_op {
                frame = frame.op_by_op();
            }
            let mut out = Vec::new();
            // Frames with different inputs and codes: a replay must read both afresh.
            for f in 0..4u64 {
                let lm_hidden = device.upload(noise(&[2, h], 10 + f)).unwrap();
                let c0 = device.upload(noise(&[2, h], 20 + f)).unwrap();
                let mut hidden = depth.start_frame(&device, &mut frame, &lm_hidden, &c0).unwrap();
                for k in 1..cfg.num_codebooks {
                    out.extend(hidden.to_f32_vec());
                    if k + 1 < cfg.num_codebooks {
                        let code = ((f as usize * 7 + k * 5) % cfg.audio_vocab_size) as u32;
                        hidden = depth.step(&device, &mut frame, k, code).unwrap();
                    }
                }
            }
            (out, frame.mode())
        };
        let (direct, _) = run(true);
        let (recorded, mode) = run(false);
        println!("{}: depth frame {mode}", device.kind());
        if records(&device) {
            assert!(mode.contains("replayed"), "the depth frame was not recorded: {mode}");
        }
        assert!(same_bits(&direct, &recorded), "{}: the recorded depth frames differ", device.kind());
    }
}

/// A decode-shaped step (append one key and value row per batch entry, attend over the cache)
/// recorded with its position, and recorded as if its positions were fixed: the first equals the
/// step run op by op, the second, replayed at later positions, does not. The control shows the
/// bit-for-bit comparisons above can fail, and that the position must move with the cache.
#[test]
fn a_recording_that_does_not_move_with_the_cache_is_caught() {
    for device in devices() {
        let (heads, head_dim, capacity) = (2, 16, 12);
        let width = heads * head_dim;
        let run = |mode: Option<bool>| {
            let mut cache = KvCache::new(&device, 1, 2, capacity, width, DType::BF16).unwrap();
            let mut step = match mode {
                None => RecordedStep::op_by_op(),
                Some(_) => RecordedStep::Untried,
            };
            let mut out = Vec::new();
            for s in 0..8u64 {
                let input = device.upload(noise(&[2, width], 30 + s)).unwrap();
                let position = cache.len();
                let shape = decode_shape(position, capacity, heads, head_dim);
                let moving = mode != Some(false);
                let positions = if moving { vec![position] } else { Vec::new() };
                let y = step
                    .run(&device, &positions, &input, &[2, width], &mut |x| {
                        append_and_attend(&device, &mut cache, x, shape)
                    })
                    .unwrap();
                cache.advance(1);
                out.extend(y.to_f32_vec());
            }
            (out, step.is_replayed())
        };
        let (direct, _) = run(None);
        let (moving, replayed) = run(Some(true));
        assert!(same_bits(&direct, &moving), "{}: the recorded step differs", device.kind());
        if records(&device) {
            assert!(replayed, "the step was not recorded");
            let (fixed, _) = run(Some(false));
            assert!(!same_bits(&direct, &fixed), "a recording fixed at its first position went unnoticed");
        }
    }
}

/// A step under a memory budget whose scratch is large enough to be checked against it (a decode
/// step over a song-length cache): it still records, and equals the step run op by op.
#[test]
fn a_step_over_a_long_cache_records_under_a_memory_budget() {
    for device in devices() {
        // 8 heads of 128 over 8192 keys: the attention's split partials take about 2 MB.
        let (heads, head_dim, capacity) = (8, 128, 8192);
        let width = heads * head_dim;
        device.set_memory_limit(Some(1 << 40)).unwrap();
        let run = |op_by_op: bool| {
            let mut cache = KvCache::new(&device, 1, 2, capacity, width, DType::BF16).unwrap();
            let mut step = if op_by_op { RecordedStep::op_by_op() } else { RecordedStep::Untried };
            let mut out = Vec::new();
            for s in 0..6u64 {
                let input = device.upload(noise(&[2, width], 80 + s)).unwrap();
                let position = cache.len();
                let shape = decode_shape(position, capacity, heads, head_dim);
                let y = step
                    .run(&device, &[position], &input, &[2, width], &mut |x| {
                        append_and_attend(&device, &mut cache, x, shape)
                    })
                    .unwrap();
                cache.advance(1);
                out.extend(y.to_f32_vec());
            }
            (out, step.describe())
        };
        let (direct, _) = run(true);
        let (recorded, mode) = run(false);
        device.set_memory_limit(None).unwrap();
        if records(&device) {
            assert!(mode.contains("replayed"), "the step under a budget was not recorded: {mode}");
        }
        assert!(same_bits(&direct, &recorded), "{}: the recorded step differs", device.kind());
    }
}

/// A thread that waits for the whole device (as loading the other half does in a streamed song)
/// while the AR thread records: the recording still succeeds and equals the step run op by op.
#[test]
fn a_step_records_while_another_thread_waits_for_the_device() {
    let model = ModelDir::open(&tiny_model_dir()).unwrap();
    for device in devices() {
        let lm = model.language_model(&device, None, DType::BF16).unwrap();
        let (direct, _) = decode_run(&device, &lm, true, 6);
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| {
                let x = device.upload(noise(&[64, 64], 5)).unwrap();
                let mut waits = 0u64;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    device.add(&x, &x).unwrap();
                    device.synchronize().unwrap();
                    waits += 1;
                }
                waits
            });
            // Several fresh caches: several recordings, each with the waiter running.
            for _ in 0..8 {
                let (recorded, mode) = decode_run(&device, &lm, false, 6);
                if records(&device) {
                    assert!(mode.contains("replayed"), "the decode step was not recorded: {mode}");
                }
                assert!(same_bits(&direct, &recorded), "{}: the recorded decode steps differ", device.kind());
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            println!("{}: the other thread waited for the device {} times", device.kind(), waiter.join().unwrap());
        });
    }
}

/// A recording that fails (here: the step waits for the device, which a recording cannot) leaves
/// the step running op by op, computing the same, and it is recorded again later.
#[test]
fn a_failed_recording_runs_op_by_op_and_is_tried_again() {
    for device in devices() {
        let (heads, head_dim, capacity) = (2, 16, 24);
        let width = heads * head_dim;
        let run = |fail_first_recording: bool| {
            let mut cache = KvCache::new(&device, 1, 2, capacity, width, DType::BF16).unwrap();
            let mut step = if fail_first_recording { RecordedStep::Untried } else { RecordedStep::op_by_op() };
            let (mut out, mut modes, mut calls) = (Vec::new(), Vec::new(), 0);
            for s in 0..capacity as u64 {
                let input = device.upload(noise(&[2, width], 60 + s)).unwrap();
                let position = cache.len();
                let shape = decode_shape(position, capacity, heads, head_dim);
                let y = step
                    .run(&device, &[position], &input, &[2, width], &mut |x| {
                        calls += 1;
                        // The second call is the first recording where the device records.
                        if fail_first_recording && calls == 2 {
                            device.synchronize()?;
                        }
                        append_and_attend(&device, &mut cache, x, shape)
                    })
                    .unwrap();
                cache.advance(1);
                out.extend(y.to_f32_vec());
                modes.push(step.describe());
            }
            (out, modes, step.is_replayed())
        };
        let (direct, _, _) = run(false);
        let (retried, modes, replayed) = run(true);
        assert!(same_bits(&direct, &retried), "{}: the retried step differs", device.kind());
        if records(&device) {
            assert!(modes[1].contains("recording failed"), "the failed recording went unnoticed: {}", modes[1]);
            assert!(replayed, "the step was not recorded again: {}", modes.last().unwrap());
        }
    }
}
