//! The in-process engine behind the window. A worker thread makes one song at a time with the
//! Songloom pipeline (a new one, or a new version of a library song), or the takes of a recipe as
//! one batch, plays it (the first take) while it is made, writes its WAV and keeps it in the
//! library; a second thread answers the library's requests
//! (list, listen, rename, export, delete), so a slow disk never stalls the window. The window sees
//! only the contract's requests and events.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use anyhow::{Context, bail};
use songloom_engine::lora::{AdapterSpec, Adapters};
use songloom_engine::pipeline::{Cancel, Event, MemoryRequest, Pipeline, Request as SongRequest};
use songloom_engine::plan::WeightsChoice;
use songloom_engine::{Device, DeviceChoice, DeviceOptions, Precision};
use songloom_ui::contract::{
    DeviceStatus, EditRequest, Engine, EngineEvent, ExportFormat, InstalledModel, JobId, PlaybackState, Recipe,
    Request, SongEntry, SongId, Timings,
};

use crate::edit_job::{self, request_of};
use crate::library::{Library, Song, default_dir};
use crate::player::Player;
use crate::song_job::{self, BatchJob, FinishedSong, SongJob, SongSink};
use crate::wav::{self, FileFormat};
use songloom_wire::notice::model_name;

/// The jobs being made now (one song, or the takes of a batch), each with its own cancel.
type Running = Arc<Mutex<HashMap<JobId, Cancel>>>;
/// Songs cancelled while they waited their turn: the worker skips them.
type Unqueued = Arc<Mutex<std::collections::HashSet<JobId>>>;

/// Sends an event and wakes the window.
#[derive(Clone)]
struct Outbox {
    events: mpsc::Sender<EngineEvent>,
    repaint: Arc<dyn Fn() + Send + Sync>,
}

impl Outbox {
    fn send(&self, event: EngineEvent) {
        let _ = self.events.send(event);
        (self.repaint)();
    }
}

/// The one player. Opening a sound device can take a while, so it is opened on the engine's
/// threads ([`ensure`](Self::ensure)), never on the window's, which only reaches a player that is
/// already open and never waits for one to open.
#[derive(Default)]
struct Players {
    /// The open player and its sample rate, or why nothing can play at that rate.
    current: Mutex<Option<(u32, Result<Player, String>)>>,
    /// Held while a player opens, so two engine threads do not open two.
    opening: Mutex<()>,
    /// Whether the song being made has the player: set when a song starts, cleared when a library
    /// song is listened to meanwhile (the song goes on being made, into the library).
    follows_job: std::sync::atomic::AtomicBool,
    /// The volume asked for, 0..=1, as f32 bits (none asked yet: 0, which reads as full).
    volume_bits: std::sync::atomic::AtomicU32,
}

impl Players {
    /// Hands the player to the song about to be made, at `sample_rate`: a new song, paused until
    /// the window says the rest can play through.
    fn follow_new_song(&self, sample_rate: u32) {
        self.ensure(sample_rate);
        self.follows_job.store(true, std::sync::atomic::Ordering::Relaxed);
        self.with_open(|p| {
            p.new_song();
            p.pause();
        });
    }

    /// Makes sure a player is open at `sample_rate` (or that it is known why none can be).
    fn ensure(&self, sample_rate: u32) {
        let _one_at_a_time = self.opening.lock().expect("not poisoned");
        if self.current.lock().expect("not poisoned").as_ref().is_some_and(|(rate, _)| *rate == sample_rate) {
            return;
        }
        let opened = Player::open(sample_rate);
        if let Ok(player) = &opened {
            player.set_volume(self.volume());
        }
        *self.current.lock().expect("not poisoned") = Some((sample_rate, opened));
    }

    fn volume(&self) -> f32 {
        match self.volume_bits.load(std::sync::atomic::Ordering::Relaxed) {
            0 => 1.0,
            bits => f32::from_bits(bits),
        }
    }

    /// Sets the volume of the open player and of any opened later.
    fn set_volume(&self, volume: f32) {
        let volume = if volume.is_finite() { volume.clamp(0.0, 1.0) } else { 1.0 };
        // Zero is stored as the smallest positive f32, so 0 keeps meaning "none asked".
        let bits = if volume == 0.0 { f32::MIN_POSITIVE.to_bits() } else { volume.to_bits() };
        self.volume_bits.store(bits, std::sync::atomic::Ordering::Relaxed);
        self.with_open(|p| p.set_volume(volume));
    }

    /// Runs `f` on the open player for the song being made, if it still has the player.
    fn for_job(&self, f: impl FnOnce(&Player)) {
        if self.follows_job.load(std::sync::atomic::Ordering::Relaxed) {
            self.with_open(f);
        }
    }

    /// Runs `f` on the open player, if there is one.
    fn with_open(&self, f: impl FnOnce(&Player)) {
        if let Some((_, Ok(player))) = self.current.lock().expect("not poisoned").as_ref() {
            f(player);
        }
    }

    fn state(&self) -> PlaybackState {
        match self.current.lock().expect("not poisoned").as_ref() {
            None => PlaybackState::default(),
            Some((sample_rate, Err(why))) => {
                PlaybackState { sample_rate: *sample_rate, unavailable: Some(why.clone()), ..PlaybackState::default() }
            }
            Some((sample_rate, Ok(p))) => {
                let s = p.status();
                PlaybackState {
                    position: s.position,
                    frames: s.frames,
                    sample_rate: *sample_rate,
                    playing: s.playing,
                    level: s.level,
                    unavailable: None,
                }
            }
        }
    }
}

/// A song the worker is asked to make, in the order asked.
enum Work {
    /// A new song from a recipe.
    Generate { job: JobId, recipe: Recipe },
    /// Takes of a recipe, made as one batch: take k is `jobs[k]`, seed `recipe.seed + k`.
    Takes { jobs: Vec<JobId>, recipe: Recipe },
    /// A new version of library song `song`.
    Edit { job: JobId, song: SongId, edit: EditRequest },
}

impl Work {
    /// Its jobs: one, or a job a take.
    fn jobs(&self) -> Vec<JobId> {
        match self {
            Work::Generate { job, .. } | Work::Edit { job, .. } => vec![*job],
            Work::Takes { jobs, .. } => jobs.clone(),
        }
    }
}

/// A job of a work item as it starts: which take it is (0 for a song alone), and its cancel.
struct Started {
    take: usize,
    job: JobId,
    cancel: Cancel,
}

/// The jobs of `work` that were not cancelled while they waited, each entered as running with a
/// cancel of its own; those that were are said to be cancelled.
fn start(work: &Work, running: &Running, unqueued: &Unqueued, outbox: &Outbox) -> Vec<Started> {
    let mut started = Vec::new();
    let mut skipped = Vec::new();
    {
        // Under the lock a Cancel takes first, so it either finds a job running or left it in
        // `unqueued` before.
        let mut running = running.lock().expect("not poisoned");
        let mut unqueued = unqueued.lock().expect("not poisoned");
        for (take, job) in work.jobs().into_iter().enumerate() {
            if unqueued.remove(&job) {
                skipped.push(job);
            } else {
                let cancel = Cancel::default();
                running.insert(job, cancel.clone());
                started.push(Started { take, job, cancel });
            }
        }
    }
    for job in skipped {
        outbox.send(EngineEvent::Cancelled { job });
    }
    started
}

/// What the librarian thread is asked: the window's requests, and the engine's own call to send
/// the list again after a song was kept.
enum ToLibrarian {
    /// Boxed: a request carries a recipe, far larger than the other messages.
    Request(Box<Request>),
    RefreshList,
    /// Answered once everything asked before is done.
    Drain(mpsc::Sender<()>),
}

/// How many engines' device probes are running, for [`wait_for_device_probe`].
static PROBES_RUNNING: Mutex<usize> = Mutex::new(0);
static PROBE_DONE: std::sync::Condvar = std::sync::Condvar::new();

/// Waits (at most `limit`) until every device probe started is done: a process that exits while a
/// probe opens wgpu's adapter on its thread (lavapipe, with LLVM inside) would be aborted by LLVM.
pub fn wait_for_device_probe(limit: std::time::Duration) {
    let running = PROBES_RUNNING.lock().expect("not poisoned");
    let _ = PROBE_DONE.wait_timeout_while(running, limit, |n| *n > 0);
}

/// A model download on its thread: storing `true` in `stop` ends it (a pause); `discard`, set by
/// a cancel, has it remove what it fetched once stopped.
struct RunningDownload {
    stop: Arc<std::sync::atomic::AtomicBool>,
    discard: bool,
}

pub struct InProcessEngine {
    jobs: mpsc::Sender<Work>,
    outbox: Outbox,
    /// The model download while one runs.
    download: Arc<Mutex<Option<RunningDownload>>>,
    librarian: mpsc::Sender<ToLibrarian>,
    events: mpsc::Receiver<EngineEvent>,
    running: Running,
    unqueued: Unqueued,
    players: Arc<Players>,
}

impl InProcessEngine {
    /// Starts the workers; `repaint` wakes the window when an event arrives.
    pub fn spawn(library_dir: Option<PathBuf>, repaint: impl Fn() + Send + Sync + 'static) -> Self {
        let library_dir = library_dir.unwrap_or_else(default_dir);
        let (event_tx, events) = mpsc::channel();
        let outbox = Outbox { events: event_tx, repaint: Arc::new(repaint) };
        let running: Running = Arc::default();
        let players: Arc<Players> = Arc::default();
        let (librarian, librarian_rx) = mpsc::channel::<ToLibrarian>();

        let (jobs, job_rx) = mpsc::channel::<Work>();
        let mut worker = Worker {
            library_dir: library_dir.clone(),
            pipeline: None,
            players: players.clone(),
            outbox: outbox.clone(),
            librarian: librarian.clone(),
        };
        let worker_running = running.clone();
        let unqueued: Unqueued = Arc::default();
        let worker_unqueued = unqueued.clone();
        std::thread::spawn(move || {
            for work in job_rx {
                let started = start(&work, &worker_running, &worker_unqueued, &worker.outbox);
                if let Work::Takes { recipe, .. } = &work {
                    if !started.is_empty() {
                        worker.run_takes(recipe, &started, &worker_running);
                    }
                    continue;
                }
                let Some(Started { job, cancel, .. }) = started.into_iter().next() else { continue };
                let last = match worker.run(job, &work, &cancel) {
                    Ok(timings) => EngineEvent::Finished { job, timings },
                    Err(_) if cancel.is_cancelled() => EngineEvent::Cancelled { job },
                    Err(e) => EngineEvent::Failed { job, message: format!("{e:#}") },
                };
                if !matches!(last, EngineEvent::Finished { .. }) {
                    // A cancelled or failed song is not kept, so it stops playing too.
                    worker.players.for_job(Player::stop);
                }
                worker_running.lock().expect("not poisoned").remove(&job);
                worker.outbox.send(last);
            }
        });

        *PROBES_RUNNING.lock().expect("not poisoned") += 1;
        let mut librarian_state = Librarian {
            dir: library_dir,
            search: String::new(),
            editable: EditableCache::default(),
            players: players.clone(),
            outbox: outbox.clone(),
        };
        std::thread::spawn(move || {
            librarian_state.send_devices();
            *PROBES_RUNNING.lock().expect("not poisoned") -= 1;
            PROBE_DONE.notify_all();
            for message in librarian_rx {
                let result = match message {
                    ToLibrarian::Request(request) => librarian_state.handle(*request),
                    ToLibrarian::RefreshList => librarian_state.send_list(),
                    ToLibrarian::Drain(done) => {
                        let _ = done.send(());
                        Ok(())
                    }
                };
                if let Err(e) = result {
                    librarian_state.outbox.send(EngineEvent::Problem { message: format!("{e:#}") });
                }
            }
        });
        InProcessEngine { jobs, outbox, download: Arc::default(), librarian, events, running, unqueued, players }
    }

    /// The model's download on a thread of its own (one at a time), its progress a few times a
    /// second.
    fn start_download(&self) {
        let mut slot = self.download.lock().expect("not poisoned");
        if slot.is_some() {
            return;
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        *slot = Some(RunningDownload { stop: stop.clone(), discard: false });
        let (outbox, download) = (self.outbox.clone(), self.download.clone());
        std::thread::spawn(move || {
            let last = std::cell::Cell::new(std::time::Instant::now() - std::time::Duration::from_secs(1));
            let report = |done: u64, total: u64, file: &str| {
                if last.get().elapsed() >= std::time::Duration::from_millis(250) || done == total {
                    last.set(std::time::Instant::now());
                    let progress = songloom_ui::contract::DownloadProgress {
                        done_bytes: done,
                        total_bytes: total,
                        file: file.to_string(),
                    };
                    outbox.send(EngineEvent::Download { progress });
                }
            };
            let progress = crate::model_download::Progress { report: &report, stop: &stop };
            let mut result = crate::model_download::download_with(None, "main", &progress)
                .map(|dir| dir.display().to_string())
                .map_err(|e| format!("{e:#}"));
            // The lock held while the slot is emptied and the cancel done: a cancel comes before
            // (and is done here) or after (and finds no download running).
            let mut slot = download.lock().expect("not poisoned");
            if slot.take().is_some_and(|d| d.discard) && result.is_err() {
                result = Err(match crate::model_download::discard_partial(&crate::model_download::default_dir()) {
                    Ok(()) => "cancelled; what it had fetched is removed".into(),
                    Err(e) => format!("cancelled, but {e:#}"),
                });
            }
            drop(slot);
            outbox.send(EngineEvent::DownloadEnded { result });
            send_models(&outbox);
        });
    }

    /// Stops a running download, which then removes what it fetched; with none running, removes
    /// what an earlier one left.
    fn cancel_download(&self) {
        let mut slot = self.download.lock().expect("not poisoned");
        if let Some(running) = slot.as_mut() {
            running.discard = true;
            running.stop.store(true, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        drop(slot);
        match crate::model_download::discard_partial(&crate::model_download::default_dir()) {
            Ok(()) => self.outbox.send(EngineEvent::Notice { message: "The partial download is removed".into() }),
            Err(e) => self.outbox.send(EngineEvent::Problem { message: format!("{e:#}") }),
        }
        send_models(&self.outbox);
    }
}

/// The system's folder picker on a thread of its own (the window goes on drawing); the chosen
/// folder to the window, nothing when the picker is closed.
fn choose_model_folder(outbox: &Outbox) {
    let outbox = outbox.clone();
    std::thread::spawn(move || {
        let dialog = rfd::AsyncFileDialog::new()
            .set_title("Choose a MiniMax-Music3 model folder (diffusers layout)")
            .set_directory(crate::model_download::models_dir());
        if let Some(folder) = pollster::block_on(dialog.pick_folder()) {
            outbox.send(EngineEvent::ModelFolderChosen { path: folder.path().display().to_string() });
        }
    });
}

/// The folders in `typed` (the models folder when empty, created if need be), for the window's
/// folder chooser; a folder that cannot be read says why, and where it was.
fn list_folder(typed: &str) -> songloom_ui::contract::FolderListing {
    use songloom_ui::contract::{FolderEntry, FolderListing};
    let folder = if typed.trim().is_empty() {
        let models = crate::model_download::models_dir();
        let _ = std::fs::create_dir_all(&models);
        models
    } else {
        typed_path(typed)
    };
    let folder = std::path::absolute(&folder).unwrap_or(folder);
    let holds_model = |dir: &Path| dir.join("language_model").is_dir() && dir.join("transformer").is_dir();
    let mut listing = FolderListing {
        path: folder.display().to_string(),
        parent: folder.parent().map(|p| p.display().to_string()),
        is_model: holds_model(&folder),
        ..FolderListing::default()
    };
    match std::fs::read_dir(&folder) {
        Ok(entries) => {
            let mut folders: Vec<FolderEntry> = entries
                .flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                .filter(|(name, _)| !name.starts_with('.'))
                .map(|(name, path)| FolderEntry { name, is_model: holds_model(&path) })
                .collect();
            folders.sort_by_key(|f| f.name.to_lowercase());
            listing.folders = folders;
        }
        Err(e) => listing.error = Some(format!("{} cannot be read: {e}", folder.display())),
    }
    listing
}

/// The models folder and what it holds, to the window.
fn send_models(outbox: &Outbox) {
    let models = crate::model_download::installed()
        .into_iter()
        .map(|m| InstalledModel {
            path: m.dir.display().to_string(),
            complete: m.complete.is_some(),
            summary: m.describe().unwrap_or_else(|| format!("{}: incomplete", m.dir.display())),
        })
        .collect();
    let folder = crate::model_download::models_dir().display().to_string();
    outbox.send(EngineEvent::Models { folder, models });
}

impl Engine for InProcessEngine {
    fn send(&self, request: Request) {
        match request {
            Request::Generate { job, recipe } => {
                let _ = self.jobs.send(Work::Generate { job, recipe });
            }
            Request::Takes { jobs, recipe } => {
                let _ = self.jobs.send(Work::Takes { jobs, recipe });
            }
            Request::Edit { job, song, edit } => {
                let _ = self.jobs.send(Work::Edit { job, song, edit });
            }
            Request::Cancel { job } => {
                let running = self.running.lock().expect("not poisoned");
                match running.get(&job) {
                    Some(cancel) => cancel.cancel(),
                    // Not started yet (or over): skipped when its turn comes.
                    None => {
                        self.unqueued.lock().expect("not poisoned").insert(job);
                    }
                }
            }
            Request::TogglePlayback => self.players.with_open(Player::toggle),
            Request::Play => self.players.with_open(Player::play),
            Request::SetVolume { volume } => self.players.set_volume(volume),
            Request::Seek { frame } => self.players.with_open(|p| p.seek(frame)),
            Request::ListModels => send_models(&self.outbox),
            Request::DownloadModel => self.start_download(),
            Request::ChooseModelFolder => choose_model_folder(&self.outbox),
            Request::CancelDownload => self.cancel_download(),
            Request::PauseDownload => {
                if let Some(running) = self.download.lock().expect("not poisoned").as_ref() {
                    running.stop.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
            other => {
                let _ = self.librarian.send(ToLibrarian::Request(Box::new(other)));
            }
        }
    }

    fn poll(&self) -> Vec<EngineEvent> {
        self.events.try_iter().collect()
    }

    fn playback(&self) -> PlaybackState {
        self.players.state()
    }

    fn utc_offset_s(&self, unix_s: i64) -> i64 {
        local_utc_offset_s(unix_s)
    }
}

impl Drop for InProcessEngine {
    /// What the window asked of the library as it closed (a delete whose Undo it cut short) is
    /// done before the process ends.
    fn drop(&mut self) {
        let (done, finished) = mpsc::channel();
        if self.librarian.send(ToLibrarian::Drain(done)).is_ok() {
            let _ = finished.recv_timeout(std::time::Duration::from_secs(5));
        }
    }
}

/// Seconds the local clock is ahead of UTC at `unix_s` (the system's time zone).
#[cfg(unix)]
fn local_utc_offset_s(unix_s: i64) -> i64 {
    let time = unix_s as libc::time_t;
    // SAFETY: an all-zero `tm` is a valid value (integers and a null zone name), and
    // `localtime_r` writes only into it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live locals of the right types.
    if unsafe { libc::localtime_r(&time, &mut tm) }.is_null() {
        return 0;
    }
    // `tm_gmtoff` is a C long: 32 bits on 32-bit Unix.
    #[allow(clippy::useless_conversion)]
    i64::from(tm.tm_gmtoff)
}

#[cfg(not(unix))]
fn local_utc_offset_s(_unix_s: i64) -> i64 {
    0
}

/// What a loaded pipeline was made for: the model, device, precision, weights and budget.
#[derive(Debug, Clone, PartialEq)]
struct PipelineKey {
    /// The model directory as the recipe names it (empty for the embedded one).
    model: String,
    device: DeviceChoice,
    precision: Precision,
    memory: MemoryRequest,
    /// The LoRA adapters merged at load, in order.
    adapters: Vec<AdapterSpec>,
}

impl PipelineKey {
    /// The engine's side of `recipe`, each name checked with a message that says what is expected.
    fn of(recipe: &Recipe) -> anyhow::Result<Self> {
        let memory = MemoryRequest {
            weights: WeightsChoice::parse(&recipe.weights)?,
            max_memory_bytes: recipe.max_memory_gb.map(crate::engine_args::max_memory_bytes).transpose()?,
            mode: None,
        };
        let precision = Precision::parse(&recipe.precision)?;
        let device = DeviceChoice::parse(&recipe.device)?;
        let adapters =
            recipe.adapters.iter().map(|a| AdapterSpec { path: a.path.clone().into(), scale: a.scale }).collect();
        Ok(PipelineKey { model: recipe.model.clone(), device, precision, memory, adapters })
    }

    /// Whether `loaded`, loaded for this key, serves `asked`: the same key, or one that names the
    /// weights `loaded` chose (a song's recipe keeps the weights it was made with, not `auto`).
    fn serves(&self, asked: &PipelineKey, loaded: &Pipeline) -> bool {
        let chosen = MemoryRequest { weights: WeightsChoice::of(loaded.formats()), ..self.memory };
        self == asked || (*asked == PipelineKey { memory: chosen, ..self.clone() })
    }
}

struct Worker {
    library_dir: PathBuf,
    /// The last pipeline, kept while the model, device and precision stay the same.
    pipeline: Option<(PipelineKey, Pipeline)>,
    players: Arc<Players>,
    outbox: Outbox,
    librarian: mpsc::Sender<ToLibrarian>,
}

/// The window's side of a song: stage and audio events to the window, audio to the player (for
/// the song that `plays`: the first of takes).
struct WindowSink<'a> {
    job: JobId,
    outbox: &'a Outbox,
    players: &'a Players,
    plays: bool,
}

impl SongSink for WindowSink<'_> {
    fn event(&self, event: &Event) {
        let job = self.job;
        match event {
            Event::Stage { stage, done, total } => {
                self.outbox.send(EngineEvent::Stage { job, stage: *stage, done: *done, total: *total })
            }
            Event::Audio { first_sample, samples, sample_rate } => {
                if self.plays {
                    self.players.for_job(|p| p.push(samples));
                }
                let (first_sample, samples, sample_rate) = (*first_sample, samples.clone(), *sample_rate);
                self.outbox.send(EngineEvent::Audio { job, first_sample, samples, sample_rate });
            }
            Event::Score(_) | Event::Finished { .. } => {}
        }
    }
}

impl Worker {
    /// The pipeline `key` asks for, loaded anew when it names another model, device, precision,
    /// weights, budget or adapters than the loaded one, or for a song the loaded plan has no room
    /// for.
    fn pipeline(&mut self, job: JobId, key: &PipelineKey, request: &SongRequest) -> anyhow::Result<&Pipeline> {
        let fits = |(k, p): &(PipelineKey, Pipeline)| k.serves(key, p) && p.check_song(request).is_ok();
        if !self.pipeline.as_ref().is_some_and(fits) {
            // The old pipeline's memory is freed before the new one is planned against what is free.
            self.pipeline = None;
            let options = DeviceOptions { precision: key.precision, ..DeviceOptions::default() };
            let device = Device::open(key.device, options)?;
            let dir = model_dir(&key.model)?;
            let plan = Pipeline::plan(&dir, &device, key.memory, Some(request))?;
            self.outbox.send(EngineEvent::Plan { job, plan: plan.describe() });
            let outbox = self.outbox.clone();
            let loading = move |event: Event| {
                if let Event::Stage { stage, done, total } = event {
                    outbox.send(EngineEvent::Stage { job, stage, done, total });
                }
            };
            let adapters = Adapters::open(&key.adapters)?;
            self.pipeline = Some((key.clone(), Pipeline::load_adapted(&dir, adapters, device, &plan, &loading)?));
        } else if let Some((_, p)) = &self.pipeline {
            self.outbox.send(EngineEvent::Plan { job, plan: p.loaded_plan().describe() });
        }
        Ok(&self.pipeline.as_ref().expect("just loaded").1)
    }

    /// Makes the song `work` asks for: played as it comes (held until the window says the rest
    /// can play through), kept in the library, and said to the window as saved.
    fn run(&mut self, job: JobId, work: &Work, cancel: &Cancel) -> anyhow::Result<Timings> {
        // Until it plays, the song being made does not have the player: one that fails before
        // leaves what is playing alone.
        self.players.follows_job.store(false, std::sync::atomic::Ordering::Relaxed);
        let made = match work {
            Work::Generate { recipe, .. } => self.generate_job(job, recipe)?,
            Work::Edit { song, edit, .. } => self.edit_job(job, *song, edit)?,
            Work::Takes { .. } => bail!("takes are made together, by run_takes"),
        };
        let pipeline = &self.pipeline.as_ref().expect("loaded for the job").1;
        let (players, outbox) = (&self.players, &self.outbox);
        players.follow_new_song(pipeline.sample_rate());
        let finished = song_job::run(pipeline, &made, &WindowSink { job, outbox, players, plays: true }, cancel)?;
        players.for_job(Player::complete);
        let saved = finished.saved.expect("the job names the library");
        let editable =
            Library::open(&self.library_dir).map_or_else(|e| Err(format!("{e:#}")), |l| editable(&l, &saved));
        outbox.send(EngineEvent::Saved { job, song: entry(&saved, editable) });
        let _ = self.librarian.send(ToLibrarian::RefreshList);
        Ok(Timings::from(&finished.stats))
    }

    /// The takes `started` of `recipe` as one batch: the first plays as it is made (held until the
    /// window says the rest can play through), each is kept in the library with its recipe (its
    /// own seed) and has its own events to its end; one that fails or is cancelled leaves the
    /// others.
    fn run_takes(&mut self, recipe: &Recipe, started: &[Started], running: &Running) {
        self.players.follows_job.store(false, std::sync::atomic::Ordering::Relaxed);
        let first = started[0].job;
        let jobs = match self.takes_jobs(first, recipe, started) {
            Ok(jobs) => jobs,
            Err(e) => {
                let message = format!("{e:#}");
                for take in started {
                    running.lock().expect("not poisoned").remove(&take.job);
                    self.outbox.send(EngineEvent::Failed { job: take.job, message: message.clone() });
                }
                return;
            }
        };
        let pipeline = &self.pipeline.as_ref().expect("loaded for the takes").1;
        let (players, outbox) = (&self.players, &self.outbox);
        players.follow_new_song(pipeline.sample_rate());
        let ends = TakeEnds { library_dir: &self.library_dir, librarian: &self.librarian, players, outbox, running };
        let ended: Vec<std::sync::atomic::AtomicBool> = started.iter().map(|_| Default::default()).collect();
        let batch = jobs
            .into_iter()
            .zip(started)
            .zip(&ended)
            .map(|((job, take), ended)| {
                let (id, plays, ends) = (take.job, take.job == first, &ends);
                let cancel = take.cancel.clone();
                BatchJob {
                    job,
                    sink: Box::new(WindowSink { job: id, outbox, players, plays }),
                    cancel: take.cancel.clone(),
                    finished: Box::new(move |result| {
                        ended.store(true, std::sync::atomic::Ordering::Relaxed);
                        ends.ended(id, plays, result, &cancel);
                    }),
                }
            })
            .collect();
        if let Err(e) = song_job::run_batch(pipeline, batch) {
            // A take's file could not be opened: the takes not yet told are failed with it.
            for (take, ended) in started.iter().zip(&ended) {
                if !ended.load(std::sync::atomic::Ordering::Relaxed) {
                    ends.ended(take.job, take.job == first, Err(anyhow::anyhow!("{e:#}")), &take.cancel);
                }
            }
        }
    }

    /// The song jobs of takes `started` of `recipe` (seeds `recipe.seed + take`), with the
    /// pipeline they ask for loaded (its plan said to job `first`) and checked to hold them all.
    fn takes_jobs(&mut self, first: JobId, recipe: &Recipe, started: &[Started]) -> anyhow::Result<Vec<SongJob>> {
        if started.len() > crate::generate::MAX_TAKES {
            bail!("at most {} takes are made at once, not {}", crate::generate::MAX_TAKES, started.len());
        }
        let recipes: Vec<Recipe> = started
            .iter()
            .map(|t| Recipe { seed: recipe.seed.wrapping_add(t.take as u64), ..recipe.clone() })
            .collect();
        let library = self.library_dir.clone();
        let pipeline = self.pipeline(first, &PipelineKey::of(recipe)?, &request_of(&recipes[0]))?;
        let jobs: Vec<SongJob> = recipes
            .iter()
            .map(|recipe| SongJob {
                request: request_of(recipe),
                recipe: made_with(pipeline, recipe),
                out: None,
                library: Some(library.clone()),
                edit: None,
            })
            .collect();
        pipeline.check_batch(&jobs.iter().map(|j| j.request.clone()).collect::<Vec<_>>())?;
        Ok(jobs)
    }

    /// A new song of `recipe`, with the pipeline it asks for loaded.
    fn generate_job(&mut self, job: JobId, recipe: &Recipe) -> anyhow::Result<SongJob> {
        let request = request_of(recipe);
        let pipeline = self.pipeline(job, &PipelineKey::of(recipe)?, &request)?;
        let recipe = made_with(pipeline, recipe);
        Ok(SongJob { request, recipe, out: None, library: Some(self.library_dir.clone()), edit: None })
    }

    /// `edit` of library song `id`, with the pipeline its recipe names loaded: its score is that
    /// model's codes, and an edit keeps the song's adapters.
    fn edit_job(&mut self, job: JobId, id: SongId, edit: &EditRequest) -> anyhow::Result<SongJob> {
        let parent = {
            let library = Library::open(&self.library_dir)?;
            let parent = song(&library, id)?;
            // Said before a model is loaded for nothing.
            if let Err(why) = editable(&library, &parent) {
                bail!("song {id} cannot be edited: {why}");
            }
            parent.recipe
        };
        let (key, dir) = (PipelineKey::of(&parent)?, self.library_dir.clone());
        let pipeline = self.pipeline(job, &key, &request_of(&parent))?;
        let made = edit_job::edit_job(pipeline, &dir, id, edit, &made_with(pipeline, &parent), None)?;
        if pipeline.check_song(&made.request).is_ok() {
            return Ok(made);
        }
        // A new version longer than the loaded plan has room for (an extension): planned for it.
        let pipeline = self.pipeline(job, &key, &made.request)?;
        edit_job::edit_job(pipeline, &dir, id, edit, &made_with(pipeline, &parent), None)
    }
}

/// Where a take's end is told: the library it was kept in, the window, the player (for the take
/// that plays) and the running jobs.
struct TakeEnds<'a> {
    library_dir: &'a Path,
    librarian: &'a mpsc::Sender<ToLibrarian>,
    players: &'a Players,
    outbox: &'a Outbox,
    running: &'a Running,
}

impl TakeEnds<'_> {
    /// Take `job` ended with `result`: saved then finished, cancelled, or failed (a take that
    /// `plays` completes or stops the player).
    fn ended(&self, job: JobId, plays: bool, result: anyhow::Result<FinishedSong>, cancel: &Cancel) {
        let saved = result.and_then(|finished| {
            let song = finished.saved.context("the take was not kept in the library")?;
            Ok((song, Timings::from(&finished.stats)))
        });
        let last = match saved {
            Ok((song, timings)) => {
                if plays {
                    self.players.for_job(Player::complete);
                }
                let editable =
                    Library::open(self.library_dir).map_or_else(|e| Err(format!("{e:#}")), |l| editable(&l, &song));
                self.outbox.send(EngineEvent::Saved { job, song: entry(&song, editable) });
                let _ = self.librarian.send(ToLibrarian::RefreshList);
                EngineEvent::Finished { job, timings }
            }
            Err(e) => {
                if plays {
                    // A cancelled or failed song is not kept, so it stops playing too.
                    self.players.for_job(Player::stop);
                }
                if cancel.is_cancelled() {
                    EngineEvent::Cancelled { job }
                } else {
                    EngineEvent::Failed { job, message: format!("{e:#}") }
                }
            }
        };
        self.running.lock().expect("not poisoned").remove(&job);
        self.outbox.send(last);
    }
}

/// `recipe` as `pipeline` makes it: the weights used and the adapters as read (with their
/// checksums), so the recipe makes the same song again.
fn made_with(pipeline: &Pipeline, recipe: &Recipe) -> Recipe {
    Recipe {
        weights: WeightsChoice::of(pipeline.formats()).name().into(),
        adapters: pipeline.adapters().map(crate::engine_args::adapter_recipes).unwrap_or_default(),
        ..recipe.clone()
    }
}

/// Answers the library's requests, and says which devices can run.
struct Librarian {
    dir: PathBuf,
    /// The window's last search, so a change can be answered with the same list.
    search: String,
    editable: EditableCache,
    players: Arc<Players>,
    outbox: Outbox,
}

impl Librarian {
    /// Each device choice and whether it can run here.
    fn send_devices(&self) {
        let probes = Device::probe_all();
        let picked = probes
            .iter()
            .find(|p| p.status.is_ok() && p.auto && p.kind != songloom_engine::DeviceKind::Cpu)
            .map_or(songloom_engine::DeviceKind::Cpu, |gpu| gpu.kind);
        // Each backend that runs here advised once (a GPU's plan opens it); `auto` takes its pick's.
        let advice: Vec<Option<String>> =
            probes.iter().map(|p| p.status.is_ok().then(|| crate::advice::for_device(p.kind))).collect();
        let picked_advice = probes.iter().position(|p| p.kind == picked).and_then(|i| advice[i].clone());
        let auto = Ok(if picked == songloom_engine::DeviceKind::Cpu {
            "the CPU here".into()
        } else {
            format!("{picked} here")
        });
        let mut devices =
            vec![DeviceStatus { name: DeviceChoice::Auto.name().into(), available: auto, advice: picked_advice }];
        devices.extend(probes.into_iter().zip(advice).map(|(p, advice)| DeviceStatus {
            name: p.kind.name().into(),
            available: p.status,
            advice,
        }));
        self.outbox.send(EngineEvent::Devices { devices });
    }

    /// The songs of the last search.
    fn send_list(&mut self) -> anyhow::Result<()> {
        let library = Library::open(&self.dir)?;
        let songs = library.list(&self.search)?;
        let songs = songs.iter().map(|s| entry(s, self.editable.of(&library, s))).collect();
        self.outbox.send(EngineEvent::Library { songs });
        Ok(())
    }

    fn handle(&mut self, request: Request) -> anyhow::Result<()> {
        if let Request::ListFolder { path } = request {
            self.outbox.send(EngineEvent::Folder { listing: list_folder(&path) });
            return Ok(());
        }
        if let Request::ModelInfo { model } = request {
            let summary = model_dir(&model)
                .and_then(|d| crate::model_info::summary(&d))
                .map(|s| if model.trim().is_empty() { format!("built-in model: {s}") } else { s })
                .map_err(|e| format!("{e:#}"));
            let name = summary.is_ok().then(|| model_name(model.trim().is_empty()).to_string());
            self.outbox.send(EngineEvent::ModelInfo { model, summary, name });
            return Ok(());
        }
        let library = Library::open(&self.dir)?;
        match request {
            Request::ListSongs { search } => self.search = search,
            Request::RenameSong { id, title } => library.rename(id, &title)?,
            Request::DeleteSong { id } => library.delete(id)?,
            Request::ExportSong { id, folder, format } => {
                let song = song(&library, id)?;
                let folder = if folder.trim().is_empty() { music_dir() } else { typed_path(&folder) };
                std::fs::create_dir_all(&folder).with_context(|| format!("creating {}", folder.display()))?;
                let format = match format {
                    ExportFormat::Float32 => FileFormat::F32,
                    ExportFormat::Pcm16 => FileFormat::Pcm16,
                    ExportFormat::Flac => FileFormat::Flac,
                };
                let target = free_name(&folder, &song.title, format.extension());
                let recipe = serde_json::to_string(&song.recipe)?;
                let path = wav::export_as(&song.wav, &target, format, &song.title, &recipe)?;
                self.outbox.send(EngineEvent::Notice { message: format!("Exported to {}", path.display()) });
                return Ok(());
            }
            Request::PlaySong { id } => {
                let song = song(&library, id)?;
                // A song being made goes on into the library, no longer heard.
                self.players.follows_job.store(false, std::sync::atomic::Ordering::Relaxed);
                let (samples, sample_rate) = wav::read_song(&song.wav)?;
                self.players.ensure(sample_rate);
                self.players.with_open(|p| {
                    p.new_song();
                    p.push(&samples);
                    p.complete();
                });
                let song = entry(&song, self.editable.of(&library, &song));
                self.outbox.send(EngineEvent::Loaded { song, samples, sample_rate });
                return Ok(());
            }
            Request::Generate { .. }
            | Request::Takes { .. }
            | Request::Edit { .. }
            | Request::Cancel { .. }
            | Request::TogglePlayback
            | Request::Play
            | Request::SetVolume { .. }
            | Request::Seek { .. }
            | Request::ListModels
            | Request::DownloadModel
            | Request::PauseDownload
            | Request::CancelDownload
            | Request::ChooseModelFolder
            | Request::ListFolder { .. }
            | Request::ModelInfo { .. } => {
                return Ok(());
            }
        }
        drop(library);
        self.send_list()
    }
}

/// The directory a recipe's model names; empty for the default model.
fn model_dir(model: &str) -> anyhow::Result<PathBuf> {
    if model.trim().is_empty() { crate::default_model::path() } else { Ok(typed_path(model)) }
}

/// A folder as a person types it: trimmed, and `~` (alone or before `/`) as their home folder, as
/// a shell would read it.
fn typed_path(text: &str) -> PathBuf {
    let text = text.trim();
    let home = || dirs::home_dir().filter(|h| !h.as_os_str().is_empty());
    match text.strip_prefix('~') {
        Some("") => home().unwrap_or_else(|| PathBuf::from(text)),
        Some(rest) if rest.starts_with('/') => {
            home().map_or_else(|| PathBuf::from(text), |h| h.join(rest.trim_start_matches('/')))
        }
        _ => PathBuf::from(text),
    }
}

fn song(library: &Library, id: SongId) -> anyhow::Result<Song> {
    library.get(id)?.with_context(|| format!("song {id} is no longer in the library"))
}

/// The user's music folder (`XDG_MUSIC_DIR` of `user-dirs.dirs` on Linux), else `~/Music`.
fn music_dir() -> PathBuf {
    dirs::audio_dir().or_else(|| dirs::home_dir().map(|h| h.join("Music"))).unwrap_or_else(|| PathBuf::from("."))
}

/// `<folder>/<title>.<extension>`, with ` (2)`, ` (3)` ... where that exists; the title is made
/// safe for a file name.
fn free_name(folder: &Path, title: &str, extension: &str) -> PathBuf {
    let stem = wav::file_stem(title);
    (1..)
        .map(|n| folder.join(if n == 1 { format!("{stem}.{extension}") } else { format!("{stem} ({n}).{extension}") }))
        .find(|p| !p.exists())
        .expect("some name is free")
}

fn entry(song: &Song, editable: Result<(), String>) -> SongEntry {
    SongEntry {
        id: song.id,
        title: song.title.clone(),
        recipe: song.recipe.clone(),
        seconds: song.seconds,
        created_unix: song.created_unix,
        timings: song.timings.clone(),
        editable,
    }
}

/// Whether `song` can be edited, or why not: an edit starts from the score (the codes) its file
/// keeps.
fn editable(library: &Library, song: &Song) -> Result<(), String> {
    match library.score(song.id) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => {
            Err("it has no codes (it was made before Songloom kept them, or imported from a file without them)".into())
        }
        Err(e) => Err(format!("{e:#}")),
    }
}

/// Whether each library song can be edited, remembered with its file's length and modification
/// time: a score is read whole (megabytes for a long song), and the list is sent again on every
/// search, rename and delete. A file that changes, or a new song that takes a deleted one's id
/// (and so its file name), is read again.
#[derive(Default)]
struct EditableCache(HashMap<SongId, (FileStamp, Result<(), String>)>);

#[derive(Debug, PartialEq)]
struct FileStamp {
    len_bytes: u64,
    modified: Option<SystemTime>,
}

impl EditableCache {
    fn of(&mut self, library: &Library, song: &Song) -> Result<(), String> {
        let Ok(meta) = std::fs::metadata(&song.wav) else { return editable(library, song) };
        let stamp = FileStamp { len_bytes: meta.len(), modified: meta.modified().ok() };
        match self.0.get(&song.id) {
            Some((seen, editable)) if *seen == stamp => editable.clone(),
            _ => {
                let editable = editable(library, song);
                self.0.insert(song.id, (stamp, editable.clone()));
                editable
            }
        }
    }
}

#[cfg(test)]
mod typed_path_tests {
    use super::*;

    #[test]
    fn a_typed_folder_reads_as_a_shell_reads_it() {
        let home = dirs::home_dir().expect("a home folder");
        assert_eq!(typed_path("~/models/MiniMax-Music3 "), home.join("models/MiniMax-Music3"));
        assert_eq!(typed_path("~"), home);
        assert_eq!(typed_path(" /srv/models "), PathBuf::from("/srv/models"));
        // Another user's home and a name starting with ~ are left as typed.
        assert_eq!(typed_path("~bob/x"), PathBuf::from("~bob/x"));
        assert_eq!(typed_path("models/~x"), PathBuf::from("models/~x"));
    }

    #[test]
    fn the_folder_chooser_lists_folders_marks_models_and_says_what_it_cannot_read() {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["Zeta", "alpha", ".hidden", "MiniMax-Music3/language_model", "MiniMax-Music3/transformer"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        std::fs::write(dir.path().join("notes.txt"), "not a folder").unwrap();
        let listing = list_folder(&dir.path().display().to_string());
        let names: Vec<(&str, bool)> = listing.folders.iter().map(|f| (f.name.as_str(), f.is_model)).collect();
        assert_eq!(names, [("alpha", false), ("MiniMax-Music3", true), ("Zeta", false)]);
        assert_eq!(listing.parent.as_deref(), dir.path().parent().map(|p| p.display().to_string()).as_deref());
        assert!(!listing.is_model && listing.error.is_none());
        let model = list_folder(&dir.path().join("MiniMax-Music3").display().to_string());
        assert!(model.is_model);
        let missing = list_folder(&dir.path().join("gone").display().to_string());
        assert!(
            missing.error.as_deref().is_some_and(|e| e.contains("gone") && e.contains("cannot be read")),
            "{missing:?}"
        );
    }
}
