//! The two halves of the model as the plan loads them: the AR half (language model and depth
//! decoder) and the acoustic half (condition encoder, DiT, vocoder). Streamed, both stay
//! resident; phase by phase, one is loaded while the other is freed.

use std::sync::{Arc, Mutex};

use super::{Event, Half, Stage};
use crate::config::{ConditionConfig, DepthConfig, DitConfig, LmConfig, PipelineConstants, VocoderConfig};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::model_dir::{ACOUSTIC_DTYPE, AR_DTYPE, ModelDir};
use crate::models::{condition::ConditionEncoder, depth::DepthDecoder, dit::Dit, lm::LanguageModel, vocoder::Vocoder};
use crate::plan::{ArFormats, Mode, Plan};
use crate::tensor::DType;
use crate::weights::{Checkpoint, VarBuilder};

pub struct ArHalf {
    pub lm: LanguageModel,
    pub depth: DepthDecoder,
}

pub struct AcousticHalf {
    pub condition: ConditionEncoder,
    pub dit: Dit,
    pub vocoder: Vocoder,
}

/// Where the weights come from.
pub enum Weights {
    Dir(ModelDir),
    /// Made up on the device at the real geometry (benchmarks).
    Synthetic {
        seed: u64,
    },
}

/// Reports loading progress: `done` of `total` components.
pub type LoadEvents<'a> = &'a (dyn Fn(Event) + Sync);

impl Weights {
    fn load_ar(
        &self,
        device: &Device,
        constants: &PipelineConstants,
        formats: ArFormats,
        events: LoadEvents,
    ) -> Result<ArHalf> {
        let progress = |done| events(Event::Stage { stage: Stage::Load { half: Half::Ar }, done, total: 2 });
        progress(0);
        let (lm, depth) = match self {
            Weights::Dir(model) => {
                let lm = model.language_model(device, None, formats.lm)?;
                progress(1);
                (lm, model.depth_decoder(device, formats.depth)?)
            }
            Weights::Synthetic { seed } => {
                let rows = constants.sampleable_rows();
                let vb = VarBuilder::synthetic(*seed, device, AR_DTYPE);
                let lm =
                    LanguageModel::new(&LmConfig::default(), &vb.with_format(formats.lm).with_host_tables(true), rows)?;
                progress(1);
                (lm, DepthDecoder::new(&DepthConfig::default(), &vb.with_format(formats.depth))?)
            }
        };
        device.synchronize()?;
        progress(2);
        Ok(ArHalf { lm, depth })
    }

    /// Refuses acoustic-half files that hold NaN or infinite values, naming the tensor.
    fn check_acoustic_finite(&self) -> Result<()> {
        if let Weights::Dir(model) = self {
            for component in ["condition_encoder", "transformer", "vocoder"] {
                Checkpoint::open(&model.component(component))?.check_finite()?;
            }
        }
        Ok(())
    }

    /// The acoustic half, the DiT's block matrices in `dit` (q8, or as the precision has them).
    fn load_acoustic(&self, device: &Device, dit: DType, events: LoadEvents) -> Result<AcousticHalf> {
        let progress = |done| events(Event::Stage { stage: Stage::Load { half: Half::Acoustic }, done, total: 3 });
        progress(0);
        let half = match self {
            Weights::Dir(model) => {
                let condition = model.condition_encoder(device)?;
                progress(1);
                let dit = model.transformer(device, dit)?;
                progress(2);
                AcousticHalf { condition, dit, vocoder: model.vocoder(device)? }
            }
            Weights::Synthetic { seed } => {
                let ar = VarBuilder::synthetic(*seed, device, AR_DTYPE);
                let acoustic = VarBuilder::synthetic(*seed, device, ACOUSTIC_DTYPE);
                let condition = ConditionEncoder::new(&ConditionConfig::default(), &ar)?;
                progress(1);
                let dit = Dit::new(&DitConfig::default(), &acoustic.with_format(dit))?;
                progress(2);
                AcousticHalf { condition, dit, vocoder: Vocoder::new(&VocoderConfig::default(), &acoustic)? }
            }
        };
        device.synchronize()?;
        progress(3);
        Ok(half)
    }
}

/// The loaded halves, under the plan's mode.
pub struct Halves {
    pub weights: Weights,
    pub formats: ArFormats,
    pub mode: Mode,
    /// The DiT's block matrices (the plan's `acoustic`).
    pub dit: DType,
    ar: Mutex<Option<Arc<ArHalf>>>,
    acoustic: Mutex<Option<Arc<AcousticHalf>>>,
}

fn poisoned() -> Error {
    Error::Invalid("a model half was poisoned by a failed load".into())
}

impl Halves {
    /// Loads what the plan keeps resident: both halves when streamed, the AR half (the first a song
    /// needs) when phase by phase.
    pub fn load(
        weights: Weights,
        plan: &Plan,
        device: &Device,
        constants: &PipelineConstants,
        events: LoadEvents,
    ) -> Result<Self> {
        let halves = Halves {
            weights,
            formats: plan.formats,
            mode: plan.mode,
            dit: plan.acoustic,
            ar: Mutex::new(None),
            acoustic: Mutex::new(None),
        };
        // Phase by phase the acoustic half loads (and is checked as it loads) only after the AR
        // half has run: its files are checked now, so damaged weights are named before a song.
        if plan.mode == Mode::Phased {
            halves.weights.check_acoustic_finite()?;
        }
        halves.ar(device, constants, events)?;
        if plan.mode == Mode::Streamed {
            halves.acoustic(device, events)?;
        }
        Ok(halves)
    }

    /// The AR half, loaded if it is not (phase by phase, after freeing the acoustic half).
    pub fn ar(&self, device: &Device, constants: &PipelineConstants, events: LoadEvents) -> Result<Arc<ArHalf>> {
        if let Some(half) = self.ar.lock().map_err(|_| poisoned())?.as_ref() {
            return Ok(half.clone());
        }
        if self.mode == Mode::Phased {
            self.free(&self.acoustic, device)?;
        }
        let half = Arc::new(self.weights.load_ar(device, constants, self.formats, events)?);
        *self.ar.lock().map_err(|_| poisoned())? = Some(half.clone());
        Ok(half)
    }

    /// The acoustic half, loaded if it is not (phase by phase, after freeing the AR half).
    pub fn acoustic(&self, device: &Device, events: LoadEvents) -> Result<Arc<AcousticHalf>> {
        if let Some(half) = self.acoustic.lock().map_err(|_| poisoned())?.as_ref() {
            return Ok(half.clone());
        }
        if self.mode == Mode::Phased {
            self.free(&self.ar, device)?;
        }
        let half = Arc::new(self.weights.load_acoustic(device, self.dit, events)?);
        *self.acoustic.lock().map_err(|_| poisoned())? = Some(half.clone());
        Ok(half)
    }

    /// Drops a half (its memory back to the pool once no run holds it) and hands the pool's unused
    /// memory back to the driver, so the other half has the room.
    fn free<T>(&self, half: &Mutex<Option<Arc<T>>>, device: &Device) -> Result<()> {
        let mut slot = half.lock().map_err(|_| poisoned())?;
        if slot.as_ref().is_some_and(|h| Arc::strong_count(h) > 1) {
            return Err(Error::Invalid("a model half is still in use by another song".into()));
        }
        if slot.take().is_some() {
            device.release_unused_memory()?;
        }
        Ok(())
    }
}
