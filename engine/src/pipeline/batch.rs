//! Several songs at once (takes, a server's queue): one AR loop over all of them ([`ArBatch`]),
//! streamed, each song's windows made on one acoustic thread for all of them, where on a GPU the
//! windows ready at once take their flow steps together ([`super::acoustic_worker`]). Songs handed
//! over while the batch runs join it at the next frame. A song made in a batch is the song made
//! alone with the same recipe and seed: on the CPU the same codes and the same audio, bit for bit
//! (the decode products' rows do not depend on one another, each song samples from its own seeded
//! streams, and its windows go through the DiT alone); on a GPU the same codes, and audio within
//! the f32 rounding of the DiT's products over several windows.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::{Duration, Instant};

use super::acoustic_worker::AcousticWorker;
use super::ar::{ArBatch, ArRun, Frame, Member, Sinks};
use super::stream::{Song, SongWorker, StreamedAudio};
use super::windows::window_starts;
use super::{AcousticHalf, Cancel, Event, Observer, Pipeline, Request, RngChooser, Stage, Stats};
use crate::device::ThreadPriority;
use crate::error::{Error, Result};
use crate::plan::Mode;
use crate::prompt::PromptIds;

/// Where a song's events go.
pub type EventSink<'a> = Arc<dyn Fn(Event) + Send + Sync + 'a>;

/// One song of a batch: its request, where its events and its outcome go, and its cancel.
pub struct BatchSong<'a> {
    pub req: Request,
    /// Token ids already made (synthetic weights have no tokenizer); `None` to tokenize the
    /// request's description and lyrics.
    pub prompt: Option<PromptIds>,
    pub events: EventSink<'a>,
    pub cancel: Cancel,
    /// When the song was asked for: its statistics count from here.
    pub started: Instant,
    /// Called once: with the song's statistics after its `Score` and `Finished` events, or with
    /// what stopped it.
    pub done: Box<dyn FnOnce(Result<Stats>) + Send + 'a>,
}

/// Hands over a song to join the batch, given how many it runs now; `None` for none now. Asked
/// before every frame.
pub type Arrivals<'r, 'a> = &'r (dyn Fn(usize) -> Option<BatchSong<'a>> + Sync);

/// No song joins: the batch is the songs it started with.
pub fn no_arrivals<'a>(_: usize) -> Option<BatchSong<'a>> {
    None
}

/// What the AR loop hands a song's acoustic work when the song leaves the loop.
type ArOutcome = (Result<ArRun>, f64);

/// A song's `done`, called once: by hand, or with an error should the song's work be dropped
/// unfinished (a thread that did not start, a panic).
struct Done<'a>(Option<Box<dyn FnOnce(Result<Stats>) + Send + 'a>>);

impl Done<'_> {
    fn call(mut self, result: Result<Stats>) {
        if let Some(done) = self.0.take() {
            done(result);
        }
    }
}

/// `song` with its `done` guarded: dropped uncalled (its work lost to a thread that did not start
/// or a panic), it tells the song so.
fn guarded(song: BatchSong<'_>) -> BatchSong<'_> {
    let guard = Done(Some(song.done));
    BatchSong { done: Box::new(move |result| guard.call(result)), ..song }
}

/// What became of a song handed to the batch.
enum Joining<'a> {
    Joined(Joined<'a>, Running),
    /// It could not run; it was told why.
    Refused,
    /// Its KV cache does not fit beside the songs running now, but would alone: it waits for one
    /// of them to leave.
    Later(BatchSong<'a>),
}

impl Drop for Done<'_> {
    fn drop(&mut self) {
        if let Some(done) = self.0.take() {
            done(Err(Error::Invalid("the song stopped unexpectedly: its work could not go on".into())));
        }
    }
}

/// A song that joined, as its acoustic work takes it.
struct Joined<'a> {
    song: BatchSong<'a>,
    done: Done<'a>,
    prompt: PromptIds,
    max_frames: usize,
    tokenize_s: f64,
    frames: mpsc::Receiver<Frame>,
    ar_outcome: mpsc::Receiver<ArOutcome>,
}

/// How often a song waiting for room, with no song left in the AR loop, is tried again (and its
/// cancel heard).
const WAITING_SONG_CHECK: Duration = Duration::from_millis(50);

/// How many songs' acoustic work is under way, streamed: each holds an acoustic workspace on the
/// device until its last window, after its KV cache has gone with it from the AR loop.
#[derive(Default)]
struct Rendering {
    songs: Mutex<usize>,
    ended: Condvar,
}

impl Rendering {
    fn count(&self) -> usize {
        *self.songs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One song more, until the returned guard drops (its work done, or dropped unstarted).
    fn start(&self) -> RenderingSong<'_> {
        *self.songs.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        RenderingSong(self)
    }

    /// Waits until fewer than `seen` songs render, or `most` has passed.
    fn wait_below(&self, seen: usize, most: Duration) {
        let songs = self.songs.lock().unwrap_or_else(|e| e.into_inner());
        drop(self.ended.wait_timeout_while(songs, most, |n| *n >= seen).unwrap_or_else(|e| e.into_inner()));
    }
}

struct RenderingSong<'r>(&'r Rendering);

impl Drop for RenderingSong<'_> {
    fn drop(&mut self) {
        *self.0.songs.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        self.0.ended.notify_all();
    }
}

/// The AR loop's side of a song that joined.
struct Running {
    started: Instant,
    size: (usize, usize),
    ar_outcome: mpsc::Sender<ArOutcome>,
}

impl Pipeline {
    /// Makes `songs` together, and the songs `arrivals` hands over while they run; returns when
    /// every song is done (each told through its own `done`). Streamed, a song's audio comes as its
    /// windows are made; phase by phase, the AR half runs for every song, then the acoustic half
    /// song after song (songs join only while the AR half runs).
    pub fn generate_batch<'a>(&self, songs: Vec<BatchSong<'a>>, arrivals: Arrivals<'_, 'a>) {
        let songs: Vec<BatchSong<'a>> = songs.into_iter().map(guarded).collect();
        let events = |_: Event| {};
        let ar_half = match self.ar_half(&events) {
            Ok(half) => half,
            Err(e) => return songs.into_iter().for_each(|s| (s.done)(Err(each_song(&e)))),
        };
        let acoustic_half = match self.plan.mode {
            Mode::Streamed => match self.acoustic_half(&events) {
                Ok(half) => Some(half),
                Err(e) => return songs.into_iter().for_each(|s| (s.done)(Err(each_song(&e)))),
            },
            Mode::Phased => None,
        };
        let rendering = &Rendering::default();
        std::thread::scope(|scope| {
            // Streamed, every song's windows run on one thread, several songs' flow steps at once.
            let worker = match acoustic_half.clone() {
                Some(half) => {
                    let (worker, jobs) = AcousticWorker::new();
                    let thread = std::thread::Builder::new().name("songloom-acoustic".into());
                    let started = thread.spawn_scoped(scope, move || {
                        // The windows leave the AR loop room on the device; should the device
                        // refuse, they run as normal.
                        let _ = self.device.set_thread_priority(ThreadPriority::Yielding);
                        self.serve_windows(&half, jobs);
                        let _ = self.device.end_thread();
                    });
                    if let Err(e) = started {
                        let e = Error::Invalid(format!("cannot start the acoustic thread: {e}"));
                        return songs.into_iter().for_each(|s| (s.done)(Err(each_song(&e))));
                    }
                    Some(worker)
                }
                None => None,
            };
            let ar_thread = std::thread::Builder::new().name("songloom-ar".into()).spawn_scoped(scope, move || {
                let mut deferred = Vec::new();
                let mut start_acoustic = |joined: Joined<'a>| match (&acoustic_half, &worker) {
                    (Some(half), Some(worker)) => {
                        let (half, worker) = (half.clone(), worker.clone());
                        let thread = std::thread::Builder::new().name("songloom-song".into());
                        let rendering_song = rendering.start();
                        // Should the thread not start, its song is told so as `joined` drops.
                        let _ = thread.spawn_scoped(scope, move || {
                            let _rendering_song = rendering_song;
                            self.finish_batch_song(&half, joined, Some(worker));
                            let _ = self.device.end_thread();
                        });
                    }
                    _ => deferred.push(joined),
                };
                // The AR loop is the songs' critical path.
                let priority = self.device.set_thread_priority(ThreadPriority::Critical);
                self.run_ar_batch(
                    ArBatch::new(self.ar_models(&ar_half)),
                    songs,
                    arrivals,
                    priority,
                    rendering,
                    &mut start_acoustic,
                );
                // The songs were told their outcomes; a failure here leaves only a stream behind.
                let _ = self.device.end_thread();
                deferred
            });
            // Phase by phase, the AR half (dropped with the AR thread) gives its room to the other.
            let deferred = match ar_thread {
                Ok(handle) => handle.join().unwrap_or_default(),
                Err(e) => return eprintln!("cannot start the AR thread: {e}"),
            };
            if deferred.is_empty() {
                return;
            }
            match self.acoustic_half(&events) {
                Ok(half) => deferred.into_iter().for_each(|joined| self.finish_batch_song(&half, joined, None)),
                Err(e) => deferred.into_iter().for_each(|joined| joined.done.call(Err(each_song(&e)))),
            }
        });
    }

    /// How many of the songs the plan was made for run at once within its budget, at most `most`.
    pub fn batch_capacity(&self, most: usize) -> usize {
        self.plan.batch_capacity(&self.geometry, most)
    }

    /// Whether `reqs` can run together under the loaded plan (each one's numbers and prompt, and
    /// all their KV caches against the budget), without running them.
    pub fn check_batch(&self, reqs: &[Request]) -> Result<()> {
        let sizes = reqs
            .iter()
            .map(|req| self.prompt_and_frames(req, None).map(|(prompt, frames)| (prompt.cond.len(), frames)))
            .collect::<Result<Vec<_>>>()?;
        self.plan.for_batch(&self.geometry, &sizes, 0).map(|_| ())
    }

    /// A request's prompt (`given`, or its description and lyrics tokenized) and its frame limit,
    /// its numbers checked.
    fn prompt_and_frames(&self, req: &Request, given: Option<PromptIds>) -> Result<(PromptIds, usize)> {
        let prompt = match given {
            Some(prompt) => prompt,
            None => self.encode_prompt(&req.description, &req.lyrics)?,
        };
        let frames = self.validate(req, &prompt)?;
        Ok((prompt, frames))
    }

    /// The AR loop over the batch until every song has left it; a song's acoustic work is handed
    /// to `start_acoustic` as it joins.
    fn run_ar_batch<'a>(
        &self,
        mut batch: ArBatch<'_, 'a>,
        songs: Vec<BatchSong<'a>>,
        arrivals: Arrivals<'_, 'a>,
        priority: Result<()>,
        rendering: &Rendering,
        start_acoustic: &mut dyn FnMut(Joined<'a>),
    ) {
        let mut running: HashMap<usize, Running> = HashMap::new();
        let mut waiting: std::collections::VecDeque<BatchSong<'a>> = songs.into();
        let mut next_id = 0;
        if let Err(e) = priority {
            return waiting.into_iter().for_each(|s| (s.done)(Err(each_song(&e))));
        }
        // Phase by phase, the songs that left the AR loop wait for it to end before their audio is
        // made: songs stop joining once one has left, so a steady queue cannot hold them back.
        let mut open = true;
        loop {
            while let Some(song) = open.then(|| arrivals(batch.len() + waiting.len())).flatten() {
                waiting.push_back(guarded(song));
            }
            while let Some(song) = waiting.pop_front() {
                let sizes: Vec<(usize, usize)> = running.values().map(|r| r.size).collect();
                // The running songs' acoustic work is counted with them.
                let rendered = rendering.count();
                let rendering_only = rendered.saturating_sub(running.len());
                match self.join_song(&mut batch, next_id, song, &sizes, rendering_only) {
                    Joining::Joined(joined, run) => {
                        running.insert(next_id, run);
                        start_acoustic(joined);
                    }
                    Joining::Refused => {}
                    Joining::Later(song) => {
                        waiting.push_front(song);
                        // With no song left in the AR loop, room comes only as a song's audio ends;
                        // the song is tried again now and then meanwhile, so a cancel is heard.
                        if batch.is_empty() {
                            rendering.wait_below(rendered, WAITING_SONG_CHECK);
                            continue;
                        }
                        break;
                    }
                }
                next_id += 1;
            }
            if batch.is_empty() {
                return;
            }
            match batch.step() {
                Ok(left) => {
                    open &= self.plan.mode == Mode::Streamed || left.is_empty();
                    for (id, result) in left {
                        if let Some(run) = running.remove(&id) {
                            let _ = run.ar_outcome.send((result, run.started.elapsed().as_secs_f64()));
                        }
                    }
                }
                Err(e) => {
                    for (_, run) in running.drain() {
                        let _ = run.ar_outcome.send((Err(each_song(&e)), run.started.elapsed().as_secs_f64()));
                    }
                    return;
                }
            }
        }
    }

    /// Tokenizes and checks a song, runs its prefill and adds it to the batch; `others` are the
    /// prompt tokens and frames of the songs already running and `rendering` the songs that left
    /// the loop but still make their audio (for the memory plan). A song that cannot join is told
    /// why; one that fits alone but not beside them waits.
    fn join_song<'a>(
        &self,
        batch: &mut ArBatch<'_, 'a>,
        id: usize,
        mut song: BatchSong<'a>,
        others: &[(usize, usize)],
        rendering: usize,
    ) -> Joining<'a> {
        let checked = song.cancel.check().and_then(|()| self.prompt_and_frames(&song.req, song.prompt.take()));
        let (prompt, max_frames) = match checked {
            Ok(checked) => checked,
            Err(e) => {
                (song.done)(Err(e));
                return Joining::Refused;
            }
        };
        let size = (prompt.cond.len(), max_frames);
        if let Err(e) = self.plan.for_batch(&self.geometry, &[others, &[size]].concat(), rendering) {
            let alone = self.plan.for_batch(&self.geometry, &[size], 0);
            if (!others.is_empty() || rendering > 0) && alone.is_ok() {
                song.prompt = Some(prompt);
                return Joining::Later(song);
            }
            (song.done)(Err(e));
            return Joining::Refused;
        }
        (song.events)(Event::Stage { stage: Stage::Tokenize, done: 1, total: 1 });
        let tokenize_s = song.started.elapsed().as_secs_f64();
        let (frame_tx, frame_rx) = match self.plan.mode {
            Mode::Streamed => mpsc::sync_channel::<Frame>(2 * self.constants.chunk_frames),
            // Phase by phase the frames wait in host memory until the acoustic half runs.
            Mode::Phased => mpsc::sync_channel::<Frame>(max_frames + 1),
        };
        let events = song.events.clone();
        let sinks = Sinks {
            chooser: Box::new(RngChooser { seed: song.req.seed }),
            on_frame: Box::new(move |frame| frame_tx.send(frame).map_err(|_| Error::Cancelled)),
            events: Box::new(move |event| events(event)),
            cancel: song.cancel.clone(),
        };
        let member = match Member::prefilled(batch.models(), id, &prompt, max_frames, sinks) {
            Ok(member) => member,
            Err(e) => {
                (song.done)(Err(e));
                return Joining::Refused;
            }
        };
        batch.join(member);
        let (outcome_tx, outcome_rx) = mpsc::channel();
        let running = Running { started: song.started, size, ar_outcome: outcome_tx };
        let done = Done(Some(std::mem::replace(&mut song.done, Box::new(|_| {}))));
        let joined = Joined { song, done, prompt, max_frames, tokenize_s, frames: frame_rx, ar_outcome: outcome_rx };
        Joining::Joined(joined, running)
    }

    /// A song's windows from its frames as they come, then its statistics and score, told to the
    /// song.
    fn finish_batch_song<'a>(&self, half: &AcousticHalf, joined: Joined<'a>, worker: Option<AcousticWorker<'a>>) {
        let Joined { song, done, prompt, max_frames, tokenize_s, frames, ar_outcome } = joined;
        let worker =
            worker.map(|worker| SongWorker { worker, events: song.events.clone(), cancel: song.cancel.clone() });
        let outcome = self.schedule(song.req.steps).and_then(|schedule| {
            let observer = Observer { events: &*song.events, cancel: &song.cancel };
            let run = Song {
                prompt: &prompt,
                req: &song.req,
                max_frames,
                schedule: &schedule,
                resume: None,
                started: song.started,
                observer,
            };
            let expected_windows = window_starts(max_frames, &self.constants).len();
            let acoustic: Result<StreamedAudio> =
                self.stream_windows(half, &run, frames, expected_windows, worker.as_ref());
            let ar = ar_outcome.recv().unwrap_or_else(|_| {
                (Err(Error::Invalid("the AR loop stopped".into())), song.started.elapsed().as_secs_f64())
            });
            self.song_outcome((ar, acoustic), tokenize_s, song.started)
        });
        match outcome {
            Ok((stats, score)) => {
                (song.events)(Event::Score(Arc::new(score)));
                (song.events)(Event::Finished { stats: stats.clone() });
                done.call(Ok(stats));
            }
            Err(e) => done.call(Err(e)),
        }
    }
}

/// An error that stopped every song of a batch, for each of them.
pub(super) fn each_song(e: &Error) -> Error {
    match e {
        Error::Cancelled => Error::Cancelled,
        Error::OverBudget { wanted, in_use, budget } => {
            Error::OverBudget { wanted: *wanted, in_use: *in_use, budget: *budget }
        }
        e => Error::Invalid(e.to_string()),
    }
}
