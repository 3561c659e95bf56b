//! The RVQ depth decoder: diffusers 0.42.1 `models/transformers/minimax_music3_rvq_depth_decoder.py`
//! driven as `_generate_depth_codes` in `modular_pipelines/minimax_music3/encoders.py` does.
//! Defaults match `MiniMaxAI/MiniMax-Music3` `rvq_depth_decoder/config.json`.
//!
//! The reference re-runs the whole causal prefix for each of the seven codebooks. Attention is
//! causal with learned absolute positions, so keeping each frame's keys and values and running one
//! new position per codebook computes the same thing.

use super::kv_cache::{KV_DTYPE, KvCache};
use super::linear::{Linear, linear3};
use super::swiglu::SwiGlu;
use crate::config::DepthConfig;
use crate::device::{AttentionShape, Device, RecordedStep, RmsNorm};
use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};
use crate::weights::VarBuilder;

const RMS_EPS: f32 = 1e-6;

struct Layer {
    input_norm: Tensor,
    q: Linear,
    k: Linear,
    v: Linear,
    out: Linear,
    mlp: SwiGlu,
}

pub struct DepthDecoder {
    cfg: DepthConfig,
    audio_embeddings: Tensor,
    projection: Linear,
    pos_embedding: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    heads: Vec<Linear>,
    kv_dtype: DType,
}

/// The frames of one AR loop, one at a time: the KV cache over the CFG pair, refilled each frame,
/// the positional rows of each of a frame's calls, and each call recorded where the device records
/// steps (a frame's calls always run at the same positions).
pub struct DepthFrame {
    cache: KvCache,
    /// `pos_embedding` rows of the start's two positions, then of each step's one, per batch entry.
    positions: Vec<Tensor>,
    calls: Vec<RecordedStep>,
}

impl DepthFrame {
    /// The entries the frame was made for.
    pub fn batch(&self) -> usize {
        self.cache.batch()
    }

    /// The frame with its calls run op by op, never recorded (a baseline).
    pub fn op_by_op(mut self) -> Self {
        self.calls.iter_mut().for_each(|c| *c = RecordedStep::op_by_op());
        self
    }

    /// How the frame's calls run, in words.
    pub fn mode(&self) -> String {
        self.calls.first().map(RecordedStep::describe).unwrap_or_default()
    }
}

impl DepthDecoder {
    pub fn new(cfg: &DepthConfig, vb: &VarBuilder) -> Result<Self> {
        let (h, i, v) = (cfg.hidden_size, cfg.intermediate_size, cfg.audio_vocab_size);
        if cfg.num_codebooks < 2 || cfg.num_codebooks > cfg.max_position_embeddings {
            return Err(Error::Invalid(format!(
                "depth decoder: {} codebooks need 2..={} positions",
                cfg.num_codebooks, cfg.max_position_embeddings
            )));
        }
        let layers = (0..cfg.num_layers)
            .map(|l| {
                let p = vb.pp(format!("layers.{l}"));
                Ok(Layer {
                    input_norm: p.get(&[h], "input_layernorm.weight")?,
                    q: Linear::new(&p, &[h, h], "attn.to_q.weight")?,
                    k: Linear::new(&p, &[h, h], "attn.to_k.weight")?,
                    v: Linear::new(&p, &[h, h], "attn.to_v.weight")?,
                    out: Linear::new(&p, &[h, h], "attn.to_out.weight")?,
                    mlp: SwiGlu::new(&p, "post_attention_layernorm.weight", "", h, i)?,
                })
            })
            .collect::<Result<_>>()?;
        let heads = (0..cfg.num_codebooks - 1)
            .map(|k| Linear::new(vb, &[v, h], &format!("audio_heads.{k}.weight")))
            .collect::<Result<_>>()?;
        Ok(DepthDecoder {
            cfg: cfg.clone(),
            audio_embeddings: vb.table(&[v * (cfg.num_codebooks - 1), h], "audio_embeddings.weight")?,
            projection: Linear::new(vb, &[h, h], "projection.weight")?,
            pos_embedding: vb.get(&[cfg.max_position_embeddings, h], "pos_embedding.weight")?,
            layers,
            norm: vb.get(&[h], "norm.weight")?,
            heads,
            kv_dtype: KV_DTYPE,
        })
    }

    /// The decoder with its frames' KV caches in `dtype` rather than [`KV_DTYPE`] (f32 for a test
    /// that holds it against an f32 computation).
    pub fn with_kv_dtype(self, dtype: DType) -> Self {
        DepthDecoder { kv_dtype: dtype, ..self }
    }

    pub fn config(&self) -> &DepthConfig {
        &self.cfg
    }

    /// A frame for `batch` entries, to be started by [`start_frame`](Self::start_frame).
    pub fn new_frame(&self, device: &Device, batch: usize) -> Result<DepthFrame> {
        let (layers, rows, width) = (self.cfg.num_layers, self.cfg.num_codebooks, self.cfg.hidden_size);
        let cache = KvCache::new(device, layers, batch, rows, width, self.kv_dtype)?;
        // Batch-major rows: the start's [b0 p0, b0 p1, b1 p0, b1 p1], then one per step.
        let start: Vec<u32> = (0..batch).flat_map(|_| [0, 1]).collect();
        let mut positions = vec![device.embedding(&self.pos_embedding, &start)?];
        for position in 2..rows {
            positions.push(device.embedding(&self.pos_embedding, &vec![position as u32; batch])?);
        }
        let calls = (0..rows - 1).map(|_| RecordedStep::Untried).collect();
        Ok(DepthFrame { cache, positions, calls })
    }

    /// Starts a frame from the language model's hidden states `[batch, hidden]` and the embedding
    /// of the frame's semantic code `[batch, hidden]`; returns the hidden state that predicts
    /// codebook 1, `[batch, hidden]`.
    pub fn start_frame(
        &self,
        device: &Device,
        frame: &mut DepthFrame,
        lm_hidden: &Tensor,
        c0_embed: &Tensor,
    ) -> Result<Tensor> {
        let batch = frame.cache.batch();
        if lm_hidden.shape()[0] != batch {
            return Err(Error::Invalid(format!("a depth frame of {batch} entries got {}", lm_hidden.shape()[0])));
        }
        frame.cache.clear();
        // Batch-major rows: [b0 p0, b0 p1, b1 p0, b1 p1].
        let mut rows = Vec::with_capacity(2 * batch);
        for b in 0..batch {
            rows.push(device.slice_rows(lm_hidden, b, b + 1)?);
            rows.push(device.slice_rows(c0_embed, b, b + 1)?);
        }
        let inputs = device.cat_rows(&rows.iter().collect::<Vec<_>>())?;
        self.call(device, frame, 0, &inputs, 2)
    }

    /// Feeds the code sampled for codebook `codebook` (1-based, below the last) to every batch
    /// entry; returns the hidden state that predicts codebook `codebook + 1`.
    pub fn step(&self, device: &Device, frame: &mut DepthFrame, codebook: usize, code: u32) -> Result<Tensor> {
        let codes = vec![code; frame.cache.batch()];
        self.step_each(device, frame, codebook, &codes)
    }

    /// [`step`](Self::step) with a code for each batch entry (songs of a batch draw their own).
    pub fn step_each(&self, device: &Device, frame: &mut DepthFrame, codebook: usize, codes: &[u32]) -> Result<Tensor> {
        Self::check_step(frame, codebook, codes.len())?;
        let pairs: Vec<(usize, u32)> = codes.iter().map(|&code| (codebook, code)).collect();
        let inputs = self.code_embeddings(device, &pairs)?;
        self.call(device, frame, codebook, &inputs, 1)
    }

    /// [`step_each`](Self::step_each) with codes drawn on the device
    /// ([`draw_each`](crate::device::SamplingOps::draw_each)), `[batch / 2, 1]`: one a CFG pair,
    /// which both of its entries take.
    pub fn step_drawn(
        &self,
        device: &Device,
        frame: &mut DepthFrame,
        codebook: usize,
        codes: &Tensor,
    ) -> Result<Tensor> {
        Self::check_step(frame, codebook, 2 * codes.elem_count())?;
        if codebook == 0 || codebook >= self.cfg.num_codebooks {
            return Err(Error::Invalid(format!("codebook {codebook} is out of range")));
        }
        let offset = (codebook as u32 - 1) * self.cfg.audio_vocab_size as u32;
        let inputs = device.embedding_drawn(&self.audio_embeddings, codes, offset, 2)?;
        self.call(device, frame, codebook, &inputs, 1)
    }

    /// An error unless `codes` codes are one a batch entry of `frame` and codebook `codebook`
    /// comes next.
    fn check_step(frame: &DepthFrame, codebook: usize, codes: usize) -> Result<()> {
        let batch = frame.cache.batch();
        if codes != batch {
            return Err(Error::Invalid(format!("a depth frame of {batch} entries got {codes} codes")));
        }
        if frame.cache.len() != codebook + 1 {
            return Err(Error::Invalid(format!(
                "the depth step of codebook {codebook} follows {} positions, not {}",
                codebook + 1,
                frame.cache.len()
            )));
        }
        Ok(())
    }

    /// Call `index` of a frame (0 starts it, k feeds codebook k): `new` positions per batch entry.
    fn call(
        &self,
        device: &Device,
        frame: &mut DepthFrame,
        index: usize,
        inputs: &Tensor,
        new: usize,
    ) -> Result<Tensor> {
        let DepthFrame { cache, positions, calls } = frame;
        let shape = [cache.batch(), self.cfg.hidden_size];
        let out = calls[index]
            .run(device, &[], inputs, &shape, &mut |x| self.forward(device, cache, x, &positions[index], new))?;
        cache.advance(new);
        Ok(out)
    }

    /// Whole frames with their codes known (teacher forcing), one batch entry a frame: from the
    /// language model's hidden state `[frames, hidden]`, the semantic code's embedding
    /// `[frames, hidden]` and the residual codes `c1..c7` of each frame, the hidden states that
    /// predict codebooks 1..=7, `[frames * 7, hidden]` frame-major: what the loop's start and
    /// steps return, in one pass over the frame's positions.
    pub fn forced_frames(
        &self,
        device: &Device,
        lm_hidden: &Tensor,
        c0_embed: &Tensor,
        residual: &[&[u32]],
    ) -> Result<Tensor> {
        let n = self.cfg.num_codebooks;
        let frames = residual.len();
        if lm_hidden.shape()[0] != frames || c0_embed.shape()[0] != frames {
            return Err(Error::Invalid(format!(
                "{frames} forced depth frames got {} hidden states",
                lm_hidden.shape()[0]
            )));
        }
        let mut cache = KvCache::new(device, self.cfg.num_layers, frames, n, self.cfg.hidden_size, self.kv_dtype)?;
        // Frame-major rows: [hidden, c0, c1..c_{n-2}] (the last code is never fed).
        let mut rows = Vec::with_capacity(frames * n);
        for (f, codes) in residual.iter().enumerate() {
            if codes.len() + 1 != n {
                return Err(Error::Invalid(format!(
                    "a forced depth frame has {} residual codes, not {}",
                    codes.len(),
                    n - 1
                )));
            }
            rows.push(device.slice_rows(lm_hidden, f, f + 1)?);
            rows.push(device.slice_rows(c0_embed, f, f + 1)?);
            let pairs: Vec<(usize, u32)> = codes[..n - 2].iter().enumerate().map(|(k, &c)| (k + 1, c)).collect();
            rows.push(self.code_embeddings(device, &pairs)?);
        }
        let inputs = device.cat_rows(&rows.iter().collect::<Vec<_>>())?;
        let ids: Vec<u32> = (0..frames).flat_map(|_| 0..n as u32).collect();
        let positions = device.embedding(&self.pos_embedding, &ids)?;
        let x = self.layers(device, &mut cache, &inputs, &positions, n)?;
        // Positions 1..n of each frame predict codebooks 1..n-1.
        let outputs: Vec<Tensor> =
            (0..frames).map(|f| device.slice_rows(&x, f * n + 1, f * n + n)).collect::<Result<_>>()?;
        device.rms_norm(&device.cat_rows(&outputs.iter().collect::<Vec<_>>())?, &self.norm, RMS_EPS)
    }

    /// Logits of codebook `codebook` (1-based) from its hidden state: `[batch, audio_vocab]`.
    pub fn head_logits(&self, device: &Device, codebook: usize, hidden: &Tensor) -> Result<Tensor> {
        self.heads[codebook - 1].forward(device, hidden)
    }

    /// Rows of `audio_embeddings` for `(codebook, code)` pairs (codebooks 1-based).
    pub fn code_embeddings(&self, device: &Device, codes: &[(usize, u32)]) -> Result<Tensor> {
        let v = self.cfg.audio_vocab_size as u32;
        let mut ids = Vec::with_capacity(codes.len());
        for &(codebook, code) in codes {
            if codebook == 0 || codebook >= self.cfg.num_codebooks || code >= v {
                return Err(Error::Invalid(format!("code {code} of codebook {codebook} is out of range")));
            }
            ids.push(code + (codebook as u32 - 1) * v);
        }
        device.embedding(&self.audio_embeddings, &ids)
    }

    /// Runs `new` positions per batch entry (rows batch-major, unprojected, with their positional
    /// rows `positions`) and returns each entry's last normed hidden state; the caller marks the
    /// positions valid.
    fn forward(
        &self,
        device: &Device,
        cache: &mut KvCache,
        inputs: &Tensor,
        positions: &Tensor,
        new: usize,
    ) -> Result<Tensor> {
        let batch = cache.batch();
        let x = self.layers(device, cache, inputs, positions, new)?;
        let last: Vec<Tensor> =
            (0..batch).map(|b| device.slice_rows(&x, b * new + new - 1, b * new + new)).collect::<Result<_>>()?;
        device.rms_norm(&device.cat_rows(&last.iter().collect::<Vec<_>>())?, &self.norm, RMS_EPS)
    }

    /// The layers over `new` positions a batch entry, their keys and values written to the cache:
    /// the residual stream of every row, before the final norm.
    fn layers(
        &self,
        device: &Device,
        cache: &mut KvCache,
        inputs: &Tensor,
        positions: &Tensor,
        new: usize,
    ) -> Result<Tensor> {
        let batch = cache.batch();
        let start = cache.len();
        let h = self.cfg.hidden_size;
        let heads = self.cfg.num_attention_heads;
        let mut x = device.add(&self.projection.forward(device, inputs)?, positions)?;
        let shape = AttentionShape {
            batch,
            q_len: new,
            kv_len: start + new,
            kv_capacity: cache.capacity(),
            heads,
            kv_heads: heads,
            head_dim: h / heads,
            causal: true,
        };
        for (l, layer) in self.layers.iter().enumerate() {
            let norm = RmsNorm { weight: &layer.input_norm, eps: RMS_EPS };
            let [q, k, v] = linear3(device, &x, norm, [&layer.q, &layer.k, &layer.v])?;
            cache.write(device, l, &k, &v, new)?;
            let (keys, values) = cache.layer(l);
            let attn = device.attention(&q, keys, values, shape)?;
            x = layer.out.forward_add(device, &attn, &x)?;
            x = layer.mlp.forward_residual(device, &x, RMS_EPS)?;
        }
        Ok(x)
    }
}
