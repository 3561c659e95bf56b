//! The song pipeline: prompt -> AR frames -> windows -> stereo audio. [`Pipeline`] loads every
//! stage once; a song runs streamed ([`Pipeline::generate`], in `stream`) or in the reference's
//! order, stage after stage ([`Pipeline::generate_sequential`]), with the same audio.

pub mod ar;
mod events;
pub mod rng;
pub mod sampling;
mod stream;
pub mod windows;

use std::path::Path;
use std::time::Instant;

use self::ar::{ArModels, Chooser, Draw, Frame};
pub use self::events::{Cancel, Event, MAX_DURATION_S, Observer, Request, StageName, Stats};
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
        (observer.events)(Event::Audio { first_sample: 0, samples, sample_rate: self.sample_rate() });
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
