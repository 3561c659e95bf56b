//! A song continued from its codes draws what one run would have: the sampler's randomness is
//! keyed by (seed, frame), and the continued loop replays the kept codes through the same states
//! (teacher forcing). The ground issue #31's edits stand on: an 8 s song extended by 4 s is the
//! 12 s song, code for code, on the CPU.

use songloom_engine::pipeline::ar::{Chooser, Codes, Prefix, WithoutEnd};
use songloom_engine::pipeline::{Cancel, Event, Observer, Pipeline, RngChooser};
use songloom_engine::prompt::PromptIds;
use songloom_engine::{Device, DeviceKind};
use songloom_tests::{cpu, devices, tiny_model_dir};

fn no_events(_: Event) {}

struct Song<'a> {
    pipeline: &'a Pipeline,
    prompt: PromptIds,
}

impl Song<'_> {
    /// The codes of `seconds` of the song with `seed`, never ended by the model, continuing
    /// `prefix` when given.
    fn codes(&self, seconds: f64, seed: u64, prefix: Option<&Codes>) -> Codes {
        let c = &self.pipeline.constants;
        let rows = c.sampleable_rows();
        let mut rng = RngChooser { seed };
        let mut replay;
        let then: &mut dyn Chooser = match prefix {
            Some(codes) => {
                replay = Prefix { codes, semantic_base: c.code_offset - rows.start, then: &mut rng };
                &mut replay
            }
            None => &mut rng,
        };
        let mut chooser =
            WithoutEnd { end_index: (c.audio_end_id - rows.start) as usize, before_frame: usize::MAX, then };
        let frames = self.pipeline.max_frames(seconds).unwrap();
        let cancel = Cancel::default();
        let observer = Observer { events: &no_events, cancel: &cancel };
        self.pipeline.generate_codes(&self.prompt, frames, &mut chooser, observer).unwrap()
    }
}

fn pipeline(device: Device) -> Pipeline {
    Pipeline::load(&tiny_model_dir(), device).unwrap()
}

/// On every device here (the CPU; CUDA and wgpu where present): the continued loop runs the same
/// kernels in the same order as the single run, so the codes are the same.
#[test]
fn an_extended_song_is_the_longer_song_code_for_code() {
    for device in devices() {
        let kind = device.kind();
        let pipeline = pipeline(device);
        extended_equals_longer(&pipeline, kind);
    }
}

fn extended_equals_longer(pipeline: &Pipeline, device: DeviceKind) {
    let song = Song { prompt: pipeline.encode_prompt("warm lo-fi piano", "[verse]\nla la la").unwrap(), pipeline };
    let short = song.codes(8.0, 7, None);
    let long = song.codes(12.0, 7, None);
    let frames_8 = pipeline.max_frames(8.0).unwrap();
    assert_eq!(short.frames.len(), frames_8 + 1, "the priming frame and every frame of 8 s");
    assert_eq!(long.frames[..short.frames.len()], short.frames[..], "the longer song begins as the shorter");

    let extended = song.codes(12.0, 7, Some(&short));
    assert_eq!(extended, long, "{device:?}: 8 s extended by 4 s differs from the 12 s song");

    // Controls: the continuation must depend on the kept codes where they are and on the seed
    // (what they show does not depend on the device, so once).
    if device != DeviceKind::Cpu {
        return;
    }
    let mut shifted = short.clone();
    shifted.frames.remove(0);
    assert_ne!(song.codes(12.0, 7, Some(&shifted)).frames[frames_8 + 1..], long.frames[frames_8 + 1..]);
    assert_ne!(song.codes(12.0, 8, Some(&short)).frames[frames_8 + 1..], long.frames[frames_8 + 1..]);
}

#[test]
fn codes_this_model_cannot_draw_are_refused() {
    let pipeline = pipeline(cpu());
    let song = Song { prompt: pipeline.encode_prompt("piano", "[verse]\nla").unwrap(), pipeline: &pipeline };
    let mut codes = song.codes(1.0, 1, None);
    codes.frames[1][3] = u32::MAX - 1;
    let c = &pipeline.constants;
    let rows = c.sampleable_rows();
    let mut rng = RngChooser { seed: 1 };
    let mut chooser = Prefix { codes: &codes, semantic_base: c.code_offset - rows.start, then: &mut rng };
    let cancel = Cancel::default();
    let observer = Observer { events: &no_events, cancel: &cancel };
    let err = pipeline.generate_codes(&song.prompt, 50, &mut chooser, observer).unwrap_err().to_string();
    assert!(err.contains("frame 1") && err.contains("not one this model draws"), "{err}");
}

/// The frames' hidden states, what the acoustic half renders, come back from the codes alone by
/// the teacher-forced pass, as the generation made them: a stored song's codes are enough to
/// render any of its windows again.
#[test]
fn hidden_states_are_recovered_from_the_codes() {
    let pipeline = pipeline(cpu());
    let prompt = pipeline.encode_prompt("calm strings", "[verse]\nla la").unwrap();
    let frames = pipeline.max_frames(3.0).unwrap();
    let cancel = Cancel::default();
    let observer = || Observer { events: &no_events, cancel: &cancel };
    let made = pipeline.generate_frames(&prompt, frames, &mut RngChooser { seed: 3 }, observer()).unwrap();
    let codes = pipeline.generate_codes(&prompt, frames, &mut RngChooser { seed: 3 }, observer()).unwrap();
    let c = &pipeline.constants;
    let base = c.code_offset - c.sampleable_rows().start;
    // The RNG after the codes is never reached: every draw is replayed.
    let mut never = RngChooser { seed: 999 };
    let mut replay = Prefix { codes: &codes, semantic_base: base, then: &mut never };
    let recovered = pipeline.generate_frames(&prompt, codes.frames.len() - 1, &mut replay, observer()).unwrap();
    assert_eq!(recovered.shape(), made.shape());
    assert_eq!(recovered.to_f32_vec(), made.to_f32_vec(), "recovered hidden states differ");
    // Control: a changed code changes the hidden states from its frame on.
    let mut changed = codes.clone();
    changed.frames[2][5] ^= 1;
    let mut replay = Prefix { codes: &changed, semantic_base: base, then: &mut never };
    let other = pipeline.generate_frames(&prompt, codes.frames.len() - 1, &mut replay, observer()).unwrap();
    assert_ne!(other.to_f32_vec(), made.to_f32_vec());
}

/// The forced pass (the kept frames through the language model and the depth decoder at once, as
/// an edit brings the song back to its splice) gives the states the frame-by-frame loop gave: the
/// hidden states of the forced frames that ask for them, and of the frames after, equal the
/// generated ones within float rounding.
#[test]
fn the_forced_pass_recovers_the_hidden_states() {
    for device in devices() {
        let kind = device.kind();
        forced_pass_recovers(&pipeline(device), kind);
    }
}

fn forced_pass_recovers(pipeline: &Pipeline, kind: DeviceKind) {
    use songloom_engine::pipeline::ar::{self, ArModels, Forced};
    let prompt = pipeline.encode_prompt("calm strings", "[verse]\nla la").unwrap();
    let frames = pipeline.max_frames(12.0).unwrap();
    let cancel = Cancel::default();
    let observer = || Observer { events: &no_events, cancel: &cancel };
    let made = pipeline.generate_frames(&prompt, frames, &mut RngChooser { seed: 4 }, observer()).unwrap();
    let codes = pipeline.generate_codes(&prompt, frames, &mut RngChooser { seed: 4 }, observer()).unwrap();
    let c = &pipeline.constants;
    let base = c.code_offset - c.sampleable_rows().start;
    let (half, _) = pipeline.stages().unwrap();
    let models = ArModels { device: &pipeline.device, lm: &half.lm, depth: &half.depth, constants: c };
    let width = made.shape()[1];
    let recovered = |codes: &Codes, forced: usize, hidden_from: usize| -> Vec<f32> {
        let mut never = RngChooser { seed: 999 };
        let mut replay = Prefix { codes, semantic_base: base, then: &mut never };
        let mut hidden = Vec::new();
        let mut keep = |f: ar::Frame| {
            hidden.extend(f.hidden);
            Ok(())
        };
        let forced = Some(Forced { codes, frames: forced, hidden_from });
        ar::run_forced(&models, &prompt, forced, frames, &mut replay, &mut keep, observer()).unwrap();
        hidden
    };
    // Frames 1..=200 forced (the priming frame and 200 emitted), those from 121 on with their
    // states; the 100 after them replayed.
    let after = recovered(&codes, 201, 121);
    let made = made.to_f32_vec();
    assert_eq!(after.len(), (frames - 120) * width, "forced frames before 121 come without hidden states");
    let d = songloom_tests::distance(&after, &made[120 * width..]);
    // The language model's parity bound (tests/tests/parity.rs: twice the reference's bf16 rounding
    // against its f32 control): the pass sums in another order than the loop, as a backend's own
    // kernels do against the reference's.
    let bound = songloom_tests::bf16_bound(&songloom_tests::Golden::open("lm"), "reference", "control").rel;
    assert!(d.rel < bound, "{kind:?}: hidden states after the forced pass: {d:?} (bound {bound})");
    println!("{kind:?}: forced pass against the loop: {d:?}, bound {bound}");
    // Control: the last forced frames' codes shifted by one frame show in every later state.
    let mut shifted = codes.clone();
    shifted.frames.remove(190);
    let d = songloom_tests::distance(&recovered(&shifted, 201, 121), &made[120 * width..]);
    println!("{kind:?}: codes off by one frame: {d:?}");
    assert!(d.rel > bound, "{kind:?}: forced codes off by one frame must show: {d:?}");
}
