//! The AR loop over several songs at once. Each song keeps its own KV cache, sampler, frame sink
//! and cancel; a frame of the batch runs each product once over every song's rows (the weights
//! read once for all), attention against each song's own cache. Songs join after their prefill and
//! leave when they end, fail or are cancelled, without disturbing the others. A song alone is a
//! batch of one, issued as the single-song loop always was (the decode step recorded where the
//! device records it).

use std::borrow::Cow;
use std::ops::Range;
use std::time::{Duration, Instant};

use super::ar::{
    ArModels, ArRun, Chooser, Draw, FORCED_CHUNK, Forced, Frame, FrameParts, feedback_embedding, forced_chunk, timed,
};
use super::sampling::{depth_probs, depth_shortlist, semantic_probs, semantic_shortlist};
use super::{Cancel, Event, Stage};
use crate::device::{Device, RecordedStep, Shortlist};
use crate::error::Result;
use crate::models::depth::DepthFrame;
use crate::models::kv_cache::KvCache;
use crate::prompt::PromptIds;
use crate::tensor::{Storage, Tensor};

/// Where a song's draws come from, where its frames and events go, and its cancel.
pub struct Sinks<'s> {
    pub chooser: Box<dyn Chooser + 's>,
    pub on_frame: Box<dyn FnMut(Frame) -> Result<()> + 's>,
    pub events: Box<dyn Fn(Event) + 's>,
    pub cancel: Cancel,
}

/// A song of the batch: its cache, the state its next frame starts from, what it drew.
pub struct Member<'s> {
    /// The caller's name for the song, handed back when it leaves.
    pub id: usize,
    max_frames: usize,
    sinks: Sinks<'s>,
    cache: KvCache,
    /// The language model's last hidden states, `[2, hidden]` (the conditional row first).
    last_hidden: Tensor,
    /// The loop's next frame (0 only primes the loop).
    next_frame: usize,
    run: ArRun,
    device_wait: Duration,
    sampling: Duration,
    handing_on: Duration,
    parts: Parts,
}

/// A song's [`FrameParts`] as they add up.
#[derive(Default)]
struct Parts {
    semantic: Duration,
    depth: Duration,
    states: Duration,
    feed: Duration,
}

impl<'s> Member<'s> {
    /// A song with its prompt through the language model (its prefill), ready for frame 0.
    pub fn prefilled(m: ArModels, id: usize, prompt: &PromptIds, max_frames: usize, sinks: Sinks<'s>) -> Result<Self> {
        let device = m.device;
        let mut cache = m.lm.new_cache(device, 2, prompt.cond.len() + max_frames + 1)?;
        let last_hidden = m.lm.forward(device, &m.lm.embed(device, &prompt.pair())?, &mut cache)?;
        let run = ArRun::default();
        Ok(Member {
            id,
            max_frames,
            sinks,
            cache,
            last_hidden,
            next_frame: 0,
            run,
            device_wait: Duration::ZERO,
            sampling: Duration::ZERO,
            handing_on: Duration::ZERO,
            parts: Parts::default(),
        })
    }

    /// Takes the `forced` frames (their codes known) in a few passes; the loop then draws from the
    /// frame after them.
    pub fn force(&mut self, m: ArModels, forced: Forced) -> Result<()> {
        let frames = forced.frames.min(forced.codes.frames.len()).min(self.max_frames + 1);
        let mut first = 0;
        for chunk in forced.codes.frames[..frames].chunks(FORCED_CHUNK) {
            self.sinks.cancel.check()?;
            let (hiddens, next) =
                forced_chunk(&m, chunk, first, forced.hidden_from, &self.last_hidden, &mut self.cache)?;
            self.last_hidden = next;
            for (i, codes) in chunk.iter().enumerate() {
                self.run.codes.frames.push(codes.clone());
                if first + i > 0 {
                    let hidden = hiddens.get(&(first + i)).cloned().unwrap_or_default();
                    (self.sinks.on_frame)(Frame { hidden, codes: codes.clone() })?;
                    self.run.frames += 1;
                }
            }
            first += chunk.len();
            self.progress(self.max_frames);
        }
        self.next_frame = frames;
        Ok(())
    }

    /// Whether the song has all its frames.
    pub fn is_done(&self) -> bool {
        self.run.frames >= self.max_frames
    }

    /// What the song's loop made.
    pub fn into_run(self) -> ArRun {
        ArRun {
            device_wait_s: self.device_wait.as_secs_f64(),
            sampling_s: self.sampling.as_secs_f64(),
            handing_on_s: self.handing_on.as_secs_f64(),
            parts: FrameParts {
                semantic_s: self.parts.semantic.as_secs_f64(),
                depth_s: self.parts.depth.as_secs_f64(),
                states_s: self.parts.states.as_secs_f64(),
                feed_s: self.parts.feed.as_secs_f64(),
            },
            ..self.run
        }
    }

    fn progress(&self, total: usize) {
        (self.sinks.events)(Event::Stage { stage: Stage::ArFrames, done: self.run.frames, total });
    }
}

/// The songs running together, and the depth decoder's frame for them.
pub struct ArBatch<'m, 's> {
    m: ArModels<'m>,
    songs: Vec<Member<'s>>,
    /// For `2 * songs.len()` entries; made again when the batch changes size.
    depth_frame: Option<DepthFrame>,
    rows: Range<u32>,
    semantic: Shortlist,
    residual: Shortlist,
    decode_step: BatchStep,
}

/// The decode step of several songs, recorded for the songs it names (by id, in order) where the
/// device records steps: it bakes in their caches, so it is made again when they change.
#[derive(Default)]
struct BatchStep {
    songs: Vec<usize>,
    step: RecordedStep,
}

/// How a song leaves the batch this frame.
type Exit = Option<Result<()>>;

impl<'m, 's> ArBatch<'m, 's> {
    pub fn new(m: ArModels<'m>) -> Self {
        let rows = m.lm.head_rows();
        let (semantic, residual) = (semantic_shortlist(&rows, m.constants), depth_shortlist(m.constants));
        ArBatch { m, songs: Vec::new(), depth_frame: None, rows, semantic, residual, decode_step: BatchStep::default() }
    }

    /// The models the batch runs.
    pub fn models(&self) -> ArModels<'m> {
        self.m
    }

    /// Adds a song (prefilled) to run from the next frame on.
    pub fn join(&mut self, song: Member<'s>) {
        self.songs.push(song);
    }

    pub fn len(&self) -> usize {
        self.songs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.songs.is_empty()
    }

    /// One frame of every song. Returns the songs that left the batch: their id and run, or what
    /// stopped them (a cancel, their sampler or their frame sink). An error of the device stops the
    /// whole batch.
    pub fn step(&mut self) -> Result<Vec<(usize, Result<ArRun>)>> {
        let mut exits: Vec<Exit> = self.songs.iter().map(|s| s.sinks.cancel.check().err().map(Err)).collect();
        let started = Instant::now();
        let tokens = self.semantic_draws(&mut exits)?;
        let semantic = started.elapsed();
        self.songs.iter_mut().for_each(|song| song.parts.semantic += semantic);
        let drawing: Vec<usize> = (0..self.songs.len()).filter(|&i| tokens[i].is_some()).collect();
        if !drawing.is_empty() {
            let tokens: Vec<u32> = drawing.iter().map(|&i| tokens[i].expect("drawing")).collect();
            self.frame(&drawing, &tokens, &mut exits)?;
        }
        let mut left = Vec::new();
        let mut kept = Vec::with_capacity(self.songs.len());
        for (mut song, exit) in std::mem::take(&mut self.songs).into_iter().zip(exits) {
            match exit {
                None => {
                    song.next_frame += 1;
                    kept.push(song);
                }
                Some(outcome) => left.push((song.id, outcome.map(|()| song.into_run()))),
            }
        }
        self.songs = kept;
        if left.iter().any(|(id, _)| self.decode_step.songs.contains(id)) {
            // Its caches are gone with the songs.
            self.decode_step = BatchStep::default();
        }
        Ok(left)
    }

    /// Each song's semantic draw: its token, or `None` when it leaves (its end token, a cancel or
    /// its sampler's error, written to `exits`).
    fn semantic_draws(&mut self, exits: &mut [Exit]) -> Result<Vec<Option<u32>>> {
        let (m, device) = (self.m, self.m.device);
        let count = self.songs.len();
        let hidden = stacked(device, self.songs.iter().map(|s| &s.last_hidden).collect())?;
        let logits = m.lm.logits(device, &hidden)?;
        let every: Vec<usize> = (0..count).collect();
        let candidates = waited_together(&mut self.songs, &every, || device.candidates_each(&logits, &self.semantic))?;
        check_lists(&candidates, count)?;
        let mut tokens = vec![None; count];
        for ((i, song), candidates) in self.songs.iter_mut().enumerate().zip(candidates) {
            if exits[i].is_some() {
                continue;
            }
            let started = Instant::now();
            let probs = semantic_probs(&candidates, self.rows.clone(), m.constants);
            let drawn = song.sinks.chooser.choose(song.next_frame, Draw::Semantic, &probs);
            song.sampling += started.elapsed();
            match drawn {
                Err(e) => exits[i] = Some(Err(e)),
                Ok(index) if self.rows.start + index as u32 == m.constants.audio_end_id => {
                    // The song is complete early: its length is what was made, which progress shows.
                    song.progress(song.run.frames);
                    exits[i] = Some(Ok(()));
                }
                Ok(index) => tokens[i] = Some(self.rows.start + index as u32),
            }
        }
        Ok(tokens)
    }

    /// The rest of a frame for the songs `drawing` (indices, ascending) that drew `tokens`: the
    /// depth decoder's codes, the frames handed on, and the language model's step on them.
    fn frame(&mut self, drawing: &[usize], tokens: &[u32], exits: &mut [Exit]) -> Result<()> {
        let mut started = Instant::now();
        let (m, device) = (self.m, self.m.device);
        let (c, n) = (m.constants, drawing.len());
        let c0: Vec<Tensor> = tokens.iter().map(|&t| m.lm.embed(device, &[t])).collect::<Result<_>>()?;
        // Owned: the songs are borrowed mutably while it is in use.
        let lm_hidden = stacked(device, drawing.iter().map(|&i| &self.songs[i].last_hidden).collect())?.into_owned();
        let c0_pairs = device.cat_rows(&c0.iter().flat_map(|e| [e, e]).collect::<Vec<_>>())?;
        if self.depth_frame.as_ref().is_none_or(|f| f.batch() != 2 * n) {
            self.depth_frame = Some(m.depth.new_frame(device, 2 * n)?);
        }
        let mut depth = Depth {
            m,
            frame: self.depth_frame.as_mut().expect("made above"),
            rule: &self.residual,
            lm_hidden: &lm_hidden,
            c0_pairs: &c0_pairs,
            songs: &mut self.songs,
            drawing,
        };
        let drawn = match depth.uniforms() {
            Some(uniforms) => depth.drawn_on_device(&uniforms)?,
            None => None,
        };
        let (residual, states) = match drawn {
            Some(drawn) => drawn,
            // The chooser must see the probabilities, or a draw on the device needed every entry.
            None => depth.drawn_on_host(exits)?,
        };
        let codes: Vec<Vec<u32>> = tokens
            .iter()
            .zip(residual)
            .map(|(&t, residual)| std::iter::once(t - c.code_offset).chain(residual).collect())
            .collect();
        lap(&mut self.songs, drawing, &mut started, |parts| &mut parts.depth);
        let width = lm_hidden.shape()[1];
        let handing_on = drawing.iter().any(|&i| exits[i].is_none() && self.songs[i].next_frame > 0);
        let states = if handing_on {
            let all = device.cat_rows(&std::iter::once(&lm_hidden).chain(&states).collect::<Vec<_>>())?;
            waited_together(&mut self.songs, drawing, || device.to_host(&all))?
        } else {
            Vec::new()
        };
        let mut feeding = Vec::with_capacity(n);
        for (d, &i) in drawing.iter().enumerate() {
            if exits[i].is_none() {
                let started = Instant::now();
                exits[i] = self.hand_on(i, &codes[d], || frame_hidden(&states, width, n, d));
                self.songs[i].handing_on += started.elapsed();
            }
            if exits[i].is_none() {
                feeding.push(d);
            }
        }
        lap(&mut self.songs, drawing, &mut started, |parts| &mut parts.states);
        if feeding.is_empty() {
            return Ok(());
        }
        let feedback: Vec<Tensor> =
            feeding.iter().map(|&d| feedback_embedding(device, &m, &c0[d], &codes[d])).collect::<Result<_>>()?;
        let embeds = device.cat_rows(&feedback.iter().flat_map(|f| [f, f]).collect::<Vec<_>>())?;
        let fed: Vec<usize> = feeding.iter().map(|&d| drawing[d]).collect();
        let ids: Vec<usize> = fed.iter().map(|&i| self.songs[i].id).collect();
        if self.decode_step.songs != ids {
            self.decode_step = BatchStep { songs: ids, step: RecordedStep::Untried };
        }
        let mut caches: Vec<&mut KvCache> =
            self.songs.iter_mut().enumerate().filter(|(i, _)| fed.contains(i)).map(|(_, s)| &mut s.cache).collect();
        let out = m.lm.decode_many(device, &embeds, &mut caches, &mut self.decode_step.step)?;
        if let [i] = fed[..] {
            self.songs[i].last_hidden = out;
        } else {
            for (j, &i) in fed.iter().enumerate() {
                self.songs[i].last_hidden = device.slice_rows(&out, 2 * j, 2 * j + 2)?;
            }
        }
        lap(&mut self.songs, &fed, &mut started, |parts| &mut parts.feed);
        Ok(())
    }

    /// Records song `i`'s frame and hands it on with its hidden states from `hidden` (not the
    /// priming frame): whether the song leaves now (its last frame, or its sink's error).
    fn hand_on(&mut self, i: usize, codes: &[u32], hidden: impl FnOnce() -> Vec<f32>) -> Exit {
        let song = &mut self.songs[i];
        song.run.codes.frames.push(codes.to_vec());
        if song.next_frame == 0 {
            return None;
        }
        if let Err(e) = (song.sinks.on_frame)(Frame { hidden: hidden(), codes: codes.to_vec() }) {
            return Some(Err(e));
        }
        song.run.frames += 1;
        song.progress(song.max_frames);
        song.is_done().then_some(Ok(()))
    }
}

/// A frame's depth decoder for the songs `drawing` of a batch: their residual codes (`c1..`, a
/// song each) and the hidden states that predicted them (each codebook's `[2 * songs, hidden]`).
struct Depth<'a, 's, 'm> {
    m: ArModels<'m>,
    frame: &'a mut DepthFrame,
    rule: &'a Shortlist,
    lm_hidden: &'a Tensor,
    c0_pairs: &'a Tensor,
    songs: &'a mut Vec<Member<'s>>,
    drawing: &'a [usize],
}

type DepthCodes = (Vec<Vec<u32>>, Vec<Tensor>);

impl Depth<'_, '_, '_> {
    fn codebooks(&self) -> usize {
        self.m.depth.config().num_codebooks
    }

    /// Each residual draw's uniform, `[codebook - 1][song]`, where every song's chooser has them.
    fn uniforms(&mut self) -> Option<Vec<Vec<f64>>> {
        let codebooks = self.codebooks();
        let mut uniforms = vec![Vec::with_capacity(self.drawing.len()); codebooks - 1];
        for &i in self.drawing {
            let song = &mut self.songs[i];
            for (k, row) in uniforms.iter_mut().enumerate() {
                row.push(song.sinks.chooser.uniform(song.next_frame, Draw::Depth(k + 1))?);
            }
        }
        Some(uniforms)
    }

    /// The codes drawn by the device one codebook after another, read back once at the end;
    /// `None` where a draw needed every entry on the host.
    fn drawn_on_device(&mut self, uniforms: &[Vec<f64>]) -> Result<Option<DepthCodes>> {
        let (m, device) = (self.m, self.m.device);
        let mut hidden = m.depth.start_frame(device, self.frame, self.lm_hidden, self.c0_pairs)?;
        let mut states = Vec::with_capacity(self.codebooks());
        let mut drawn = Vec::with_capacity(self.codebooks());
        for (k, uniforms) in (1..self.codebooks()).zip(uniforms) {
            let logits = m.depth.head_logits(device, k, &hidden)?;
            let codes = device.draw_each(&logits, self.rule, uniforms)?;
            if k + 1 < self.codebooks() {
                let next = m.depth.step_drawn(device, self.frame, k, &codes)?;
                states.push(std::mem::replace(&mut hidden, next));
            }
            drawn.push(codes);
        }
        states.push(hidden);
        let values = waited_together(self.songs, self.drawing, || read_codes(device, &drawn))?;
        if values.iter().any(|&code| code < 0.0) {
            return Ok(None);
        }
        let n = self.drawing.len();
        let residual = (0..n).map(|d| values.iter().skip(d).step_by(n).map(|&code| code as u32).collect()).collect();
        Ok(Some((residual, states)))
    }

    /// The codes drawn on the host, each codebook's shortlist read back and shown to the choosers.
    fn drawn_on_host(&mut self, exits: &mut [Exit]) -> Result<DepthCodes> {
        let (m, device) = (self.m, self.m.device);
        let c = m.constants;
        let mut hidden = m.depth.start_frame(device, self.frame, self.lm_hidden, self.c0_pairs)?;
        let mut residual = vec![Vec::with_capacity(self.codebooks()); self.drawing.len()];
        let mut states = Vec::with_capacity(self.codebooks());
        for k in 1..self.codebooks() {
            let logits = m.depth.head_logits(device, k, &hidden)?;
            let candidates = waited_together(self.songs, self.drawing, || device.candidates_each(&logits, self.rule))?;
            check_lists(&candidates, self.drawing.len())?;
            for ((d, &i), candidates) in self.drawing.iter().enumerate().zip(candidates) {
                let song = &mut self.songs[i];
                let started = Instant::now();
                // A song that failed this frame still fills its rows until the frame ends.
                let code = match &exits[i] {
                    Some(_) => 0,
                    None => {
                        match song.sinks.chooser.choose(song.next_frame, Draw::Depth(k), &depth_probs(&candidates, c)) {
                            Ok(code) => code as u32,
                            Err(e) => {
                                exits[i] = Some(Err(e));
                                0
                            }
                        }
                    }
                };
                song.sampling += started.elapsed();
                residual[d].push(code);
            }
            if k + 1 < self.codebooks() {
                let entries: Vec<u32> = residual.iter().flat_map(|codes| [codes[k - 1], codes[k - 1]]).collect();
                let next = m.depth.step_each(device, self.frame, k, &entries)?;
                states.push(std::mem::replace(&mut hidden, next));
            }
        }
        states.push(hidden);
        Ok((residual, states))
    }
}

/// Codes from [`draw_each`](crate::device::SamplingOps::draw_each), codebook after codebook: read
/// back at once where they are on the device.
fn read_codes(device: &Device, drawn: &[Tensor]) -> Result<Vec<f32>> {
    if drawn.iter().all(|t| matches!(t.storage(), Storage::Cpu(_))) {
        return Ok(drawn.iter().map(Tensor::to_host).collect::<Result<Vec<_>>>()?.concat());
    }
    device.to_host(&device.cat_rows(&drawn.iter().collect::<Vec<_>>())?)
}

/// Adds the time since `started` to the part `part` picks of each song of `songs` named in
/// `which`, and starts the next part's clock.
fn lap(songs: &mut [Member], which: &[usize], started: &mut Instant, part: impl Fn(&mut Parts) -> &mut Duration) {
    let now = Instant::now();
    which.iter().for_each(|&i| *part(&mut songs[i].parts) += now - *started);
    *started = now;
}

/// Runs `read` (a read from the device, which waits for it), adding how long it took to the wait
/// of each song of `songs` named in `waiting`: they waited together.
fn waited_together<T>(songs: &mut [Member], waiting: &[usize], read: impl FnOnce() -> Result<T>) -> Result<T> {
    let mut waited = Duration::ZERO;
    let value = timed(&mut waited, read);
    waiting.iter().for_each(|&i| songs[i].device_wait += waited);
    value
}

/// An error unless the device sent back a list for each of the `songs` pairs of logits.
fn check_lists(lists: &[crate::device::Candidates], songs: usize) -> Result<()> {
    if lists.len() != songs {
        return Err(crate::error::Error::Gpu(format!("{} sampling lists came back for {songs} songs", lists.len())));
    }
    Ok(())
}

/// Song `d`'s conditional rows of a frame's hidden states `states` (each codebook's `[2 * n,
/// width]`, one after the other): `[codebooks * width]`.
fn frame_hidden(states: &[f32], width: usize, n: usize, d: usize) -> Vec<f32> {
    states.chunks(2 * n * width).flat_map(|rows| &rows[2 * d * width..(2 * d + 1) * width]).copied().collect()
}

/// The rows of several songs as one tensor (the one song's own when alone).
fn stacked<'t>(device: &Device, parts: Vec<&'t Tensor>) -> Result<Cow<'t, Tensor>> {
    match parts[..] {
        [one] => Ok(Cow::Borrowed(one)),
        _ => Ok(Cow::Owned(device.cat_rows(&parts)?)),
    }
}
