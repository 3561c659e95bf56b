//! The edits of a song already made, on the tiny model: each keeps the codes and the audio
//! outside what it changes, sample for sample, and renders only the windows it must. An extended
//! song is the longer song (its codes on the CPU, its audio after the crossfade within rounding).
//! Each equality is shown to fail when its window offset is off by one.

use std::sync::{Arc, Mutex};

use songloom_engine::pipeline::ar::Codes;
use songloom_engine::pipeline::edit::{CROSSFADE_S, Edit, Edited, Original};
use songloom_engine::pipeline::score::Score;
use songloom_engine::pipeline::{Cancel, Event, Observer, Pipeline, Request, Resume};
use songloom_engine::{Device, DeviceKind};
use songloom_tests::{cpu, devices, distance, tiny_model_dir};

const LYRICS: &str = "[verse]\nla la la\nsun on the water\n[chorus]\noh oh\nwe go home";

/// A song as the edits see it: request, score and planar audio.
struct Made {
    request: Request,
    score: Score,
    audio: [Vec<f32>; 2],
    /// The audio events' first samples and lengths, in order.
    chunks: Vec<(usize, usize)>,
}

impl Made {
    fn original(&self) -> Original<'_> {
        Original { request: &self.request, score: &self.score, audio: &self.audio }
    }
}

/// Collects a run's audio and score; the audio must come in order, without gaps.
#[derive(Default)]
struct Collect {
    samples: Vec<f32>,
    chunks: Vec<(usize, usize)>,
    score: Option<Arc<Score>>,
}

impl Collect {
    fn event(&mut self, event: Event) {
        match event {
            Event::Audio { first_sample, samples, .. } => {
                assert_eq!(first_sample, self.samples.len() / 2, "audio out of order");
                self.chunks.push((first_sample, samples.len() / 2));
                self.samples.extend(samples);
            }
            Event::Score(score) => self.score = Some(score),
            _ => {}
        }
    }

    fn made(self, request: Request) -> Made {
        let n = self.samples.len() / 2;
        let audio = [(0..n).map(|i| self.samples[2 * i]).collect(), (0..n).map(|i| self.samples[2 * i + 1]).collect()];
        Made { request, score: (*self.score.expect("a score")).clone(), audio, chunks: self.chunks }
    }
}

fn request(seconds: f64, seed: u64) -> Request {
    Request {
        description: "warm lo-fi piano, slow".into(),
        lyrics: LYRICS.into(),
        duration_s: seconds,
        seed,
        steps: 4,
        guidance: None,
    }
}

fn generate(pipeline: &Pipeline, req: &Request) -> Made {
    let collect = Mutex::new(Collect::default());
    let events = |e: Event| collect.lock().unwrap().event(e);
    let cancel = Cancel::default();
    pipeline.generate(req, Observer { events: &events, cancel: &cancel }).unwrap();
    collect.into_inner().unwrap().made(req.clone())
}

/// The song of `req` had the model not ended it: its codes drawn with the end token refused, as
/// an extension draws them.
fn generate_unended(pipeline: &Pipeline, req: &Request) -> Made {
    let frames = pipeline.max_frames(req.duration_s).unwrap();
    let prompt = pipeline.encode_prompt(&req.description, &req.lyrics).unwrap();
    let none = Codes::default();
    let resume = Resume {
        codes: &none,
        frames,
        no_end_before_frame: usize::MAX,
        first_window: 0,
        seam: None,
        first_sample: 0,
        noise_seed: req.seed,
    };
    let collect = Mutex::new(Collect::default());
    let events = |e: Event| collect.lock().unwrap().event(e);
    let cancel = Cancel::default();
    let (_, score) =
        pipeline.resume_song(&prompt, req, &resume, Observer { events: &events, cancel: &cancel }).unwrap();
    let mut collected = collect.into_inner().unwrap();
    collected.score = Some(Arc::new(score));
    collected.made(req.clone())
}

fn edit(pipeline: &Pipeline, original: &Made, edit: &Edit, seed: u64) -> (Edited, Made) {
    let collect = Mutex::new(Collect::default());
    let events = |e: Event| collect.lock().unwrap().event(e);
    let cancel = Cancel::default();
    let edited =
        pipeline.edit(&original.original(), edit, seed, Observer { events: &events, cancel: &cancel }).unwrap();
    let made = collect.into_inner().unwrap().made(edited.request.clone());
    assert_eq!(made.audio[0].len(), edited.stats.samples, "the stats count the audio sent");
    assert_eq!(made.score, edited.score, "the Score event is the edit's score");
    (edited, made)
}

fn edit_error(pipeline: &Pipeline, original: &Made, edit: &Edit, seed: u64) -> String {
    let cancel = Cancel::default();
    let observer = Observer { events: &|_| {}, cancel: &cancel };
    pipeline.edit(&original.original(), edit, seed, observer).unwrap_err().to_string()
}

/// Whether both channels agree, bit for bit, on `[from, to)`.
fn same(a: &[Vec<f32>; 2], b: &[Vec<f32>; 2], from: usize, to: usize) -> bool {
    (0..2).all(|ch| a[ch].len() >= to && b[ch].len() >= to && a[ch][from..to] == b[ch][from..to])
}

fn pipeline(device: Device) -> Pipeline {
    Pipeline::load(&tiny_model_dir(), device).unwrap()
}

fn fade(pipeline: &Pipeline) -> usize {
    (CROSSFADE_S * pipeline.sample_rate() as f64) as usize
}

/// The first seed from `from` whose song of `seconds` the model did not end early (the equality
/// with a longer song needs an original that ran its whole length).
fn full_song(pipeline: &Pipeline, seconds: f64, from: u64) -> Made {
    let frames = pipeline.max_frames(seconds).unwrap();
    (from..from + 20)
        .map(|seed| generate(pipeline, &request(seconds, seed)))
        .find(|made| made.score.frames() == frames)
        .expect("a seed whose song runs its length")
}

#[test]
fn an_extended_song_is_the_longer_song() {
    for device in devices() {
        let kind = device.kind();
        let pipeline = pipeline(device);
        extended_is_longer(&pipeline, kind);
    }
}

fn extended_is_longer(pipeline: &Pipeline, kind: DeviceKind) {
    // 12 s: windows at frames 0 and 100, the last one full; 20 s: four windows.
    let original = full_song(pipeline, 12.0, 1);
    let seed = original.request.seed;
    let (edited, extended) = edit(pipeline, &original, &Edit::Extend { seconds: Some(8.0) }, seed);
    let longer = generate_unended(pipeline, &request(20.0, seed));
    let kept = original.score.codes.frames.len();
    assert!(extended.score.codes.frames[..kept] == original.score.codes.frames[..], "{kind:?}: kept codes changed");
    // The kept frames are forced through the language model in one pass, which sums in another
    // order than the frame-by-frame loop: the CPU's kernels keep the draws, a GPU's may turn one.
    if kind == DeviceKind::Cpu {
        assert!(extended.score.codes == longer.score.codes, "12 s extended by 8 s differs from 20 s");
    }
    let splice = edited.changed_from_sample;
    assert!(splice > 0, "the whole last window of the original is kept");
    assert!(same(&extended.audio, &original.audio, 0, splice), "{kind:?}: the audio before the splice changed");
    assert_eq!(extended.chunks[0], (0, splice), "the kept audio comes first, then the new");
    assert_eq!(edited.stats.windows, 2, "only the windows after the splice are rendered");
    if kind != DeviceKind::Cpu {
        return;
    }
    let after = splice + fade(pipeline);
    let end = longer.audio[0].len();
    assert_eq!(extended.audio[0].len(), end);
    // The kept frames before the windows rendered go through the language model in one pass
    // (teacher forcing), in another order of sums than frame by frame: the rendered audio is the
    // longer song's within float rounding, against a different song's distance as the control.
    let d = distance(&extended.audio[0][after..end], &longer.audio[0][after..end]);
    assert!(d.rel < 1e-3, "after the crossfade it is the longer song's audio: {d:?}");
    let seams = |m: &Made| m.score.seams.concat();
    let d = distance(&seams(&extended), &seams(&longer));
    assert!(d.rel < 1e-3, "the extended song's seams are the longer song's: {d:?}");
    // Control, the splice a window late: the kept audio is no longer the original's.
    let span = pipeline.window_spans(original.score.frames())[0].1;
    assert!(!same(&extended.audio, &original.audio, 0, splice + span.min(original.audio[0].len() - splice)));
    // A seam from the wrong window changes what follows the splice.
    let mut wrong = original.score.clone();
    wrong.seams.swap(0, 1);
    let wrong = Made { score: wrong, audio: original.audio.clone(), request: original.request.clone(), chunks: vec![] };
    let (_, off) = edit(pipeline, &wrong, &Edit::Extend { seconds: Some(8.0) }, seed);
    let d = distance(&off.audio[0][after..end], &longer.audio[0][after..end]);
    assert!(d.rel > 1e-2, "a wrong seam must show: {d:?}");
}

#[test]
fn a_rerender_changes_its_range_alone() {
    let pipeline = pipeline(cpu());
    let original = generate(&pipeline, &request(16.0, 3));
    let frames = original.score.frames();
    let length_s = original.audio[0].len() as f64 / pipeline.sample_rate() as f64;
    let (from_s, to_s) = (length_s * 0.4, length_s * 0.6);
    let (edited, new) = edit(&pipeline, &original, &Edit::Rerender { from_s, to_s }, 77);
    let (a, b) = (edited.changed_from_sample, edited.changed_to_sample.expect("the original comes back"));
    let rate = pipeline.sample_rate() as f64;
    assert_eq!((a, b), ((from_s * rate) as usize, (to_s * rate) as usize));
    assert!(new.score.codes == original.score.codes, "a re-render keeps the codes");
    let end = original.audio[0].len();
    assert_eq!(new.audio[0].len(), end);
    assert!(same(&new.audio, &original.audio, 0, a), "before the range");
    assert!(same(&new.audio, &original.audio, b, end), "after the range");
    assert!(!same(&new.audio, &original.audio, a, b), "the range is rendered again");
    let spans = pipeline.window_spans(frames);
    let touched = spans.iter().filter(|&&(s, e)| s < b && e > a).count();
    assert_eq!(edited.stats.windows, touched, "only the windows covering the range are rendered");
    assert!(touched < spans.len());
    // Control: one window off, the range's audio would count as outside and fail the check.
    let span = spans[1].1 - spans[1].0;
    assert!(!same(&new.audio, &original.audio, b - span.min(b), b.saturating_sub(span) + span));
}

#[test]
fn another_path_and_a_resung_line_keep_what_comes_before() {
    let pipeline = pipeline(cpu());
    let original = full_song(&pipeline, 16.0, 5);
    let fps = 25.0;
    let at_s = 10.0;
    let kept = (at_s * fps) as usize;

    let edits = [
        Edit::From { at_s, description: None },
        Edit::From { at_s, description: Some("fast bright strings".into()) },
        Edit::Resing { line: 5, lyrics: "we sail away\n[outro]\nla".into(), at_s: Some(at_s) },
    ];
    for e in &edits {
        let (edited, new) = edit(&pipeline, &original, e, 99);
        let codes = &new.score.codes.frames;
        assert!(codes[..=kept] == original.score.codes.frames[..=kept], "{e:?}: codes before the time are kept");
        assert!(codes[kept + 1..] != original.score.codes.frames[kept + 1..], "{e:?}: and those after drawn again");
        let splice = edited.changed_from_sample;
        assert!(splice > 0 && (splice as f64) <= at_s * pipeline.sample_rate() as f64, "{e:?}: splice {splice}");
        assert!(same(&new.audio, &original.audio, 0, splice), "{e:?}: the audio before the splice is kept");
        // Control: one window later the audio is no longer the original's.
        let span = pipeline.window_spans(original.score.frames())[1];
        assert!(!same(&new.audio, &original.audio, 0, splice + (span.1 - span.0)));
    }
    let (_, resung) = edit(&pipeline, &original, &edits[2], 99);
    assert_eq!(
        resung.request.lyrics,
        "[verse]\nla la la\nsun on the water\n[chorus]\noh oh\nwe sail away\n[outro]\nla"
    );
    // The same seed as the song's would draw the same path: refused.
    let err = edit_error(&pipeline, &original, &edits[0], original.request.seed);
    assert!(err.contains("another seed"), "{err}");
}

#[test]
fn a_score_without_seams_is_edited_the_same() {
    let pipeline = pipeline(cpu());
    let original = full_song(&pipeline, 16.0, 11);
    let e = Edit::Rerender { from_s: 9.0, to_s: 11.0 };
    let (_, with) = edit(&pipeline, &original, &e, 5);
    let bare = Made { score: original.score.codes_only(), ..original };
    let (_, without) = edit(&pipeline, &bare, &e, 5);
    // The seams found again come from the forced pass's hidden states, within float rounding of
    // the loop's; a wrong seam is the control (in the extension test).
    let d = distance(&without.audio[0], &with.audio[0]);
    assert!(d.rel < 1e-3, "the seams found again are the kept ones: {d:?}");
}

#[test]
fn edits_that_cannot_be_made_say_why() {
    let pipeline = pipeline(cpu());
    let original = generate(&pipeline, &request(6.0, 2));
    let other = Made {
        score: Score { model: "music3-0000".into(), ..original.score.clone() },
        ..generate(&pipeline, &request(6.0, 2))
    };
    let err = edit_error(&pipeline, &other, &Edit::Extend { seconds: Some(2.0) }, 2);
    assert!(err.contains("another model") && err.contains("music3-0000"), "{err}");

    let empty = Made {
        score: Score { codes: Codes::default(), ..original.score.clone() },
        ..generate(&pipeline, &request(6.0, 2))
    };
    let err = edit_error(&pipeline, &empty, &Edit::Extend { seconds: Some(2.0) }, 2);
    assert!(err.contains("no frames"), "{err}");

    let mut cut = generate(&pipeline, &request(6.0, 2));
    cut.audio[0].pop();
    cut.audio[1].pop();
    let err = edit_error(&pipeline, &cut, &Edit::Extend { seconds: Some(2.0) }, 2);
    assert!(err.contains("not what its codes make"), "{err}");

    for (e, expected) in [
        (Edit::Rerender { from_s: 3.0, to_s: 2.0 }, "start before its end"),
        (Edit::Rerender { from_s: 1.0, to_s: 60.0 }, "within the song"),
        (Edit::From { at_s: 99.0, description: None }, "within the song"),
        (Edit::Extend { seconds: Some(-1.0) }, "positive"),
        (Edit::Resing { line: 40, lyrics: "x".into(), at_s: None }, "no line 41 (counting from 1; 40 counting from 0)"),
    ] {
        let err = edit_error(&pipeline, &original, &e, 8);
        assert!(err.contains(expected), "{e:?}: {err}");
    }
}
