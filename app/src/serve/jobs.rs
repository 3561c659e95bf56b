//! The server's songs: a queue the HTTP handlers add to and one worker thread that makes them, one
//! at a time on the one engine, through the same song job as the CLI and the window. Each job
//! keeps its events (as the CLI's `--json` lines) and its audio so far, so a client that connects
//! late replays them; a version counter tells waiting streams that something was added.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};

use songloom_engine::pipeline::{Cancel, Event, Pipeline, Request};
use songloom_ui::contract::Recipe;
use songloom_wire::Event as WireEvent;
use tokio::sync::watch;

use crate::song_job::{self, SongJob, SongSink};

/// Songs over whose audio stays in memory for `stream.pcm`; a long-running server holds no more
/// (a minute of stereo f32 is 21 MB).
pub const KEPT_AUDIO: usize = 4;

/// Where a job is.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    Queued,
    Running,
    /// Kept in the library under this id.
    Finished {
        library_id: i64,
    },
    Failed(String),
    Cancelled,
}

impl State {
    pub fn name(&self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Running => "running",
            State::Finished { .. } => "finished",
            State::Failed(_) => "failed",
            State::Cancelled => "cancelled",
        }
    }

    pub fn is_over(&self) -> bool {
        !matches!(self, State::Queued | State::Running)
    }
}

/// One song asked of the server.
pub struct Job {
    pub state: State,
    pub request: Request,
    pub recipe: Recipe,
    /// The events so far, in order.
    pub events: Vec<WireEvent>,
    /// Interleaved stereo samples so far (dropped once the song is over and [`KEPT_AUDIO`] newer
    /// songs are: the library's WAV has them).
    pub audio: Vec<f32>,
    pub audio_dropped: bool,
    cancel: Cancel,
    /// Bumped whenever the job changes, for streams waiting on it.
    version: watch::Sender<u64>,
}

impl Job {
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    fn changed(&self) {
        self.version.send_modify(|v| *v += 1);
    }
}

#[derive(Default)]
struct Queue {
    next_id: u64,
    waiting: VecDeque<u64>,
    jobs: HashMap<u64, Job>,
    /// Set when the server stops: the worker finishes the running job's cancel and exits.
    closed: bool,
}

/// The jobs, shared by the handlers and the worker.
#[derive(Default)]
pub struct Jobs {
    queue: Mutex<Queue>,
    wake: Condvar,
}

impl Jobs {
    /// Queues a song; returns its id and its place (1 = next to run).
    pub fn add(&self, request: Request, recipe: Recipe) -> (u64, usize) {
        let mut q = self.queue.lock().expect("not poisoned");
        q.next_id += 1;
        let id = q.next_id;
        let (version, _) = watch::channel(0);
        let job = Job {
            state: State::Queued,
            request,
            recipe,
            events: Vec::new(),
            audio: Vec::new(),
            audio_dropped: false,
            cancel: Cancel::default(),
            version,
        };
        q.jobs.insert(id, job);
        q.waiting.push_back(id);
        let place = q.waiting.len();
        self.wake.notify_all();
        (id, place)
    }

    /// Runs `f` on job `id`, if there is one.
    pub fn with<T>(&self, id: u64, f: impl FnOnce(&Job) -> T) -> Option<T> {
        self.queue.lock().expect("not poisoned").jobs.get(&id).map(f)
    }

    /// The job's place in the queue (1 = next), if it waits.
    pub fn place(&self, id: u64) -> Option<usize> {
        self.queue.lock().expect("not poisoned").waiting.iter().position(|&j| j == id).map(|p| p + 1)
    }

    /// Cancels job `id`: a waiting one never runs, a running one stops between frames and steps
    /// and leaves no file. Returns its state after, or `None` for no such job.
    pub fn cancel(&self, id: u64) -> Option<State> {
        let mut q = self.queue.lock().expect("not poisoned");
        q.waiting.retain(|&j| j != id);
        let job = q.jobs.get_mut(&id)?;
        match job.state {
            State::Queued => {
                job.state = State::Cancelled;
                job.events.push(WireEvent::Cancelled);
                job.changed();
            }
            State::Running => job.cancel.cancel(),
            _ => {}
        }
        Some(job.state.clone())
    }

    /// Cancels every job that waits or runs and stops the worker after the one it runs, so every
    /// stream of a job ends.
    pub fn close(&self) {
        let mut q = self.queue.lock().expect("not poisoned");
        q.closed = true;
        let waiting: Vec<u64> = q.waiting.drain(..).collect();
        for id in waiting {
            if let Some(job) = q.jobs.get_mut(&id) {
                job.state = State::Cancelled;
                job.events.push(WireEvent::Cancelled);
                job.changed();
            }
        }
        for job in q.jobs.values() {
            job.cancel.cancel();
        }
        self.wake.notify_all();
    }

    /// The next job to run, marked running; `None` once the server stops.
    fn next(&self) -> Option<(u64, Request, Recipe, Cancel)> {
        let mut q = self.queue.lock().expect("not poisoned");
        loop {
            if q.closed {
                return None;
            }
            if let Some(id) = q.waiting.pop_front() {
                let job = q.jobs.get_mut(&id).expect("a waiting job exists");
                job.state = State::Running;
                job.changed();
                return Some((id, job.request.clone(), job.recipe.clone(), job.cancel.clone()));
            }
            q = self.wake.wait(q).expect("not poisoned");
        }
    }

    fn update(&self, id: u64, f: impl FnOnce(&mut Job)) {
        if let Some(job) = self.queue.lock().expect("not poisoned").jobs.get_mut(&id) {
            f(job);
            job.changed();
        }
    }

    /// The worker: makes each queued song in turn into the library at `library`.
    pub fn work(self: &Arc<Self>, pipeline: &Pipeline, library: PathBuf) {
        while let Some((id, request, recipe, cancel)) = self.next() {
            let job = SongJob { request, recipe, out: None, library: Some(library.clone()) };
            let sink = JobSink { jobs: self, id };
            let result = song_job::run(pipeline, &job, &sink, &cancel);
            self.update(id, |job| match result {
                Ok(finished) => {
                    let (library_id, title) = finished.saved.map_or((0, String::new()), |s| (s.id, s.title));
                    job.events.push(WireEvent::Saved { library_id, title });
                    job.state = State::Finished { library_id };
                }
                Err(_) if cancel.is_cancelled() => {
                    job.events.push(WireEvent::Cancelled);
                    job.state = State::Cancelled;
                }
                Err(e) => {
                    let message = format!("{e:#}");
                    job.events.push(WireEvent::Error { message: message.clone() });
                    job.state = State::Failed(message);
                }
            });
            self.drop_old_audio();
        }
    }

    /// Frees the audio of songs over but the newest [`KEPT_AUDIO`].
    fn drop_old_audio(&self) {
        let mut q = self.queue.lock().expect("not poisoned");
        let mut over: Vec<u64> =
            q.jobs.iter().filter(|(_, j)| j.state.is_over() && !j.audio_dropped).map(|(id, _)| *id).collect();
        over.sort_unstable();
        for id in &over[..over.len().saturating_sub(KEPT_AUDIO)] {
            let job = q.jobs.get_mut(id).expect("listed");
            job.audio = Vec::new();
            job.audio_dropped = true;
        }
    }
}

/// A running job's events into its record.
struct JobSink<'a> {
    jobs: &'a Jobs,
    id: u64,
}

impl SongSink for JobSink<'_> {
    fn event(&self, event: &Event) {
        self.jobs.update(self.id, |job| {
            if let Event::Audio { samples, .. } = event {
                job.audio.extend_from_slice(samples);
            }
            job.events.push(crate::generate::wire_event(event));
        });
    }
}
