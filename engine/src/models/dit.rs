//! The flow-matching DiT: diffusers 0.42.1 `models/transformers/transformer_minimax_music3.py`.
//! Defaults match `MiniMaxAI/MiniMax-Music3` `transformer/config.json`.
//!
//! Input channels are `[latents, zeros, condition]`; a residual 1x1 conv, `proj_in`, the time
//! embedding prepended as one token, pre-LayerNorm blocks with partial rotary attention and a GLU
//! whose first half is the value, then `proj_out` and a residual 1x1 conv. No final norm.

use crate::config::DitConfig;
use crate::device::{AttentionShape, Device, Rotary};
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::weights::VarBuilder;

const LAYER_NORM_EPS: f32 = 1e-5;
const ROPE_THETA: f32 = 10000.0;

struct Block {
    norm1_w: Tensor,
    norm1_b: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    norm2_w: Tensor,
    norm2_b: Tensor,
    ff_in: Tensor,
    ff_in_b: Tensor,
    ff_out: Tensor,
    ff_out_b: Tensor,
}

pub struct Dit {
    cfg: DitConfig,
    fourier: Vec<f32>,
    time_1: Tensor,
    time_1_b: Tensor,
    time_2: Tensor,
    time_2_b: Tensor,
    preprocess: Tensor,
    proj_in: Tensor,
    blocks: Vec<Block>,
    proj_out: Tensor,
    postprocess: Tensor,
}

/// The rotary embedding of a window of `seq` tokens (the time token first).
pub fn rotary(cfg: &DitConfig, seq: usize) -> Rotary {
    Rotary {
        heads: cfg.num_attention_heads,
        head_dim: cfg.attention_head_dim,
        rotary_dim: cfg.rotary_dim,
        theta: ROPE_THETA,
        first_position: 0,
        seq_len: seq,
    }
}

/// The attention of `batch` windows of `seq` tokens each: every token sees every other token of
/// its own window.
pub fn attention_shape(cfg: &DitConfig, seq: usize, batch: usize) -> AttentionShape {
    let heads = cfg.num_attention_heads;
    AttentionShape {
        batch,
        q_len: seq,
        kv_len: seq,
        kv_capacity: seq,
        heads,
        kv_heads: heads,
        head_dim: cfg.attention_head_dim,
        causal: false,
    }
}

impl Dit {
    pub fn new(cfg: &DitConfig, vb: &VarBuilder) -> Result<Self> {
        let inner = cfg.inner_dim();
        let concat = 2 * cfg.in_channels + cfg.condition_dim;
        let (ff, fourier) = (cfg.ff_inner_dim, cfg.fourier_embedding_dim);
        if cfg.rotary_dim > cfg.attention_head_dim || !cfg.rotary_dim.is_multiple_of(2) {
            return Err(Error::Invalid(format!(
                "transformer: rotary_dim {} must be even and at most the head dim {}",
                cfg.rotary_dim, cfg.attention_head_dim
            )));
        }
        let device = vb.device();
        // The matrices in the form the precision policy multiplies them in; the blocks' matrices
        // (97 % of the weights) quantized when the builder's format is (their products unpack
        // them to bf16 first: kernels/quant.cu), or in FP8 under the fp8 policy; the small
        // projections as the policy has them.
        let matrix = |vb: &VarBuilder, shape: &[usize], name: &str| device.product_weight(vb.get(shape, name)?);
        let block_format = if vb.format().is_quantized() { vb.format() } else { device.precision().dit_matrices() };
        let block_matrix = |vb: &VarBuilder, shape: &[usize], name: &str| {
            if block_format.is_packed() {
                vb.with_format(block_format).matrix(shape, name)
            } else {
                matrix(vb, shape, name)
            }
        };
        let blocks = (0..cfg.num_layers)
            .map(|l| {
                let p = vb.pp(format!("transformer_blocks.{l}"));
                Ok(Block {
                    norm1_w: p.get(&[inner], "norm1.weight")?,
                    norm1_b: p.get(&[inner], "norm1.bias")?,
                    q: block_matrix(&p, &[inner, inner], "attn.to_q.weight")?,
                    k: block_matrix(&p, &[inner, inner], "attn.to_k.weight")?,
                    v: block_matrix(&p, &[inner, inner], "attn.to_v.weight")?,
                    out: block_matrix(&p, &[inner, inner], "attn.to_out.0.weight")?,
                    norm2_w: p.get(&[inner], "norm2.weight")?,
                    norm2_b: p.get(&[inner], "norm2.bias")?,
                    ff_in: block_matrix(&p, &[2 * ff, inner], "ff_in.weight")?,
                    ff_in_b: p.get(&[2 * ff], "ff_in.bias")?,
                    ff_out: block_matrix(&p, &[inner, ff], "ff_out.weight")?,
                    ff_out_b: p.get(&[inner], "ff_out.bias")?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Dit {
            cfg: cfg.clone(),
            fourier: device.to_host(&vb.get(&[fourier / 2, 1], "time_proj.weight")?)?,
            time_1: matrix(vb, &[inner, fourier], "time_embed.linear_1.weight")?,
            time_1_b: vb.get(&[inner], "time_embed.linear_1.bias")?,
            time_2: matrix(vb, &[inner, inner], "time_embed.linear_2.weight")?,
            time_2_b: vb.get(&[inner], "time_embed.linear_2.bias")?,
            preprocess: matrix(vb, &[concat, concat, 1], "preprocess_conv.weight")?.reshape(&[concat, concat])?,
            proj_in: matrix(vb, &[inner, concat], "proj_in.weight")?,
            blocks,
            proj_out: matrix(vb, &[cfg.in_channels, inner], "proj_out.weight")?,
            postprocess: matrix(vb, &[cfg.in_channels, cfg.in_channels, 1], "postprocess_conv.weight")?
                .reshape(&[cfg.in_channels, cfg.in_channels])?,
        })
    }

    pub fn config(&self) -> &DitConfig {
        &self.cfg
    }

    /// The time token: Fourier features (cos first) through the two-layer MLP, `[1, inner]`.
    fn time_embedding(&self, device: &Device, t: f32) -> Result<Tensor> {
        // (2*pi*t) @ W^T, in f32, as the reference evaluates it left to right.
        let scaled = (2.0 * std::f64::consts::PI) as f32 * t;
        let angles: Vec<f32> = self.fourier.iter().map(|w| scaled * w).collect();
        let features: Vec<f32> = angles.iter().map(|a| a.cos()).chain(angles.iter().map(|a| a.sin())).collect();
        let features = device.upload(Tensor::from_f32(&[1, features.len()], features)?)?;
        let hidden = device.silu(&device.linear(&features, &self.time_1, Some(&self.time_1_b))?)?;
        device.linear(&hidden, &self.time_2, Some(&self.time_2_b))
    }

    /// Velocity `[channels, length]` for `latents [channels, length]` at flow time `t` under
    /// `condition [length, condition_dim]` (zeros for the unconditional branch).
    pub fn forward(&self, device: &Device, latents: &Tensor, t: f32, condition: &Tensor) -> Result<Tensor> {
        let mut velocities = self.forward_batch(device, &[DitInput { latents, t, condition }])?;
        Ok(velocities.remove(0))
    }

    /// The velocities of a CFG pair, `[conditioned, unconditioned]`: one batch of two windows.
    pub fn forward_cfg(
        &self,
        device: &Device,
        latents: &Tensor,
        t: f32,
        condition: &Tensor,
        unconditioned: &Tensor,
    ) -> Result<[Tensor; 2]> {
        let inputs = [condition, unconditioned].map(|condition| DitInput { latents, t, condition });
        self.forward_batch(device, &inputs)?
            .try_into()
            .map_err(|v: Vec<Tensor>| Error::Invalid(format!("the DiT gave {} velocities for a CFG pair", v.len())))
    }

    /// The velocities of several windows of one length in one pass: their rows stacked through
    /// every product (a CFG pair's two branches fill the tensor cores twice as well as one), each
    /// window attending only to itself. Each velocity is the one [`Dit::forward`] gives its input.
    pub fn forward_batch(&self, device: &Device, inputs: &[DitInput]) -> Result<Vec<Tensor>> {
        let cfg = &self.cfg;
        let Some(first) = inputs.first() else { return Ok(Vec::new()) };
        let (channels, length) = first.latents.dims2("transformer")?;
        for input in inputs {
            if input.latents.shape() != [channels, length]
                || channels != cfg.in_channels
                || input.condition.shape() != [length, cfg.condition_dim]
            {
                return Err(Error::shape(
                    "transformer",
                    format!(
                        "latents {:?} with condition {:?} in a batch of {} windows of {length} latents",
                        input.latents.shape(),
                        input.condition.shape(),
                        inputs.len()
                    ),
                ));
            }
        }
        let zeros = device.upload(Tensor::zeros(&[channels, length]))?;
        let columns = inputs
            .iter()
            .map(|input| {
                device.transpose(&device.cat_rows(&[input.latents, &zeros, &device.transpose(input.condition)?])?)
            })
            .collect::<Result<Vec<_>>>()?;
        let x = device.cat_rows(&columns.iter().collect::<Vec<_>>())?;
        let x = device.add(&device.linear(&x, &self.preprocess, None)?, &x)?;
        let x = device.linear(&x, &self.proj_in, None)?;
        // Each window's rows behind its own time token (one token a flow time, told apart by its
        // bits so that every value, NaN included, finds its own).
        let mut tokens: Vec<(u32, Tensor)> = Vec::new();
        for input in inputs {
            if !tokens.iter().any(|(t, _)| *t == input.t.to_bits()) {
                tokens.push((input.t.to_bits(), self.time_embedding(device, input.t)?));
            }
        }
        let spans = (0..inputs.len())
            .map(|i| device.slice_rows(&x, i * length, (i + 1) * length))
            .collect::<Result<Vec<_>>>()?;
        let mut parts = Vec::with_capacity(2 * inputs.len());
        for (input, span) in inputs.iter().zip(&spans) {
            let token = tokens.iter().find(|(t, _)| *t == input.t.to_bits()).map(|(_, token)| token);
            parts.extend(token);
            parts.push(span);
        }
        let mut x = device.cat_rows(&parts)?;
        let seq = length + 1;
        let (rotary, shape) = (rotary(cfg, seq), attention_shape(cfg, seq, inputs.len()));
        for b in &self.blocks {
            let n = device.layer_norm(&x, &b.norm1_w, &b.norm1_b, LAYER_NORM_EPS)?;
            let [q, k, v] = device.linear3(&n, None, [&b.q, &b.k, &b.v])?;
            let attn = device.attention_rotated(&q, &k, &v, shape, rotary)?;
            x = device.add(&x, &device.linear(&attn, &b.out, None)?)?;
            let n = device.layer_norm(&x, &b.norm2_w, &b.norm2_b, LAYER_NORM_EPS)?;
            let glu = device.linear_glu(&n, &b.ff_in, Some(&b.ff_in_b))?;
            x = device.add(&x, &device.linear(&glu, &b.ff_out, Some(&b.ff_out_b))?)?;
        }
        // Without the time tokens.
        let rows =
            (0..inputs.len()).map(|i| device.slice_rows(&x, i * seq + 1, (i + 1) * seq)).collect::<Result<Vec<_>>>()?;
        let y = device.linear(&device.cat_rows(&rows.iter().collect::<Vec<_>>())?, &self.proj_out, None)?;
        let y = device.add(&device.linear(&y, &self.postprocess, None)?, &y)?;
        (0..inputs.len()).map(|i| device.transpose(&device.slice_rows(&y, i * length, (i + 1) * length)?)).collect()
    }
}

/// One window of a batched DiT forward ([`Dit::forward_batch`]).
#[derive(Clone, Copy)]
pub struct DitInput<'a> {
    /// `[channels, length]`.
    pub latents: &'a Tensor,
    /// The flow time.
    pub t: f32,
    /// `[length, condition_dim]` (zeros for the unconditional branch).
    pub condition: &'a Tensor,
}
