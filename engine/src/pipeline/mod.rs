//! The song pipeline: prompt -> AR frames -> windows -> stereo audio, streamed. The AR loop runs on
//! one thread and hands frames to the acoustic thread through a channel; a window starts as soon as
//! its 200 frames exist, and its audio leaves the engine, in order, as soon as it is final.

pub mod ar;
pub mod rng;
pub mod sampling;
pub mod windows;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use self::ar::{ArModels, Chooser, Draw, Frame};
use self::rng::Rng;
use self::windows::{AcousticModels, Carry, NoiseSource, crop, run_window, window_starts};
use crate::config::PipelineConstants;
use crate::config::{self, ConditionConfig, DepthConfig, DitConfig, LmConfig, SchedulerConfig, VocoderConfig};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::model_dir::{ACOUSTIC_DTYPE, AR_DTYPE, ModelDir};
use crate::models::{
    condition::ConditionEncoder, depth::DepthDecoder, dit::Dit, lm::LanguageModel, scheduler::FlowMatchEuler,
    vocoder::Vocoder,
};
use crate::prompt::{PromptEncoder, PromptIds};
use crate::tensor::Tensor;
use crate::weights::VarBuilder;

/// The longest song the model makes (its 9000-frame limit at 25 frames/s).
pub const MAX_DURATION_S: f64 = 360.0;

/// A request for one song.
#[derive(Debug, Clone)]
pub struct Request {
    pub prompt: String,
    pub lyrics: String,
    /// An upper bound: the model may end the song earlier.
    pub duration_s: f64,
    pub seed: u64,
    pub steps: usize,
    /// The DiT's classifier-free guidance scale; `None` for the model's own (1.7).
    pub guidance: Option<f32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageName {
    Tokenize,
    ArFrames,
    Denoise { window: usize, windows: usize },
    Vocoder { window: usize, windows: usize },
}

#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub frames: usize,
    pub windows: usize,
    /// Stereo sample frames at `sample_rate`.
    pub samples: usize,
    pub sample_rate: u32,
    pub tokenize_s: f64,
    pub ar_s: f64,
    pub acoustic_s: f64,
    pub total_s: f64,
    pub time_to_first_audio_s: Option<f64>,
}

#[derive(Debug, Clone)]
pub enum Event {
    Stage {
        stage: StageName,
        done: usize,
        total: usize,
    },
    /// Interleaved stereo samples, starting at stereo frame `first_sample`; in order, never revised.
    Audio {
        first_sample: usize,
        samples: Vec<f32>,
    },
    Finished {
        stats: Stats,
    },
}

/// A cancellation token, checked between frames and steps.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() { Err(Error::Cancelled) } else { Ok(()) }
    }
}

/// Where a run reports its events and learns that it is cancelled.
#[derive(Clone, Copy)]
pub struct Observer<'a> {
    pub events: &'a (dyn Fn(Event) + Sync),
    pub cancel: &'a Cancel,
}

/// Every stage of a model, loaded once.
pub struct Pipeline {
    pub device: Device,
    pub constants: PipelineConstants,
    /// None for synthetic weights, which come without a tokenizer.
    prompt: Option<PromptEncoder>,
    scheduler: SchedulerConfig,
    lm: LanguageModel,
    depth: DepthDecoder,
    condition: ConditionEncoder,
    dit: Dit,
    vocoder: Vocoder,
}

/// Draws from our seeded RNG.
pub struct RngChooser(pub Rng);

impl Chooser for RngChooser {
    fn choose(&mut self, _draw: Draw, probs: &[f32]) -> Result<usize> {
        Ok(self.0.categorical(probs))
    }
}

/// Window noise from per-window streams of the seed, so it does not depend on timing.
pub struct SeededNoise {
    pub seed: u64,
}

impl NoiseSource for SeededNoise {
    fn noise(&mut self, window: usize, channels: usize, length: usize) -> Result<Tensor> {
        let values = Rng::derive(self.seed, "window-noise", window as u64).normals(channels * length);
        Tensor::from_f32(&[channels, length], values)
    }
}

impl Pipeline {
    pub fn load(model_dir: &Path, device: Device) -> Result<Self> {
        let model = ModelDir::open(model_dir)?;
        let prompt = PromptEncoder::new(&model.component("tokenizer"), &model.constants)?;
        Pipeline {
            lm: model.language_model(&device, None)?,
            depth: model.depth_decoder(&device)?,
            condition: model.condition_encoder(&device)?,
            dit: model.transformer(&device)?,
            vocoder: model.vocoder(&device)?,
            constants: model.constants.clone(),
            prompt: Some(prompt),
            scheduler: config::read_config(&model.component("scheduler"), "scheduler_config.json")?,
            device,
        }
        .ready()
    }

    /// Waits until every weight is on the device, so any thread's stream may read them.
    fn ready(self) -> Result<Self> {
        self.device.synchronize()?;
        Ok(self)
    }

    /// Every stage at the real checkpoint's geometry with synthetic weights made on the device
    /// (benchmarks). There is no tokenizer: use [`generate_ids`](Self::generate_ids).
    pub fn synthetic(device: Device, seed: u64, constants: PipelineConstants) -> Result<Self> {
        let rows =
            constants.audio_end_id.min(constants.code_offset)..constants.code_offset + constants.semantic_vocab_size;
        let (lm, depth, condition, dit, vocoder) = {
            let ar = VarBuilder::synthetic(seed, &device, AR_DTYPE);
            let acoustic = VarBuilder::synthetic(seed, &device, ACOUSTIC_DTYPE);
            (
                LanguageModel::new(&LmConfig::default(), &ar, rows)?,
                DepthDecoder::new(&DepthConfig::default(), &ar)?,
                ConditionEncoder::new(&ConditionConfig::default(), &ar)?,
                Dit::new(&DitConfig::default(), &acoustic)?,
                Vocoder::new(&VocoderConfig::default(), &acoustic)?,
            )
        };
        Pipeline {
            lm,
            depth,
            condition,
            dit,
            vocoder,
            constants,
            prompt: None,
            scheduler: SchedulerConfig::default(),
            device,
        }
        .ready()
    }

    /// The loaded stages, for benchmarks that time them one by one.
    pub fn stages(&self) -> (&LanguageModel, &DepthDecoder, &ConditionEncoder, &Dit, &Vocoder) {
        (&self.lm, &self.depth, &self.condition, &self.dit, &self.vocoder)
    }

    pub fn sample_rate(&self) -> u32 {
        self.vocoder.config().sampling_rate as u32
    }

    pub fn encode_prompt(&self, prompt: &str, lyrics: &str) -> Result<PromptIds> {
        match &self.prompt {
            Some(encoder) => encoder.encode(prompt, lyrics),
            None => Err(Error::Invalid("this model has no tokenizer".into())),
        }
    }

    /// `min(int(duration * frame_rate), max_frames)`, or an error for a duration out of range.
    pub fn max_frames(&self, duration_s: f64) -> Result<usize> {
        if !(duration_s > 0.0 && duration_s <= MAX_DURATION_S) {
            return Err(Error::Invalid(format!(
                "the duration must be above 0 and at most {MAX_DURATION_S} s, got {duration_s}"
            )));
        }
        let frames = ((duration_s * self.condition.config().frame_rate()) as usize).min(self.constants.max_frames);
        if frames == 0 {
            return Err(Error::Invalid(format!("{duration_s} s is shorter than one frame of the model")));
        }
        Ok(frames)
    }

    fn ar_models(&self) -> ArModels<'_> {
        ArModels { device: &self.device, lm: &self.lm, depth: &self.depth, constants: &self.constants }
    }

    fn schedule(&self, steps: usize) -> Result<FlowMatchEuler> {
        FlowMatchEuler::new(&self.scheduler, steps)
    }

    /// The whole AR loop, then the frames as one `[frames, layers * hidden]` tensor.
    pub fn generate_frames(
        &self,
        prompt: &PromptIds,
        max_frames: usize,
        chooser: &mut dyn Chooser,
        observer: Observer,
    ) -> Result<Tensor> {
        let mut hidden = Vec::new();
        let mut width = 0;
        let frames = ar::run(
            &self.ar_models(),
            prompt,
            max_frames,
            chooser,
            &mut |f: Frame| {
                width = f.hidden.len();
                hidden.extend(f.hidden);
                Ok(())
            },
            observer,
        )?;
        if frames == 0 {
            return Err(Error::Invalid("the model ended the song before its first frame".into()));
        }
        Tensor::from_f32(&[frames, width], hidden)
    }

    /// Every window of `frames` in order, then the cropped song as planar stereo `[2, samples]`;
    /// `guidance` as in [`Request`].
    pub fn render_windows(
        &self,
        frames: &Tensor,
        steps: usize,
        guidance: Option<f32>,
        noise: &mut dyn NoiseSource,
        observer: Observer,
    ) -> Result<[Vec<f32>; 2]> {
        let schedule = self.schedule(steps)?;
        let acoustic = self.acoustic(&schedule, guidance);
        let frames = &self.device.upload(frames.clone())?;
        let count = frames.shape()[0];
        let starts = window_starts(count, &self.constants);
        let mut carry = Carry::default();
        let mut song = [Vec::new(), Vec::new()];
        for (k, &start) in starts.iter().enumerate() {
            let end = (start + self.constants.chunk_frames).min(count);
            let window_frames = self.device.slice_rows(frames, start, end)?;
            let out = run_window(&acoustic, k, starts.len(), &window_frames, &mut carry, noise, observer)?;
            let wave = self.device.to_host(&out.waveform)?;
            let n = wave.len() / 2;
            let (left, right) = crop(k, k + 1 == starts.len(), n, self.vocoder.config().hop_length(), &self.constants);
            for (side, part) in song.iter_mut().zip(stereo_span(&wave, left, right)) {
                side.extend(part);
            }
        }
        Ok(song)
    }

    fn acoustic<'a>(&'a self, schedule: &'a FlowMatchEuler, guidance: Option<f32>) -> AcousticModels<'a> {
        AcousticModels {
            guidance: guidance.unwrap_or(self.constants.dit_cfg_scale),
            device: &self.device,
            condition: &self.condition,
            dit: &self.dit,
            vocoder: &self.vocoder,
            schedule,
            constants: &self.constants,
        }
    }

    fn noise(&self, seed: u64) -> SeededNoise {
        SeededNoise { seed }
    }

    /// The reference's order: the whole AR loop, then every window. Emits the same audio as
    /// [`generate`](Self::generate), only later.
    pub fn generate_sequential(&self, req: &Request, observer: Observer) -> Result<Stats> {
        let started = Instant::now();
        let max_frames = self.validate(req)?;
        let prompt = self.tokenize(req, observer)?;
        let tokenize_s = started.elapsed().as_secs_f64();
        let mut chooser = RngChooser(Rng::new(req.seed));
        let frames = self.generate_frames(&prompt, max_frames, &mut chooser, observer)?;
        let ar_s = started.elapsed().as_secs_f64() - tokenize_s;
        let song = self.render_windows(&frames, req.steps, req.guidance, &mut self.noise(req.seed), observer)?;
        let first_audio = started.elapsed().as_secs_f64();
        let samples = interleave(&song);
        (observer.events)(Event::Audio { first_sample: 0, samples });
        let stats = Stats {
            frames: frames.shape()[0],
            windows: window_starts(frames.shape()[0], &self.constants).len(),
            samples: song[0].len(),
            sample_rate: self.sample_rate(),
            tokenize_s,
            ar_s,
            acoustic_s: first_audio - tokenize_s - ar_s,
            total_s: started.elapsed().as_secs_f64(),
            time_to_first_audio_s: Some(first_audio),
        };
        (observer.events)(Event::Finished { stats: stats.clone() });
        Ok(stats)
    }

    /// Checks the request's numbers; returns its frame limit.
    fn validate(&self, req: &Request) -> Result<usize> {
        if req.steps == 0 {
            return Err(Error::Invalid("the number of steps must be at least 1".into()));
        }
        if let Some(g) = req.guidance
            && !(g.is_finite() && (0.0..=20.0).contains(&g))
        {
            return Err(Error::Invalid(format!("the guidance scale must be between 0 and 20 (got {g})")));
        }
        self.max_frames(req.duration_s)
    }

    fn tokenize(&self, req: &Request, observer: Observer) -> Result<PromptIds> {
        let prompt = self.encode_prompt(&req.prompt, &req.lyrics)?;
        (observer.events)(Event::Stage { stage: StageName::Tokenize, done: 1, total: 1 });
        Ok(prompt)
    }

    /// Generates a song, streaming: windows are denoised while the AR loop goes on, and audio is
    /// emitted as soon as it is final.
    pub fn generate(&self, req: &Request, observer: Observer) -> Result<Stats> {
        let started = Instant::now();
        let prompt = self.tokenize(req, observer)?;
        self.generate_ids(&prompt, req, started, observer)
    }

    /// [`generate`](Self::generate) from token ids already made (`req.prompt` and `req.lyrics`
    /// are not read); `started` is when the request arrived.
    pub fn generate_ids(
        &self,
        prompt: &PromptIds,
        req: &Request,
        started: Instant,
        observer: Observer,
    ) -> Result<Stats> {
        let max_frames = self.validate(req)?;
        let tokenize_s = started.elapsed().as_secs_f64();
        let schedule = self.schedule(req.steps)?;
        let (tx, rx) = mpsc::sync_channel::<Frame>(2 * self.constants.chunk_frames);
        let expected_windows = window_starts(max_frames, &self.constants).len();
        let (ar_result, acoustic_result) = std::thread::scope(|scope| {
            let ar_thread = std::thread::Builder::new().name(crate::cuda::CRITICAL_THREAD_PREFIX.into()).spawn_scoped(
                scope,
                || {
                    let mut chooser = RngChooser(Rng::new(req.seed));
                    let result = ar::run(
                        &self.ar_models(),
                        prompt,
                        max_frames,
                        &mut chooser,
                        &mut |frame| tx.send(frame).map_err(|_| Error::Cancelled),
                        observer,
                    );
                    drop(tx);
                    (result, started.elapsed().as_secs_f64())
                },
            );
            // When this returns (an error included) the receiver is dropped, and the AR thread stops at
            // its next frame.
            let acoustic = self.stream_windows(&schedule, rx, expected_windows, req, started, observer);
            let ar = match ar_thread {
                Ok(handle) => {
                    handle.join().unwrap_or_else(|_| (Err(Error::Invalid("the AR thread failed".into())), 0.0))
                }
                Err(e) => (Err(Error::Invalid(format!("cannot start the AR thread: {e}"))), 0.0),
            };
            (ar, acoustic)
        });
        let (frames, ar_s, acoustic) = match (ar_result, acoustic_result) {
            ((Ok(frames), ar_end), Ok(acoustic)) => (frames, ar_end - tokenize_s, acoustic),
            // The acoustic thread's error is the cause when the AR thread only saw it stop listening.
            (_, Err(e)) => return Err(e),
            ((Err(e), _), _) => return Err(e),
        };
        if frames == 0 {
            return Err(Error::Invalid("the model ended the song before its first frame".into()));
        }
        let stats = Stats {
            frames,
            windows: acoustic.windows,
            samples: acoustic.samples,
            sample_rate: self.sample_rate(),
            tokenize_s,
            ar_s,
            acoustic_s: acoustic.busy.as_secs_f64(),
            total_s: started.elapsed().as_secs_f64(),
            time_to_first_audio_s: acoustic.first_audio_s,
        };
        (observer.events)(Event::Finished { stats: stats.clone() });
        Ok(stats)
    }

    /// The acoustic thread: collects frames, runs each window as soon as it can, emits audio.
    #[allow(clippy::too_many_arguments)]
    fn stream_windows(
        &self,
        schedule: &FlowMatchEuler,
        frames_rx: mpsc::Receiver<Frame>,
        expected_windows: usize,
        req: &Request,
        started: Instant,
        observer: Observer,
    ) -> Result<StreamedAudio> {
        let c = &self.constants;
        let acoustic = self.acoustic(schedule, req.guidance);
        let hop = self.vocoder.config().hop_length();
        let mut noise = self.noise(req.seed);
        let mut carry = Carry::default();
        // Frames from `base` on; earlier ones are no longer needed by any window.
        let mut hidden: Vec<f32> = Vec::new();
        let mut base = 0;
        let mut width = 0;
        let mut count = 0;
        let mut ended = false;
        let mut out = StreamedAudio::default();
        // The tail of the last window run, held until we know whether that window was the last.
        let mut held_tail: Option<[Vec<f32>; 2]> = None;
        let emit = |song: &[Vec<f32>; 2], out: &mut StreamedAudio| {
            if song[0].is_empty() {
                return;
            }
            if out.first_audio_s.is_none() {
                out.first_audio_s = Some(started.elapsed().as_secs_f64());
            }
            let samples = interleave(song);
            (observer.events)(Event::Audio { first_sample: out.samples, samples });
            out.samples += song[0].len();
        };
        let mut k = 0;
        loop {
            let start = k * c.chunk_hop;
            let full = start + c.chunk_frames;
            // Wait for this window's frames, or for the end of the loop.
            while !ended && count < full + 1 {
                match frames_rx.recv() {
                    Ok(frame) => {
                        width = frame.hidden.len();
                        hidden.extend(frame.hidden);
                        count += 1;
                    }
                    Err(_) => ended = true,
                }
                // A window that has all its frames need not wait for the next one to start.
                if count == full && !ended {
                    break;
                }
            }
            observer.cancel.check()?;
            // Window k (k >= 1) exists iff the song has more than start + hop frames.
            let exists = k == 0 || count > start + c.chunk_hop;
            if held_tail.is_some() && (exists || ended) {
                let tail = held_tail.take().expect("checked");
                if !exists {
                    emit(&tail, &mut out); // the previous window was the last one
                }
            }
            if !exists {
                break;
            }
            if !ended && count < full {
                continue;
            }
            let end = full.min(count);
            let frames =
                Tensor::from_f32(&[end - start, width], hidden[(start - base) * width..(end - base) * width].to_vec())?;
            let busy = Instant::now();
            let window = run_window(
                &acoustic,
                k,
                expected_windows.max(k + 1),
                &self.device.upload(frames)?,
                &mut carry,
                &mut noise,
                observer,
            )?;
            let wave = self.device.to_host(&window.waveform)?;
            out.busy += busy.elapsed();
            let n = wave.len() / 2;
            // Known last: the loop ended and no later window exists.
            let known_last = ended && count <= start + c.chunk_frames;
            let (left, right) = crop(k, known_last, n, hop, c);
            let part = |from: usize, to: usize| stereo_span(&wave, from, to);
            emit(&part(left, right), &mut out);
            if !known_last {
                held_tail = Some(part(right, n));
            }
            out.windows += 1;
            k += 1;
            let next_start = (k * c.chunk_hop).min(count);
            hidden.drain(..(next_start - base) * width);
            base = next_start;
        }
        Ok(out)
    }
}

#[derive(Default)]
struct StreamedAudio {
    samples: usize,
    windows: usize,
    first_audio_s: Option<f64>,
    busy: Duration,
}

/// Samples `[from, to)` of each channel of a planar stereo waveform, clamped to [-1, 1] as the
/// reference does at the end.
fn stereo_span(planar: &[f32], from: usize, to: usize) -> [Vec<f32>; 2] {
    let n = planar.len() / 2;
    [0, 1].map(|ch| planar[ch * n + from..ch * n + to].iter().map(|v| v.clamp(-1.0, 1.0)).collect())
}

/// Planar stereo to interleaved.
pub fn interleave(song: &[Vec<f32>; 2]) -> Vec<f32> {
    song[0].iter().zip(&song[1]).flat_map(|(l, r)| [*l, *r]).collect()
}
