//! Edits of a song already made: extend it, take another path from a time, sing it again from a
//! line with new lyrics, render a range again. Each keeps the codes and the audio it does not
//! change: the kept codes are replayed (teacher forcing) to bring the language model back to
//! where the edit starts, and only the windows from the splice on are rendered, the first of
//! them handed the seam the song's score kept. The audio before the splice is the song's own,
//! sample for sample; a short crossfade joins the two at every edge.

use std::sync::Mutex;

pub use songloom_wire::Edit;

use super::score::Score;
use super::stream::Resume;
use super::windows::{crop, window_starts};
use super::{Event, Observer, Pipeline, Request, Stats};
use crate::error::{Error, Result};
use crate::prompt::PromptIds;

/// The crossfade at each edge of an edit, in seconds.
pub const CROSSFADE_S: f64 = 0.05;

/// A song to edit: its request (as its recipe has it), its score and its audio.
pub struct Original<'a> {
    pub request: &'a Request,
    pub score: &'a Score,
    /// Planar stereo, as the song was made.
    pub audio: &'a [Vec<f32>; 2],
}

/// The new version an edit made.
#[derive(Debug, Clone)]
pub struct Edited {
    /// The new song's request: the original's with the edit's seed, length, description or lyrics.
    pub request: Request,
    pub stats: Stats,
    pub score: Score,
    /// Where the new audio begins, in stereo frames: before it the audio is the original's.
    pub changed_from_sample: usize,
    /// Where the original's audio comes back (a re-render), if it does.
    pub changed_to_sample: Option<usize>,
}

/// What an edit would make, before it runs.
#[derive(Debug, Clone)]
pub struct EditPreview {
    /// The new version's request (its seed, length, description and lyrics).
    pub request: Request,
    /// As in [`Edited`].
    pub changed_from_sample: usize,
    pub changed_to_sample: Option<usize>,
}

/// What an edit keeps and where its new audio goes, worked out before anything runs.
#[derive(Debug, Clone)]
struct EditPlan {
    request: Request,
    /// Emitted frames whose codes are kept.
    kept_frames: usize,
    /// Frames the run makes at most.
    frames: usize,
    no_end_before_frame: usize,
    first_window: usize,
    /// The first sample of the first window's audio in the song.
    first_sample: usize,
    /// The original's audio is kept before this sample; the crossfade to the new starts here.
    splice: usize,
    /// A re-render's end: the original's audio is back from here.
    back_at: Option<usize>,
    /// The windows whose seams the new audio changes: `[first_window, seams_end)`.
    seams_end: Option<usize>,
    noise_seed: u64,
}

impl Pipeline {
    /// Where each window's audio sits in a song of `frames` frames: `[start, end)` in stereo
    /// frames, as a run emits it.
    pub fn window_spans(&self, frames: usize) -> Vec<(usize, usize)> {
        let c = &self.constants;
        let hop = self.geometry.vocoder.hop_length();
        let starts = window_starts(frames, c);
        let mut at = 0;
        let mut spans = Vec::with_capacity(starts.len());
        for (k, &start) in starts.iter().enumerate() {
            let samples = self.geometry.condition.latent_length((start + c.chunk_frames).min(frames) - start) * hop;
            let (left, right) = crop(k, k + 1 == starts.len(), samples, hop, c);
            spans.push((at, at + right - left));
            at += right - left;
        }
        spans
    }

    /// Where window `index`'s audio starts in any song in which the windows before it are full and
    /// not the last: the splice of an edit that keeps those windows.
    fn splice_before(&self, index: usize) -> usize {
        let c = &self.constants;
        let hop = self.geometry.vocoder.hop_length();
        let full = self.geometry.condition.latent_length(c.chunk_frames) * hop;
        (0..index)
            .map(|k| {
                let (left, right) = crop(k, false, full, hop, c);
                right - left
            })
            .sum()
    }

    /// Makes a new version of `original` by `edit`, its new draws (and its new windows' noise) from
    /// `seed`; its audio streams to `observer` from the start, the kept part first, as a song's
    /// does, then `Score` and `Finished`.
    pub fn edit(&self, original: &Original, edit: &Edit, seed: u64, observer: Observer) -> Result<Edited> {
        let plan = self.plan_edit(original, edit, seed)?;
        let prompt = self.encode_prompt(&plan.request.description, &plan.request.lyrics)?;
        let original_prompt = self.encode_prompt(&original.request.description, &original.request.lyrics)?;
        (observer.events)(Event::Stage { stage: super::Stage::Tokenize, done: 1, total: 1 });
        self.edit_planned(original, &plan, &prompt, &original_prompt, observer)
    }

    /// [`edit`](Self::edit) with the token ids made by the caller (synthetic weights have no
    /// tokenizer): `prompt` for the new version, `original_prompt` for the song edited.
    pub fn edit_ids(
        &self,
        original: &Original,
        edit: &Edit,
        seed: u64,
        prompt: &PromptIds,
        original_prompt: &PromptIds,
        observer: Observer,
    ) -> Result<Edited> {
        let plan = self.plan_edit(original, edit, seed)?;
        self.edit_planned(original, &plan, prompt, original_prompt, observer)
    }

    /// What `edit` of `original` would make, checked and worked out without running anything: the
    /// new version's request and where its audio changes.
    pub fn preview_edit(&self, original: &Original, edit: &Edit, seed: u64) -> Result<EditPreview> {
        let plan = self.plan_edit(original, edit, seed)?;
        Ok(EditPreview { request: plan.request, changed_from_sample: plan.splice, changed_to_sample: plan.back_at })
    }

    fn edit_planned(
        &self,
        original: &Original,
        plan: &EditPlan,
        prompt: &PromptIds,
        original_prompt: &PromptIds,
        observer: Observer,
    ) -> Result<Edited> {
        let seams = self.seams_for(original, original_prompt, plan.first_window, observer)?;
        let kept = super::ar::Codes { frames: original.score.codes.frames[..=plan.kept_frames].to_vec() };
        let resume = Resume {
            codes: &kept,
            frames: plan.frames,
            no_end_before_frame: plan.no_end_before_frame,
            first_window: plan.first_window,
            seam: plan.first_window.checked_sub(1).map(|k| seams[k].as_slice()),
            first_sample: plan.first_sample,
            noise_seed: plan.noise_seed,
        };
        let fade = (CROSSFADE_S * self.sample_rate() as f64) as usize;
        let splicer = Mutex::new(Splicer::new(original.audio, plan, fade));
        let sample_rate = self.sample_rate();
        let emit = |first_sample: usize, samples: Vec<f32>| {
            if !samples.is_empty() {
                (observer.events)(Event::Audio { first_sample, samples, sample_rate });
            }
        };
        let kept_audio = splicer.lock().map_err(|_| poisoned())?.kept();
        emit(0, kept_audio);
        let failed: Mutex<Option<Error>> = Mutex::new(None);
        let events = |event: Event| match event {
            Event::Audio { first_sample, samples, .. } => {
                let spliced = splicer.lock().map_err(|_| poisoned()).and_then(|mut s| s.take(first_sample, &samples));
                match spliced {
                    Ok((at, samples)) => emit(at, samples),
                    Err(e) => {
                        failed.lock().expect("not poisoned").get_or_insert(e);
                        observer.cancel.cancel();
                    }
                }
            }
            other => (observer.events)(other),
        };
        let run =
            self.resume_song(prompt, &plan.request, &resume, Observer { events: &events, cancel: observer.cancel });
        if let Some(e) = failed.lock().map_err(|_| poisoned())?.take() {
            return Err(e);
        }
        let (mut stats, run_score) = run?;
        let (at, tail) = splicer.lock().map_err(|_| poisoned())?.finish()?;
        emit(at, tail);
        stats.samples = splicer.lock().map_err(|_| poisoned())?.emitted;
        // A re-render's run replays the codes only as far as its last window needs them.
        let codes = if plan.seams_end.is_some() { original.score.codes.clone() } else { run_score.codes };
        let score = Score { model: run_score.model, codes, seams: merged_seams(&seams, run_score.seams, plan) };
        (observer.events)(Event::Score(std::sync::Arc::new(score.clone())));
        (observer.events)(Event::Finished { stats: stats.clone() });
        Ok(Edited {
            request: plan.request.clone(),
            stats,
            score,
            changed_from_sample: plan.splice,
            changed_to_sample: plan.back_at,
        })
    }

    /// The song's seams, or (for a score read from an exported file, which carries codes alone)
    /// those of the windows before `first_window`, found again by rendering them.
    fn seams_for(
        &self,
        original: &Original,
        prompt: &PromptIds,
        first_window: usize,
        observer: Observer,
    ) -> Result<Vec<Vec<f32>>> {
        let score = original.score;
        if first_window == 0 || score.seams.len() >= first_window {
            return Ok(score.seams.clone());
        }
        let c = &self.constants;
        let frames = ((first_window - 1) * c.chunk_hop + c.chunk_frames).min(score.frames());
        let resume = Resume {
            codes: &score.codes,
            frames,
            no_end_before_frame: 0,
            first_window: 0,
            seam: None,
            first_sample: 0,
            noise_seed: original.request.seed,
        };
        let quiet = |event: Event| {
            if let Event::Stage { .. } = event {
                (observer.events)(event)
            }
        };
        let (_, found) =
            self.resume_song(prompt, original.request, &resume, Observer { events: &quiet, cancel: observer.cancel })?;
        Ok(found.seams)
    }

    /// Checks `original` against this model and works out what `edit` keeps.
    fn plan_edit(&self, original: &Original, edit: &Edit, seed: u64) -> Result<EditPlan> {
        let c = &self.constants;
        let score = original.score;
        let model = self.model_identity()?;
        if score.model != model {
            return Err(Error::Invalid(format!(
                "this song was made by another model ({}; the one loaded is {model}): load the model it was made \
                 with to edit it",
                score.model
            )));
        }
        let frames = score.frames();
        if frames == 0 {
            return Err(Error::Invalid("this song's score holds no frames: it cannot be edited".into()));
        }
        let spans = self.window_spans(frames);
        let samples = spans.last().map_or(0, |s| s.1);
        if original.audio[0].len() != samples || original.audio[1].len() != samples {
            return Err(Error::Invalid(format!(
                "this song's audio ({} samples) is not what its codes make ({samples}): its file was changed after \
                 it was made",
                original.audio[0].len()
            )));
        }
        let fps = self.geometry.condition.frame_rate();
        let rate = self.sample_rate() as f64;
        let at_frame = |at_s: f64, what: &str| -> Result<usize> {
            let length_s = frames as f64 / fps;
            if !(at_s.is_finite() && at_s >= 0.0 && at_s < length_s) {
                return Err(Error::Invalid(format!(
                    "{what} must be a time within the song (0 to {length_s:.2} s), got {at_s} s"
                )));
            }
            Ok((at_s * fps) as usize)
        };
        let mut request = original.request.clone();
        request.seed = seed;
        // Windows wholly within the kept frames, full and so rendered as before, keep their audio.
        let kept_windows = |kept: usize| {
            window_starts(frames, c).iter().filter(|&&start| start + c.chunk_frames <= kept.min(frames)).count()
        };
        let continued = |request: Request, kept: usize, total: usize, no_end_before_frame: usize| {
            let first_window = kept_windows(kept);
            let splice = self.splice_before(first_window);
            EditPlan {
                request: Request { duration_s: total as f64 / fps, ..request },
                kept_frames: kept,
                frames: total,
                no_end_before_frame,
                first_window,
                first_sample: splice,
                splice,
                back_at: None,
                seams_end: None,
                noise_seed: seed,
            }
        };
        Ok(match edit {
            Edit::Extend { seconds } => {
                if frames >= c.max_frames {
                    return Err(Error::Invalid(format!(
                        "this song is already as long as the model makes them ({} s)",
                        c.max_frames as f64 / fps
                    )));
                }
                let (total, no_end) = match seconds {
                    Some(s) if !(s.is_finite() && *s > 0.0) => {
                        return Err(Error::Invalid(format!("extend by a positive number of seconds, got {s}")));
                    }
                    // The length asked for: the model may not end the song before it.
                    Some(s) => {
                        let total = (frames + ((s * fps) as usize).max(1)).min(c.max_frames);
                        (total, total + 1)
                    }
                    // Until the model ends it, at least one frame on (the song's own end token
                    // would otherwise be drawn again at once).
                    None => (c.max_frames, frames + 2),
                };
                continued(request, frames, total, no_end)
            }
            Edit::From { at_s, description } => {
                if seed == original.request.seed {
                    return Err(Error::Invalid(
                        "another path needs another seed: with the song's own seed it would draw the same codes".into(),
                    ));
                }
                if let Some(d) = description {
                    if d.trim().is_empty() {
                        return Err(Error::Invalid("the new description is empty".into()));
                    }
                    request.description = d.clone();
                }
                let kept = at_frame(*at_s, "the time to take another path from")?;
                let total = frames.max(self.max_frames(original.request.duration_s)?);
                continued(request, kept, total, kept + 2)
            }
            Edit::Resing { line, lyrics, at_s } => {
                let (new_lyrics, estimate) = resung_lyrics(&original.request.lyrics, *line, lyrics)?;
                request.lyrics = new_lyrics;
                let at_s = at_s.unwrap_or(estimate * frames as f64 / fps);
                let kept = at_frame(at_s, "the time to sing again from")?;
                let total = frames.max(self.max_frames(original.request.duration_s)?);
                continued(request, kept, total, kept + 2)
            }
            Edit::Rerender { from_s, to_s } => {
                let length_s = samples as f64 / rate;
                if !(from_s.is_finite()
                    && to_s.is_finite()
                    && 0.0 <= *from_s
                    && from_s < to_s
                    && *to_s <= length_s + 1e-9)
                {
                    return Err(Error::Invalid(format!(
                        "re-render a range within the song (0 to {length_s:.2} s, its start before its end), got \
                         {from_s} to {to_s} s"
                    )));
                }
                let a = (from_s * rate) as usize;
                let b = ((to_s * rate) as usize).clamp(a + 1, samples);
                let window_of =
                    |sample: usize| spans.iter().position(|&(_, end)| sample < end).unwrap_or(spans.len() - 1);
                let (first, last) = (window_of(a), window_of(b - 1));
                let total = (last * c.chunk_hop + c.chunk_frames).min(frames);
                EditPlan {
                    request,
                    kept_frames: frames,
                    frames: total,
                    no_end_before_frame: usize::MAX,
                    first_window: first,
                    first_sample: spans[first].0,
                    splice: a,
                    back_at: (b < samples).then_some(b),
                    seams_end: Some(last),
                    noise_seed: seed,
                }
            }
        })
    }
}

/// The lyrics with line `line` (from 0, every line of the text) and those after it replaced by
/// `new`, and where that line is sung as a share of the song: its place among the sung lines (not
/// the structure tags or blank lines), an estimate.
fn resung_lyrics(lyrics: &str, line: usize, new: &str) -> Result<(String, f64)> {
    let lines: Vec<&str> = lyrics.lines().collect();
    if line >= lines.len() {
        return Err(Error::Invalid(format!(
            "the song's lyrics have {} lines: there is no line {} (counting from 1; {line} counting from 0) to sing \
             again from",
            lines.len(),
            line + 1
        )));
    }
    if new.trim().is_empty() {
        return Err(Error::Invalid("give the new lyrics to sing from that line on".into()));
    }
    let is_tag = |t: &str| t.starts_with('[') && t.ends_with(']');
    let sung = |l: &&&str| {
        let t = l.trim();
        !(t.is_empty() || is_tag(t))
    };
    let total = lines.iter().filter(sung).count().max(1);
    let before = lines[..line].iter().filter(sung).count();
    let mut text = lines[..line].join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(new.trim_end());
    Ok((text, before as f64 / total as f64))
}

/// The new version's seams: the original's for the windows it kept, the run's for those it
/// rendered; a re-render keeps the original's from its last window on, as the audio after its range
/// is the original's.
fn merged_seams(original: &[Vec<f32>], rendered: Vec<Vec<f32>>, plan: &EditPlan) -> Vec<Vec<f32>> {
    let first = plan.first_window;
    let mut seams: Vec<Vec<f32>> = original.iter().take(first).cloned().collect();
    match plan.seams_end {
        None => seams.extend(rendered),
        Some(last) => {
            seams.extend(rendered.into_iter().take(last - first));
            seams.extend(original.iter().skip(last).cloned());
        }
    }
    seams
}

fn poisoned() -> Error {
    Error::Invalid("an edit's audio was lost to a failed thread".into())
}

/// Joins the original's audio and the run's: the original before the splice, a crossfade into the
/// new audio, and for a re-render a crossfade back and the original after its range.
struct Splicer<'a> {
    original: &'a [Vec<f32>; 2],
    splice: usize,
    back_at: Option<usize>,
    fade: usize,
    /// The next sample to emit.
    emitted: usize,
}

/// A raised-cosine ramp from 0 (at `x = 0`) to 1 (at `x = 1`).
fn ramp(x: f64) -> f32 {
    (0.5 - 0.5 * (std::f64::consts::PI * x.clamp(0.0, 1.0)).cos()) as f32
}

impl<'a> Splicer<'a> {
    fn new(original: &'a [Vec<f32>; 2], plan: &EditPlan, fade: usize) -> Self {
        // Both fades fit within what is changed, and nothing fades in at the song's start.
        let room = plan.back_at.map_or(usize::MAX, |b| (b - plan.splice) / 2);
        let fade = fade.min(room).min(original[0].len().saturating_sub(plan.splice));
        Splicer { original, splice: plan.splice, back_at: plan.back_at, fade, emitted: 0 }
    }

    /// The original's audio before the splice, interleaved.
    fn kept(&mut self) -> Vec<f32> {
        let kept = interleaved(self.original, 0, self.splice);
        self.emitted = self.splice;
        kept
    }

    /// Of the run's audio at `first_sample`, what the new version plays: `(first sample, samples)`.
    fn take(&mut self, first_sample: usize, samples: &[f32]) -> Result<(usize, Vec<f32>)> {
        let count = samples.len() / 2;
        let done = self.back_at.is_some_and(|back| self.emitted >= back);
        if first_sample > self.emitted && !done {
            return Err(Error::Invalid(format!(
                "the edit's audio skipped from sample {} to {first_sample}",
                self.emitted
            )));
        }
        let at = self.emitted;
        let end = (first_sample + count).min(self.back_at.unwrap_or(usize::MAX));
        let mut out = Vec::with_capacity(2 * end.saturating_sub(at));
        for p in at..end {
            let mut weight = 1.0;
            if self.splice > 0 && self.fade > 0 && p < self.splice + self.fade {
                weight = ramp((p - self.splice) as f64 / self.fade as f64);
            }
            if let Some(back) = self.back_at
                && self.fade > 0
                && p >= back - self.fade
            {
                weight = weight.min(ramp((back - p) as f64 / self.fade as f64));
            }
            for ch in 0..2 {
                let new = samples[2 * (p - first_sample) + ch];
                let old = self.original[ch].get(p).copied().unwrap_or(new);
                out.push(if weight >= 1.0 { new } else { old + (new - old) * weight });
            }
        }
        self.emitted = self.emitted.max(end);
        Ok((at, out))
    }

    /// After the run: the original's audio after a re-render's range.
    fn finish(&mut self) -> Result<(usize, Vec<f32>)> {
        let Some(back) = self.back_at else { return Ok((self.emitted, Vec::new())) };
        if self.emitted < back {
            return Err(Error::Invalid(format!(
                "the re-rendered windows ended at sample {}, before the range's end {back}",
                self.emitted
            )));
        }
        let at = self.emitted;
        let tail = interleaved(self.original, back, self.original[0].len());
        self.emitted = self.original[0].len();
        Ok((at, tail))
    }
}

fn interleaved(planar: &[Vec<f32>; 2], from: usize, to: usize) -> Vec<f32> {
    planar[0][from..to].iter().zip(&planar[1][from..to]).flat_map(|(l, r)| [*l, *r]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lyrics_are_replaced_from_the_line_on() {
        let lyrics = "[verse]\none\ntwo\n\n[chorus]\nthree\nfour";
        let (text, at) = resung_lyrics(lyrics, 2, "deux\n[chorus]\ntrois").unwrap();
        assert_eq!(text, "[verse]\none\ndeux\n[chorus]\ntrois");
        assert_eq!(at, 0.25, "one sung line of four comes before line 2");
        let err = resung_lyrics(lyrics, 7, "x").unwrap_err().to_string();
        assert!(err.contains("7 lines") && err.contains("no line 8 (counting from 1; 7 counting from 0)"), "{err}");
        assert!(resung_lyrics(lyrics, 1, "  ").unwrap_err().to_string().contains("new lyrics"));
        assert_eq!(resung_lyrics(lyrics, 0, "la").unwrap(), ("la".to_string(), 0.0));
    }

    #[test]
    fn the_ramp_runs_from_zero_to_one() {
        assert_eq!(ramp(0.0), 0.0);
        assert_eq!(ramp(1.0), 1.0);
        assert!((ramp(0.5) - 0.5).abs() < 1e-6);
    }
}
