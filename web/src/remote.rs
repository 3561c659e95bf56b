//! The engine contract over the HTTP API of `songloom serve`: each request becomes API calls made
//! in the background, each answer an [`EngineEvent`] for the window's next [`poll`](Engine::poll).
//! A song's progress comes from its Server-Sent Events, its audio from its raw stream, which the
//! player plays as it arrives. The page's state is also written where a test can read it
//! (`window.songloomState`: `idle`, `running`, `finished`, `failed` or `cancelled`; the frames
//! that arrived, `songloomFrames`, and the furthest the player has played, `songloomPlayedTo`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use serde_json::{Value, json};
use songloom_ui::contract::{
    DeviceStatus, Engine, EngineEvent, ExportFormat, JobId, PlaybackState, Recipe, Request, SongEntry, SongId, Stage,
    Timings,
};
use wasm_bindgen_futures::spawn_local;

use crate::http;
use crate::player::WebPlayer;
use crate::sse::SseReader;

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
            context.request_repaint();
        }
    }

    fn spawn(&self, work: impl AsyncFnOnce(RemoteEngine) + 'static) {
        let engine = self.clone();
        spawn_local(async move { work(engine).await });
    }

    async fn devices(&self) {
        let devices = match http::json("GET", "/api/devices", None).await {
            Ok((200, body)) => body["devices"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| DeviceStatus {
                    name: d["name"].as_str().unwrap_or("?").to_string(),
                    available: if d["available"].as_bool() == Some(true) {
                        Ok(d["description"].as_str().unwrap_or("").to_string())
                    } else {
                        Err(d["reason"].as_str().unwrap_or("not available").to_string())
                    },
                    advice: None,
                })
                .collect(),
            _ => Vec::new(),
        };
        self.emit(EngineEvent::Devices { devices });
    }

    async fn generate(&self, job: JobId, recipe: Recipe) {
        let body = json!({
            "description": recipe.description, "lyrics": recipe.lyrics, "duration": recipe.duration_s,
            "seed": recipe.seed, "steps": recipe.steps, "guidance": recipe.guidance,
        });
        let id = match http::json("POST", "/api/songs", Some(body)).await {
            Ok((201, answer)) => answer["id"].as_u64().unwrap_or(0),
            Ok((status, answer)) => return self.failed(job, http::error_of(status, &answer)),
            Err(why) => return self.failed(job, why),
        };
        self.shared.borrow_mut().songs.insert(job, id);
        if self.shared.borrow().cancelled.contains(&job) {
            let _ = http::json("DELETE", &format!("/api/songs/{id}"), None).await;
        }
        set_state("running");
        if let Ok((200, model)) = http::json("GET", "/api/model", None).await
            && let Some(plan) = model["plan"].as_str()
        {
            self.emit(EngineEvent::Plan { job, plan: format!("on the server: {plan}") });
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
        let mut end: Option<Value> = None;
        let status = http::stream(&format!("/api/songs/{id}/events"), |bytes| {
            for event in reader.feed(bytes) {
                let Ok(data) = serde_json::from_str::<Value>(&event.data) else { continue };
                match event.name.as_str() {
                    "stage" => {
                        if let Some(stage) = stage_of(&data["stage"]) {
                            let (done, total) = (count(&data["done"]), count(&data["total"]));
                            self.emit(EngineEvent::Stage { job, stage, done, total });
                        }
                    }
                    "finished" => timings = timings_of(&data),
                    "saved" | "error" | "cancelled" => end = Some(data),
                    _ => {}
                }
            }
        })
        .await;
        match (status, end) {
            (Ok(200), Some(data)) if data["event"] == "saved" => {
                set_state("finished");
                let library_id = data["library_id"].as_i64().unwrap_or(0);
                let songs = self.library().await.unwrap_or_default();
                let saved = songs.iter().find(|s| s.id == library_id).cloned();
                let mut ends: Vec<EngineEvent> =
                    saved.map(|song| EngineEvent::Saved { job, song }).into_iter().collect();
                ends.push(EngineEvent::Finished { job, timings });
                ends.push(EngineEvent::Library { songs });
                ends
            }
            (Ok(200), Some(data)) if data["event"] == "cancelled" => {
                set_state("cancelled");
                vec![EngineEvent::Cancelled { job }]
            }
            (Ok(200), Some(data)) => {
                set_state("failed");
                let message = data["message"].as_str().unwrap_or("the song failed").to_string();
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
        match http::json("GET", "/api/library", None).await? {
            (200, body) => Ok(body["songs"].as_array().into_iter().flatten().filter_map(entry_of).collect()),
            (status, body) => Err(http::error_of(status, &body)),
        }
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
    async fn change(&self, method: &str, id: SongId, body: Option<Value>) {
        match http::json(method, &format!("/api/library/{id}"), body).await {
            Ok((200, _)) => {}
            Ok((status, answer)) => self.emit(EngineEvent::Problem { message: http::error_of(status, &answer) }),
            Err(why) => self.emit(EngineEvent::Problem { message: why }),
        }
        self.list(String::new()).await;
    }

    async fn play_song(&self, id: SongId) {
        let song = self.library().await.ok().and_then(|songs| songs.into_iter().find(|s| s.id == id));
        let Some(song) = song else {
            return self.emit(EngineEvent::Problem { message: format!("song {id} is not in the library") });
        };
        match http::bytes(&format!("/api/library/{id}/audio.wav")).await {
            Ok((200, bytes)) => match read_wav(&bytes) {
                Some((samples, sample_rate)) => {
                    self.shared.borrow_mut().heard_job = None;
                    self.player.borrow_mut().load(samples.clone(), sample_rate);
                    self.emit(EngineEvent::Loaded { song, samples, sample_rate });
                }
                None => {
                    self.emit(EngineEvent::Problem { message: "the song's file is not a WAV this page reads".into() })
                }
            },
            Ok((status, _)) => self.emit(EngineEvent::Problem { message: format!("the song's file: {status}") }),
            Err(why) => self.emit(EngineEvent::Problem { message: why }),
        }
    }

    async fn model_info(&self, model: String) {
        let summary = match http::json("GET", "/api/model", None).await {
            Ok((200, body)) => Ok(format!(
                "on the server: {}; {} ({}); {}",
                body["device"].as_str().unwrap_or("?"),
                if body["embedded"] == true {
                    "the built-in model, Songloom Mini (instrumental, no vocals)"
                } else {
                    "the model"
                },
                body["path"].as_str().unwrap_or("?"),
                body["plan"].as_str().unwrap_or("")
            )),
            Ok((status, body)) => Err(http::error_of(status, &body)),
            Err(why) => Err(why),
        };
        self.emit(EngineEvent::ModelInfo { model, summary });
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
            Request::Cancel { job } => {
                let id = self.shared.borrow().songs.get(&job).copied();
                match id {
                    Some(id) => self.spawn(async move |_| {
                        let _ = http::json("DELETE", &format!("/api/songs/{id}"), None).await;
                    }),
                    None => self.shared.borrow_mut().cancelled.push(job),
                }
                self.player.borrow_mut().stop();
            }
            Request::TogglePlayback => self.player.borrow_mut().toggle(),
            Request::Seek { frame } => self.player.borrow_mut().seek(frame),
            Request::PlaySong { id } => self.spawn(async move |e| e.play_song(id).await),
            Request::ModelInfo { model } => self.spawn(async move |e| e.model_info(model).await),
            Request::ListSongs { search } => self.spawn(async move |e| e.list(search).await),
            Request::RenameSong { id, title } => {
                self.spawn(async move |e| e.change("PATCH", id, Some(json!({"title": title}))).await)
            }
            Request::DeleteSong { id } => self.spawn(async move |e| e.change("DELETE", id, None).await),
            Request::ExportSong { id, format, .. } => self.export(id, format),
            // The server's model is fetched where it runs (`songloom model download` there).
            Request::ListModels => {}
            Request::DownloadModel | Request::PauseDownload | Request::CancelDownload | Request::ChooseModelFolder => {
                self.emit(EngineEvent::Problem {
                    message: "the model is downloaded on the server: `songloom model download` there".into(),
                })
            }
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
}

fn count(v: &Value) -> usize {
    v.as_u64().unwrap_or(0) as usize
}

fn stage_of(stage: &Value) -> Option<Stage> {
    let (window, windows) = (count(&stage["window"]), count(&stage["windows"]));
    Some(match stage["name"].as_str()? {
        "load" => Stage::Load { acoustic: stage["half"] == "acoustic" },
        "tokenize" => Stage::Tokenize,
        "ar_frames" => Stage::ArFrames,
        "dit" => Stage::Denoise { window, windows },
        "vocoder" => Stage::Vocoder { window, windows },
        _ => return None,
    })
}

fn timings_of(data: &Value) -> Timings {
    Timings {
        total_s: data["total_s"].as_f64().unwrap_or(0.0),
        time_to_first_audio_s: data["time_to_first_audio_s"].as_f64(),
        ar_s: data["ar_s"].as_f64().unwrap_or(0.0),
        acoustic_s: data["acoustic_s"].as_f64().unwrap_or(0.0),
        frames: count(&data["frames"]),
        windows: count(&data["windows"]),
    }
}

fn entry_of(song: &Value) -> Option<SongEntry> {
    Some(SongEntry {
        id: song["id"].as_i64()?,
        title: song["title"].as_str()?.to_string(),
        recipe: serde_json::from_value(song["recipe"].clone()).unwrap_or_default(),
        seconds: song["seconds"].as_f64().unwrap_or(0.0),
        created_unix: song["created_unix"].as_i64().unwrap_or(0),
        timings: Timings::default(),
    })
}

/// A WAV's interleaved stereo samples and rate: 32-bit float or 16-bit PCM, as the server writes.
fn read_wav(bytes: &[u8]) -> Option<(Vec<f32>, u32)> {
    if bytes.len() < 12 || &bytes[..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return None;
    }
    let (mut at, mut format, mut data) = (12, None, None);
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let size = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().ok()?) as usize;
        let body = bytes.get(at + 8..at + 8 + size).unwrap_or(&bytes[at + 8..]);
        match id {
            b"fmt " if body.len() >= 16 => {
                let u16_at = |i: usize| u16::from_le_bytes([body[i], body[i + 1]]);
                let rate = u32::from_le_bytes(body[4..8].try_into().ok()?);
                format = Some((u16_at(0), u16_at(2), rate, u16_at(14)));
            }
            b"data" => data = Some(body),
            _ => {}
        }
        at += 8 + size + size % 2;
    }
    let ((kind, channels, rate, bits), data) = (format?, data?);
    let mono: Vec<f32> = match (kind, bits) {
        (3, 32) => data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        (1, 16) => data.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]]) as f32 / 32768.0).collect(),
        _ => return None,
    };
    let samples = match channels {
        2 => mono,
        1 => mono.iter().flat_map(|&s| [s, s]).collect(),
        _ => return None,
    };
    Some((samples, rate))
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
