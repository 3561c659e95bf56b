//! The streamed run: the AR loop on a thread of its own hands frames to the acoustic thread
//! through a bounded channel; a window starts as soon as its frames exist, and its audio leaves
//! the engine, in order, as soon as it is final (the window after it decides where it is cut).

use std::sync::mpsc;
use std::time::Instant;

use std::sync::Arc;

use super::acoustic_worker::{AcousticWorker, WindowJob};
use super::ar::{self, ArRun, Chooser, Codes, Frame, Prefix, WithoutEnd};
use super::score::Score;
use super::windows::{Carry, crop, run_window, window_starts};
use super::{
    AcousticHalf, ArHalf, Cancel, Event, EventSink, Observer, Pipeline, Request, RngChooser, Stats, interleave,
    stereo_span,
};
use crate::device::ThreadPriority;
use crate::error::{Error, Result};
use crate::models::scheduler::FlowMatchEuler;
use crate::plan::Mode;
use crate::prompt::PromptIds;
use crate::tensor::Tensor;

impl Pipeline {
    /// [`generate`](Self::generate) from token ids already made (`req.description` and `req.lyrics`
    /// are not read); `started` is when the request arrived.
    pub fn generate_ids(
        &self,
        prompt: &PromptIds,
        req: &Request,
        started: Instant,
        observer: Observer,
    ) -> Result<Stats> {
        let (stats, score) = self.run_song(prompt, req, None, started, observer)?;
        (observer.events)(Event::Score(Arc::new(score)));
        (observer.events)(Event::Finished { stats: stats.clone() });
        Ok(stats)
    }

    /// A song picked up again where `resume` says (an edit): the kept codes replayed, then the
    /// request's seed drawing the rest, the windows rendered from `resume.first_window` on. Its
    /// audio events start at `resume.first_sample`; no `Score` or `Finished` event is sent (the
    /// edit that called it sends its own). The score's seams are those of the windows rendered.
    pub fn resume_song(
        &self,
        prompt: &PromptIds,
        req: &Request,
        resume: &Resume,
        observer: Observer,
    ) -> Result<(Stats, Score)> {
        self.run_song(prompt, req, Some(resume), Instant::now(), observer)
    }

    fn run_song(
        &self,
        prompt: &PromptIds,
        req: &Request,
        resume: Option<&Resume>,
        started: Instant,
        observer: Observer,
    ) -> Result<(Stats, Score)> {
        let mut max_frames = self.validate(req, prompt)?;
        if let Some(resume) = resume {
            max_frames = resume.frames;
            self.plan.for_song(&self.geometry, prompt.cond.len(), max_frames)?;
        }
        let tokenize_s = started.elapsed().as_secs_f64();
        let schedule = self.schedule(req.steps)?;
        let song = Song { prompt, req, max_frames, schedule: &schedule, resume, started, observer };
        let halves = match self.plan.mode {
            Mode::Streamed => self.run_streamed(&song),
            Mode::Phased => self.run_phased(&song),
        };
        self.song_outcome(halves, tokenize_s, started)
    }

    /// A song's statistics and score from what its two halves made, or the error that stopped it.
    pub(super) fn song_outcome(
        &self,
        (ar_result, acoustic_result): HalvesResult,
        tokenize_s: f64,
        started: Instant,
    ) -> Result<(Stats, Score)> {
        let (ar, ar_end, acoustic) = match (ar_result, acoustic_result) {
            ((Ok(ar), ar_end), Ok(acoustic)) => (ar, ar_end, acoustic),
            // An AR error of its own is the cause: the acoustic half then saw its frames end early.
            ((Err(e), _), _) if !matches!(e, Error::Cancelled) => return Err(e),
            // The acoustic thread's error is the cause when the AR thread only saw it stop listening.
            (_, Err(e)) => return Err(e),
            ((Err(e), _), _) => return Err(e),
        };
        if ar.frames == 0 {
            return Err(Error::Invalid("the model ended the song before its first frame".into()));
        }
        let overlap_s =
            acoustic.busy_spans.iter().map(|&(from, to)| (to.min(ar_end) - from.max(tokenize_s)).max(0.0)).sum();
        let stats = Stats {
            frames: ar.frames,
            windows: acoustic.windows,
            samples: acoustic.samples,
            sample_rate: self.sample_rate(),
            tokenize_s,
            ar_s: ar_end - tokenize_s,
            acoustic_s: acoustic.busy_spans.iter().map(|(from, to)| to - from).sum(),
            total_s: started.elapsed().as_secs_f64(),
            time_to_first_audio_s: acoustic.first_audio_s,
            ar_device_wait_s: ar.device_wait_s,
            overlap_s,
            ar_sampling_s: ar.sampling_s,
            ar_handing_on_s: ar.handing_on_s,
            ar_semantic_s: ar.parts.semantic_s,
            ar_depth_s: ar.parts.depth_s,
            ar_states_s: ar.parts.states_s,
            ar_feed_s: ar.parts.feed_s,
        };
        // The last window's seam is kept too: extended, the song may render the window after it.
        let score = Score { model: self.model_identity()?, codes: ar.codes, seams: acoustic.seams };
        Ok((stats, score))
    }

    /// The first emitted frame whose hidden states a resumed run's windows need: the first of the
    /// window before the first rendered (for what it hands on), or of the first rendered.
    fn first_hidden_frame(&self, resume: &Resume) -> usize {
        resume.first_window.saturating_sub(1) * self.constants.chunk_hop
    }

    /// The AR loop of `song`: its own draws, or the kept codes replayed first when it resumes one.
    fn run_ar(&self, half: &ArHalf, song: &Song, on_frame: &mut dyn FnMut(Frame) -> Result<()>) -> Result<ArRun> {
        let mut rng = RngChooser { seed: song.req.seed };
        let models = self.ar_models(half);
        // Resumed, the kept frames go through the models at once (teacher forcing); only the
        // frames the rendered windows read get their hidden states.
        let forced = song.resume.map(|r| ar::Forced {
            codes: r.codes,
            frames: r.codes.frames.len(),
            hidden_from: self.first_hidden_frame(r) + 1,
        });
        let mut run = |chooser: &mut dyn Chooser| {
            ar::run_forced(&models, song.prompt, forced, song.max_frames, chooser, on_frame, song.observer)
        };
        let Some(resume) = song.resume else { return run(&mut rng) };
        let c = &self.constants;
        let rows = c.sampleable_rows();
        let mut free = WithoutEnd {
            end_index: (c.audio_end_id - rows.start) as usize,
            before_frame: resume.no_end_before_frame,
            then: &mut rng,
        };
        run(&mut Prefix { codes: resume.codes, semantic_base: c.code_offset - rows.start, then: &mut free })
    }

    /// Both halves at once: the AR loop on a thread of its own feeds the acoustic thread (this one).
    fn run_streamed(&self, song: &Song) -> HalvesResult {
        let Song { max_frames, started, observer, .. } = *song;
        let (ar_half, acoustic_half) = match (self.ar_half(observer.events), self.acoustic_half(observer.events)) {
            (Ok(ar), Ok(acoustic)) => (ar, acoustic),
            // The AR result carries the error; no audio was made.
            (Err(e), _) | (_, Err(e)) => return ((Err(e), 0.0), Ok(StreamedAudio::default())),
        };
        let expected_windows = window_starts(max_frames, &self.constants).len();
        let (tx, rx) = mpsc::sync_channel::<Frame>(2 * self.constants.chunk_frames);
        std::thread::scope(|scope| {
            let ar_thread = std::thread::Builder::new().name("songloom-ar".into()).spawn_scoped(scope, || {
                // The AR loop is the song's critical path.
                let result = self.device.set_thread_priority(ThreadPriority::Critical).and_then(|()| {
                    self.run_ar(&ar_half, song, &mut |frame| tx.send(frame).map_err(|_| Error::Cancelled))
                });
                drop(tx);
                // Ended whatever the song's outcome, a cancelled one's included; the song's own
                // error stays the cause.
                let ended = self.device.end_thread();
                let result = result.and_then(|run| ended.map(|()| run));
                (result, started.elapsed().as_secs_f64())
            });
            // When this returns (an error included) the receiver is dropped, and the AR thread stops at
            // its next frame. The acoustic half leaves the AR loop room on the device meanwhile;
            // should the device refuse, it runs as normal.
            let _ = self.device.set_thread_priority(ThreadPriority::Yielding);
            let acoustic = self.stream_windows(&acoustic_half, song, rx, expected_windows, None);
            let _ = self.device.set_thread_priority(ThreadPriority::Normal);
            let ar = match ar_thread {
                Ok(handle) => {
                    handle.join().unwrap_or_else(|_| (Err(Error::Invalid("the AR thread failed".into())), 0.0))
                }
                Err(e) => (Err(Error::Invalid(format!("cannot start the AR thread: {e}"))), 0.0),
            };
            (ar, acoustic)
        })
    }

    /// One half at a time: the whole AR loop with its frames kept in host memory, its weights
    /// freed, then the acoustic half over the kept frames, through the same window code as the
    /// streamed run (so the audio is the same).
    fn run_phased(&self, song: &Song) -> HalvesResult {
        let Song { started, observer, .. } = *song;
        let mut frames = Vec::new();
        let ar_result = self.ar_half(observer.events).and_then(|half| {
            let mut keep = |frame| {
                frames.push(frame);
                Ok(())
            };
            self.run_ar(&half, song, &mut keep)
        });
        let ar_end = started.elapsed().as_secs_f64();
        if ar_result.is_err() {
            return ((ar_result, ar_end), Ok(StreamedAudio::default()));
        }
        let expected_windows = window_starts(frames.len(), &self.constants).len();
        let (tx, rx) = mpsc::sync_channel::<Frame>(frames.len().max(1));
        for frame in frames {
            // The channel holds every frame and its receiver is below: a send cannot fail.
            let _ = tx.send(frame);
        }
        drop(tx);
        let acoustic = self
            .acoustic_half(observer.events)
            .and_then(|half| self.stream_windows(&half, song, rx, expected_windows, None));
        ((ar_result, ar_end), acoustic)
    }

    /// The acoustic thread: collects frames, runs each window as soon as it can (on this thread, or
    /// on `worker`'s with other songs' windows), emits audio.
    pub(super) fn stream_windows(
        &self,
        half: &AcousticHalf,
        song: &Song,
        frames_rx: mpsc::Receiver<Frame>,
        expected_windows: usize,
        worker: Option<&SongWorker>,
    ) -> Result<StreamedAudio> {
        let Song { req, schedule, started, observer, resume, .. } = *song;
        // A resumed song's carry is made on this thread's stream: its windows stay here.
        let worker = worker.filter(|_| resume.is_none());
        let c = &self.constants;
        let acoustic = self.acoustic(half, schedule, req.guidance);
        let hop = self.geometry.vocoder.hop_length();
        let sample_rate = self.sample_rate();
        let mut noise = self.noise(resume.map_or(req.seed, |r| r.noise_seed));
        let mut carry = Carry::default();
        let first_window = resume.map_or(0, |r| r.first_window);
        // Resumed, the window before the first one rendered is needed for what it hands on.
        let mut resumed_seam = resume.and_then(|r| r.seam).filter(|_| first_window > 0);
        if first_window > 0 && resumed_seam.is_none() {
            return Err(Error::Invalid(format!("window {first_window} cannot be rendered without its seam")));
        }
        // Frames from `base` on; earlier ones are no longer needed by any window.
        let mut hidden: Vec<f32> = Vec::new();
        let mut base = resume.map_or(0, |r| self.first_hidden_frame(r));
        let mut width = 0;
        let mut count = 0;
        let mut ended = false;
        let mut out = StreamedAudio { samples: resume.map_or(0, |r| r.first_sample), ..StreamedAudio::default() };
        // The tail of the last window run, held until we know whether that window was the last.
        let mut held_tail: Option<[Vec<f32>; 2]> = None;
        let emit = |song: &[Vec<f32>; 2], out: &mut StreamedAudio| {
            if song[0].is_empty() {
                return;
            }
            if out.first_audio_s.is_none() {
                out.first_audio_s = Some(started.elapsed().as_secs_f64());
            }
            let samples = interleave(song);
            (observer.events)(Event::Audio { first_sample: out.samples, samples, sample_rate });
            out.samples += song[0].len();
        };
        let mut k = first_window;
        loop {
            let start = k * c.chunk_hop;
            let full = start + c.chunk_frames;
            // Wait for this window's frames, or for the end of the loop.
            while !ended && count < full + 1 {
                match frames_rx.recv() {
                    Ok(frame) => {
                        if !frame.hidden.is_empty() {
                            width = frame.hidden.len();
                        }
                        if count >= base {
                            hidden.extend(frame.hidden);
                        }
                        count += 1;
                    }
                    Err(_) => ended = true,
                }
                // A window that has all its frames need not wait for the next one to start.
                if count == full && !ended {
                    break;
                }
            }
            observer.cancel.check()?;
            // Window k (k >= 1) exists iff the song has more than start + hop frames.
            let exists = k == 0 || count > start + c.chunk_hop;
            if held_tail.is_some() && (exists || ended) {
                let tail = held_tail.take().expect("checked");
                if !exists {
                    emit(&tail, &mut out); // the previous window was the last one
                }
            }
            if !exists {
                break;
            }
            if !ended && count < full {
                continue;
            }
            let end = full.min(count);
            let rows = |from: usize, to: usize| {
                Tensor::from_f32(&[to - from, width], hidden[(from - base) * width..(to - base) * width].to_vec())
            };
            if let Some(seam) = resumed_seam.take() {
                let previous = start - c.chunk_hop;
                carry = Carry::resumed(&acoustic, &rows(previous, previous + c.chunk_frames)?, seam)?;
            }
            let frames = rows(start, end)?;
            let busy_from = started.elapsed().as_secs_f64();
            // Once the AR loop has ended, the windows its frames make; until then those planned.
            let windows_expected = if ended { window_starts(count, c).len() } else { expected_windows }.max(k + 1);
            let (wave, seam) = match worker {
                None => {
                    let frames = self.device.upload(frames)?;
                    let window = run_window(&acoustic, k, windows_expected, &frames, &mut carry, &mut noise, observer)?;
                    (self.device.to_host(&window.waveform)?, carry.seam(&self.device)?.unwrap_or_default())
                }
                Some(worker) => {
                    let audio = worker.worker.run(|reply| WindowJob {
                        index: k,
                        windows_expected,
                        frames,
                        carry: std::mem::take(&mut carry),
                        noise,
                        schedule: schedule.clone(),
                        guidance: req.guidance,
                        events: worker.events.clone(),
                        cancel: worker.cancel.clone(),
                        reply,
                    })?;
                    carry = audio.carry;
                    (audio.waveform, audio.seam)
                }
            };
            out.seams.push(seam);
            out.busy_spans.push((busy_from, started.elapsed().as_secs_f64()));
            let n = wave.len() / 2;
            // Known last: the loop ended and no later window exists.
            let known_last = ended && count <= start + c.chunk_frames;
            let (left, right) = crop(k, known_last, n, hop, c);
            let part = |from: usize, to: usize| stereo_span(&wave, from, to);
            emit(&part(left, right), &mut out);
            if !known_last {
                held_tail = Some(part(right, n));
            }
            out.windows += 1;
            k += 1;
            let next_start = (k * c.chunk_hop).min(count);
            hidden.drain(..(next_start - base) * width);
            base = next_start;
        }
        Ok(out)
    }
}

/// Where a run picks a song up again (an edit): the codes it replays, the window it renders first
/// and what that window is handed.
#[derive(Debug, Clone)]
pub struct Resume<'a> {
    /// Replayed before the sampler draws (teacher forcing): the kept frames' codes, the priming
    /// frame's first.
    pub codes: &'a Codes,
    /// The frames the run makes at most (kept ones included).
    pub frames: usize,
    /// Frames before this one may not end the song.
    pub no_end_before_frame: usize,
    /// The first window rendered; the audio before it is the song's own.
    pub first_window: usize,
    /// What window `first_window - 1` handed on (the score's seam); none for window 0.
    pub seam: Option<&'a [f32]>,
    /// The stereo frame of the song at which the first window's audio starts.
    pub first_sample: usize,
    /// The seed of the windows' noise (the request's seed draws the codes).
    pub noise_seed: u64,
}

/// One song's run, as both modes take it.
#[derive(Clone, Copy)]
pub(super) struct Song<'a> {
    pub(super) prompt: &'a PromptIds,
    pub(super) req: &'a Request,
    pub(super) max_frames: usize,
    pub(super) schedule: &'a FlowMatchEuler,
    pub(super) resume: Option<&'a Resume<'a>>,
    pub(super) started: Instant,
    pub(super) observer: Observer<'a>,
}

/// A batch's song whose windows run on the batch's [`AcousticWorker`]: the worker and what the
/// song's windows report to.
pub(super) struct SongWorker<'w> {
    pub(super) worker: AcousticWorker<'w>,
    pub(super) events: EventSink<'w>,
    pub(super) cancel: Cancel,
}

/// The AR half's run and when it ended, and the acoustic half's audio.
pub(super) type HalvesResult = ((Result<ArRun>, f64), Result<StreamedAudio>);

#[derive(Default)]
pub(super) struct StreamedAudio {
    samples: usize,
    windows: usize,
    first_audio_s: Option<f64>,
    /// When each window ran, in seconds since the song started.
    busy_spans: Vec<(f64, f64)>,
    /// What each window rendered handed on.
    seams: Vec<Vec<f32>>,
}
