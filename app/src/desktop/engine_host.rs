//! The in-process engine behind the window. A worker thread makes one song at a time with the
//! Songloom pipeline, plays it while it is made, writes its WAV and keeps it in the library; a
//! second thread answers the library's requests (list, listen, rename, export, delete), so a slow
//! disk never stalls the window. The window sees only the contract's requests and events.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use songloom_engine::Device;
use songloom_engine::device::F32Math;
use songloom_engine::pipeline::{Cancel, Event, Observer, Pipeline, Request as SongRequest, StageName};
use songloom_ui::contract::{
    Engine, EngineEvent, ExportFormat, JobId, PlaybackState, Recipe, Request, SongEntry, SongId, Stage, Timings,
};

use crate::library::{Library, Song, default_dir, timings_of};
use crate::player::Player;
use crate::wav::{self, WavFile, WavFormat};

const SAMPLE_RATE: u32 = 44100;

/// The one player, opened on first use; `Err` says why nothing can play.
type PlayerSlot = Arc<Mutex<Option<Result<Player, String>>>>;
type Running = Arc<Mutex<Option<(JobId, Cancel)>>>;

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

pub struct InProcessEngine {
    jobs: mpsc::Sender<(JobId, Recipe)>,
    library_requests: mpsc::Sender<Request>,
    events: mpsc::Receiver<EngineEvent>,
    running: Running,
    player: PlayerSlot,
}

impl InProcessEngine {
    /// Starts the workers; `repaint` wakes the window when an event arrives.
    pub fn spawn(library_dir: Option<PathBuf>, repaint: impl Fn() + Send + Sync + 'static) -> Self {
        let library_dir = library_dir.unwrap_or_else(default_dir);
        let (event_tx, events) = mpsc::channel();
        let outbox = Outbox { events: event_tx, repaint: Arc::new(repaint) };
        let running: Running = Arc::default();
        let player: PlayerSlot = Arc::default();

        let (jobs, job_rx) = mpsc::channel::<(JobId, Recipe)>();
        let mut worker =
            Worker { library_dir: library_dir.clone(), pipeline: None, player: player.clone(), outbox: outbox.clone() };
        let worker_running = running.clone();
        std::thread::spawn(move || {
            for (job, recipe) in job_rx {
                let cancel = Cancel::default();
                *worker_running.lock().expect("not poisoned") = Some((job, cancel.clone()));
                let last = match worker.run(job, &recipe, &cancel) {
                    Ok(timings) => EngineEvent::Finished { job, timings },
                    Err(_) if cancel.is_cancelled() => EngineEvent::Cancelled { job },
                    Err(e) => EngineEvent::Failed { job, message: format!("{e:#}") },
                };
                if !matches!(last, EngineEvent::Finished { .. }) {
                    // A cancelled or failed song is not kept, so it stops playing too.
                    with_player(&worker.player, Player::stop);
                }
                *worker_running.lock().expect("not poisoned") = None;
                worker.outbox.send(last);
            }
        });

        let (library_requests, library_rx) = mpsc::channel::<Request>();
        let mut librarian = Librarian {
            dir: library_dir,
            search: String::new(),
            player: player.clone(),
            running: running.clone(),
            outbox,
        };
        std::thread::spawn(move || {
            for request in library_rx {
                if let Err(e) = librarian.handle(request) {
                    librarian.outbox.send(EngineEvent::Problem { message: format!("{e:#}") });
                }
            }
        });
        InProcessEngine { jobs, library_requests, events, running, player }
    }
}

impl Engine for InProcessEngine {
    fn send(&self, request: Request) {
        match request {
            Request::Generate { job, recipe } => {
                let _ = self.jobs.send((job, recipe));
            }
            Request::Cancel { job } => {
                if let Some((running, cancel)) = self.running.lock().expect("not poisoned").as_ref()
                    && *running == job
                {
                    cancel.cancel();
                }
            }
            Request::TogglePlayback => with_player(&self.player, Player::toggle),
            Request::Seek { frame } => with_player(&self.player, |p| p.seek(frame)),
            other => {
                let _ = self.library_requests.send(other);
            }
        }
    }

    fn poll(&self) -> Vec<EngineEvent> {
        self.events.try_iter().collect()
    }

    fn playback(&self) -> PlaybackState {
        match self.player.lock().expect("not poisoned").as_ref() {
            None => PlaybackState { sample_rate: SAMPLE_RATE, ..PlaybackState::default() },
            Some(Err(why)) => {
                PlaybackState { sample_rate: SAMPLE_RATE, unavailable: Some(why.clone()), ..PlaybackState::default() }
            }
            Some(Ok(p)) => {
                let s = p.status();
                PlaybackState {
                    position: s.position,
                    frames: s.frames,
                    sample_rate: SAMPLE_RATE,
                    playing: s.playing,
                    level: s.level,
                    unavailable: None,
                }
            }
        }
    }
}

/// Runs `f` on the player, opening it the first time.
fn with_player(slot: &PlayerSlot, f: impl FnOnce(&Player)) {
    let mut slot = slot.lock().expect("not poisoned");
    if let Ok(p) = slot.get_or_insert_with(|| Player::open(SAMPLE_RATE)) {
        f(p);
    }
}

struct Worker {
    library_dir: PathBuf,
    /// The last pipeline, kept while the model, device and precision stay the same.
    pipeline: Option<((String, String, String), Pipeline)>,
    player: PlayerSlot,
    outbox: Outbox,
}

impl Worker {
    fn pipeline(&mut self, recipe: &Recipe) -> anyhow::Result<&Pipeline> {
        let key = (recipe.model.clone(), recipe.device.clone(), recipe.precision.clone());
        if self.pipeline.as_ref().is_none_or(|(k, _)| *k != key) {
            self.pipeline = None;
            let math = F32Math::from_name(&recipe.precision)?;
            let device = Device::from_name_with(&recipe.device, math)?;
            self.pipeline = Some((key, Pipeline::load(&model_dir(&recipe.model)?, device)?));
        }
        Ok(&self.pipeline.as_ref().expect("just loaded").1)
    }

    fn run(&mut self, job: JobId, recipe: &Recipe, cancel: &Cancel) -> anyhow::Result<Timings> {
        let library_dir = self.library_dir.clone();
        let (player, outbox) = (self.player.clone(), self.outbox.clone());
        let pipeline = self.pipeline(recipe)?;
        let sample_rate = pipeline.sample_rate();
        std::fs::create_dir_all(&library_dir)?;
        let staged = library_dir.join(format!(".job-{job}-{}.wav", std::process::id()));
        let wav = Mutex::new(Some(WavFile::create(&staged, sample_rate, WavFormat::F32)?));
        with_player(&player, Player::new_song);
        let write_error = Mutex::new(None);
        let events = |event: Event| match event {
            Event::Stage { stage, done, total } => {
                outbox.send(EngineEvent::Stage { job, stage: stage_of(stage), done, total })
            }
            Event::Audio { first_sample, samples } => {
                with_player(&player, |p| p.push(&samples));
                if let Some(w) = wav.lock().expect("not poisoned").as_mut()
                    && let Err(e) = w.write(&samples)
                {
                    *write_error.lock().expect("not poisoned") = Some(e);
                    cancel.cancel();
                }
                outbox.send(EngineEvent::Audio { job, first_sample, samples, sample_rate });
            }
            Event::Finished { .. } => {}
        };
        let request = SongRequest {
            prompt: recipe.description.clone(),
            lyrics: recipe.lyrics.clone(),
            duration_s: recipe.duration_s,
            seed: recipe.seed,
            steps: recipe.steps,
            guidance: Some(recipe.guidance),
        };
        let result = pipeline.generate(&request, Observer { events: &events, cancel });
        if let Some(e) = write_error.lock().expect("not poisoned").take() {
            return Err(e);
        }
        let stats = result?;
        with_player(&player, Player::complete);
        let timings = timings_of(&stats);
        let path =
            wav.lock().expect("not poisoned").take().expect("written once").finish(&serde_json::to_string(recipe)?)?;
        let seconds = stats.samples as f64 / sample_rate as f64;
        let title: String = recipe.description.chars().take(60).collect();
        let song = Library::open(&library_dir)?.add(&title, recipe, seconds, &timings, &path)?;
        outbox.send(EngineEvent::Saved { job, song: entry(&song) });
        Ok(timings)
    }
}

/// Answers the library's requests.
struct Librarian {
    dir: PathBuf,
    /// The window's last search, so a change can be answered with the same list.
    search: String,
    player: PlayerSlot,
    running: Running,
    outbox: Outbox,
}

impl Librarian {
    fn handle(&mut self, request: Request) -> anyhow::Result<()> {
        if let Request::ModelInfo { model } = request {
            let summary = model_dir(&model)
                .and_then(|d| crate::model_info::summary(&d))
                .map(|s| if model.trim().is_empty() { format!("embedded test model: {s}") } else { s })
                .map_err(|e| format!("{e:#}"));
            self.outbox.send(EngineEvent::ModelInfo { model, summary });
            return Ok(());
        }
        let library = Library::open(&self.dir)?;
        match request {
            Request::ListSongs { search } => self.search = search,
            Request::RenameSong { id, title } => library.rename(id, &title)?,
            Request::DeleteSong { id } => library.delete(id)?,
            Request::ExportSong { id, folder, format } => {
                let song = song(&library, id)?;
                let folder = if folder.trim().is_empty() { music_dir() } else { PathBuf::from(folder.trim()) };
                std::fs::create_dir_all(&folder).with_context(|| format!("creating {}", folder.display()))?;
                let format = match format {
                    ExportFormat::Float32 => WavFormat::F32,
                    ExportFormat::Pcm16 => WavFormat::Pcm16,
                };
                let target = free_name(&folder, &song.title);
                let path = wav::export(&song.wav, &target, format, &serde_json::to_string(&song.recipe)?)?;
                self.outbox.send(EngineEvent::Notice { message: format!("Exported to {}", path.display()) });
                return Ok(());
            }
            Request::PlaySong { id } => {
                if self.running.lock().expect("not poisoned").is_some() {
                    anyhow::bail!("a song is being made and has the player; listen when it is done");
                }
                let song = song(&library, id)?;
                let (samples, sample_rate) = wav::read_song(&song.wav)?;
                with_player(&self.player, |p| {
                    p.new_song();
                    p.push(&samples);
                    p.complete();
                });
                self.outbox.send(EngineEvent::Loaded { song: entry(&song), samples, sample_rate });
                return Ok(());
            }
            Request::Generate { .. }
            | Request::Cancel { .. }
            | Request::TogglePlayback
            | Request::Seek { .. }
            | Request::ModelInfo { .. } => {
                return Ok(());
            }
        }
        self.outbox.send(EngineEvent::Library { songs: library.list(&self.search)?.iter().map(entry).collect() });
        Ok(())
    }
}

/// The directory a recipe's model names; empty for the embedded test model.
fn model_dir(model: &str) -> anyhow::Result<PathBuf> {
    if model.trim().is_empty() { crate::default_model::path() } else { Ok(PathBuf::from(model.trim())) }
}

fn song(library: &Library, id: SongId) -> anyhow::Result<Song> {
    library.get(id)?.with_context(|| format!("song {id} is no longer in the library"))
}

/// `$XDG_MUSIC_DIR`, else `~/Music`.
fn music_dir() -> PathBuf {
    std::env::var_os("XDG_MUSIC_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join("Music")))
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `<folder>/<title>.wav`, with ` (2)`, ` (3)` ... where that exists; the title is made safe for a
/// file name.
fn free_name(folder: &Path, title: &str) -> PathBuf {
    let safe: String =
        title.chars().map(|c| if c.is_alphanumeric() || " -_.,()".contains(c) { c } else { '_' }).collect();
    let stem = match safe.trim().trim_start_matches('.') {
        "" => "song".to_string(),
        s => s.chars().take(80).collect(),
    };
    (1..)
        .map(|n| folder.join(if n == 1 { format!("{stem}.wav") } else { format!("{stem} ({n}).wav") }))
        .find(|p| !p.exists())
        .expect("some name is free")
}

fn entry(song: &Song) -> SongEntry {
    SongEntry {
        id: song.id,
        title: song.title.clone(),
        recipe: song.recipe.clone(),
        seconds: song.seconds,
        created_unix: song.created_unix,
        timings: song.timings.clone(),
    }
}

fn stage_of(stage: StageName) -> Stage {
    match stage {
        StageName::Tokenize => Stage::Tokenize,
        StageName::ArFrames => Stage::ArFrames,
        StageName::Denoise { window, windows } => Stage::Denoise { window, windows },
        StageName::Vocoder { window, windows } => Stage::Vocoder { window, windows },
    }
}
