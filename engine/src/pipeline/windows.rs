//! The acoustic half, window by window (diffusers 0.42.1 `before_denoise.py`, `denoise.py`,
//! `decoders.py`): 200-frame windows with a 100-frame hop, each conditioned, denoised with Euler
//! steps under CFG against zero conditioning while its first latents are pulled onto the previous
//! window's, vocoded whole and cropped.

use super::batch::each_song;
use super::{Event, Observer, Stage};
use crate::config::PipelineConstants;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::models::condition::ConditionEncoder;
use crate::models::dit::{Dit, DitInput};
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

    /// The carry on the device, from the host (where [`to_host`](Self::to_host) left it).
    pub fn to_device(self, device: &Device) -> Result<Carry> {
        let up = |t: Tensor| device.upload(t);
        Ok(Carry { latent: self.latent.map(up).transpose()?, condition: self.condition.map(up).transpose()? })
    }

    /// The same carry on the host, for a song whose windows run on another thread's stream.
    pub fn to_host(&self, device: &Device) -> Result<Carry> {
        let host = |t: &Tensor| Tensor::from_f32(t.shape(), device.to_host(t)?);
        Ok(Carry {
            latent: self.latent.as_ref().map(host).transpose()?,
            condition: self.condition.as_ref().map(host).transpose()?,
        })
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
    let mut window = Denoising::begin(m, index, windows_expected, frames, carry, noise)?;
    while !window.denoised(m) {
        observer.cancel.check()?;
        let mut alone = [(m, &mut window, observer)];
        step_together(&mut alone).outcomes.into_iter().try_for_each(|outcome| outcome)?;
    }
    observer.cancel.check()?;
    window.finish(m, carry, observer)
}

/// What [`step_together`] did: each window's outcome, and how many DiT passes it took.
pub struct Stepped {
    pub outcomes: Vec<Result<()>>,
    pub passes: usize,
}

/// One flow step of each of `windows` (each with its song's models and observer), the CFG pairs
/// of the windows of one length through the DiT as one batch (or, under `cfg_batched: false`,
/// their conditioned branches and then their unconditioned ones): more rows for each product than
/// a window alone has. A window's velocity is the one it gets alone within the f32 bound (a batch
/// changes how the products are blocked, not what they sum). A failed DiT pass fails the windows
/// in it; a window's own op fails it alone.
pub fn step_together(windows: &mut [(&AcousticModels, &mut Denoising, Observer)]) -> Stepped {
    let n = windows.len();
    let mut outcomes: Vec<Result<()>> = windows.iter_mut().map(|(m, window, _)| window.prepare(m)).collect();
    let Some((first, ..)) = windows.first() else { return Stepped { outcomes, passes: 0 } };
    let (dit, device, cfg_batched) = (first.dit, first.device, first.cfg_batched);
    let mut lengths: Vec<usize> = (0..n).filter(|&i| outcomes[i].is_ok()).map(|i| windows[i].1.length()).collect();
    lengths.sort_unstable();
    lengths.dedup();
    let branches: &[&[usize]] = if cfg_batched { &[&[0, 1]] } else { &[&[0], &[1]] };
    let mut velocities: Vec<[Option<Tensor>; 2]> = (0..n).map(|_| [None, None]).collect();
    let mut passes = 0;
    for length in lengths {
        for &branch in branches {
            let members: Vec<usize> =
                (0..n).filter(|&i| outcomes[i].is_ok() && windows[i].1.length() == length).collect();
            let inputs: Vec<DitInput> = members
                .iter()
                .flat_map(|&i| {
                    let pair = windows[i].1.inputs(windows[i].0);
                    branch.iter().map(move |&b| pair[b])
                })
                .collect();
            passes += 1;
            match dit.forward_batch(device, &inputs) {
                Ok(out) => {
                    let mut out = out.into_iter();
                    for &i in &members {
                        for &b in branch {
                            velocities[i][b] = out.next();
                        }
                    }
                }
                Err(e) => members.iter().for_each(|&i| outcomes[i] = Err(each_song(&e))),
            }
        }
    }
    for (i, (m, window, observer)) in windows.iter_mut().enumerate() {
        if outcomes[i].is_ok() {
            outcomes[i] = match std::mem::take(&mut velocities[i]) {
                [Some(v_cond), Some(v_uncond)] => window.advance(m, &v_cond, &v_uncond, *observer),
                _ => Err(Error::Invalid("the DiT gave fewer velocities than it was given windows".into())),
            };
        }
    }
    Stepped { outcomes, passes }
}

/// A window between its conditioning and its vocoding: its latents, how far its flow steps have
/// gone, and what it needs for the rest. Several songs' windows can take their steps together
/// ([`Dit::forward_batch`]); a window's own ops are the same either way.
pub struct Denoising {
    index: usize,
    windows_expected: usize,
    condition: Tensor,
    /// The unconditioned branch's condition.
    zeros: Tensor,
    latents: Tensor,
    /// The previous window's latents over the overlap, and this window's noise there.
    previous: Option<(Tensor, Tensor)>,
    /// The flow steps taken.
    steps_done: usize,
}

impl Denoising {
    /// Window `index` conditioned on its frames `[n, layers * hidden]` and what the window before
    /// handed on, its latents drawn from `noise`.
    pub fn begin(
        m: &AcousticModels,
        index: usize,
        windows_expected: usize,
        frames: &Tensor,
        carry: &Carry,
        noise: &mut dyn NoiseSource,
    ) -> Result<Denoising> {
        let device = m.device;
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
        let latents = device.upload(noise.noise(index, channels, length)?)?;
        let previous = match previous {
            Some(previous) => {
                let prompt = device.transpose(&device.slice_rows(&device.transpose(&latents)?, 0, overlap)?)?;
                Some((previous, prompt))
            }
            None => None,
        };
        let zeros = device.upload(Tensor::zeros(condition.shape()))?;
        Ok(Denoising { index, windows_expected, condition, zeros, latents, previous, steps_done: 0 })
    }

    /// Whether every flow step has been taken.
    pub fn denoised(&self, m: &AcousticModels) -> bool {
        self.steps_done == m.schedule.len()
    }

    /// How many latents the window has (windows of one length go through the DiT together).
    pub fn length(&self) -> usize {
        self.latents.shape()[1]
    }

    /// Pulls the overlap onto the previous window's latents along the flow path, before a step.
    pub fn prepare(&mut self, m: &AcousticModels) -> Result<()> {
        if let Some((previous, prompt)) = &self.previous {
            self.latents = overlap_blend(m.device, &self.latents, prompt, previous, self.t(m))?;
        }
        Ok(())
    }

    /// The next step's CFG pair, conditioned then unconditioned ([`prepare`](Self::prepare) first).
    pub fn inputs(&self, m: &AcousticModels) -> [DitInput<'_>; 2] {
        let (latents, t) = (&self.latents, self.t(m));
        [&self.condition, &self.zeros].map(|condition| DitInput { latents, t, condition })
    }

    fn t(&self, m: &AcousticModels) -> f32 {
        m.schedule.timesteps[self.steps_done]
    }

    /// Takes the step whose CFG pair gave `v_cond` and `v_uncond`.
    pub fn advance(
        &mut self,
        m: &AcousticModels,
        v_cond: &Tensor,
        v_uncond: &Tensor,
        observer: Observer,
    ) -> Result<()> {
        let velocity = cfg_combine(m.device, v_cond, v_uncond, m.guidance)?;
        self.latents = m.schedule.step(m.device, self.steps_done, &self.latents, &velocity)?;
        self.steps_done += 1;
        let stage = Stage::Dit { window: self.index, windows: self.windows_expected };
        (observer.events)(Event::Stage { stage, done: self.steps_done, total: m.schedule.len() });
        Ok(())
    }

    /// The denoised window vocoded; `carry` gets what it hands the next window.
    pub fn finish(self, m: &AcousticModels, carry: &mut Carry, observer: Observer) -> Result<WindowOut> {
        let (c, device, index) = (m.constants, m.device, self.index);
        let mut latents = self.latents;
        if let Some((previous, _)) = &self.previous {
            latents = replace_prefix(device, &latents, previous)?;
        }
        finite(device, &latents, "DiT", index)?;
        let (start, end) = carried_span(latents.shape()[1], c);
        let latents_t = device.transpose(&latents)?;
        carry.latent = Some(device.transpose(&device.slice_rows(&latents_t, start, end)?)?);
        carry.condition = Some(device.slice_rows(&self.condition, start, end)?);
        observer.cancel.check()?;
        let waveform = m.vocoder.forward(device, &latents)?;
        finite(device, &waveform, "vocoder", index)?;
        (observer.events)(Event::Stage {
            stage: Stage::Vocoder { window: index, windows: self.windows_expected },
            done: 1,
            total: 1,
        });
        Ok(WindowOut { latents, waveform })
    }
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
