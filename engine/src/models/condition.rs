//! The condition encoder: diffusers 0.42.1
//! `models/condition_embedders/condition_embedder_minimax_music3.py`. Defaults match
//! `MiniMaxAI/MiniMax-Music3` `condition_encoder/config.json`.
//!
//! Each frame carries `num_condition_layers` hidden states (the language model's, then one per
//! depth step), laid out layer-major. They are mixed with softmax weights, scaled, convolved over
//! time (k=3) and resampled to the latent rate with nearest neighbours.

use crate::config::ConditionConfig;
use crate::device::{Conv1dParams, Device};
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::weights::VarBuilder;

pub struct ConditionEncoder {
    cfg: ConditionConfig,
    layer_weights: Vec<f32>,
    layer_scale: f32,
    proj: Tensor,
    proj_bias: Tensor,
}

impl ConditionEncoder {
    pub fn new(cfg: &ConditionConfig, vb: &VarBuilder) -> Result<Self> {
        let device = vb.device();
        let logits = device.to_host(&vb.get(&[cfg.num_condition_layers], "layer_weight_logits")?)?;
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let exps: Vec<f32> = logits.iter().map(|l| (l - max).exp()).collect();
        let sum: f32 = exps.iter().sum();
        let layer_scale = device.to_host(&vb.get(&[1], "layer_scale")?)?[0];
        let (h, out) = (cfg.condition_hidden_dim, cfg.out_dim);
        Ok(ConditionEncoder {
            cfg: cfg.clone(),
            layer_weights: exps.iter().map(|e| e / sum).collect(),
            layer_scale,
            proj: vb.get(&[out, h, 3], "proj.weight")?,
            proj_bias: vb.get(&[out], "proj.bias")?,
        })
    }

    pub fn config(&self) -> &ConditionConfig {
        &self.cfg
    }

    /// `frame_hiddens [frames, layers * hidden]` -> `[latent_length(frames), out_dim]`.
    pub fn forward(&self, device: &Device, frame_hiddens: &Tensor) -> Result<Tensor> {
        let (frames, width) = frame_hiddens.dims2("condition encoder")?;
        let h = self.cfg.condition_hidden_dim;
        if width != h * self.cfg.num_condition_layers || frames == 0 {
            return Err(Error::shape(
                "condition encoder",
                format!("frame hiddens {frames}x{width}, expected frames x {}", h * self.cfg.num_condition_layers),
            ));
        }
        let mut mixed: Option<Tensor> = None;
        for (l, &w) in self.layer_weights.iter().enumerate() {
            let part = device.scale(&device.slice_cols(frame_hiddens, l * h, (l + 1) * h)?, w)?;
            mixed = Some(match mixed {
                None => part,
                Some(acc) => device.add(&acc, &part)?,
            });
        }
        let mixed = device.scale(&mixed.expect("at least one layer"), self.layer_scale)?;
        let mixed = device.transpose(&mixed)?;
        let params = Conv1dParams::new(&mixed, &self.proj, 1, 1)?;
        let projected = device.conv1d(&mixed, &self.proj, Some(&self.proj_bias), &params)?;
        let resampled = device.resample_nearest(&projected, self.cfg.latent_length(frames))?;
        device.transpose(&resampled)
    }
}
