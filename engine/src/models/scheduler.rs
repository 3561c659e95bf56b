//! The flow-matching Euler schedule as the reference sets it up per window (diffusers 0.42.1
//! `schedulers/scheduling_flow_match_euler_discrete.py` with the sigmas of
//! `modular_pipelines/minimax_music3/denoise.py`), plus the CFG combine and the overlap-prefix
//! blend of the denoise loop. Arithmetic follows the reference's dtypes: the sigma grid in f64
//! (numpy), everything after it in f32.

use crate::config::SchedulerConfig;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

#[derive(Debug, Clone)]
pub struct FlowMatchEuler {
    /// Flow time of each step (0 = noise, 1 = data for this checkpoint).
    pub timesteps: Vec<f32>,
    /// `timesteps.len() + 1` sigmas; the last is the terminal value.
    pub sigmas: Vec<f32>,
}

/// numpy's `linspace(start, stop, num)`: `i * step + start`, the last element set to `stop`.
fn linspace(start: f64, stop: f64, num: usize) -> Vec<f64> {
    if num == 1 {
        return vec![start];
    }
    let step = (stop - start) / (num - 1) as f64;
    let mut v: Vec<f64> = (0..num).map(|i| i as f64 * step + start).collect();
    v[num - 1] = stop;
    v
}

impl FlowMatchEuler {
    /// The schedule for `steps` Euler steps: sigmas `linspace(1, 1/steps, steps)`, shifted, then
    /// inverted when the checkpoint says so.
    pub fn new(cfg: &SchedulerConfig, steps: usize) -> Result<Self> {
        let unsupported = [
            (cfg.use_dynamic_shifting, "use_dynamic_shifting"),
            (cfg.stochastic_sampling, "stochastic_sampling"),
            (cfg.use_karras_sigmas, "use_karras_sigmas"),
            (cfg.use_exponential_sigmas, "use_exponential_sigmas"),
            (cfg.use_beta_sigmas, "use_beta_sigmas"),
            (cfg.shift_terminal.is_some_and(|v| v != 0.0), "shift_terminal"),
        ];
        if let Some((_, name)) = unsupported.iter().find(|(on, _)| *on) {
            return Err(Error::Invalid(format!("scheduler option `{name}` is not supported")));
        }
        if steps == 0 {
            return Err(Error::Invalid("the number of steps must be at least 1".into()));
        }
        let shift = cfg.shift as f32;
        let train = cfg.num_train_timesteps as f32;
        let mut sigmas: Vec<f32> = linspace(1.0, 1.0 / steps as f64, steps)
            .into_iter()
            .map(|s| s as f32)
            .map(|s| shift * s / (1.0 + (shift - 1.0) * s))
            .collect();
        let terminal = if cfg.invert_sigmas {
            sigmas.iter_mut().for_each(|s| *s = 1.0 - *s);
            1.0
        } else {
            0.0
        };
        let timesteps = sigmas.iter().map(|s| s * train).collect();
        sigmas.push(terminal);
        Ok(FlowMatchEuler { timesteps, sigmas })
    }

    pub fn len(&self) -> usize {
        self.timesteps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.timesteps.is_empty()
    }

    /// One Euler step: `sample + (sigma[i+1] - sigma[i]) * velocity`.
    pub fn step(&self, device: &Device, i: usize, sample: &Tensor, velocity: &Tensor) -> Result<Tensor> {
        let dt = self.sigmas[i + 1] - self.sigmas[i];
        device.add(sample, &device.scale(velocity, dt)?)
    }
}

/// Classifier-free guidance as diffusers' `ClassifierFreeGuidance`: `uncond + scale * (cond - uncond)`.
pub fn cfg_combine(device: &Device, cond: &Tensor, uncond: &Tensor, scale: f32) -> Result<Tensor> {
    let shift = device.add(cond, &device.scale(uncond, -1.0)?)?;
    device.add(uncond, &device.scale(&shift, scale)?)
}

/// The overlap blend of one denoise step: the first `overlap` latent columns are set to
/// `(1 - (1 - 1e-6) t) * noise_prompt + t * previous`, re-imposing the previous window's latents
/// along the flow path. `latents [c, l]`, `noise_prompt` and `previous` `[c, overlap]`.
pub fn overlap_blend(
    device: &Device,
    latents: &Tensor,
    noise_prompt: &Tensor,
    previous: &Tensor,
    t: f32,
) -> Result<Tensor> {
    let noise_weight = 1.0 - (1.0 - 1e-6f64) as f32 * t;
    let blended = device.add(&device.scale(noise_prompt, noise_weight)?, &device.scale(previous, t)?)?;
    replace_prefix(device, latents, &blended)
}

/// `latents` with its first `prefix.cols` columns replaced by `prefix` (both `[c, *]`).
pub fn replace_prefix(device: &Device, latents: &Tensor, prefix: &Tensor) -> Result<Tensor> {
    let (c, l) = latents.dims2("replace_prefix")?;
    let (pc, overlap) = prefix.dims2("replace_prefix")?;
    if pc != c || overlap > l {
        return Err(Error::shape("replace_prefix", format!("{:?} into {:?}", prefix.shape(), latents.shape())));
    }
    // Work on the transpose so the prefix is a block of rows.
    let rows_t = device.transpose(latents)?;
    let tail = device.slice_rows(&rows_t, overlap, l)?;
    let joined = device.cat_rows(&[&device.transpose(prefix)?, &tail])?;
    device.transpose(&joined)
}
