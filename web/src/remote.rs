//! The engine contract over the HTTP API of `songloom serve`: each request becomes API calls made
//! in the background, each answer an [`EngineEvent`] for the window's next [`poll`](Engine::poll).
//! A song's progress comes from its Server-Sent Events, its audio from its raw stream, which the
//! player plays as it arrives. Takes are one request whose answer names a song each, each followed
//! as a job of its own (the first one heard). The page's state is also written where a test can read it
//! (`window.songloomState`: `idle`, `running`, `finished`, `failed` or `cancelled`; the frames
//! that arrived, `songloomFrames`, and the furthest the player has played, `songloomPlayedTo`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use serde::de::IgnoredAny;
use songloom_ui::contract::{
    EditRequest, Engine, EngineEvent, ExportFormat, JobId, PlaybackState, Recipe, Request, SongEntry, SongId, Timings,
};
use songloom_wire::{Devices, Event, LibraryList, Rename, ServedModel, SongCreated};
use wasm_bindgen_futures::spawn_local;

use crate::player::WebPlayer;
use crate::sse::SseReader;
use crate::{client, http};

#[derive(Default)]
struct Shared {
    events: Vec<EngineEvent>,
    /// The server's id of each job the window started.
    songs: HashMap<JobId, u64>,
    /// Jobs cancelled before the server gave them an id.
    cancelled: Vec<JobId>,
    /// The window's context, to draw again when something arrives.
    repaint: Option<egui::Context>,
    /// The furthest frame the player's clock has reached (for `window.songloomPlayedTo`).
    played_to: usize,
    /// The song being made whose audio goes to the player; none once a library song is
    /// listened to meanwhile.
    heard_job: Option<JobId>,
}

#[derive(Clone)]
pub struct RemoteEngine {
    shared: Rc<RefCell<Shared>>,
    player: Rc<RefCell<WebPlayer>>,
}

impl RemoteEngine {
    pub fn new() -> Self {
        let engine = RemoteEngine { shared: Rc::default(), player: Rc::new(RefCell::new(WebPlayer::new())) };
        let devices = engine.clone();
        spawn_local(async move { devices.devices().await });
        set_state("idle");
        engine
    }

    /// The window's context, asked to draw whenever an answer arrives.
    pub fn repaint_with(&self, context: egui::Context) {
        self.shared.borrow_mut().repaint = Some(context);
    }

    fn emit(&self, event: EngineEvent) {
        let mut shared = self.shared.borrow_mut();
        shared.events.push(event);
        if let Some(context) = &shared.repaint {
            context.request_repaint_after(songloom_ui::app::EVENT_REDRAW);
        }
    }

    fn spawn(&self, work: impl AsyncFnOnce(RemoteEngine) + 'static) {
        let engine = self.clone();
        spawn_local(async move { work(engine).await });
    }

    async fn devices(&self) {
        let devices = match http::request::<Devices>("GET", "/api/devices").await {
            Ok(answer) => answer.devices.iter().map(client::device_status).collect(),
            Err(_) => Vec::new(),
        };
        self.emit(EngineEvent::Devices { devices });
    }

    async fn generate(&self, job: JobId, recipe: Recipe) {
        self.make(&[job], "/api/songs", &client::song_request(&recipe)).await
    }

    /// Takes of `recipe`, one request: the server answers with a song each, take k job `jobs[k]`.
    async fn takes(&self, jobs: Vec<JobId>, recipe: Recipe) {
        self.make(&jobs, "/api/songs", &client::takes_request(&recipe, jobs.len())).await
    }

    /// A new version of library song `song`: made on the server as a new song is.
    async fn edit(&self, job: JobId, song: SongId, edit: EditRequest) {
        self.make(&[job], &format!("/api/songs/{song}/edits"), &edit).await
    }

    /// Asks the server for the songs of `jobs` with `body` at `url` (a new one, its takes, or a
    /// version of one), then follows each as it is made, to the library; the first is heard.
    async fn make(&self, jobs: &[JobId], url: &str, body: &impl serde::Serialize) {
        let ids = match http::call::<SongCreated>("POST", url, Some(body)).await {
            Ok(created) => client::song_ids(&created),
            Err(why) => return jobs.iter().for_each(|&job| self.failed(job, why.clone())),
        };
        for &job in jobs.iter().skip(ids.len()) {
            self.failed(job, format!("the server made {} songs of the {} asked for", ids.len(), jobs.len()));
        }
        let jobs: Vec<(JobId, u64)> = jobs.iter().copied().zip(ids).collect();
        for &(job, id) in &jobs {
            self.shared.borrow_mut().songs.insert(job, id);
            if self.shared.borrow().cancelled.contains(&job) {
                let _ = http::request::<IgnoredAny>("DELETE", &format!("/api/songs/{id}")).await;
            }
        }
        set_state("running");
        if let (Ok(model), Some(&(job, _))) = (http::request::<ServedModel>("GET", "/api/model").await, jobs.first()) {
            self.emit(EngineEvent::Plan { job, plan: format!("on the server: {}", model.plan) });
        }
        for (take, (job, id)) in jobs.into_iter().enumerate() {
            self.spawn(async move |e| e.follow(job, id, take == 0).await);
        }
    }

    /// Follows server song `id` as job `job` to its end; its audio goes to the window (and the
    /// player) for the song `heard`, the others' progress comes from their events alone.
    async fn follow(&self, job: JobId, id: u64, heard: bool) {
        if !heard {
            for event in self.events(job, id).await {
                self.emit(event);
            }
            return;
        }
        // The events and the audio arrive on two streams; the song's end waits for both.
        let ending: Rc<RefCell<(bool, Option<Vec<EngineEvent>>)>> = Rc::default();
        let audio = self.clone();
        let audio_ending = ending.clone();
        spawn_local(async move {
            audio.audio(job, id).await;
            let mut ending = audio_ending.borrow_mut();
            ending.0 = true;
            for event in ending.1.take().unwrap_or_default() {
                audio.emit(event);
            }
        });
        let ends = self.events(job, id).await;
        let mut ending = ending.borrow_mut();
        if ending.0 {
            for event in ends {
                self.emit(event);
            }
        } else {
            ending.1 = Some(ends);
        }
    }

    fn failed(&self, job: JobId, message: String) {
        set_state("failed");
        self.emit(EngineEvent::Failed { job, message });
    }

    /// The song's events, as they come, until its last; returns the events that end it.
    async fn events(&self, job: JobId, id: u64) -> Vec<EngineEvent> {
        let mut reader = SseReader::default();
        let mut timings = Timings::default();
        let mut end: Option<Event> = None;
        let status = http::stream(&format!("/api/songs/{id}/events"), |bytes| {
            for sse in reader.feed(bytes) {
                let Ok(event) = serde_json::from_str::<Event>(&sse.data) else { continue };
                if let Some(progress) = client::progress_event(job, &event) {
                    self.emit(progress);
                }
                match event {
                    Event::Finished(stats) => timings = Timings::from(&stats),
                    Event::Saved { .. } | Event::Error { .. } | Event::Cancelled => end = Some(event),
                    _ => {}
                }
            }
        })
        .await;
        match (status, end) {
            (Ok(200), Some(Event::Saved { library_id, .. })) => {
                set_state("finished");
                let songs = self.library().await.unwrap_or_default();
                let saved = songs.iter().find(|s| s.id == library_id).cloned();
                let mut ends: Vec<EngineEvent> =
                    saved.map(|song| EngineEvent::Saved { job, song }).into_iter().collect();
                ends.push(EngineEvent::Finished { job, timings });
                ends.push(EngineEvent::Library { songs });
                ends
            }
            (Ok(200), Some(Event::Cancelled)) => {
                set_state("cancelled");
                vec![EngineEvent::Cancelled { job }]
            }
            (Ok(200), Some(Event::Error { message })) => {
                set_state("failed");
                vec![EngineEvent::Failed { job, message }]
            }
            (Ok(status), _) => {
                set_state("failed");
                vec![EngineEvent::Failed { job, message: format!("the song's events ended early ({status})") }]
            }
            (Err(why), _) => {
                set_state("failed");
                vec![EngineEvent::Failed { job, message: why }]
            }
        }
    }

    /// The song's samples as they are made, to the player and the window.
    async fn audio(&self, job: JobId, id: u64) {
        let sample_rate = 44_100;
        self.shared.borrow_mut().heard_job = Some(job);
        self.player.borrow_mut().begin(sample_rate);
        let mut pending: Vec<u8> = Vec::new();
        let mut frames = 0usize;
        let _ = http::stream(&format!("/api/songs/{id}/stream.pcm"), |bytes| {
            pending.extend_from_slice(bytes);
            // Whole stereo frames only: a piece may end inside a sample.
            let whole = pending.len() / 8 * 8;
            let samples: Vec<f32> = pending
                .drain(..whole)
                .as_slice()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            if samples.is_empty() {
                return;
            }
            if self.shared.borrow().heard_job == Some(job) {
                self.player.borrow_mut().push(&samples);
            }
            let first_sample = frames;
            frames += samples.len() / 2;
            set_frames(frames);
            self.emit(EngineEvent::Audio { job, first_sample, samples, sample_rate });
        })
        .await;
        if self.shared.borrow().heard_job == Some(job) {
            self.player.borrow_mut().complete();
        }
    }

    async fn library(&self) -> Result<Vec<SongEntry>, String> {
        let list = http::request::<LibraryList>("GET", "/api/library").await?;
        Ok(list.songs.into_iter().map(client::song_entry).collect())
    }

    async fn list(&self, search: String) {
        match self.library().await {
            Ok(songs) => {
                let search = search.to_lowercase();
                let songs = songs
                    .into_iter()
                    .filter(|s| {
                        search.is_empty()
                            || s.title.to_lowercase().contains(&search)
                            || s.recipe.description.to_lowercase().contains(&search)
                    })
                    .collect();
                self.emit(EngineEvent::Library { songs });
            }
            Err(why) => self.emit(EngineEvent::Problem { message: format!("the library: {why}") }),
        }
    }

    /// A library change, then the library as it now is.
    async fn change(&self, method: &str, id: SongId, body: Option<Rename>) {
        if let Err(why) = http::call::<IgnoredAny>(method, &format!("/api/library/{id}"), body.as_ref()).await {
            self.emit(EngineEvent::Problem { message: why });
        }
        self.list(String::new()).await;
    }

    async fn play_song(&self, id: SongId) {
        let song = self.library().await.ok().and_then(|songs| songs.into_iter().find(|s| s.id == id));
        let Some(song) = song else {
            return self.emit(EngineEvent::Problem { message: format!("song {id} is not in the library") });
        };
        match http::bytes(&format!("/api/library/{id}/audio.wav")).await {
            Ok((200, bytes)) => match songloom_wire::wav::read(&bytes).and_then(|wav| {
                let sample_rate = wav.sample_rate;
                Ok((wav.into_stereo()?, sample_rate))
            }) {
                Ok((samples, sample_rate)) => {
                    self.shared.borrow_mut().heard_job = None;
                    self.player.borrow_mut().load(samples.clone(), sample_rate);
                    self.emit(EngineEvent::Loaded { song, samples, sample_rate });
                }
                Err(why) => self.emit(EngineEvent::Problem { message: format!("the song's file: {why}") }),
            },
            Ok((status, _)) => self.emit(EngineEvent::Problem { message: format!("the song's file: {status}") }),
            Err(why) => self.emit(EngineEvent::Problem { message: why }),
        }
    }

    async fn model_info(&self, model: String) {
        let served = http::request::<ServedModel>("GET", "/api/model").await;
        let name = served.as_ref().ok().map(|m| songloom_wire::notice::model_name(m.embedded).to_string());
        let summary = served.map(|m| client::model_summary(&m));
        self.emit(EngineEvent::ModelInfo { model, summary, name });
    }

    /// A download of the song's WAV by the browser.
    fn export(&self, id: SongId, format: ExportFormat) {
        let file = match format {
            ExportFormat::Float32 => "audio.wav?format=float32&download=1",
            ExportFormat::Pcm16 => "audio.wav?format=pcm16&download=1",
            ExportFormat::Flac => "audio.flac?download=1",
        };
        let url = format!("/api/library/{id}/{file}");
        let started = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.create_element("a").ok())
            .and_then(|a| wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlAnchorElement>(a).ok())
            .map(|a| {
                a.set_href(&url);
                a.set_download("");
                a.click();
            });
        self.emit(match started {
            Some(()) => EngineEvent::Notice { message: "Downloading the WAV (your browser's downloads)".into() },
            None => EngineEvent::Problem { message: "this page could not start a download".into() },
        });
    }
}

impl Engine for RemoteEngine {
    fn send(&self, request: Request) {
        match request {
            Request::Generate { job, recipe } => self.spawn(async move |e| e.generate(job, recipe).await),
            Request::Takes { jobs, recipe } => self.spawn(async move |e| e.takes(jobs, recipe).await),
            Request::Edit { job, song, edit } => self.spawn(async move |e| e.edit(job, song, edit).await),
            Request::Cancel { job } => {
                let id = self.shared.borrow().songs.get(&job).copied();
                match id {
                    Some(id) => self.spawn(async move |_| {
                        let _ = http::request::<IgnoredAny>("DELETE", &format!("/api/songs/{id}")).await;
                    }),
                    None => self.shared.borrow_mut().cancelled.push(job),
                }
                // Only the song heard stops playing; a take not heard leaves the player alone.
                if self.shared.borrow().heard_job.is_none_or(|heard| heard == job) {
                    self.player.borrow_mut().stop();
                }
            }
            Request::TogglePlayback => self.player.borrow_mut().toggle(),
            Request::Play => self.player.borrow_mut().play(),
            Request::SetVolume { volume } => self.player.borrow_mut().set_volume(volume),
            Request::Seek { frame } => self.player.borrow_mut().seek(frame),
            Request::PlaySong { id } => self.spawn(async move |e| e.play_song(id).await),
            Request::ModelInfo { model } => self.spawn(async move |e| e.model_info(model).await),
            Request::ListSongs { search } => self.spawn(async move |e| e.list(search).await),
            Request::RenameSong { id, title } => {
                self.spawn(async move |e| e.change("PATCH", id, Some(Rename { title })).await)
            }
            Request::DeleteSong { id } => self.spawn(async move |e| e.change("DELETE", id, None).await),
            Request::ExportSong { id, format, .. } => self.export(id, format),
            // The server's model is fetched where it runs (`songloom model download` there).
            Request::ListModels => {}
            Request::DownloadModel
            | Request::PauseDownload
            | Request::CancelDownload
            | Request::ChooseModelFolder
            | Request::ListFolder { .. } => self.emit(EngineEvent::Problem {
                message: "the model is downloaded on the server: `songloom model download` there".into(),
            }),
        }
    }

    fn poll(&self) -> Vec<EngineEvent> {
        self.player.borrow_mut().schedule();
        let position = self.player.borrow().position();
        let mut shared = self.shared.borrow_mut();
        if position > shared.played_to {
            shared.played_to = position;
            set_global("songloomPlayedTo", &(position as f64).into());
        }
        std::mem::take(&mut shared.events)
    }

    fn playback(&self) -> PlaybackState {
        self.player.borrow().state()
    }

    fn is_remote(&self) -> bool {
        true
    }

    fn utc_offset_s(&self, unix_s: i64) -> i64 {
        let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(unix_s as f64 * 1000.0));
        // JavaScript gives minutes behind UTC.
        -(date.get_timezone_offset() as i64) * 60
    }
}

/// The page's state, where a test reads it.
fn set_state(state: &str) {
    set_global("songloomState", &state.into());
}

fn set_frames(frames: usize) {
    set_global("songloomFrames", &(frames as f64).into());
}

fn set_global(name: &str, value: &wasm_bindgen::JsValue) {
    if let Some(window) = web_sys::window() {
        let _ = js_sys::Reflect::set(&window, &name.into(), value);
    }
}
