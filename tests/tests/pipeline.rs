//! The song pipeline against whole runs of the reference (`MiniMaxMusic3Blocks` on the tiny
//! checkpoint, every random draw recorded), then streaming, determinism and cancellation.
//!
//! Each bound is twice the distance between the reference (bf16 AR half) and its f32 control run
//! on the same draws and noise. Measured on the CPU backend (2026-11-30), relative distance =
//! max |d| / max |reference| (`cargo nextest run --no-capture -p songloom-tests --test pipeline`):
//!
//! | what                          | short (1 s, 1 window) | long (12.08 s, 3 windows) | negative control |
//! |-------------------------------|-----------------------|---------------------------|------------------|
//! | semantic distributions        | 5.3e-2 (bound 1.1e-1) | 7.8e-2 (bound 1.6e-1)     |                  |
//! | depth distributions           | 1.7e-2 (bound 3.4e-2) | 2.2e-2 (bound 4.3e-2)     |                  |
//! | frame hiddens                 | 9.6e-3 (bound 1.9e-2) | 8.1e-3 (bound 1.6e-2)     | swapped codebooks: 1.25 |
//! | waveform (reference frames)   | 1.1e-3 (bound 2.2e-3) | 2.0e-3 (bound 3.9e-3)     | overlap 171: 4.5e-1 |

use std::path::Path;
use std::sync::Mutex;

use songloom_engine::Device;
use songloom_engine::Tensor;
use songloom_engine::pipeline::ar::{Chooser, Draw};
use songloom_engine::pipeline::windows::NoiseSource;
use songloom_engine::pipeline::{Cancel, Event, Observer, Pipeline, Request, RngChooser};
use songloom_engine::prompt::PromptIds;
use songloom_tests::{
    Bound, Golden, copy_tiny_model, cpu, device_kinds, device_of, devices, distance, fixtures, tiny_model_dir,
};

const BF16_FACTOR: f32 = 2.0;

#[derive(serde::Deserialize)]
struct GoldenRequest {
    prompt: String,
    lyrics: String,
    duration: f64,
    steps: usize,
}

fn request(name: &str) -> GoldenRequest {
    let path = fixtures().join("goldens").join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Replays the reference's draws and keeps the distributions we computed.
struct Replay {
    draws: std::vec::IntoIter<u32>,
    rows_start: u32,
    semantic: Vec<Vec<f32>>,
    depth: Vec<Vec<f32>>,
}

impl Chooser for Replay {
    fn choose(&mut self, _frame: usize, draw: Draw, probs: &[f32]) -> songloom_engine::Result<usize> {
        let recorded = self.draws.next().expect("more draws than the reference made");
        Ok(match draw {
            Draw::Semantic => {
                self.semantic.push(probs.to_vec());
                (recorded - self.rows_start) as usize
            }
            Draw::Depth(_) => {
                self.depth.push(probs.to_vec());
                recorded as usize
            }
        })
    }
}

/// The reference's window noise.
struct GoldenNoise<'a>(&'a Golden);

impl NoiseSource for GoldenNoise<'_> {
    fn noise(&mut self, window: usize, channels: usize, length: usize) -> songloom_engine::Result<Tensor> {
        let t = self.0.tensor(&format!("noise_{window}"));
        assert_eq!(t.shape(), [channels, length], "noise of window {window}");
        Ok(t)
    }
}

fn no_events(_: Event) {}

fn quiet(cancel: &Cancel) -> Observer<'_> {
    Observer { events: &no_events, cancel }
}

fn prompt_of(g: &Golden) -> PromptIds {
    let ids = g.ids("text_ids");
    let n = ids.len() / 2;
    PromptIds { text: String::new(), cond: ids[..n].to_vec(), uncond: ids[n..].to_vec() }
}

/// Our semantic distributions span the sampleable rows; the reference's the whole vocabulary.
fn slice_rows(full: &[f32], vocab: usize, rows: std::ops::Range<u32>) -> Vec<f32> {
    full.chunks(vocab).flat_map(|p| p[rows.start as usize..rows.end as usize].to_vec()).collect()
}

fn ar_case(name: &str, model_dir: &Path, device: Device) -> (Vec<f32>, Golden) {
    let g = Golden::open(name);
    let pipeline = Pipeline::load(model_dir, device).unwrap();
    let dev = pipeline.device.kind();
    let req = request(name);
    let prompt = pipeline.encode_prompt(&req.prompt, &req.lyrics).unwrap();
    assert_eq!(prompt.pair(), g.ids("text_ids"), "{name}: prompt ids");
    let rows_start = pipeline.constants.audio_end_id;
    let mut replay = Replay { draws: g.ids("draws").into_iter(), rows_start, semantic: vec![], depth: vec![] };
    let max_frames = pipeline.max_frames(req.duration).unwrap();
    let frames = pipeline.generate_frames(&prompt_of(&g), max_frames, &mut replay, quiet(&Cancel::default())).unwrap();
    assert_eq!(frames.shape(), g.tensor("frame_hiddens").shape(), "{name}: frame count");
    assert!(replay.draws.next().is_none(), "{name}: the reference drew more often");

    let vocab = g.tensor("semantic_probs").shape()[1];
    let rows = rows_start..pipeline.constants.code_offset + pipeline.constants.semantic_vocab_size;
    let reference = slice_rows(&g.values("semantic_probs"), vocab, rows.clone());
    let control = slice_rows(&g.values("semantic_probs_control"), vocab, rows);
    let bound = Bound::calibrated(distance(&control, &reference), BF16_FACTOR, 1e-6);
    bound.check(&format!("{dev}: {name} semantic distributions"), &replay.semantic.concat(), &reference);
    let bound =
        Bound::calibrated(distance(&g.values("depth_probs_control"), &g.values("depth_probs")), BF16_FACTOR, 1e-6);
    bound.check(&format!("{dev}: {name} depth distributions"), &replay.depth.concat(), &g.values("depth_probs"));
    (frames.to_f32_vec(), g)
}

fn frames_bound(g: &Golden) -> Bound {
    Bound::calibrated(distance(&g.values("frame_hiddens_control"), &g.values("frame_hiddens")), BF16_FACTOR, 1e-6)
}

#[test]
fn ar_loop_matches_reference_draw_for_draw() {
    for dev in device_kinds() {
        for name in ["pipeline_short", "pipeline_long"] {
            let (frames, g) = ar_case(name, &tiny_model_dir(), device_of(dev));
            frames_bound(&g).check(&format!("{dev}: {name} frame hiddens"), &frames, &g.values("frame_hiddens"));
        }
    }
}

#[test]
fn ar_loop_with_misplaced_residual_codebooks_is_caught() {
    // Negative control: codebooks 1 and 2 of the residual embedding table swapped, as if the
    // feedback used the wrong `(k - 1) * vocab` offsets.
    let dir = copy_tiny_model();
    let depth_dir = dir.path().join("rvq_depth_decoder");
    let ckpt = songloom_engine::weights::Checkpoint::open(&depth_dir).unwrap();
    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> = ckpt
        .tensor_names()
        .map(|n| {
            let t = ckpt.read(n).unwrap();
            (n.to_string(), t.shape().to_vec(), t.to_f32_vec())
        })
        .collect();
    drop(ckpt);
    let table = tensors.iter_mut().find(|t| t.0 == "audio_embeddings.weight").unwrap();
    let block = 32 * table.1[1];
    let (first, rest) = table.2.split_at_mut(block);
    first.swap_with_slice(&mut rest[..block]);
    songloom_engine::weights::save_f32(&depth_dir.join("diffusion_pytorch_model.safetensors"), &tensors).unwrap();

    let g = Golden::open("pipeline_short");
    let pipeline = Pipeline::load(dir.path(), cpu()).unwrap();
    let mut replay = Replay {
        draws: g.ids("draws").into_iter(),
        rows_start: pipeline.constants.audio_end_id,
        semantic: vec![],
        depth: vec![],
    };
    let frames = pipeline.generate_frames(&prompt_of(&g), 25, &mut replay, quiet(&Cancel::default())).unwrap();
    frames_bound(&g).rejects("frame hiddens with swapped codebooks", &frames.to_f32_vec(), &g.values("frame_hiddens"));
}

fn render(model_dir: &Path, name: &str, device: Device) -> (Vec<f32>, Golden) {
    let g = Golden::open(name);
    let pipeline = Pipeline::load(model_dir, device).unwrap();
    let req = request(name);
    let song = pipeline
        .render_windows(&g.tensor("frame_hiddens"), req.steps, None, &mut GoldenNoise(&g), quiet(&Cancel::default()))
        .unwrap();
    (song.concat(), g)
}

fn waveform_bound(g: &Golden) -> Bound {
    Bound::calibrated(distance(&g.values("waveform_control"), &g.values("waveform")), BF16_FACTOR, 1e-5)
}

#[test]
fn windows_match_reference_waveform() {
    for dev in device_kinds() {
        for name in ["pipeline_short", "pipeline_long"] {
            let (ours, g) = render(&tiny_model_dir(), name, device_of(dev));
            assert_eq!(ours.len(), g.values("waveform").len(), "{name}: length");
            waveform_bound(&g).check(&format!("{dev}: {name} waveform"), &ours, &g.values("waveform"));
        }
    }
}

#[test]
fn windows_with_a_wrong_overlap_are_caught() {
    // Negative control: carrying 171 latents instead of 172 between windows.
    let dir = copy_tiny_model();
    let path = dir.path().join("songloom.json");
    let mut constants: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    constants["overlap_latents"] = 171.into();
    std::fs::write(&path, constants.to_string()).unwrap();
    let (ours, g) = render(dir.path(), "pipeline_long", cpu());
    assert_eq!(ours.len(), g.values("waveform").len());
    waveform_bound(&g).rejects("waveform with overlap 171", &ours, &g.values("waveform"));
}

fn song(pipeline: &Pipeline, req: &Request, streamed: bool) -> (Vec<f32>, songloom_engine::pipeline::Stats) {
    let audio = Mutex::new(Vec::new());
    let events = |e: Event| {
        if let Event::Audio { first_sample, samples, .. } = e {
            let mut audio = audio.lock().unwrap();
            assert_eq!(first_sample * 2, audio.len(), "audio arrives in order, without gaps");
            audio.extend(samples);
        }
    };
    let stats = if streamed {
        pipeline.generate(req, Observer { events: &events, cancel: &Cancel::default() }).unwrap()
    } else {
        pipeline.generate_sequential(req, Observer { events: &events, cancel: &Cancel::default() }).unwrap()
    };
    (audio.into_inner().unwrap(), stats)
}

fn song_request(seed: u64) -> Request {
    Request {
        description: "warm lo-fi piano".into(),
        lyrics: "[verse]\nla la la".into(),
        duration_s: 10.08,
        seed,
        steps: 2,
        guidance: None,
    }
}

#[test]
fn streamed_equals_sequential_and_seed_decides() {
    for device in devices() {
        streamed_equals_sequential_on(device);
    }
}

fn streamed_equals_sequential_on(device: Device) {
    let pipeline = Pipeline::load(&tiny_model_dir(), device).unwrap();
    println!("streaming on {}", pipeline.device.kind());
    let req = song_request(5);
    let (streamed, stats) = song(&pipeline, &req, true);
    let (sequential, _) = song(&pipeline, &req, false);
    assert_eq!(stats.frames, 252);
    assert_eq!(stats.windows, 2);
    assert_eq!(streamed.len(), sequential.len());
    assert!(streamed == sequential, "streamed audio differs from the sequential run");
    assert!(streamed.iter().all(|v| v.is_finite()));
    assert!(streamed.iter().any(|v| v.abs() > 1e-3), "silent");
    assert!(stats.time_to_first_audio_s.unwrap() < stats.total_s);
    // The time breakdown is made of parts of the song's own times.
    assert!((0.0..=stats.ar_s).contains(&stats.ar_device_wait_s), "{stats:?}");
    let host = stats.ar_device_wait_s + stats.ar_sampling_s + stats.ar_handing_on_s;
    assert!(stats.ar_sampling_s > 0.0 && host <= stats.ar_s, "{stats:?}");
    let parts = [stats.ar_semantic_s, stats.ar_depth_s, stats.ar_states_s, stats.ar_feed_s];
    assert!(parts.iter().all(|&s| s > 0.0) && parts.iter().sum::<f64>() <= stats.ar_s, "{stats:?}");
    assert!(stats.ar_states_s >= stats.ar_handing_on_s, "{stats:?}");
    assert!(stats.overlap_s >= 0.0 && stats.overlap_s <= stats.ar_s.min(stats.acoustic_s) + 1e-9, "{stats:?}");

    let (again, _) = song(&pipeline, &req, true);
    assert!(again == streamed, "the same seed gave different audio");
    let (other, _) = song(&pipeline, &song_request(6), true);
    assert!(other != streamed, "another seed gave the same audio");
}

#[test]
fn cancel_stops_the_song() {
    let pipeline = Pipeline::load(&tiny_model_dir(), cpu()).unwrap();
    let cancel = Cancel::default();
    let frames_seen = Mutex::new(0);
    let events = |e: Event| {
        if let Event::Stage { stage: songloom_engine::pipeline::Stage::ArFrames, done, .. } = e {
            *frames_seen.lock().unwrap() = done;
            if done == 30 {
                cancel.cancel();
            }
        }
    };
    let err = pipeline.generate(&song_request(1), Observer { events: &events, cancel: &cancel }).unwrap_err();
    assert!(matches!(err, songloom_engine::Error::Cancelled), "{err}");
    assert!(*frames_seen.lock().unwrap() < 40);
}

#[test]
fn guidance_defaults_to_the_models_and_is_checked() {
    let pipeline = Pipeline::load(&tiny_model_dir(), cpu()).unwrap();
    let default = song_request(5);
    let explicit = Request { guidance: Some(pipeline.constants.dit_cfg_scale), ..song_request(5) };
    let stronger = Request { guidance: Some(3.0), ..song_request(5) };
    let (a, _) = song(&pipeline, &default, true);
    let (b, _) = song(&pipeline, &explicit, false);
    assert!(a == b, "the model's guidance is the default (streamed and sequential alike)");
    let (c, _) = song(&pipeline, &stronger, true);
    assert!(c != a, "another guidance gave the same audio");
    for bad in [f32::NAN, -1.0, 50.0] {
        let req = Request { guidance: Some(bad), ..song_request(5) };
        let err = pipeline.generate(&req, quiet(&Cancel::default())).unwrap_err().to_string();
        assert!(err.contains("guidance"), "{err}");
    }
}

/// Samples the end token at semantic draw `end_at` (index 0 of the sampleable rows, which start
/// at it), and the code at row `code` before that.
struct EndAt {
    end_at: usize,
    code: usize,
    semantic_draws: usize,
}

impl Chooser for EndAt {
    fn choose(&mut self, _frame: usize, draw: Draw, _probs: &[f32]) -> songloom_engine::Result<usize> {
        if draw != Draw::Semantic {
            return Ok(0);
        }
        self.semantic_draws += 1;
        Ok(if self.semantic_draws > self.end_at { 0 } else { self.code })
    }
}

/// A song the model ends early says so: its last AR progress is complete at the frames it made,
/// not a share of the length asked for.
#[test]
fn a_song_that_ends_early_says_its_length() {
    let pipeline = Pipeline::load(&tiny_model_dir(), cpu()).unwrap();
    let c = &pipeline.constants;
    // The rows start at the end token; the codes start at code_offset.
    let code = (c.code_offset - c.audio_end_id.min(c.code_offset)) as usize + 3;
    let prompt = pipeline.encode_prompt("piano", "[verse]\nla").unwrap();
    let stages = Mutex::new(Vec::new());
    let events = |e: Event| {
        if let Event::Stage { stage: songloom_engine::pipeline::Stage::ArFrames, done, total } = e {
            stages.lock().unwrap().push((done, total));
        }
    };
    let observer = Observer { events: &events, cancel: &Cancel::default() };
    let frames =
        pipeline.generate_frames(&prompt, 40, &mut EndAt { end_at: 11, code, semantic_draws: 0 }, observer).unwrap();
    let made = frames.shape()[0];
    assert!(made < 40, "the song did not end early ({made} frames)");
    let stages = stages.into_inner().unwrap();
    assert_eq!(stages.last(), Some(&(made, made)), "{stages:?}");
    assert!(stages[..stages.len() - 1].iter().all(|&(_, total)| total == 40), "{stages:?}");
}

/// The seeded sampler with its uniforms hidden: every draw is shown its probabilities on the host.
struct OnHost(RngChooser);

impl Chooser for OnHost {
    fn choose(&mut self, frame: usize, draw: Draw, probs: &[f32]) -> songloom_engine::Result<usize> {
        self.0.choose(frame, draw, probs)
    }
}

/// The seeded sampler whose uniforms, offered to a device, are the next frame's: where the device
/// draws, its song is not the sampler's.
struct NextFrames(RngChooser);

impl Chooser for NextFrames {
    fn choose(&mut self, frame: usize, draw: Draw, probs: &[f32]) -> songloom_engine::Result<usize> {
        self.0.choose(frame, draw, probs)
    }

    fn uniform(&mut self, frame: usize, draw: Draw) -> Option<f64> {
        self.0.uniform(frame + 1, draw)
    }
}

/// The residual codes drawn by the device (the frame's codebooks one after another, read back
/// once) are the codes the host draws from the same probabilities: the same frames bit for bit,
/// on every device. The control shows the device did draw them.
#[test]
fn codes_drawn_on_the_device_are_the_hosts() {
    for device in devices() {
        let kind = device.kind();
        let pipeline = Pipeline::load(&tiny_model_dir(), device).unwrap();
        let prompt = pipeline.encode_prompt("warm lo-fi piano", "[verse]\nla la la").unwrap();
        let frames = |chooser: &mut dyn Chooser| {
            let cancel = Cancel::default();
            pipeline.generate_frames(&prompt, 60, chooser, quiet(&cancel)).unwrap().to_host().unwrap()
        };
        let drawn = frames(&mut RngChooser { seed: 9 });
        let on_host = frames(&mut OnHost(RngChooser { seed: 9 }));
        assert!(drawn == on_host, "{kind}: the device's draws are not the host's");
        let shifted = frames(&mut NextFrames(RngChooser { seed: 9 }));
        assert!(shifted != drawn, "{kind}: the device did not draw with the uniforms it was given");
    }
}
