//! The global language model: transformers' `Qwen3ForCausalLM` (v5.24), as the reference pipeline
//! drives it (diffusers 0.42.1 `modular_pipelines/minimax_music3/encoders.py`): always through
//! `inputs_embeds`, a `[2, S]` prefill of the CFG pair, then one position per frame against a KV
//! cache. Defaults match `MiniMaxAI/MiniMax-Music3` `language_model/config.json`.
//!
//! `lm_head` is loaded only over the rows that can be sampled, `[audio_end_id, code_offset +
//! semantic_vocab)`; every other row is masked to -inf by the reference before sampling.

use std::ops::Range;

use super::kv_cache::{KV_DTYPE, KvCache};
use super::linear::{Linear, linear3};
use super::swiglu::SwiGlu;
use crate::config::LmConfig;
use crate::device::{AttentionInputs, AttentionShape, Device, RecordedStep, RmsNorm, Rotary};
use crate::error::Result;
use crate::tensor::{DType, Tensor};
use crate::weights::VarBuilder;

struct Layer {
    input_norm: Tensor,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    q_norm: Tensor,
    k_norm: Tensor,
    mlp: SwiGlu,
}

pub struct LanguageModel {
    cfg: LmConfig,
    embed_tokens: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    head: Tensor,
    head_rows: Range<u32>,
    kv_dtype: DType,
}

impl LanguageModel {
    /// Loads the model with `lm_head` restricted to `head_rows`.
    pub fn new(cfg: &LmConfig, vb: &VarBuilder, head_rows: Range<u32>) -> Result<Self> {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let (q_dim, kv_dim) = (cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim);
        let m = vb.pp("model");
        let layers = (0..cfg.num_hidden_layers)
            .map(|l| {
                let p = m.pp(format!("layers.{l}"));
                Ok(Layer {
                    input_norm: p.get(&[h], "input_layernorm.weight")?,
                    q: Linear::new(&p, &[q_dim, h], "self_attn.q_proj.weight")?,
                    k: Linear::new(&p, &[kv_dim, h], "self_attn.k_proj.weight")?,
                    v: Linear::new(&p, &[kv_dim, h], "self_attn.v_proj.weight")?,
                    o: Linear::new(&p, &[h, q_dim], "self_attn.o_proj.weight")?,
                    q_norm: p.get(&[cfg.head_dim], "self_attn.q_norm.weight")?,
                    k_norm: p.get(&[cfg.head_dim], "self_attn.k_norm.weight")?,
                    mlp: SwiGlu::new(&p, "post_attention_layernorm.weight", "mlp", h, i)?,
                })
            })
            .collect::<Result<_>>()?;
        let head_name = if cfg.tie_word_embeddings { "model.embed_tokens.weight" } else { "lm_head.weight" };
        let head = vb.get_rows(&[cfg.vocab_size, h], head_name, head_rows.start as usize, head_rows.end as usize)?;
        Ok(LanguageModel {
            cfg: cfg.clone(),
            embed_tokens: m.table(&[cfg.vocab_size, h], "embed_tokens.weight")?,
            layers,
            norm: m.get(&[h], "norm.weight")?,
            head,
            head_rows,
            kv_dtype: KV_DTYPE,
        })
    }

    /// The model with its KV caches in `dtype` rather than [`KV_DTYPE`] (f32 for a test that holds
    /// the model against an f32 computation).
    pub fn with_kv_dtype(self, dtype: DType) -> Self {
        LanguageModel { kv_dtype: dtype, ..self }
    }

    pub fn config(&self) -> &LmConfig {
        &self.cfg
    }

    /// The token ids the logits of [`logits`](Self::logits) stand for.
    pub fn head_rows(&self) -> Range<u32> {
        self.head_rows.clone()
    }

    pub fn new_cache(&self, device: &Device, batch: usize, capacity: usize) -> Result<KvCache> {
        let width = self.cfg.num_key_value_heads * self.cfg.head_dim;
        KvCache::new(device, self.cfg.num_hidden_layers, batch, capacity, width, self.kv_dtype)
    }

    /// `embed_tokens` rows of `ids`, `[ids.len(), hidden]`.
    pub fn embed(&self, device: &Device, ids: &[u32]) -> Result<Tensor> {
        super::table::gather(device, &self.embed_tokens, ids)
    }

    /// Runs `embeds [batch * seq, hidden]` (batch-major) from the cache's current length and
    /// returns the final-normed hidden state of each batch entry's last position, `[batch, hidden]`.
    pub fn forward(&self, device: &Device, embeds: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let out = self.forward_at(device, embeds, cache)?;
        cache.advance(embeds.shape()[0] / cache.batch());
        Ok(out)
    }

    /// [`forward`](Self::forward) of one position per batch entry, `embeds [batch, hidden]`, recorded
    /// against the cache on the first call where the device records steps and replayed after: the
    /// AR loop's step, whose host cost would otherwise match its GPU time.
    pub fn decode(&self, device: &Device, embeds: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let batch = cache.batch();
        if embeds.shape() != [batch, self.cfg.hidden_size] {
            return self.forward(device, embeds, cache);
        }
        cache.check_room(1)?;
        let position = cache.len();
        let mut step = std::mem::take(&mut cache.step);
        let out = step.run(device, &[position], embeds, &[batch, self.cfg.hidden_size], &mut |input| {
            self.forward_at(device, input, cache)
        });
        cache.step = step;
        let out = out?;
        cache.advance(1);
        Ok(out)
    }

    /// One position for each of several sequences, each against its own cache: `embeds` holds
    /// `caches[0].batch()` rows, then `caches[1].batch()`, ... The products run over every row at
    /// once, reading each weight once for the whole batch; attention runs against each cache alone,
    /// at its own length. On a backend whose product rows do not depend on one another (the CPU's
    /// decode products), each sequence's rows come out as [`decode`](Self::decode) alone makes them.
    ///
    /// Several caches run as `step` where the device records steps, recorded for these caches (in
    /// this order) and replayed at their new lengths after: the caller keeps one `step` for as long
    /// as the same caches decode together. One cache runs as [`decode`](Self::decode) does.
    pub fn decode_many(
        &self,
        device: &Device,
        embeds: &Tensor,
        caches: &mut [&mut KvCache],
        step: &mut RecordedStep,
    ) -> Result<Tensor> {
        if let [cache] = caches {
            return self.decode(device, embeds, cache);
        }
        let rows: usize = caches.iter().map(|c| c.batch()).sum();
        if embeds.shape() != [rows, self.cfg.hidden_size] {
            return Err(crate::error::Error::Invalid(format!(
                "a decode step of {rows} rows got embeddings of shape {:?}",
                embeds.shape()
            )));
        }
        for cache in caches.iter() {
            cache.check_room(1)?;
        }
        let positions: Vec<usize> = caches.iter().map(|c| c.len()).collect();
        let eps = self.cfg.rms_norm_eps as f32;
        let out = step.run(device, &positions, embeds, &[rows, self.cfg.hidden_size], &mut |input| {
            let x = self.layers_over(device, input, caches, 1)?;
            device.rms_norm(&x, &self.norm, eps)
        })?;
        for cache in caches.iter_mut() {
            cache.advance(1);
        }
        Ok(out)
    }

    /// [`forward`](Self::forward) for every position: the final-norm hidden states of all rows,
    /// batch-major `[batch * seq, hidden]` (a teacher-forced pass, which needs each frame's state).
    pub fn forward_all(&self, device: &Device, embeds: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let x = self.layers_at(device, embeds, cache)?;
        cache.advance(embeds.shape()[0] / cache.batch());
        device.rms_norm(&x, &self.norm, self.cfg.rms_norm_eps as f32)
    }

    /// [`forward`](Self::forward) without marking the new positions valid.
    fn forward_at(&self, device: &Device, embeds: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let batch = cache.batch();
        let seq = embeds.shape()[0] / batch;
        let x = self.layers_at(device, embeds, cache)?;
        let last: Vec<Tensor> =
            (0..batch).map(|b| device.slice_rows(&x, b * seq + seq - 1, b * seq + seq)).collect::<Result<_>>()?;
        let last = device.cat_rows(&last.iter().collect::<Vec<_>>())?;
        device.rms_norm(&last, &self.norm, self.cfg.rms_norm_eps as f32)
    }

    /// The decoder layers over `embeds`, their keys and values written to the cache: the residual
    /// stream of every row, before the final norm.
    fn layers_at(&self, device: &Device, embeds: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let seq = embeds.shape()[0] / cache.batch();
        self.layers_over(device, embeds, &mut [cache], seq)
    }

    /// The decoder layers over `embeds`, `seq` positions a batch entry of `caches[0]`, then of
    /// `caches[1]`, ...: the products over every row at once, attention against each cache at its
    /// own length (one cache's rows are not sliced apart). The residual stream of every row.
    fn layers_over(&self, device: &Device, embeds: &Tensor, caches: &mut [&mut KvCache], seq: usize) -> Result<Tensor> {
        let eps = self.cfg.rms_norm_eps as f32;
        let rows: usize = caches.iter().map(|c| c.batch() * seq).sum();
        let mut x = device.slice_rows(embeds, 0, rows)?;
        for (l, layer) in self.layers.iter().enumerate() {
            let norm = RmsNorm { weight: &layer.input_norm, eps };
            let [q, k, v] = linear3(device, &x, norm, [&layer.q, &layer.k, &layer.v])?;
            let attn = if let [cache] = caches {
                self.attend(device, layer, l, [q, k, v], cache, seq)?
            } else {
                let mut outputs = Vec::with_capacity(caches.len());
                let mut first = 0;
                for cache in caches.iter_mut() {
                    let n = cache.batch() * seq;
                    let [q, k, v] = [&q, &k, &v].map(|t| device.slice_rows(t, first, first + n));
                    outputs.push(self.attend(device, layer, l, [q?, k?, v?], cache, seq)?);
                    first += n;
                }
                device.cat_rows(&outputs.iter().collect::<Vec<_>>())?
            };
            x = layer.o.forward_add(device, &attn, &x)?;
            x = layer.mlp.forward_residual(device, &x, eps)?;
        }
        debug_assert_eq!(rows, x.shape()[0]);
        Ok(x)
    }

    /// Layer `l`'s attention of one cache's new rows `[q, k, v]`, their keys and values written to it.
    fn attend(
        &self,
        device: &Device,
        layer: &Layer,
        l: usize,
        [q, k, v]: [Tensor; 3],
        cache: &mut KvCache,
        seq: usize,
    ) -> Result<Tensor> {
        let eps = self.cfg.rms_norm_eps as f32;
        let (attn_shape, rotary) = self.step_geometry(cache, seq);
        let inputs = AttentionInputs { q, k, v: &v, q_norm: &layer.q_norm, k_norm: &layer.k_norm, eps, rotary };
        let q = device.attention_inputs(inputs, cache.slot(l, seq)?)?;
        let (keys, values) = cache.layer(l);
        device.attention(&q, keys, values, attn_shape)
    }

    /// The attention's shape and the rotary positions of `seq` new positions a batch entry after
    /// what `cache` holds.
    fn step_geometry(&self, cache: &KvCache, seq: usize) -> (AttentionShape, Rotary) {
        let cfg = &self.cfg;
        let rotary = Rotary {
            heads: 0,
            head_dim: cfg.head_dim,
            rotary_dim: cfg.head_dim,
            theta: cfg.rope_theta() as f32,
            first_position: cache.len(),
            seq_len: seq,
        };
        let attn_shape = AttentionShape {
            batch: cache.batch(),
            q_len: seq,
            kv_len: cache.len() + seq,
            kv_capacity: cache.capacity(),
            heads: cfg.num_attention_heads,
            kv_heads: cfg.num_key_value_heads,
            head_dim: cfg.head_dim,
            causal: true,
        };
        (attn_shape, rotary)
    }

    /// `lm_head` over the loaded rows: `[batch, head_rows.len()]`.
    pub fn logits(&self, device: &Device, hidden: &Tensor) -> Result<Tensor> {
        device.linear(hidden, &self.head, None)
    }
}
