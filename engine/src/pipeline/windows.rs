//! The acoustic half, window by window (diffusers 0.42.1 `before_denoise.py`, `denoise.py`,
//! `decoders.py`): 200-frame windows with a 100-frame hop, each conditioned, denoised with Euler
//! steps under CFG against zero conditioning while its first latents are pulled onto the previous
//! window's, vocoded whole and cropped.

use super::{Event, Observer, Stage};
use crate::config::PipelineConstants;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::models::condition::ConditionEncoder;
use crate::models::dit::Dit;
use crate::models::scheduler::{FlowMatchEuler, cfg_combine, overlap_blend, replace_prefix};
use crate::models::vocoder::Vocoder;
use crate::tensor::Tensor;

/// Where window `k` starts, given the total frame count (`chunk_starts` of the reference).
pub fn window_starts(frames: usize, c: &PipelineConstants) -> Vec<usize> {
    if frames <= c.chunk_frames { vec![0] } else { (0..frames - c.chunk_hop).step_by(c.chunk_hop).collect() }
}

/// Supplies each window's initial noise `[channels, length]`.
pub trait NoiseSource {
    fn noise(&mut self, window: usize, channels: usize, length: usize) -> Result<Tensor>;
}

pub struct AcousticModels<'a> {
    /// The DiT's classifier-free guidance scale.
    pub guidance: f32,
    pub device: &'a Device,
    pub condition: &'a ConditionEncoder,
    pub dit: &'a Dit,
    pub vocoder: &'a Vocoder,
    pub schedule: &'a FlowMatchEuler,
    pub constants: &'a PipelineConstants,
    /// Whether a step's two CFG branches go through the DiT as one batch of two windows
    /// (`SONGLOOM_DIT_CFG_BATCH=0` runs them one after the other: to time the batch against).
    pub cfg_batched: bool,
}

/// What carries from one window to the next.
#[derive(Default)]
pub struct Carry {
    latent: Option<Tensor>,
    condition: Option<Tensor>,
}

impl Carry {
    /// What window `index - 1` handed on, found again from its frames `[n, layers * hidden]` and
    /// its seam (the latents it carried, kept in the song's score): the condition is computed
    /// again, as the window computed it from the same frames.
    pub fn resumed(m: &AcousticModels, previous_frames: &Tensor, seam: &[f32]) -> Result<Carry> {
        let device = m.device;
        let condition = m.condition.forward(device, &device.upload(previous_frames.clone())?)?;
        let length = condition.shape()[0];
        let (start, end) = carried_span(length, m.constants);
        let channels = m.dit.config().in_channels;
        if seam.len() != channels * (end - start) {
            return Err(Error::Invalid(format!(
                "the song's seam holds {} values, this model carries {channels} x {} latents from a window",
                seam.len(),
                end - start
            )));
        }
        let latent = device.upload(Tensor::from_f32(&[channels, end - start], seam.to_vec())?)?;
        Ok(Carry { latent: Some(latent), condition: Some(device.slice_rows(&condition, start, end)?) })
    }

    /// The latents carried to the next window, `[channels, overlap]` row-major (a score's seam).
    pub fn seam(&self, device: &Device) -> Result<Option<Vec<f32>>> {
        self.latent.as_ref().map(|l| device.to_host(l)).transpose()
    }
}

/// The latent rows `[start, end)` a window of `length` latents hands the next.
fn carried_span(length: usize, c: &PipelineConstants) -> (usize, usize) {
    let start = length.saturating_sub(2 * c.overlap_latents);
    (start, start.max(length.saturating_sub(c.overlap_latents)))
}

/// A denoised and vocoded window.
pub struct WindowOut {
    pub latents: Tensor,
    /// Stereo `[2, length * hop]`, uncropped.
    pub waveform: Tensor,
}

/// Conditions, denoises and vocodes window `index` from its frames `[n, layers * hidden]`.
pub fn run_window(
    m: &AcousticModels,
    index: usize,
    windows_expected: usize,
    frames: &Tensor,
    carry: &mut Carry,
    noise: &mut dyn NoiseSource,
    observer: Observer,
) -> Result<WindowOut> {
    let (c, device) = (m.constants, m.device);
    let mut condition = m.condition.forward(device, &device.upload(frames.clone())?)?;
    let length = condition.shape()[0];
    let overlap = carry.latent.as_ref().map_or(0, |l| l.shape()[1].min(length));
    let previous = match (&carry.latent, &carry.condition) {
        (Some(latent), Some(cond)) if overlap > 0 => {
            let cond_prefix = device.slice_rows(cond, 0, overlap)?;
            condition = device.cat_rows(&[&cond_prefix, &device.slice_rows(&condition, overlap, length)?])?;
            Some(device.transpose(&device.slice_rows(&device.transpose(latent)?, 0, overlap)?)?)
        }
        _ => None,
    };
    let channels = m.dit.config().in_channels;
    let mut latents = device.upload(noise.noise(index, channels, length)?)?;
    let noise_prompt = match previous {
        Some(_) => Some(device.transpose(&device.slice_rows(&device.transpose(&latents)?, 0, overlap)?)?),
        None => None,
    };
    let zeros = device.upload(Tensor::zeros(condition.shape()))?;
    let stage = Stage::Dit { window: index, windows: windows_expected };
    for (i, &t) in m.schedule.timesteps.iter().enumerate() {
        observer.cancel.check()?;
        if let (Some(prev), Some(prompt)) = (&previous, &noise_prompt) {
            latents = overlap_blend(device, &latents, prompt, prev, t)?;
        }
        let [v_cond, v_uncond] = if m.cfg_batched {
            m.dit.forward_cfg(device, &latents, t, &condition, &zeros)?
        } else {
            [m.dit.forward(device, &latents, t, &condition)?, m.dit.forward(device, &latents, t, &zeros)?]
        };
        let velocity = cfg_combine(device, &v_cond, &v_uncond, m.guidance)?;
        latents = m.schedule.step(device, i, &latents, &velocity)?;
        (observer.events)(Event::Stage { stage, done: i + 1, total: m.schedule.len() });
    }
    if let Some(prev) = &previous {
        latents = replace_prefix(device, &latents, prev)?;
    }
    finite(device, &latents, "DiT", index)?;
    let (start, end) = carried_span(length, c);
    let latents_t = device.transpose(&latents)?;
    carry.latent = Some(device.transpose(&device.slice_rows(&latents_t, start, end)?)?);
    carry.condition = Some(device.slice_rows(&condition, start, end)?);
    observer.cancel.check()?;
    let waveform = m.vocoder.forward(device, &latents)?;
    finite(device, &waveform, "vocoder", index)?;
    (observer.events)(Event::Stage {
        stage: Stage::Vocoder { window: index, windows: windows_expected },
        done: 1,
        total: 1,
    });
    Ok(WindowOut { latents, waveform })
}

/// An error unless every value of a stage's output is finite (a NaN in a weight would otherwise
/// reach the file as NaN audio, or as silence once converted to 16-bit).
fn finite(device: &Device, output: &Tensor, stage: &'static str, index: usize) -> Result<()> {
    match device.count_non_finite(output)? {
        0 => Ok(()),
        count => Err(Error::NonFinite { stage, window: index + 1, count, total: output.elem_count() }),
    }
}

/// The sample range `[left, right)` of a window's waveform that belongs to the song: the first
/// window keeps its start, the last its end; the cuts sit inside the overlap.
pub fn crop(index: usize, is_last: bool, samples: usize, hop: usize, c: &PipelineConstants) -> (usize, usize) {
    let left = if index == 0 { 0 } else { c.crop_left_latents * hop };
    let right = if is_last { samples } else { samples.saturating_sub(c.crop_right_latents * hop) };
    (left.min(right), right)
}
