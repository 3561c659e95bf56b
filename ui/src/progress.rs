//! What the progress view shows: each stage's position, elapsed time, an estimate of the time
//! left, and the time to first audio. Fed by engine events and a clock the caller owns, so it is
//! the same on the desktop and in a browser.

use crate::contract::{EngineEvent, Half, Stage, Timings};
use crate::edits::Changed;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Progress {
    pub started_s: f64,
    /// Whether the prompt has been tokenized (the first stage).
    pub tokenized: bool,
    pub frames: (usize, usize),
    /// Where the denoiser is, once it has started.
    pub denoise: Option<Denoise>,
    pub windows_vocoded: usize,
    /// Stereo frames of audio so far, at `sample_rate`.
    pub samples: usize,
    pub sample_rate: u32,
    pub first_audio_s: Option<f64>,
    pub finished: Option<Timings>,
    pub error: Option<String>,
    /// The memory plan, once the engine has made it.
    pub plan: Option<String>,
    /// Which half of the model loads and how far, while it loads.
    pub loading: Option<Loading>,
    /// AR frames the song was planned with (before the model ended it early, if it did).
    pub frames_planned: usize,
    /// The AR frames made, from the first seen.
    pub ar_clock: Clock,
    /// The AR frames made since the acoustic half started (both halves share the device from
    /// there on).
    pub ar_shared_clock: Clock,
    /// The acoustic half's busy time: its denoise steps and its vocoder passes.
    pub acoustic_timer: AcousticTimer,
    /// Seconds of the song made.
    pub audio_clock: Clock,
    /// Seconds of new song the last audio part held.
    pub last_part_s: f64,
    /// For a version of a song: the part that is new. The audio around it is the parent's, sent
    /// all at once: it tells nothing of the rate the song is made at, and playback starts after
    /// the part before it.
    pub changed: Option<Changed>,
}

/// The time the acoustic half spends working, apart from the time it waits for the AR half's
/// frames: the time between two denoise steps of one window, and from a window's last step to its
/// vocoder's end.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AcousticTimer {
    step_total_s: f64,
    steps: usize,
    vocoder_total_s: f64,
    vocoder_passes: usize,
    /// The last denoise step seen: (window, step, time).
    last_step: Option<(usize, usize, f64)>,
    /// When the acoustic half last moved.
    moved_s: Option<f64>,
}

impl AcousticTimer {
    fn step(&mut self, window: usize, step: usize, steps: usize, now_s: f64) {
        match self.last_step {
            Some((w, s, t)) if w == window && step > s => {
                self.step_total_s += now_s - t;
                self.steps += step - s;
            }
            // With one step a window there is no step to time within one: the step is timed from
            // the last window's vocoder pass (any wait for frames in between counted with it).
            Some((w, _, _)) if steps == 1 && w + 1 == window && self.vocoder_passes > 0 => {
                if let Some(t) = self.moved_s {
                    self.step_total_s += now_s - t;
                    self.steps += 1;
                }
            }
            _ => {}
        }
        self.last_step = Some((window, step, now_s));
        self.moved_s = Some(now_s);
    }

    fn vocoded(&mut self, window: usize, now_s: f64) {
        if let Some((w, _, t)) = self.last_step
            && w == window
        {
            self.vocoder_total_s += now_s - t;
            self.vocoder_passes += 1;
        }
        self.moved_s = Some(now_s);
    }

    /// Seconds a denoise step and a vocoder pass take, once each has been timed.
    fn per_step_and_pass_s(&self) -> Option<(f64, f64)> {
        (self.steps > 0 && self.vocoder_passes > 0)
            .then(|| (self.step_total_s / self.steps as f64, self.vocoder_total_s / self.vocoder_passes as f64))
    }
}

/// A count seen at two moments, the first and the latest: its rate between them, which leaves out
/// whatever came before it started (loading the model, reading the lyrics).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Clock {
    /// (time, count) when first seen.
    first: Option<(f64, f64)>,
    /// (time, count) when last seen.
    last: (f64, f64),
}

impl Clock {
    fn see(&mut self, now_s: f64, count: f64) {
        self.first.get_or_insert((now_s, count));
        self.last = (now_s, count);
    }

    /// The count's rate per second, once it has moved.
    pub fn per_s(&self) -> Option<f64> {
        let (t0, c0) = self.first?;
        let (t1, c1) = self.last;
        (t1 > t0 && c1 > c0).then(|| (c1 - c0) / (t1 - t0))
    }

    /// Seconds since it was last seen (zero before it was).
    fn since_s(&self, now_s: f64) -> f64 {
        self.first.map_or(0.0, |_| (now_s - self.last.0).max(0.0))
    }
}

/// Where the denoiser is: step `step` of `steps` in acoustic window `window` (from 0) of
/// `windows`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denoise {
    pub window: usize,
    pub windows: usize,
    pub step: usize,
    pub steps: usize,
}

/// A half of the model loading: `done` of `total` parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loading {
    /// The acoustic half (`false`: the AR half).
    pub acoustic: bool,
    pub done: usize,
    pub total: usize,
}

impl Progress {
    pub fn new(now_s: f64) -> Self {
        Progress { started_s: now_s, ..Default::default() }
    }

    /// The progress of a version of a song whose new part is `changed`.
    pub fn of_version(now_s: f64, changed: Changed) -> Self {
        Progress { changed: Some(changed), ..Progress::new(now_s) }
    }

    /// Takes one event of this job, seen at time `now_s`.
    pub fn apply(&mut self, event: &EngineEvent, now_s: f64) {
        match event {
            EngineEvent::Stage { stage: Stage::ArFrames, done, total, .. } => {
                self.frames = (*done, *total);
                if self.frames_planned == 0 {
                    self.frames_planned = *total;
                }
                self.ar_clock.see(now_s, *done as f64);
                if self.acoustic_timer.moved_s.is_some() {
                    self.ar_shared_clock.see(now_s, *done as f64);
                }
            }
            EngineEvent::Stage { stage: Stage::Dit { window, windows }, done, total, .. } => {
                self.denoise = Some(Denoise { window: *window, windows: *windows, step: *done, steps: *total });
                if self.ar_shared_clock.first.is_none() {
                    self.ar_shared_clock.see(now_s, self.frames.0 as f64);
                }
                self.acoustic_timer.step(*window, *done, *total, now_s);
            }
            EngineEvent::Stage { stage: Stage::Vocoder { window, windows }, .. } => {
                self.windows_vocoded = window + 1;
                // The song may have been found shorter since the last step (the model ended it).
                if let Some(denoise) = self.denoise.as_mut() {
                    denoise.windows = *windows;
                }
                self.acoustic_timer.vocoded(*window, now_s);
            }
            EngineEvent::Stage { stage: Stage::Tokenize, .. } => self.tokenized = true,
            EngineEvent::Stage { stage: Stage::Load { half }, done, total, .. } => {
                let acoustic = *half == Half::Acoustic;
                self.loading = (done < total).then_some(Loading { acoustic, done: *done, total: *total });
            }
            EngineEvent::Plan { plan, .. } => self.plan = Some(plan.clone()),
            EngineEvent::Audio { first_sample, samples, sample_rate, .. } => {
                self.samples = first_sample + samples.len() / 2;
                self.sample_rate = *sample_rate;
                let new = self.changed.map_or(0..usize::MAX, |c| c.frames(*sample_rate));
                let new_frames = self.samples.min(new.end).saturating_sub((*first_sample).max(new.start));
                if new_frames > 0 {
                    self.first_audio_s.get_or_insert(now_s - self.started_s);
                    self.audio_clock.see(now_s, self.audio_s());
                    self.last_part_s = new_frames as f64 / f64::from((*sample_rate).max(1));
                }
            }
            EngineEvent::Finished { timings, .. } => {
                // The engine's own clock is the exact one; the window only saw the events arrive.
                if let Some(first) = timings.time_to_first_audio_s {
                    self.first_audio_s = Some(first);
                }
                self.finished = Some(timings.clone());
            }
            EngineEvent::Failed { message, .. } => self.error = Some(message.clone()),
            EngineEvent::Cancelled { .. } => self.error = Some("cancelled".into()),
            EngineEvent::Saved { .. }
            | EngineEvent::Library { .. }
            | EngineEvent::Loaded { .. }
            | EngineEvent::ModelInfo { .. }
            | EngineEvent::Models { .. }
            | EngineEvent::Download { .. }
            | EngineEvent::DownloadEnded { .. }
            | EngineEvent::ModelFolderChosen { .. }
            | EngineEvent::Folder { .. }
            | EngineEvent::Devices { .. }
            | EngineEvent::Notice { .. }
            | EngineEvent::Problem { .. } => {}
        }
    }

    /// The share of the work done, 0..=1: the AR frames and the denoise steps, weighted equally.
    pub fn fraction(&self) -> f64 {
        if self.finished.is_some() {
            return 1.0;
        }
        let ar = if self.frames.1 == 0 { 0.0 } else { self.frames.0 as f64 / self.frames.1 as f64 };
        let acoustic = match self.denoise {
            Some(Denoise { window, windows, step, steps }) if windows > 0 && steps > 0 => {
                (window as f64 + step as f64 / steps as f64) / windows as f64
            }
            _ => 0.0,
        };
        0.5 * ar + 0.5 * acoustic.min(1.0)
    }

    /// AR frames made per second so far (from the job's start).
    pub fn frames_per_s(&self, now_s: f64) -> Option<f64> {
        let elapsed = self.finished.as_ref().map_or(now_s - self.started_s, |t| t.ar_s);
        (self.frames.0 > 0 && elapsed > 0.0).then(|| self.frames.0 as f64 / elapsed)
    }

    /// Seconds of audio made so far.
    pub fn audio_s(&self) -> f64 {
        self.samples as f64 / self.sample_rate.max(1) as f64
    }

    /// Seconds left, from how fast each half has been working (the time spent loading or waiting
    /// does not count): the acoustic half's denoise steps and vocoder passes left at the time each
    /// has taken; and, while the AR half runs, its frames left at the rate it has kept since both
    /// halves share the device, and then the last window. The later of the two, which run side by
    /// side; each counted down from when its half last moved. None until a window is vocoded.
    pub fn eta_s(&self, now_s: f64) -> Option<f64> {
        if self.is_done() {
            return None;
        }
        let (step_s, pass_s) = self.acoustic_timer.per_step_and_pass_s()?;
        let Denoise { window, windows, step, steps } = self.denoise?;
        let steps_left = (windows * steps).saturating_sub(window * steps + step) as f64;
        let passes_left = windows.saturating_sub(self.windows_vocoded) as f64;
        let since_acoustic_s = self.acoustic_timer.moved_s.map_or(0.0, |t| (now_s - t).max(0.0));
        let acoustic_left_s = steps_left * step_s + passes_left * pass_s - since_acoustic_s;
        let (done, total) = self.frames;
        let ar_then_last_window_s = if done >= total {
            0.0
        } else {
            let frames_per_s = self.ar_shared_clock.per_s().or(self.ar_clock.per_s())?;
            (total - done) as f64 / frames_per_s - self.ar_clock.since_s(now_s) + steps as f64 * step_s + pass_s
        };
        Some(acoustic_left_s.max(ar_then_last_window_s).max(0.0))
    }

    /// Seconds of song made per second, measured on the audio itself once parts have come over at
    /// least [`RATE_SPAN_S`] (a remote engine's parts are the network's pieces, close together).
    pub fn audio_per_s(&self) -> Option<f64> {
        let (t0, _) = self.audio_clock.first?;
        (self.audio_clock.last.0 - t0 >= RATE_SPAN_S).then(|| self.audio_clock.per_s()).flatten()
    }

    /// Seconds of song there will be: the length asked for, or what the AR half made when it has
    /// ended (the model may end a song early).
    pub fn song_s(&self, duration_s: f64) -> f64 {
        let (done, total) = self.frames;
        if total > 0 && done >= total && self.frames_planned > 0 {
            done as f64 / (self.frames_planned as f64 / duration_s)
        } else {
            duration_s
        }
    }

    /// Seconds to wait, from `now_s`, before playing the song (of `duration_s` asked for) from
    /// where it starts playing (its start; a version's new part) plays it through without
    /// stopping for the next part, at the rate it is being made; `Some(0.0)` when it can start
    /// now, `None` while there is no new audio or no rate to go by yet. Audio comes a part at a
    /// time (the whole part once its end is made), so playback keeps the longer of
    /// [`PLAY_LEAD_S`] and the last part ahead of what is made.
    pub fn playback_wait_s(&self, duration_s: f64, now_s: f64) -> Option<f64> {
        if self.finished.is_some() {
            return Some(0.0);
        }
        let start_s = self.changed.map_or(0.0, |c| c.from_s);
        let made_s = self.audio_s();
        if made_s <= start_s {
            return None;
        }
        let song_s = self.song_s(duration_s).max(made_s);
        // Past a re-rendered part, the rest is the parent's, sent at once.
        let end_s = self.changed.and_then(|c| c.to_s).map_or(song_s, |to_s| to_s.min(song_s));
        let rate = self.audio_per_s()?;
        let lead_s = PLAY_LEAD_S.max(self.last_part_s).min(end_s - start_s);
        // Playing from `start_s` now, second x plays at x - start - lead at the latest and is
        // made at (x - made)/rate: both ends must be in time, the first part made and the last.
        let for_start = (start_s + lead_s - made_s) / rate;
        let for_end = (end_s - made_s) / rate - (end_s - start_s - lead_s);
        let since_s = (now_s - self.audio_clock.last.0).max(0.0);
        Some((for_start.max(for_end) - since_s).max(0.0))
    }

    pub fn is_done(&self) -> bool {
        self.finished.is_some() || self.error.is_some()
    }

    /// What the job is doing, in the listener's words, for a song of `duration_s` seconds:
    /// loading, reading the lyrics, composing (the AR frames, as seconds of the song), then
    /// rendering sound (the acoustic windows, as sections).
    pub fn headline(&self, duration_s: f64) -> String {
        if let Some(Loading { acoustic, done, total }) = self.loading {
            let half = if acoustic { "sound" } else { "composer" };
            return format!("Loading the model ({half}): part {} of {total}", done + 1);
        }
        let (done, total) = self.frames;
        if total == 0 {
            return if self.tokenized { "Starting to compose".into() } else { "Reading the lyrics".into() };
        }
        if done < total {
            let made = done as f64 / total as f64 * duration_s;
            return format!("Composing: {made:.0} s of {duration_s:.0} s");
        }
        match self.denoise {
            Some(Denoise { windows, .. }) => {
                format!("Rendering sound: section {} of {windows}", (self.windows_vocoded + 1).min(windows))
            }
            None => "Rendering sound".into(),
        }
    }

    /// The engine's own figures, for the details line.
    pub fn details(&self, now_s: f64) -> String {
        let mut parts = Vec::new();
        let (done, total) = self.frames;
        if total > 0 {
            let rate = self.frames_per_s(now_s).map(|r| format!(", {r:.1} frames/s")).unwrap_or_default();
            parts.push(format!("AR frames {done} / {total}{rate}"));
        }
        if let Some(Denoise { window, windows, step, steps }) = self.denoise {
            parts.push(format!("DiT window {} / {windows}, step {step} / {steps}", window + 1));
            parts.push(format!("vocoder {} / {windows}", self.windows_vocoded));
        }
        let elapsed = self.finished.as_ref().map_or(now_s - self.started_s, |t| t.total_s);
        parts.push(format!("elapsed {elapsed:.1} s"));
        if let Some(first) = self.first_audio_s {
            parts.push(format!("first audio after {first:.1} s"));
        }
        parts.join(" · ")
    }
}

/// Seconds of audio kept ahead of the playhead when playback starts while a song is made, at least.
pub const PLAY_LEAD_S: f64 = 1.0;
/// The shortest time the audio's rate is measured over.
pub const RATE_SPAN_S: f64 = 0.5;

/// `m:ss`, to the nearest second (so a song of 7.98 s reads 0:08, played or not).
pub fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    format!("{}:{:02}", s / 60, s % 60)
}

/// Seconds as a person says them: "8 s", "2 min 10 s".
pub fn in_words(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    if s < 60 { format!("{s} s") } else { format!("{} min {} s", s / 60, s % 60) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model ended the song at 24 s of 30: composing is over, the sections are the 5 its
    /// frames make rather than the 7 planned, and the share done counts the song that exists.
    #[test]
    fn a_song_ended_early_is_rendered_not_still_composed() {
        let mut p = Progress::new(0.0);
        p.apply(&stage(Stage::ArFrames, 500, 750), 5.0);
        p.apply(&stage(Stage::Dit { window: 1, windows: 7 }, 30, 30), 5.0);
        p.apply(&stage(Stage::ArFrames, 600, 600), 6.0);
        assert_eq!(p.headline(30.0), "Rendering sound: section 1 of 7");
        p.apply(&stage(Stage::Dit { window: 2, windows: 5 }, 15, 30), 7.0);
        assert_eq!(p.headline(30.0), "Rendering sound: section 1 of 5");
        assert!((p.fraction() - (0.5 + 0.5 * 2.5 / 5.0)).abs() < 1e-12, "{}", p.fraction());
    }

    #[test]
    fn the_headline_speaks_of_the_song_not_the_engine() {
        let mut p = Progress::new(0.0);
        assert_eq!(p.headline(30.0), "Reading the lyrics");
        p.apply(&stage(Stage::Load { half: Half::Ar }, 0, 2), 0.1);
        assert_eq!(p.headline(30.0), "Loading the model (composer): part 1 of 2");
        p.apply(&stage(Stage::Load { half: Half::Ar }, 2, 2), 0.2);
        p.apply(&stage(Stage::Tokenize, 1, 1), 0.3);
        p.apply(&stage(Stage::ArFrames, 300, 750), 1.0);
        assert_eq!(p.headline(30.0), "Composing: 12 s of 30 s");
        p.apply(&stage(Stage::ArFrames, 750, 750), 2.0);
        p.apply(&stage(Stage::Dit { window: 2, windows: 7 }, 4, 30), 2.5);
        p.apply(&stage(Stage::Vocoder { window: 1, windows: 7 }, 1, 1), 2.6);
        assert_eq!(p.headline(30.0), "Rendering sound: section 3 of 7");
        assert!(
            p.details(3.0).contains("AR frames 750 / 750") && p.details(3.0).contains("DiT window 3 / 7, step 4 / 30")
        );
        assert_eq!((in_words(8.4), in_words(130.0)), ("8 s".to_string(), "2 min 10 s".to_string()));
    }

    fn stage(stage: Stage, done: usize, total: usize) -> EngineEvent {
        EngineEvent::Stage { job: 1, stage, done, total }
    }

    #[test]
    fn eta_follows_the_rates_and_first_audio_is_remembered() {
        let mut p = Progress::new(10.0);
        assert_eq!(p.eta_s(10.0), None);
        p.apply(&stage(Stage::ArFrames, 100, 400), 12.0);
        p.apply(&stage(Stage::ArFrames, 200, 400), 13.0);
        p.apply(&stage(Stage::Dit { window: 0, windows: 4 }, 1, 2), 13.0);
        p.apply(&stage(Stage::Dit { window: 0, windows: 4 }, 2, 2), 13.5);
        assert_eq!(p.eta_s(13.5), None, "no vocoder pass timed yet");
        p.apply(&stage(Stage::Vocoder { window: 0, windows: 4 }, 1, 1), 14.0);
        p.apply(&stage(Stage::ArFrames, 300, 400), 14.0);
        // Steps of 0.5 s and passes of 0.5 s: 6 steps and 3 passes left. The AR half's 100 frames
        // left at 100 frames/s (since the acoustic half started) and the last window come sooner.
        assert!((p.eta_s(14.0).unwrap() - 4.5).abs() < 1e-9, "{:?}", p.eta_s(14.0));
        assert!((p.eta_s(14.5).unwrap() - 4.0).abs() < 1e-9, "counted down between events");
        assert!((p.fraction() - (0.5 * 0.75 + 0.5 * 0.25)).abs() < 1e-9);
        p.apply(&EngineEvent::Audio { job: 1, first_sample: 0, samples: vec![0.0; 8], sample_rate: 44100 }, 14.5);
        p.apply(&EngineEvent::Audio { job: 1, first_sample: 4, samples: vec![0.0; 8], sample_rate: 44100 }, 15.0);
        assert_eq!(p.first_audio_s, Some(4.5));
        assert_eq!(p.frames_per_s(15.0), Some(60.0), "300 frames in 5 s");
        assert_eq!(p.samples, 8);
        p.apply(&EngineEvent::Finished { job: 1, timings: Timings::default() }, 16.0);
        assert_eq!(p.fraction(), 1.0);
        assert!(p.is_done() && p.eta_s(16.0).is_none());
    }

    /// How fast a device makes a song: AR frames a second alone and beside the acoustic half,
    /// seconds a denoise step and a window's vocoder take.
    struct Speeds {
        ar_alone: f64,
        ar_shared: f64,
        step_s: f64,
        vocoder_s: f64,
    }

    /// A 2-core CPU with the small built-in model: the acoustic half is the slower.
    const CPU: Speeds = Speeds { ar_alone: 40.0, ar_shared: 25.0, step_s: 0.6, vocoder_s: 3.0 };
    /// A machine where the AR half is the slower: the acoustic half waits for its frames.
    const AR_BOUND: Speeds = Speeds { ar_alone: 12.0, ar_shared: 10.0, step_s: 0.1, vocoder_s: 0.5 };

    /// A song made streamed at `speeds`: the model loads for 6 s and ends the song at 24 s of the
    /// 30 asked for. The engine's events with the time each came, and when the song was done.
    fn song_made_at(speeds: &Speeds) -> (Vec<(f64, EngineEvent)>, f64) {
        let Speeds { ar_alone, ar_shared, step_s, vocoder_s } = *speeds;
        let (planned, ended, hop) = (750usize, 600usize, 750.0 / 7.0);
        let mut events = vec![(0.0, stage(Stage::Load { half: Half::Ar }, 0, 2)), (6.5, stage(Stage::Tokenize, 1, 1))];
        let (mut t, dt) = (7.0, 0.01);
        let mut frames = 0.0f64;
        let mut last_reported = 0;
        // The window being rendered: (index, seconds into it), or none while waiting for frames.
        let mut window: Option<(usize, f64)> = None;
        let mut next_window = 0usize;
        let mut audio_made = 0usize;
        loop {
            let ar_done = frames as usize >= ended;
            let windows = if ar_done { (ended as f64 / hop).ceil() as usize } else { 7 };
            if !ar_done {
                frames += dt * if window.is_some() { ar_shared } else { ar_alone };
                let made = (frames as usize).min(ended);
                if made >= last_reported + 5 || made >= ended {
                    last_reported = made;
                    let event = if made >= ended {
                        stage(Stage::ArFrames, ended, ended)
                    } else {
                        stage(Stage::ArFrames, made, planned)
                    };
                    events.push((t, event));
                }
            }
            if window.is_none() && next_window < windows {
                let needed = ((next_window + 1) as f64 * hop + 20.0).min(ended as f64);
                if frames >= needed || frames as usize >= ended {
                    window = Some((next_window, 0.0));
                    next_window += 1;
                }
            }
            if let Some((k, into)) = window.as_mut() {
                let step_before = (*into / step_s).floor() as usize;
                *into += dt;
                let step_now = (*into / step_s).floor() as usize;
                if step_now > step_before && step_now <= 30 {
                    events.push((t, stage(Stage::Dit { window: *k, windows }, step_now, 30)));
                }
                if *into >= 30.0 * step_s + vocoder_s {
                    let k = *k;
                    events.push((t, stage(Stage::Vocoder { window: k, windows }, 1, 1)));
                    let end = if k + 1 == windows { ended as f64 / 25.0 } else { (k + 1) as f64 * hop / 25.0 };
                    let end_frame = (end * 100.0) as usize;
                    let samples = vec![0.0; 2 * (end_frame - audio_made)];
                    events
                        .push((t, EngineEvent::Audio { job: 1, first_sample: audio_made, samples, sample_rate: 100 }));
                    audio_made = end_frame;
                    window = None;
                    if k + 1 == windows {
                        events.push((t, EngineEvent::Finished { job: 1, timings: Timings::default() }));
                        return (events, t);
                    }
                }
            }
            t += dt;
        }
    }

    /// Each half-second's estimate of the time left while the song is made (from when there is
    /// one), with the time truly left then.
    fn estimates(
        events: &[(f64, EngineEvent)],
        end_s: f64,
        eta: impl Fn(&Progress, f64) -> Option<f64>,
    ) -> Vec<(f64, f64)> {
        let mut p = Progress::new(0.0);
        let mut next = events.iter().peekable();
        let mut out = Vec::new();
        let mut now = 0.0;
        while now < end_s {
            while let Some((_, event)) = next.next_if(|(at, _)| *at <= now) {
                p.apply(event, now);
            }
            if let Some(left) = eta(&p, now) {
                out.push((left, end_s - now));
            }
            now += 0.5;
        }
        out
    }

    /// How much later than ever before an estimate put the song's end (the time it was said plus
    /// the time left it said), at worst: zero for estimates that only ever counted down or fell.
    fn worst_slip_s(estimates: &[(f64, f64)]) -> f64 {
        let mut earliest_end = f64::MAX;
        let mut worst = 0.0f64;
        for (left, truth) in estimates {
            // The truth counts down to the same end, so `-truth` is the time it was said.
            let end = left - truth;
            earliest_end = earliest_end.min(end);
            worst = worst.max(end - earliest_end);
        }
        worst
    }

    #[test]
    fn the_time_left_never_rises_by_more_than_the_noise_when_the_song_ends_early() {
        for (name, speeds) in [("cpu", CPU), ("AR-bound", AR_BOUND)] {
            let (events, end_s) = song_made_at(&speeds);
            let ours = estimates(&events, end_s, |p, now| p.eta_s(now));
            assert!(
                ours.len() as f64 > end_s,
                "{name}: an estimate for most of the song, {} of {end_s} s",
                ours.len() / 2
            );
            // The noise: the rates' own as the halves take turns on the device (a tenth of the
            // time the estimates cover), the clock's half-second and the events' spacing.
            let noise_s = 0.1 * ours[0].1 + 1.0;
            assert!(worst_slip_s(&ours) <= noise_s, "{name}: the end moved {} s later: {ours:?}", worst_slip_s(&ours));
            // Once the model has ended the song (which no rate foresees), never more than a fifth
            // (or 5 s) off the time truly left.
            let ended =
                |e: &EngineEvent| matches!(e, EngineEvent::Stage { stage: Stage::ArFrames, done: 600, total: 600, .. });
            let ended_s = events.iter().find(|(_, e)| ended(e)).unwrap().0;
            for (estimate, truth) in ours.iter().filter(|(_, truth)| end_s - truth > ended_s + 0.5) {
                assert!(
                    (estimate - truth).abs() <= (0.2 * truth).max(5.0),
                    "{name}: {estimate:.1} s left said, {truth:.1} s true"
                );
            }
        }
        // The control: the share done over the time since the press, as before, puts the end much
        // later as the song goes on.
        let (events, end_s) = song_made_at(&CPU);
        let by_share = estimates(&events, end_s, |p, now| {
            let f = p.fraction();
            (f > 0.02 && f < 1.0).then(|| now * (1.0 - f) / f)
        });
        assert!(worst_slip_s(&by_share) > 20.0, "the control should fail: {by_share:?}");
    }

    #[test]
    fn the_time_left_comes_with_one_step_a_window_too() {
        let mut p = Progress::new(0.0);
        p.apply(&stage(Stage::ArFrames, 100, 100), 1.0);
        for window in 0..3 {
            let t = 2.0 + window as f64;
            p.apply(&stage(Stage::Dit { window, windows: 4 }, 1, 1), t + 0.5);
            p.apply(&stage(Stage::Vocoder { window, windows: 4 }, 1, 1), t + 1.0);
        }
        // A window a second (half the step, half the vocoder), one left.
        assert!((p.eta_s(5.0).unwrap() - 1.0).abs() < 1e-9, "{:?}", p.eta_s(5.0));
    }

    /// A version keeping 20 s of its song, 30 s more asked for: the kept audio comes at once and
    /// sets no rate; playback from the change waits as a new song's from its start would.
    #[test]
    fn a_version_waits_to_play_from_its_change() {
        let audio = |from: usize, to: usize| EngineEvent::Audio {
            job: 1,
            first_sample: from * 100,
            samples: vec![0.0; 2 * (to - from) * 100],
            sample_rate: 100,
        };
        let mut p = Progress::of_version(0.0, Changed { from_s: 20.0, to_s: None });
        p.apply(&audio(0, 20), 1.0);
        assert_eq!(p.playback_wait_s(50.0, 1.0), None, "nothing new yet");
        assert_eq!((p.first_audio_s, p.last_part_s), (None, 0.0));
        p.apply(&audio(20, 24), 10.0);
        assert_eq!(p.playback_wait_s(50.0, 10.0), None, "no rate after one new part");
        p.apply(&audio(24, 26), 14.0);
        // 6 s of the 30 made at 0.5 s a second: as a new song of 30 s, 20 s to wait.
        let wait = p.playback_wait_s(50.0, 14.0).unwrap();
        assert!((wait - 20.0).abs() < 1e-9, "{wait}");
        // Counted as a new song played from its start, it would start far sooner (the kept 20 s
        // to play first): too soon to play through from the change.
        let mut plain = Progress::new(0.0);
        for (event, at) in [(audio(0, 20), 1.0), (audio(20, 24), 10.0), (audio(24, 26), 14.0)] {
            plain.apply(&event, at);
        }
        assert!(plain.playback_wait_s(50.0, 14.0).unwrap() < wait - 10.0);
        // A re-rendered part: the parent's audio after it comes at once and need not be waited for.
        let mut p = Progress::of_version(0.0, Changed { from_s: 10.0, to_s: Some(14.0) });
        p.apply(&audio(0, 10), 1.0);
        p.apply(&audio(10, 12), 2.0);
        p.apply(&audio(12, 14), 3.0);
        assert_eq!(p.playback_wait_s(40.0, 3.0), Some(0.0));
    }

    #[test]
    fn playback_waits_until_the_rest_can_play_through() {
        // 30 s asked for, made at half the speed of playback.
        let mut p = Progress::new(0.0);
        assert_eq!(p.playback_wait_s(30.0, 0.0), None, "nothing made yet");
        let audio = |first: usize, seconds: usize| EngineEvent::Audio {
            job: 1,
            first_sample: first,
            samples: vec![0.0; 2 * seconds * 100],
            sample_rate: 100,
        };
        p.apply(&audio(0, 4), 10.0);
        assert_eq!(p.playback_wait_s(30.0, 10.0), None, "no rate after one part");
        p.apply(&audio(400, 2), 14.0);
        // 6 s made at 0.5 s of song a second: the other 24 s take 48 s to make, and playing from
        // the start, a part (2 s) behind what is made, reaches the end in 28 s: 20 s to wait,
        // counted down while no part comes.
        let wait = p.playback_wait_s(30.0, 14.0).unwrap();
        assert!((wait - 20.0).abs() < 1e-9, "{wait}");
        assert!((p.playback_wait_s(30.0, 19.0).unwrap() - 15.0).abs() < 1e-9);
        // Faster than playback: one lead's worth made is enough.
        let mut fast = Progress::new(0.0);
        fast.apply(&audio(0, 2), 1.0);
        fast.apply(&audio(200, 4), 2.0);
        assert_eq!(fast.playback_wait_s(30.0, 2.0), Some(0.0));
        // Finished: play now.
        p.apply(&EngineEvent::Finished { job: 1, timings: Timings::default() }, 20.0);
        assert_eq!(p.playback_wait_s(30.0, 20.0), Some(0.0));
    }
}
