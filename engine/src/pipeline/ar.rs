//! The autoregressive loop (diffusers 0.42.1 `MiniMaxMusic3AutoregressiveStep`): the language
//! model samples each frame's semantic code under CFG, the depth decoder its residual codes, and the
//! frame is fed back. Frame 0 only primes the loop; frames 1.. are emitted.

use super::Observer;
pub use super::ar_batch::{ArBatch, Member, Sinks};
use crate::config::PipelineConstants;
use crate::device::Device;
use crate::error::Result;
use crate::models::depth::DepthDecoder;
use crate::models::lm::LanguageModel;
use crate::prompt::PromptIds;
use crate::tensor::Tensor;
use std::time::{Duration, Instant};

/// What a draw is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Draw {
    /// The semantic code (or the end token); the probabilities cover the language model's
    /// sampleable rows.
    Semantic,
    /// Residual codebook 1..=7.
    Depth(usize),
}

impl Draw {
    /// The draw's place within its frame: 0 for the semantic code, `k` for residual codebook `k`.
    pub fn index(self) -> usize {
        match self {
            Draw::Semantic => 0,
            Draw::Depth(k) => k,
        }
    }
}

/// Picks an index from each distribution: our seeded RNG, or recorded draws in tests. `frame`
/// counts from the loop's first frame (0, the one that only primes it).
pub trait Chooser {
    fn choose(&mut self, frame: usize, draw: Draw, probs: &[f32]) -> Result<usize>;

    /// The uniform `u` in `[0, 1)` where this draw is [`categorical_at`](super::rng::categorical_at)
    /// `(u, probs)` and nothing else, so a device may make it without showing the chooser the
    /// probabilities; `None` (the default) where the chooser must see them.
    fn uniform(&mut self, _frame: usize, _draw: Draw) -> Option<f64> {
        None
    }
}

impl<C: Chooser + ?Sized> Chooser for &mut C {
    fn choose(&mut self, frame: usize, draw: Draw, probs: &[f32]) -> Result<usize> {
        (**self).choose(frame, draw, probs)
    }

    fn uniform(&mut self, frame: usize, draw: Draw) -> Option<f64> {
        (**self).uniform(frame, draw)
    }
}

/// The codes a run of the loop drew, the priming frame's first: with the same prompt, the prefix of
/// a song to continue from (see [`Prefix`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Codes {
    /// One entry a frame, `c0..c7` each (`c0` as a code, without the token offset).
    pub frames: Vec<Vec<u32>>,
}

/// Replays the draws of `codes` for their frames, then lets `then` choose: the loop goes through
/// the same states as the run that drew them (teacher forcing), so with a chooser keyed by frame
/// (as [`RngChooser`](super::RngChooser) is) a continued song draws what one run would have.
pub struct Prefix<'a> {
    pub codes: &'a Codes,
    /// The semantic draw's index of code 0: the token offset less the first sampleable row.
    pub semantic_base: u32,
    pub then: &'a mut dyn Chooser,
}

impl Chooser for Prefix<'_> {
    fn choose(&mut self, frame: usize, draw: Draw, probs: &[f32]) -> Result<usize> {
        let Some(codes) = self.codes.frames.get(frame) else { return self.then.choose(frame, draw, probs) };
        let code = *codes.get(draw.index()).ok_or_else(|| {
            crate::error::Error::Invalid(format!("frame {frame} of the song to continue has {} codes", codes.len()))
        })?;
        let index = match draw {
            Draw::Semantic => (code + self.semantic_base) as usize,
            Draw::Depth(_) => code as usize,
        };
        if index >= probs.len() {
            return Err(crate::error::Error::Invalid(format!(
                "code {code} of frame {frame} of the song to continue is not one this model draws"
            )));
        }
        Ok(index)
    }

    fn uniform(&mut self, frame: usize, draw: Draw) -> Option<f64> {
        // A frame of the prefix is replayed, not drawn.
        if frame < self.codes.frames.len() { None } else { self.then.uniform(frame, draw) }
    }
}

/// Does not let the model end the song before frame `before_frame` (a continuation of a set
/// length: `usize::MAX`); the end token is the semantic draw's index `end_index`.
pub struct WithoutEnd<'a> {
    pub end_index: usize,
    pub before_frame: usize,
    pub then: &'a mut dyn Chooser,
}

impl Chooser for WithoutEnd<'_> {
    fn choose(&mut self, frame: usize, draw: Draw, probs: &[f32]) -> Result<usize> {
        if draw != Draw::Semantic || frame >= self.before_frame || self.end_index >= probs.len() {
            return self.then.choose(frame, draw, probs);
        }
        let mut probs = probs.to_vec();
        probs[self.end_index] = 0.0;
        self.then.choose(frame, draw, &probs)
    }

    fn uniform(&mut self, frame: usize, draw: Draw) -> Option<f64> {
        // Only the semantic draw's probabilities are changed.
        if draw == Draw::Semantic && frame < self.before_frame { None } else { self.then.uniform(frame, draw) }
    }
}

/// One emitted frame: its hidden states `[layers * hidden]` and codes `c0..c7`.
pub struct Frame {
    pub hidden: Vec<f32>,
    pub codes: Vec<u32>,
}

#[derive(Clone, Copy)]
pub struct ArModels<'a> {
    pub device: &'a Device,
    pub lm: &'a LanguageModel,
    pub depth: &'a DepthDecoder,
    pub constants: &'a PipelineConstants,
}

/// What a run of the loop made and where its time went.
#[derive(Debug, Clone, Default)]
pub struct ArRun {
    /// Frames emitted (fewer than asked when the model samples the end token).
    pub frames: usize,
    /// Every frame's codes, the priming frame's first.
    pub codes: Codes,
    /// How long the loop's thread waited for the device (reading back the sampling candidates and
    /// the frames' hidden states); the rest of the loop the host spent issuing work, sampling and
    /// handing frames on.
    pub device_wait_s: f64,
    /// How long the thread spent drawing codes (their distributions and the draws).
    pub sampling_s: f64,
    /// How long the thread spent handing frames on (to the acoustic half, or its queue).
    pub handing_on_s: f64,
    /// Where the frames went, each part's wall time on the thread (its waits included).
    pub parts: FrameParts,
}

/// A frame's parts, their wall time in seconds summed over a loop's frames (`Stats`'s `ar_*_s`
/// fields say what each holds).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FrameParts {
    pub semantic_s: f64,
    pub depth_s: f64,
    pub states_s: f64,
    pub feed_s: f64,
}

/// Frames whose codes are known (an edit's kept frames): the language model takes them in a few
/// passes (teacher forcing, as a prefill), the depth decoder all of a pass's frames at once, and
/// the loop starts after them. Frames before `hidden_from` are handed on without hidden states
/// (an edit renders no window of them).
#[derive(Debug, Clone, Copy)]
pub struct Forced<'a> {
    pub codes: &'a Codes,
    /// The loop's frames `0..frames` (the priming frame first) are forced.
    pub frames: usize,
    pub hidden_from: usize,
}

/// Frames a forced pass takes at once: within the prompt's planned prefill.
pub(super) const FORCED_CHUNK: usize = 256;

/// Runs the loop for at most `max_frames` emitted frames, handing each to `on_frame`.
pub fn run(
    m: &ArModels,
    prompt: &PromptIds,
    max_frames: usize,
    chooser: &mut dyn Chooser,
    on_frame: &mut dyn FnMut(Frame) -> Result<()>,
    observer: Observer,
) -> Result<ArRun> {
    run_forced(m, prompt, None, max_frames, chooser, on_frame, observer)
}

/// [`run`] after the `forced` frames (the chooser is asked from the first frame after them on).
pub fn run_forced(
    m: &ArModels,
    prompt: &PromptIds,
    forced: Option<Forced>,
    max_frames: usize,
    chooser: &mut dyn Chooser,
    on_frame: &mut dyn FnMut(Frame) -> Result<()>,
    observer: Observer,
) -> Result<ArRun> {
    let sinks = Sinks {
        chooser: Box::new(chooser),
        on_frame: Box::new(on_frame),
        events: Box::new(observer.events),
        cancel: observer.cancel.clone(),
    };
    let mut song = Member::prefilled(*m, 0, prompt, max_frames, sinks)?;
    if let Some(forced) = forced {
        song.force(*m, forced)?;
    }
    if song.is_done() {
        return Ok(song.into_run());
    }
    let mut batch = ArBatch::new(*m);
    batch.join(song);
    loop {
        if let Some((_, result)) = batch.step()?.into_iter().next() {
            return result;
        }
    }
}

/// One pass of forced frames, the first of them the loop's frame `first`, the state before it
/// `before` (`[2, hidden]`, the conditional row first): the hidden states of the frames from
/// `hidden_from` on (by frame), and the state after the last one.
pub(super) fn forced_chunk(
    m: &ArModels,
    chunk: &[Vec<u32>],
    first: usize,
    hidden_from: usize,
    before: &Tensor,
    cache: &mut crate::models::kv_cache::KvCache,
) -> Result<(std::collections::HashMap<usize, Vec<f32>>, Tensor)> {
    let device = m.device;
    let mut feedback = Vec::with_capacity(chunk.len());
    let mut c0_embeds = Vec::with_capacity(chunk.len());
    for codes in chunk {
        check_codes(m, codes)?;
        let c0_embed = m.lm.embed(device, &[codes[0] + m.constants.code_offset])?;
        feedback.push(feedback_embedding(device, m, &c0_embed, codes)?);
        c0_embeds.push(c0_embed);
    }
    let len = chunk.len();
    // Both rows take the same frames: `[cond frames..., uncond frames...]`.
    let out =
        m.lm.forward_all(device, &device.cat_rows(&feedback.iter().chain(&feedback).collect::<Vec<_>>())?, cache)?;
    let after =
        device.cat_rows(&[&device.slice_rows(&out, len - 1, len)?, &device.slice_rows(&out, 2 * len - 1, 2 * len)?])?;
    let mut hiddens = std::collections::HashMap::new();
    // Frames of this pass that need their hidden states: `[from, len)` (the priming frame never).
    let from = hidden_from.max(1).saturating_sub(first).min(len);
    if from < len {
        // The state before frame i of the pass: `before`'s conditional row for the first, then the
        // pass's own outputs.
        let states = device.cat_rows(&[&device.slice_rows(before, 0, 1)?, &device.slice_rows(&out, 0, len - 1)?])?;
        let lm_hidden = device.slice_rows(&states, from, len)?;
        let c0 = device.cat_rows(&c0_embeds[from..].iter().collect::<Vec<_>>())?;
        let residual: Vec<&[u32]> = chunk[from..].iter().map(|codes| &codes[1..]).collect();
        let depth = device.to_host(&m.depth.forced_frames(device, &lm_hidden, &c0, &residual)?)?;
        let lm_hidden = device.to_host(&lm_hidden)?;
        let width = lm_hidden.len() / (len - from);
        let steps = m.depth.config().num_codebooks - 1;
        for i in 0..len - from {
            let mut hidden = lm_hidden[i * width..(i + 1) * width].to_vec();
            hidden.extend_from_slice(&depth[i * steps * width..(i + 1) * steps * width]);
            hiddens.insert(first + from + i, hidden);
        }
    }
    Ok((hiddens, after))
}

/// An error unless `codes` are a frame this model draws: a semantic code within its sampleable
/// rows and one residual code a codebook, each within the codebook.
fn check_codes(m: &ArModels, codes: &[u32]) -> Result<()> {
    let depth = m.depth.config();
    let semantic_ok = codes.first().is_some_and(|&c0| {
        let token = c0 as u64 + m.constants.code_offset as u64;
        token < m.lm.head_rows().end as u64 && token != m.constants.audio_end_id as u64
    });
    if codes.len() != depth.num_codebooks
        || !semantic_ok
        || codes[1..].iter().any(|&code| code as usize >= depth.audio_vocab_size)
    {
        return Err(crate::error::Error::Invalid(format!(
            "the song's codes {codes:?} are not a frame this model draws (it was made by another model, or its score \
             is damaged)"
        )));
    }
    Ok(())
}

/// Runs `read` (a read from the device, which waits for it), adding how long it took to `waited`.
pub(super) fn timed<T>(waited: &mut Duration, read: impl FnOnce() -> Result<T>) -> Result<T> {
    let start = Instant::now();
    let value = read();
    *waited += start.elapsed();
    value
}

/// `(embed_tokens(c0 + offset) + sum_k audio_embeddings(c_k + (k-1) * vocab)) * codebooks^-0.5`.
pub(super) fn feedback_embedding(device: &Device, m: &ArModels, c0_embed: &Tensor, codes: &[u32]) -> Result<Tensor> {
    let pairs: Vec<(usize, u32)> = codes.iter().enumerate().skip(1).map(|(k, &code)| (k, code)).collect();
    let residual = m.depth.code_embeddings(device, &pairs)?;
    // The residual embeddings are summed first, then added to the semantic one, as the reference does.
    let mut extra = device.slice_rows(&residual, 0, 1)?;
    for k in 1..pairs.len() {
        extra = device.add(&extra, &device.slice_rows(&residual, k, k + 1)?)?;
    }
    device.scale(&device.add(c0_embed, &extra)?, (codes.len() as f32).powf(-0.5))
}
