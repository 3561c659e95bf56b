//! The DAC-style Flow-VAE decoder: diffusers 0.42.1 `models/autoencoders/minimax_music3_vocoder.py`.
//! Defaults match `MiniMaxAI/MiniMax-Music3` `vocoder/config.json`.
//!
//! The latent channels fold into two mono streams (first half left, second right, a reshape),
//! each decoded alone: `dec_in_proj`, `conv_in`, upsampling blocks (Snake, ConvTranspose1d, three
//! dilated residual units), Snake, `conv_out`, tanh. Weight norm is folded at load.

use crate::config::VocoderConfig;
use crate::device::{Conv1dParams, ConvTranspose1dParams, Device};
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::weights::VarBuilder;

struct Conv {
    weight: Tensor,
    bias: Tensor,
}

impl Conv {
    fn weight_normed(vb: &VarBuilder, shape: &[usize], name: &str) -> Result<Self> {
        let p = vb.pp(name);
        Ok(Conv { weight: p.get_weight_norm(shape, "weight")?, bias: p.get(&[shape[0]], "bias")? })
    }
}

struct ResidualUnit {
    snake1: Tensor,
    conv1: Conv,
    dilation: usize,
    snake2: Tensor,
    conv2: Conv,
}

struct Block {
    snake: Tensor,
    conv_t: Conv,
    stride: usize,
    units: Vec<ResidualUnit>,
}

pub struct Vocoder {
    cfg: VocoderConfig,
    dec_in_proj: Conv,
    conv_in: Conv,
    blocks: Vec<Block>,
    snake_out: Tensor,
    conv_out: Conv,
}

const RESIDUAL_DILATIONS: [usize; 3] = [1, 3, 9];

impl Vocoder {
    pub fn new(cfg: &VocoderConfig, vb: &VarBuilder) -> Result<Self> {
        let stages = cfg.upsampling_ratios.len() as u32;
        if !cfg.latent_channels.is_multiple_of(2) || !cfg.decoder_hidden_dim.is_multiple_of(2usize.pow(stages)) {
            return Err(Error::Invalid(format!("vocoder: unsupported geometry {cfg:?}")));
        }
        let hidden = cfg.decoder_hidden_dim;
        let alpha = |vb: &VarBuilder, c: usize, name: &str| vb.get(&[1, c, 1], name)?.reshape(&[c]);
        let mut blocks = Vec::new();
        for (i, &stride) in cfg.upsampling_ratios.iter().enumerate() {
            let (c_in, c_out) = (hidden >> i, hidden >> (i + 1));
            let p = vb.pp(format!("blocks.{i}"));
            let units = RESIDUAL_DILATIONS
                .iter()
                .enumerate()
                .map(|(u, &dilation)| {
                    let r = p.pp(format!("res_unit{}", u + 1));
                    Ok(ResidualUnit {
                        snake1: alpha(&r, c_out, "snake1.alpha")?,
                        conv1: Conv::weight_normed(&r, &[c_out, c_out, 7], "conv1")?,
                        dilation,
                        snake2: alpha(&r, c_out, "snake2.alpha")?,
                        conv2: Conv::weight_normed(&r, &[c_out, c_out, 1], "conv2")?,
                    })
                })
                .collect::<Result<_>>()?;
            // ConvTranspose1d weights are [in, out, k]; its bias has `out` entries.
            let conv_t = {
                let c = p.pp("conv_t1");
                Conv {
                    weight: c.get_weight_norm(&[c_in, c_out, 2 * stride], "weight")?,
                    bias: c.get(&[c_out], "bias")?,
                }
            };
            blocks.push(Block { snake: alpha(&p, c_in, "snake1.alpha")?, conv_t, stride, units });
        }
        let last = hidden >> stages;
        Ok(Vocoder {
            cfg: cfg.clone(),
            dec_in_proj: Conv {
                weight: vb.get(&[cfg.decoder_input_dim, cfg.latent_channels / 2, 1], "dec_in_proj.weight")?,
                bias: vb.get(&[cfg.decoder_input_dim], "dec_in_proj.bias")?,
            },
            conv_in: Conv::weight_normed(vb, &[hidden, cfg.decoder_input_dim, 7], "conv_in")?,
            blocks,
            snake_out: alpha(vb, last, "snake_out.alpha")?,
            conv_out: Conv::weight_normed(vb, &[1, last, 7], "conv_out")?,
        })
    }

    pub fn config(&self) -> &VocoderConfig {
        &self.cfg
    }

    /// `latents [latent_channels, length]` -> stereo `[2, length * hop]` in [-1, 1].
    pub fn forward(&self, device: &Device, latents: &Tensor) -> Result<Tensor> {
        let (channels, _) = latents.dims2("vocoder")?;
        if channels != self.cfg.latent_channels {
            return Err(Error::shape("vocoder", format!("latents {:?}", latents.shape())));
        }
        let half = channels / 2;
        let left = self.decode_mono(device, &device.slice_rows(latents, 0, half)?)?;
        let right = self.decode_mono(device, &device.slice_rows(latents, half, channels)?)?;
        device.cat_rows(&[&left, &right])
    }

    fn decode_mono(&self, device: &Device, x: &Tensor) -> Result<Tensor> {
        let conv = |x: &Tensor, c: &Conv, padding: usize, dilation: usize| {
            device.conv1d(x, &c.weight, Some(&c.bias), &Conv1dParams::new(x, &c.weight, padding, dilation)?)
        };
        let mut x = conv(x, &self.dec_in_proj, 0, 1)?;
        x = conv(&x, &self.conv_in, 3, 1)?;
        for block in &self.blocks {
            let s = block.stride;
            let snaked = device.snake(&x, &block.snake)?;
            let params = ConvTranspose1dParams::new(&snaked, &block.conv_t.weight, s, s.div_ceil(2))?;
            x = device.conv_transpose1d(&snaked, &block.conv_t.weight, Some(&block.conv_t.bias), &params)?;
            for unit in &block.units {
                let y = conv(&device.snake(&x, &unit.snake1)?, &unit.conv1, 3 * unit.dilation, unit.dilation)?;
                let y = conv(&device.snake(&y, &unit.snake2)?, &unit.conv2, 0, 1)?;
                x = device.add(&x, &y)?;
            }
        }
        let y = conv(&device.snake(&x, &self.snake_out)?, &self.conv_out, 3, 1)?;
        device.tanh(&y)
    }
}
