//! The song pipeline: prompt -> AR frames -> windows -> stereo audio. [`Pipeline`] loads every
//! stage once; a song runs streamed ([`Pipeline::generate`], in `stream`) or in the reference's
//! order, stage after stage ([`Pipeline::generate_sequential`]), with the same audio.

mod acoustic_worker;
pub mod ar;
mod ar_batch;
mod batch;
pub mod edit;
mod events;
mod halves;
pub mod rng;
pub mod sampling;
pub mod score;
mod stream;
pub mod windows;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use self::acoustic_worker::AcousticTally;
use self::ar::{ArModels, Chooser, Draw, Frame};
pub use self::batch::{Arrivals, BatchSong, EventSink, no_arrivals};
pub use self::events::{Cancel, Event, Half, MAX_DURATION_S, Observer, Request, Stage, Stats};
pub use self::halves::{AcousticHalf, ArHalf, LoadEvents};
use self::halves::{Halves, Weights};
use self::rng::Rng;
pub use self::stream::Resume;
use self::windows::{AcousticModels, Carry, NoiseSource, crop, run_window, window_starts};
use crate::config::PipelineConstants;
use crate::config::{self, SchedulerConfig};
use crate::device::{Device, DeviceKind};
use crate::error::{Error, Result};
use crate::lora::Adapters;
use crate::model_dir::ModelDir;
use crate::models::scheduler::FlowMatchEuler;
use crate::plan::{ArFormats, Geometry, Mode, Plan, WeightsChoice, Workload};
use crate::prompt::{PromptEncoder, PromptIds};
use crate::tensor::Tensor;

/// Every stage of a model, loaded as its plan says: once, or a half at a time.
pub struct Pipeline {
    pub device: Device,
    pub constants: PipelineConstants,
    /// None for synthetic weights, which come without a tokenizer.
    prompt: Option<PromptEncoder>,
    scheduler: SchedulerConfig,
    geometry: Geometry,
    plan: Plan,
    halves: Halves,
    /// What the batches' acoustic threads have done so far.
    acoustic_tally: Mutex<AcousticTally>,
    /// Whether the windows of a batch's songs take their flow steps together.
    windows_together: AtomicBool,
}

/// Draws from our seeded RNG, a stream of its own for each draw of each frame: what frame `f`
/// draws depends on the seed and `f` only, so a song continued from its codes draws what one run
/// would have.
pub struct RngChooser {
    pub seed: u64,
}

impl Chooser for RngChooser {
    fn choose(&mut self, frame: usize, draw: Draw, probs: &[f32]) -> Result<usize> {
        Ok(rng::categorical_at(self.draw_uniform(frame, draw), probs))
    }

    fn uniform(&mut self, frame: usize, draw: Draw) -> Option<f64> {
        Some(self.draw_uniform(frame, draw))
    }
}

impl RngChooser {
    /// Each draw's own stream, keyed by its frame and place, so a draw does not depend on which
    /// draws came before it.
    fn draw_uniform(&self, frame: usize, draw: Draw) -> f64 {
        const DRAWS_PER_FRAME: u64 = 16;
        let index = frame as u64 * DRAWS_PER_FRAME + draw.index() as u64;
        Rng::derive(self.seed, "ar-draw", index).uniform()
    }
}

/// Window noise from per-window streams of the seed, so it does not depend on timing.
#[derive(Clone, Copy)]
pub struct SeededNoise {
    pub seed: u64,
}

impl NoiseSource for SeededNoise {
    fn noise(&mut self, window: usize, channels: usize, length: usize) -> Result<Tensor> {
        let values = Rng::derive(self.seed, "window-noise", window as u64).normals(channels * length);
        Tensor::from_f32(&[channels, length], values)
    }
}

/// What a user asks of memory: the AR half's weights and a budget.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MemoryRequest {
    pub weights: WeightsChoice,
    /// `None` for the device's free memory.
    pub max_memory_bytes: Option<u64>,
    /// Streamed or phase by phase; `None` lets the plan choose (streamed where it fits).
    pub mode: Option<Mode>,
}

/// The KV cache positions a plan is made for when no prompt is known (a long description and
/// lyrics).
const PLANNED_PROMPT_TOKENS: usize = 1024;

fn no_events() -> LoadEvents<'static> {
    &|_| {}
}

/// `min(int(duration * frame_rate), max_frames)`, or an error for a duration out of range.
fn frames_for(duration_s: f64, geometry: &Geometry, constants: &PipelineConstants) -> Result<usize> {
    if !(duration_s > 0.0 && duration_s <= MAX_DURATION_S) {
        return Err(Error::Invalid(format!(
            "the duration must be above 0 and at most {MAX_DURATION_S} s, got {duration_s}"
        )));
    }
    let frames = ((duration_s * geometry.condition.frame_rate()) as usize).min(constants.max_frames);
    if frames == 0 {
        return Err(Error::Invalid(format!("{duration_s} s is shorter than one frame of the model")));
    }
    Ok(frames)
}

/// The real checkpoint's geometry, which synthetic weights take, with `lm_head` over the
/// sampleable rows of `constants`.
fn synthetic_geometry(constants: &PipelineConstants) -> Geometry {
    Geometry { head_rows: constants.sampleable_rows().len(), ..Geometry::default() }
}

/// The workload of a song of `prompt` tokens and `frames` frames on `device`.
fn workload(device: &Device, prompt: usize, frames: usize) -> Workload {
    if device.kind() == DeviceKind::Cpu {
        Workload { precision: device.precision(), prompt, frames, runtime_bytes: 0, gpu: false }
    } else {
        Workload::on_gpu(device.precision(), prompt, frames)
    }
}

/// The budget: the one asked for, else (on a GPU) the device's free memory.
fn budget_bytes(device: &Device, asked_bytes: Option<u64>) -> Option<u64> {
    asked_bytes.or_else(|| device.memory().map(|m| m.free))
}

impl Pipeline {
    /// Loads every stage with bf16 AR weights, streamed, with no budget (the reference policy).
    pub fn load(model_dir: &Path, device: Device) -> Result<Self> {
        let model = ModelDir::open(model_dir)?;
        let work = workload(&device, PLANNED_PROMPT_TOKENS, model.constants.max_frames);
        let plan = model.geometry()?.plan(ArFormats::BF16, Mode::Streamed, &work);
        Self::load_planned(model_dir, device, &plan, no_events())
    }

    /// The plan for `request` on `device`: for a song like `song` (its prompt and length), or for a
    /// long prompt and the longest song when `None`. Reads the configs and the tokenizer, no weights.
    pub fn plan(model_dir: &Path, device: &Device, memory: MemoryRequest, song: Option<&Request>) -> Result<Plan> {
        let model = ModelDir::open(model_dir)?;
        let geometry = model.geometry()?;
        let (prompt, frames) = match song {
            Some(req) => {
                let encoder = PromptEncoder::new(&model.component("tokenizer"), &model.constants)?;
                let ids = encoder.encode(&req.description, &req.lyrics)?;
                (ids.cond.len(), frames_for(req.duration_s, &geometry, &model.constants)?)
            }
            None => (PLANNED_PROMPT_TOKENS, model.constants.max_frames),
        };
        let work = workload(device, prompt, frames);
        let budget = budget_bytes(device, memory.max_memory_bytes);
        geometry.choose(memory.weights, memory.mode, model.stored_formats()?, budget, &work)
    }

    /// Loads what `plan` keeps resident and caps the device's memory at its budget.
    pub fn load_planned(model_dir: &Path, device: Device, plan: &Plan, events: LoadEvents) -> Result<Self> {
        Self::load_adapted(model_dir, Adapters::default(), device, plan, events)
    }

    /// [`load_planned`](Self::load_planned) with LoRA adapters merged into the weights at load;
    /// the adapters are checked against the model (keys, shapes, float weights) before any stage
    /// loads.
    pub fn load_adapted(
        model_dir: &Path,
        adapters: Adapters,
        device: Device,
        plan: &Plan,
        events: LoadEvents,
    ) -> Result<Self> {
        let model = ModelDir::open(model_dir)?.with_adapters(adapters)?;
        let prompt = PromptEncoder::new(&model.component("tokenizer"), &model.constants)?;
        let scheduler = config::read_config(&model.component("scheduler"), "scheduler_config.json")?;
        let geometry = model.geometry()?;
        let constants = model.constants.clone();
        device.set_memory_limit(plan.budget_bytes)?;
        let halves = Halves::load(Weights::Dir(model), plan, &device, &constants, events)?;
        let kind = device.kind();
        Ok(Pipeline {
            device,
            constants,
            prompt: Some(prompt),
            scheduler,
            geometry,
            plan: plan.clone(),
            halves,
            acoustic_tally: Mutex::default(),
            windows_together: AtomicBool::new(acoustic_worker::windows_together(kind)),
        })
    }

    /// The plan for synthetic weights at the real geometry, for a song of `prompt` tokens and
    /// `frames` frames.
    pub fn synthetic_plan(device: &Device, memory: MemoryRequest, prompt: usize, frames: usize) -> Result<Plan> {
        let geometry = synthetic_geometry(&PipelineConstants::default());
        let work = workload(device, prompt, frames);
        geometry.choose(memory.weights, memory.mode, None, budget_bytes(device, memory.max_memory_bytes), &work)
    }

    /// Every stage at the real checkpoint's geometry with synthetic weights made on the device
    /// (benchmarks), bf16 AR weights, streamed. There is no tokenizer: use
    /// [`generate_ids`](Self::generate_ids).
    pub fn synthetic(device: Device, seed: u64, constants: PipelineConstants) -> Result<Self> {
        let work = workload(&device, PLANNED_PROMPT_TOKENS, constants.max_frames);
        let plan = synthetic_geometry(&constants).plan(ArFormats::BF16, Mode::Streamed, &work);
        Self::synthetic_planned(device, seed, constants, &plan, no_events())
    }

    /// Synthetic weights under `plan`.
    pub fn synthetic_planned(
        device: Device,
        seed: u64,
        constants: PipelineConstants,
        plan: &Plan,
        events: LoadEvents,
    ) -> Result<Self> {
        let geometry = synthetic_geometry(&constants);
        device.set_memory_limit(plan.budget_bytes)?;
        let halves = Halves::load(Weights::Synthetic { seed }, plan, &device, &constants, events)?;
        let kind = device.kind();
        Ok(Pipeline {
            device,
            constants,
            prompt: None,
            scheduler: SchedulerConfig::default(),
            geometry,
            plan: plan.clone(),
            halves,
            acoustic_tally: Mutex::default(),
            windows_together: AtomicBool::new(acoustic_worker::windows_together(kind)),
        })
    }

    /// Whether `req` can run under the loaded plan (its numbers, its prompt and, against the
    /// budget, its length), without running it.
    pub fn check_song(&self, req: &Request) -> Result<()> {
        let prompt = self.encode_prompt(&req.description, &req.lyrics)?;
        self.validate(req, &prompt).map(|_| ())
    }

    /// The LoRA adapters merged into the weights (none for synthetic weights).
    pub fn adapters(&self) -> Option<&Adapters> {
        match &self.halves.weights {
            Weights::Dir(model) => Some(model.adapters()),
            Weights::Synthetic { .. } => None,
        }
    }

    /// The plan this pipeline was loaded under.
    /// What names the loaded model in a song's [`Score`](score::Score) (synthetic weights by their
    /// seed).
    pub fn model_identity(&self) -> Result<String> {
        match &self.halves.weights {
            Weights::Dir(model) => model.identity(),
            Weights::Synthetic { seed } => Ok(format!("synthetic-{seed}")),
        }
    }

    pub fn loaded_plan(&self) -> &Plan {
        &self.plan
    }

    pub fn formats(&self) -> ArFormats {
        self.plan.formats
    }

    /// Both halves, loaded if need be, for benchmarks that time the stages one by one (streamed
    /// plans only: phase by phase, one half frees the other).
    pub fn stages(&self) -> Result<(Arc<ArHalf>, Arc<AcousticHalf>)> {
        if self.plan.mode == Mode::Phased {
            return Err(Error::Invalid("a phase-by-phase plan holds one half at a time".into()));
        }
        Ok((self.ar_half(no_events())?, self.acoustic_half(no_events())?))
    }

    fn ar_half(&self, events: LoadEvents) -> Result<Arc<ArHalf>> {
        self.halves.ar(&self.device, &self.constants, events)
    }

    fn acoustic_half(&self, events: LoadEvents) -> Result<Arc<AcousticHalf>> {
        self.halves.acoustic(&self.device, events)
    }

    pub fn sample_rate(&self) -> u32 {
        self.geometry.vocoder.sampling_rate as u32
    }

    /// The assembled prompt of a description and lyrics, tokenized.
    pub fn encode_prompt(&self, description: &str, lyrics: &str) -> Result<PromptIds> {
        match &self.prompt {
            Some(encoder) => encoder.encode(description, lyrics),
            None => Err(Error::Invalid("this model has no tokenizer".into())),
        }
    }

    /// `min(int(duration * frame_rate), max_frames)`, or an error for a duration out of range.
    pub fn max_frames(&self, duration_s: f64) -> Result<usize> {
        frames_for(duration_s, &self.geometry, &self.constants)
    }

    fn ar_models<'a>(&'a self, half: &'a ArHalf) -> ArModels<'a> {
        ArModels { device: &self.device, lm: &half.lm, depth: &half.depth, constants: &self.constants }
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
        Ok(self.frames_and_run(prompt, max_frames, chooser, observer)?.0)
    }

    /// [`generate_frames`](Self::generate_frames) with the loop's run: where its time went.
    pub fn frames_and_run(
        &self,
        prompt: &PromptIds,
        max_frames: usize,
        chooser: &mut dyn Chooser,
        observer: Observer,
    ) -> Result<(Tensor, ar::ArRun)> {
        let mut hidden = Vec::new();
        let mut width = 0;
        let half = self.ar_half(observer.events)?;
        let run = ar::run(
            &self.ar_models(&half),
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
        if run.frames == 0 {
            return Err(Error::Invalid("the model ended the song before its first frame".into()));
        }
        Ok((Tensor::from_f32(&[run.frames, width], hidden)?, run))
    }

    /// The whole AR loop for its codes alone (the priming frame's first), the frames' hidden
    /// states not kept: what a song is made of, to store or to continue from.
    pub fn generate_codes(
        &self,
        prompt: &PromptIds,
        max_frames: usize,
        chooser: &mut dyn Chooser,
        observer: Observer,
    ) -> Result<ar::Codes> {
        let half = self.ar_half(observer.events)?;
        let run = ar::run(&self.ar_models(&half), prompt, max_frames, chooser, &mut |_| Ok(()), observer)?;
        Ok(run.codes)
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
        let half = self.acoustic_half(observer.events)?;
        let acoustic = self.acoustic(&half, &schedule, guidance);
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
            let (left, right) = crop(k, k + 1 == starts.len(), n, self.geometry.vocoder.hop_length(), &self.constants);
            for (side, part) in song.iter_mut().zip(stereo_span(&wave, left, right)) {
                side.extend(part);
            }
        }
        Ok(song)
    }

    fn acoustic<'a>(
        &'a self,
        half: &'a AcousticHalf,
        schedule: &'a FlowMatchEuler,
        guidance: Option<f32>,
    ) -> AcousticModels<'a> {
        AcousticModels {
            guidance: guidance.unwrap_or(self.constants.dit_cfg_scale),
            device: &self.device,
            condition: &half.condition,
            dit: &half.dit,
            vocoder: &half.vocoder,
            schedule,
            constants: &self.constants,
            cfg_batched: std::env::var("SONGLOOM_DIT_CFG_BATCH").map_or(true, |v| v != "0"),
        }
    }

    fn noise(&self, seed: u64) -> SeededNoise {
        SeededNoise { seed }
    }

    /// The reference's order: the whole AR loop, then every window. Emits the same audio as
    /// [`generate`](Self::generate), only later.
    pub fn generate_sequential(&self, req: &Request, observer: Observer) -> Result<Stats> {
        let started = Instant::now();
        let prompt = self.tokenize(req, observer)?;
        let max_frames = self.validate(req, &prompt)?;
        let tokenize_s = started.elapsed().as_secs_f64();
        let mut chooser = RngChooser { seed: req.seed };
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
            ..Stats::default()
        };
        (observer.events)(Event::Finished { stats: stats.clone() });
        Ok(stats)
    }

    /// Checks the request's numbers and, against the loaded plan's budget, its length; returns its
    /// frame limit.
    fn validate(&self, req: &Request, prompt: &PromptIds) -> Result<usize> {
        if req.steps == 0 {
            return Err(Error::Invalid("the number of steps must be at least 1".into()));
        }
        if let Some(g) = req.guidance
            && !(g.is_finite() && (0.0..=20.0).contains(&g))
        {
            return Err(Error::Invalid(format!("the guidance scale must be between 0 and 20 (got {g})")));
        }
        let frames = self.max_frames(req.duration_s)?;
        self.plan.for_song(&self.geometry, prompt.cond.len(), frames)?;
        Ok(frames)
    }

    fn tokenize(&self, req: &Request, observer: Observer) -> Result<PromptIds> {
        let prompt = self.encode_prompt(&req.description, &req.lyrics)?;
        (observer.events)(Event::Stage { stage: Stage::Tokenize, done: 1, total: 1 });
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
