//! What the progress view shows: each stage's position, elapsed time, an estimate of the time
//! left, and the time to first audio. Fed by engine events and a clock the caller owns, so it is
//! the same on the desktop and in a browser.

use crate::contract::{EngineEvent, Half, Stage, Timings};

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

    /// Takes one event of this job, seen at time `now_s`.
    pub fn apply(&mut self, event: &EngineEvent, now_s: f64) {
        match event {
            EngineEvent::Stage { stage: Stage::ArFrames, done, total, .. } => self.frames = (*done, *total),
            EngineEvent::Stage { stage: Stage::Dit { window, windows }, done, total, .. } => {
                self.denoise = Some(Denoise { window: *window, windows: *windows, step: *done, steps: *total });
            }
            EngineEvent::Stage { stage: Stage::Vocoder { window, .. }, .. } => self.windows_vocoded = window + 1,
            EngineEvent::Stage { stage: Stage::Tokenize, .. } => self.tokenized = true,
            EngineEvent::Stage { stage: Stage::Load { half }, done, total, .. } => {
                let acoustic = *half == Half::Acoustic;
                self.loading = (done < total).then_some(Loading { acoustic, done: *done, total: *total });
            }
            EngineEvent::Plan { plan, .. } => self.plan = Some(plan.clone()),
            EngineEvent::Audio { first_sample, samples, sample_rate, .. } => {
                self.samples = first_sample + samples.len() / 2;
                self.sample_rate = *sample_rate;
                self.first_audio_s.get_or_insert(now_s - self.started_s);
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

    /// Seconds left at the rate so far, once there is a rate to go by.
    pub fn eta_s(&self, now_s: f64) -> Option<f64> {
        let fraction = self.fraction();
        let elapsed = now_s - self.started_s;
        (fraction > 0.02 && fraction < 1.0).then(|| elapsed * (1.0 - fraction) / fraction)
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
    fn eta_follows_the_rate_and_first_audio_is_remembered() {
        let mut p = Progress::new(10.0);
        assert_eq!(p.eta_s(10.0), None);
        p.apply(&stage(Stage::ArFrames, 100, 200), 12.0);
        // Half the frames, no denoising yet: a quarter done after 2 s, so 6 s left.
        assert!((p.eta_s(12.0).unwrap() - 6.0).abs() < 1e-9);
        p.apply(&stage(Stage::Dit { window: 0, windows: 2 }, 15, 30), 13.0);
        assert!((p.fraction() - (0.25 + 0.5 * 0.25)).abs() < 1e-9);
        p.apply(&EngineEvent::Audio { job: 1, first_sample: 0, samples: vec![0.0; 8], sample_rate: 44100 }, 14.5);
        p.apply(&EngineEvent::Audio { job: 1, first_sample: 4, samples: vec![0.0; 8], sample_rate: 44100 }, 15.0);
        assert_eq!(p.first_audio_s, Some(4.5));
        assert_eq!(p.frames_per_s(15.0), Some(20.0), "100 frames in 5 s");
        assert_eq!(p.samples, 8);
        p.apply(&EngineEvent::Finished { job: 1, timings: Timings::default() }, 16.0);
        assert_eq!(p.fraction(), 1.0);
        assert!(p.is_done() && p.eta_s(16.0).is_none());
    }
}
