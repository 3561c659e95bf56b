//! The scripted engine and harnesses the window's tests share.

use std::cell::RefCell;
use std::collections::VecDeque;

use egui_kittest::Harness;
use songloom_ui::app::SongloomApp;
use songloom_ui::contract::{Engine, EngineEvent, PlaybackState, Recipe, Request, SongEntry, Stage, Timings};

/// Answers a Generate with a short scripted song, a few events per poll.
#[derive(Default)]
pub struct ScriptedEngine {
    pub sent: RefCell<Vec<Request>>,
    pub queue: RefCell<VecDeque<EngineEvent>>,
    pub per_poll: usize,
    /// While set, nothing arrives (a song that takes its time).
    pub paused: std::cell::Cell<bool>,
    /// Songs made elsewhere, as a browser page's engine.
    pub remote: bool,
    /// What the player reports.
    pub playback: RefCell<PlaybackState>,
}

impl Engine for ScriptedEngine {
    fn send(&self, request: Request) {
        let mut queue = self.queue.borrow_mut();
        match &request {
            Request::Takes { jobs, recipe } => {
                // Each take's song as a Generate's, then saved in the library as take k's seed.
                for (k, &job) in jobs.iter().enumerate() {
                    song_events(&mut queue, job);
                    let finished = queue.pop_back().expect("the song's end");
                    let recipe = Recipe { seed: recipe.seed.wrapping_add(k as u64), ..recipe.clone() };
                    let song = SongEntry {
                        id: 100 + job as i64,
                        title: recipe.description.clone(),
                        recipe,
                        seconds: 2.0,
                        created_unix: 0,
                        timings: Timings::default(),
                        editable: Ok(()),
                    };
                    queue.push_back(EngineEvent::Saved { job, song });
                    queue.push_back(finished);
                }
            }
            Request::Generate { job, .. } => song_events(&mut queue, *job),
            Request::Cancel { job } => {
                // As the engine: that job's song stops (or never starts), the others go on.
                queue.retain(|e| e.job() != Some(*job));
                queue.push_back(EngineEvent::Cancelled { job: *job });
            }
            Request::ListModels => queue.push_back(EngineEvent::Models {
                folder: "/models".into(),
                models: vec![songloom_ui::contract::InstalledModel {
                    path: "/models/MiniMax-Music3".into(),
                    complete: true,
                    summary: "MiniMaxAI/MiniMax-Music3 (main), 28.5 GB".into(),
                }],
            }),
            Request::DownloadModel => {
                let progress = songloom_ui::contract::DownloadProgress {
                    done_bytes: 7_000_000_000,
                    total_bytes: 28_500_000_000,
                    file: "a".into(),
                };
                queue.push_back(EngineEvent::Download { progress });
            }
            Request::PauseDownload => {
                queue.push_back(EngineEvent::DownloadEnded { result: Err("paused; downloading again resumes".into()) });
            }
            Request::CancelDownload => {
                let result = Err("cancelled; what it had fetched is removed".into());
                queue.push_back(EngineEvent::DownloadEnded { result });
            }
            Request::ListFolder { path } => {
                let path = if path.is_empty() { "/models".to_string() } else { path.clone() };
                let folders = if path == "/models" {
                    vec![
                        songloom_ui::contract::FolderEntry { name: "MiniMax-Music3".into(), is_model: true },
                        songloom_ui::contract::FolderEntry { name: "notes".into(), is_model: false },
                    ]
                } else {
                    Vec::new()
                };
                let listing = songloom_ui::contract::FolderListing {
                    is_model: path.ends_with("MiniMax-Music3"),
                    parent: path.rsplit_once('/').map(|(up, _)| if up.is_empty() { "/".into() } else { up.into() }),
                    path,
                    folders,
                    error: None,
                };
                queue.push_back(EngineEvent::Folder { listing });
            }
            Request::ModelInfo { model } => {
                let summary = if model.is_empty() {
                    Ok("6.1 M parameters: all there".into())
                } else {
                    Err(format!("{model} is not a model"))
                };
                let name = summary.is_ok().then(|| "Songloom Mini".to_string());
                queue.push_back(EngineEvent::ModelInfo { model: model.clone(), summary, name });
            }
            _ => {}
        }
        self.sent.borrow_mut().push(request);
    }

    fn poll(&self) -> Vec<EngineEvent> {
        if self.paused.get() {
            return Vec::new();
        }
        let mut queue = self.queue.borrow_mut();
        let n = if self.per_poll == 0 { queue.len() } else { self.per_poll.min(queue.len()) };
        queue.drain(..n).collect()
    }

    fn playback(&self) -> PlaybackState {
        self.playback.borrow().clone()
    }

    fn is_remote(&self) -> bool {
        self.remote
    }
}

/// A short song's events for `job`: its stages, a little audio, its end.
fn song_events(queue: &mut VecDeque<EngineEvent>, job: songloom_ui::contract::JobId) {
    queue.push_back(EngineEvent::Stage { job, stage: Stage::Tokenize, done: 1, total: 1 });
    for done in 1..=4 {
        queue.push_back(EngineEvent::Stage { job, stage: Stage::ArFrames, done, total: 4 });
    }
    for done in 1..=2 {
        queue.push_back(EngineEvent::Stage { job, stage: Stage::Dit { window: 0, windows: 1 }, done, total: 2 });
    }
    queue.push_back(EngineEvent::Audio {
        job,
        first_sample: 0,
        samples: vec![0.5, -0.5, 0.25, -0.25],
        sample_rate: 44100,
    });
    queue.push_back(EngineEvent::Finished { job, timings: Timings { total_s: 1.0, ..Timings::default() } });
}

pub fn harness(engine: ScriptedEngine) -> Harness<'static, SongloomApp<ScriptedEngine>> {
    let app = SongloomApp::new(engine, Recipe::default());
    Harness::new_ui_state(|ui, app: &mut SongloomApp<ScriptedEngine>| app.ui(ui), app)
}

pub fn library_song() -> songloom_ui::contract::SongEntry {
    songloom_ui::contract::SongEntry {
        id: 7,
        title: "Harbour lights".into(),
        recipe: Recipe {
            description: "slow harbour ballad".into(),
            lyrics: "[verse]\nlanterns".into(),
            seed: 42,
            ..Recipe::default()
        },
        seconds: 30.0,
        created_unix: 0,
        timings: Timings::default(),
        editable: Ok(()),
    }
}

/// The window at `size` with a song in the player and one in the library.
pub fn sized_harness(size: egui::Vec2) -> Harness<'static, SongloomApp<ScriptedEngine>> {
    let mut app = SongloomApp::new(ScriptedEngine::default(), Recipe::default());
    app.library.songs = vec![library_song()];
    app.track = Some(songloom_ui::state::Track {
        title: "a song".into(),
        audio: vec![0.1; 88_200],
        sample_rate: 44_100,
        ..Default::default()
    });
    Harness::builder().with_size(size).build_ui_state(|ui, app: &mut SongloomApp<ScriptedEngine>| app.ui(ui), app)
}
