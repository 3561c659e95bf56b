//! The server's songs: a queue the HTTP handlers add to and one worker thread that makes them on
//! the one engine, several at once (a song queued while others run joins them at their next frame),
//! through the same song job as the CLI and the window. Each job
//! keeps its events (as the CLI's `--json` lines) and its audio so far, so a client that connects
//! late replays them; a version counter tells waiting streams that something was added.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use songloom_engine::pipeline::{BatchSong, Cancel, Event, Pipeline, Request};
use songloom_ui::contract::{EngineEvent, Recipe, Timings};
use songloom_ui::progress::Progress;
use songloom_wire::Event as WireEvent;
use tokio::sync::watch;

use crate::edit_job::EditSource;
use crate::song_job::{self, BatchJob, SongJob, SongSink};

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
    /// How far it has come, as the window follows a song: from when it started to run.
    pub progress: Option<(Instant, Progress)>,
    /// The song an edit starts from, until the worker takes it.
    edit: Option<EditSource>,
    cancel: Cancel,
    /// Bumped whenever the job changes, for streams waiting on it.
    version: watch::Sender<u64>,
}

impl Job {
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// The share of the work done, 0 to 1, and the seconds left at the rate so far.
    pub fn fraction_and_eta(&self) -> (f64, Option<f64>) {
        match (&self.state, &self.progress) {
            (State::Finished { .. }, _) => (1.0, None),
            (_, Some((started, progress))) => {
                let now_s = started.elapsed().as_secs_f64();
                let eta_s = if self.state == State::Running { progress.eta_s(now_s) } else { None };
                (progress.fraction(), eta_s)
            }
            (_, None) => (0.0, None),
        }
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

impl Queue {
    /// Marks waiting job `id` running: its song job and cancel.
    fn start(&mut self, id: u64) -> (u64, SongJob, Cancel) {
        let job = self.jobs.get_mut(&id).expect("a waiting job exists");
        job.state = State::Running;
        job.changed();
        let song = SongJob {
            request: job.request.clone(),
            recipe: job.recipe.clone(),
            out: None,
            library: None,
            edit: job.edit.take(),
        };
        (id, song, job.cancel.clone())
    }
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
        self.add_job(SongJob { request, recipe, out: None, library: None, edit: None })
    }

    /// Queues a song job (an edit's, which carries the song it starts from); the server's library
    /// is where it goes whatever the job names.
    pub fn add_job(&self, song: SongJob) -> (u64, usize) {
        let SongJob { request, recipe, edit, .. } = song;
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
            progress: None,
            edit,
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

    /// The ids of every job, oldest first.
    pub fn ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.queue.lock().expect("not poisoned").jobs.keys().copied().collect();
        ids.sort_unstable();
        ids
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
    fn next(&self) -> Option<(u64, SongJob, Cancel)> {
        let mut q = self.queue.lock().expect("not poisoned");
        loop {
            if q.closed {
                return None;
            }
            if let Some(id) = q.waiting.pop_front() {
                return Some(q.start(id));
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

    /// The worker: makes the queued songs into the library at `library`, up to `batch` at once:
    /// a song queued while a batch runs joins it at its next frame (continuous batching). An edit
    /// runs alone, when no batch runs.
    pub fn work(self: &Arc<Self>, pipeline: &Pipeline, library: PathBuf, batch: usize) {
        while let Some((id, job, cancel)) = self.next() {
            let job = SongJob { library: Some(library.clone()), ..job };
            if job.edit.is_some() || batch <= 1 {
                let sink = JobSink { jobs: self, id };
                let result = song_job::run(pipeline, &job, &sink, &cancel);
                self.record(id, result, &cancel);
            } else if let Some(first) = self.batch_song(pipeline, id, job, cancel) {
                let arrivals = |running: usize| {
                    if running >= batch {
                        return None;
                    }
                    let (id, job, cancel) = self.next_to_join()?;
                    self.batch_song(pipeline, id, SongJob { library: Some(library.clone()), ..job }, cancel)
                };
                pipeline.generate_batch(vec![first], &arrivals);
            }
        }
    }

    /// Job `id` as a song of a batch, its outcome recorded as it ends; `None` (recorded failed)
    /// when it cannot start.
    fn batch_song<'a>(&'a self, pipeline: &Pipeline, id: u64, job: SongJob, cancel: Cancel) -> Option<BatchSong<'a>> {
        let told = cancel.clone();
        let batch_job = BatchJob {
            job,
            sink: Box::new(JobSink { jobs: self, id }),
            cancel: cancel.clone(),
            finished: Box::new(move |result| self.record(id, result, &told)),
        };
        match song_job::batch_song(pipeline, batch_job) {
            Ok(song) => Some(song),
            Err(e) => {
                self.record(id, Err(e), &cancel);
                None
            }
        }
    }

    /// The first queued song, marked running, unless it is an edit (which waits for the batch to
    /// end, and the songs behind it with it, keeping their places); `None` when there is none now
    /// or the server stops.
    fn next_to_join(&self) -> Option<(u64, SongJob, Cancel)> {
        let mut q = self.queue.lock().expect("not poisoned");
        if q.closed {
            return None;
        }
        let id = *q.waiting.front()?;
        if q.jobs.get(&id).is_some_and(|j| j.edit.is_some()) {
            return None;
        }
        q.waiting.pop_front();
        Some(q.start(id))
    }

    /// A finished, failed or cancelled song's state and last event.
    fn record(&self, id: u64, result: anyhow::Result<song_job::FinishedSong>, cancel: &Cancel) {
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
        // Here rather than after a batch, which songs joining may keep running for hours.
        self.drop_old_audio();
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
            let (started, progress) = job.progress.get_or_insert_with(|| (Instant::now(), Progress::new(0.0)));
            // The stages and the end are what the share done and the time left go by.
            let followed = match event {
                Event::Stage { stage, done, total } => {
                    Some(EngineEvent::Stage { job: self.id, stage: *stage, done: *done, total: *total })
                }
                Event::Finished { stats } => {
                    Some(EngineEvent::Finished { job: self.id, timings: Timings::from(stats) })
                }
                Event::Audio { .. } | Event::Score(_) => None,
            };
            if let Some(followed) = followed {
                progress.apply(&followed, started.elapsed().as_secs_f64());
            }
            job.events.extend(crate::generate::wire_event(event));
        });
    }
}

#[cfg(test)]
mod tests {
    use songloom_engine::pipeline::Stage;

    use super::*;

    /// A running song's share done follows its AR frames and denoising as the window's bar does,
    /// with a time left once there is a rate.
    #[test]
    fn a_running_song_reports_its_share_done_and_time_left() {
        let jobs = Jobs::default();
        let request = Request {
            description: "piano".into(),
            lyrics: "[verse]".into(),
            duration_s: 10.0,
            seed: 1,
            steps: 2,
            guidance: None,
        };
        let (id, _) = jobs.add(request, Recipe::default());
        assert_eq!(jobs.with(id, Job::fraction_and_eta), Some((0.0, None)));
        jobs.next().expect("the queued song");
        let sink = JobSink { jobs: &jobs, id };
        let pause = || std::thread::sleep(std::time::Duration::from_millis(20));
        sink.event(&Event::Stage { stage: Stage::ArFrames, done: 40, total: 100 });
        pause();
        sink.event(&Event::Stage { stage: Stage::Dit { window: 0, windows: 2 }, done: 1, total: 2 });
        pause();
        sink.event(&Event::Stage { stage: Stage::Dit { window: 0, windows: 2 }, done: 2, total: 2 });
        pause();
        sink.event(&Event::Stage { stage: Stage::Vocoder { window: 0, windows: 2 }, done: 1, total: 1 });
        sink.event(&Event::Stage { stage: Stage::ArFrames, done: 50, total: 100 });
        let (fraction, eta_s) = jobs.with(id, Job::fraction_and_eta).unwrap();
        assert_eq!(fraction, 0.5 * 0.5 + 0.5 * 0.5);
        assert!(eta_s.is_some_and(|s| s > 0.0), "{eta_s:?}");
    }
}
