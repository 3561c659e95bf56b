//! `SongloomApp`: the window's contents, laid out from the panels of [`crate::panels`]: on the
//! left what the song is (the built-in model's banner, compose, Generate/Cancel and the progress
//! and queue, the parameters, the model), on the right what there is to hear (the player, one
//! notice line, the library). It owns no thread, file or audio device: everything goes through an
//! [`Engine`].

use egui::Color32;
use serde::{Deserialize, Serialize};

use crate::contract::{DeviceStatus, Engine, EngineEvent, ExportFormat, JobId, Recipe, Request, SongEntry, SongId};
use crate::panels::model::DownloadOutcome;
use crate::panels::{ComposePanel, LibraryPanel, ModelPanel, ParametersPanel, PlayerPanel, ProgressPanel};
use crate::progress::Progress;

/// The job in the window and its progress.
pub struct Job {
    pub id: JobId,
    pub progress: Progress,
    /// The length asked for, in seconds.
    pub duration_s: f64,
}

/// A song asked for while another is made: it waits its turn in the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    pub id: JobId,
    pub title: String,
    pub duration_s: f64,
}

/// What the player holds: the song being made, or one from the library.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Track {
    pub title: String,
    /// Interleaved stereo.
    pub audio: Vec<f32>,
    pub sample_rate: u32,
    /// The job making it, while it is made.
    pub job: Option<JobId>,
    /// Its library entry, once it has one.
    pub song: Option<SongId>,
    /// The length asked for while it is being made, in seconds (the timeline's length then).
    pub expected_s: Option<f64>,
}

/// Settings that outlive a session (the shell persists them with the draft).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Where exports go; empty for the user's music folder.
    pub export_folder: String,
    pub export_format: ExportFormat,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { export_folder: String::new(), export_format: ExportFormat::Float32 }
    }
}

/// Seconds a notice stays.
pub const NOTICE_S: f64 = 8.0;

/// Where the fields a user starts with were last drawn, for a shell that drives the window from
/// outside (the browser test clicks and types there).
#[derive(Debug, Clone, Default)]
pub struct Landmarks {
    pub description: Option<egui::Rect>,
    pub lyrics: Option<egui::Rect>,
    pub generate: Option<egui::Rect>,
    /// The newest library song's Export button.
    pub export: Option<egui::Rect>,
}

impl Landmarks {
    /// Each drawn landmark by name.
    pub fn all(&self) -> Vec<(&'static str, egui::Rect)> {
        [
            ("description", self.description),
            ("lyrics", self.lyrics),
            ("generate", self.generate),
            ("export", self.export),
        ]
        .into_iter()
        .filter_map(|(name, rect)| Some((name, rect?)))
        .collect()
    }
}

pub struct SongloomApp<E: Engine> {
    engine: E,
    pub landmarks: Landmarks,
    /// The recipe being written; the shell persists it.
    pub draft: Recipe,
    pub settings: Settings,
    pub job: Option<Job>,
    /// Songs waiting their turn, in order.
    pub queue: Vec<Queued>,
    pub track: Option<Track>,
    pub library: LibraryPanel,
    /// The last notice or problem outside a job, whether it is a problem, and when it came; shown
    /// under the player for [`NOTICE_S`].
    pub notice: Option<(String, bool, f64)>,
    compose: ComposePanel,
    parameters: ParametersPanel,
    model: ModelPanel,
    next_job: JobId,
    /// A library song whose recipe would replace a draft that holds text: asked first.
    replacing_draft: Option<SongEntry>,
    library_requested: bool,
}

impl<E: Engine> SongloomApp<E> {
    pub fn new(engine: E, draft: Recipe) -> Self {
        SongloomApp {
            engine,
            landmarks: Landmarks::default(),
            draft,
            settings: Settings::default(),
            job: None,
            queue: Vec::new(),
            track: None,
            library: LibraryPanel::default(),
            notice: None,
            compose: ComposePanel::default(),
            parameters: ParametersPanel::default(),
            model: ModelPanel::default(),
            next_job: 1,
            replacing_draft: None,
            library_requested: false,
        }
    }

    pub fn engine(&self) -> &E {
        &self.engine
    }

    /// The device choices the engine has offered (none until it has said).
    pub fn devices(&self) -> &[DeviceStatus] {
        &self.parameters.devices
    }

    pub fn is_running(&self) -> bool {
        self.job.as_ref().is_some_and(|j| !j.progress.is_done())
    }

    /// Starts a song from the draft, or queues it while another is made.
    pub fn generate(&mut self, now_s: f64) {
        if !self.parameters.draft_is_valid() {
            return;
        }
        let title = self.draft.description.clone();
        self.start_or_queue(self.draft.clone(), title, now_s);
    }

    fn start_or_queue(&mut self, recipe: Recipe, title: String, now_s: f64) {
        let id = self.next_job;
        self.next_job += 1;
        if self.is_running() || !self.queue.is_empty() {
            self.queue.push(Queued { id, title, duration_s: recipe.duration_s });
        } else {
            self.begin(id, title, recipe.duration_s, now_s);
        }
        self.engine.send(Request::Generate { job: id, recipe });
    }

    /// Job `id` is the one being made now: its progress and its track.
    fn begin(&mut self, id: JobId, title: String, duration_s: f64, now_s: f64) {
        self.job = Some(Job { id, progress: Progress::new(now_s), duration_s });
        self.track = Some(Track { title, job: Some(id), expected_s: Some(duration_s), ..Track::default() });
    }

    /// Takes a waiting song out of the queue; the engine never starts it.
    pub fn unqueue(&mut self, id: JobId) {
        self.queue.retain(|q| q.id != id);
        self.engine.send(Request::Cancel { job: id });
    }

    pub fn cancel(&mut self) {
        if let Some(job) = &self.job
            && !job.progress.is_done()
        {
            self.engine.send(Request::Cancel { job: job.id });
        }
    }

    /// Takes the engine's events.
    pub fn pump(&mut self, now_s: f64) {
        for event in self.engine.poll() {
            match event {
                EngineEvent::Library { songs } => self.library.songs = songs,
                EngineEvent::Loaded { song, samples, sample_rate } => {
                    self.track = Some(Track {
                        title: song.title,
                        audio: samples,
                        sample_rate,
                        job: None,
                        song: Some(song.id),
                        expected_s: None,
                    });
                }
                EngineEvent::Devices { devices } => self.parameters.devices = devices,
                event @ (EngineEvent::ModelInfo { .. }
                | EngineEvent::Models { .. }
                | EngineEvent::Download { .. }
                | EngineEvent::DownloadEnded { .. }
                | EngineEvent::ModelFolderChosen { .. }) => {
                    let (message, problem) = match self.model.apply(event, &mut self.draft) {
                        None => continue,
                        Some(DownloadOutcome::Installed(path)) => {
                            (format!("The model is in {path}; it is now the Model"), false)
                        }
                        Some(DownloadOutcome::Stopped(why)) => (format!("The download stopped: {why}"), true),
                    };
                    self.notice = Some((message, problem, now_s));
                    self.engine.send(Request::ListModels);
                }
                EngineEvent::Notice { message } => self.notice = Some((message, false, now_s)),
                EngineEvent::Problem { message } => self.notice = Some((message, true, now_s)),
                event => self.job_event(event, now_s),
            }
        }
    }

    fn job_event(&mut self, event: EngineEvent, now_s: f64) {
        // A queued song's first event: it is the one being made now.
        if let Some(at) = self.queue.iter().position(|q| Some(q.id) == event.job()) {
            let next = self.queue.remove(at);
            self.begin(next.id, next.title, next.duration_s, now_s);
        }
        let Some(job) = self.job.as_mut().filter(|j| Some(j.id) == event.job()) else { return };
        job.progress.apply(&event, now_s);
        let Some(track) = self.track.as_mut().filter(|t| t.job == Some(job.id)) else { return };
        match event {
            EngineEvent::Audio { samples, sample_rate, .. } => {
                track.audio.extend_from_slice(&samples);
                track.sample_rate = sample_rate;
            }
            EngineEvent::Saved { song, .. } => {
                track.song = Some(song.id);
                track.title = song.title;
            }
            EngineEvent::Finished { .. } | EngineEvent::Failed { .. } | EngineEvent::Cancelled { .. } => {
                track.job = None;
                track.expected_s = None;
            }
            _ => {}
        }
    }

    /// Loads a library song's recipe into the composer; a draft with text of its own that would
    /// be lost is asked about first.
    pub fn use_recipe(&mut self, song: &SongEntry) {
        let draft_has_text = !self.draft.description.trim().is_empty() || !self.draft.lyrics.trim().is_empty();
        if draft_has_text && self.draft != song.recipe {
            self.replacing_draft = Some(song.clone());
        } else {
            self.draft = song.recipe.clone();
        }
    }

    /// Makes a library song's recipe again with a new seed, leaving the draft as it is (queued
    /// while another song is made).
    pub fn variation(&mut self, song: &SongEntry, now_s: f64) {
        let recipe = Recipe { seed: variation_seed(song.recipe.seed, self.next_job), ..song.recipe.clone() };
        let title = format!("{} (variation, seed {})", song.title, recipe.seed);
        self.start_or_queue(recipe, title, now_s);
    }

    pub fn ui(&mut self, ui: &mut egui::Ui) {
        let now = ui.input(|i| i.time);
        if !self.library_requested {
            self.library_requested = true;
            self.engine.send(Request::ListSongs { search: String::new() });
            if !self.engine.is_remote() {
                self.engine.send(Request::ListModels);
            }
        }
        self.pump(now);
        if ui.input_mut(|i| i.consume_key(egui::Modifiers::COMMAND, egui::Key::Enter)) {
            self.generate(now);
        }
        if !ui.ctx().egui_wants_keyboard_input()
            && ui.input_mut(|i| i.consume_key(egui::Modifiers::NONE, egui::Key::Space))
        {
            self.engine.send(Request::TogglePlayback);
        }
        // Two columns from 720 points on (compose on the left, listen on the right), so at 800x600
        // Generate and the player are both in view; one scrolling column below that.
        if ui.available_width() >= 720.0 {
            // Columns lay out justified, which spreads a wrapped paragraph's words apart.
            let unjustified = egui::Layout::top_down(egui::Align::Min);
            ui.columns(2, |columns| {
                egui::ScrollArea::vertical().id_salt("compose").show(&mut columns[0], |ui| {
                    ui.with_layout(unjustified, |ui| self.compose_column(ui, now));
                });
                columns[1].with_layout(unjustified, |ui| self.listen_column(ui, now));
            });
        } else {
            egui::ScrollArea::vertical().id_salt("window").show(ui, |ui| {
                self.compose_column(ui, now);
                ui.separator();
                self.listen_column(ui, now);
            });
        }
        let playback = self.engine.playback();
        if self.is_running() || playback.playing {
            ui.ctx().request_repaint_after(std::time::Duration::from_millis(50));
        }
        if let Some((_, _, at)) = &self.notice {
            let left = NOTICE_S - (now - at);
            if left > 0.0 {
                ui.ctx().request_repaint_after(std::time::Duration::from_secs_f64(left));
            }
        }
    }

    /// What the song is: the banner, the composer, Generate and the progress, the parameters and
    /// the model.
    fn compose_column(&mut self, ui: &mut egui::Ui, now: f64) {
        ui.heading("Songloom");
        let remote = self.engine.is_remote();
        if self.draft.model.trim().is_empty() && !remote {
            for request in self.model.banner_ui(ui) {
                self.engine.send(request);
            }
        }
        self.compose.ui(ui, &mut self.draft, &mut self.landmarks);
        ui.horizontal(|ui| {
            let running = self.is_running();
            let hint = if running { "Ctrl+Enter; waits its turn after the song being made" } else { "Ctrl+Enter" };
            let valid = self.parameters.draft_is_valid();
            let generate = ui.add_enabled(valid, egui::Button::new("Generate")).on_hover_text(hint);
            self.landmarks.generate = Some(generate.rect);
            if generate.clicked() {
                self.generate(now);
            }
            if ui.add_enabled(running, egui::Button::new("Cancel")).clicked() {
                self.cancel();
            }
        });
        if let Some(id) = ProgressPanel::ui(ui, self.job.as_ref(), &self.queue, now) {
            self.unqueue(id);
        }
        ui.separator();
        self.parameters.ui(ui, &mut self.draft, remote);
        for request in self.model.ui(ui, &mut self.draft, remote) {
            self.engine.send(request);
        }
    }

    /// What there is to hear: the player, a notice line, the library.
    fn listen_column(&mut self, ui: &mut egui::Ui, now: f64) {
        let playback = self.engine.playback();
        for request in PlayerPanel::ui(ui, self.track.as_ref(), &playback) {
            self.engine.send(request);
        }
        // One line always, so a notice never moves what is below it; it goes after a while.
        match &self.notice {
            Some((message, problem, at)) if now - at < NOTICE_S => {
                let color = if *problem { Color32::LIGHT_RED } else { ui.visuals().text_color() };
                ui.colored_label(color, message);
            }
            _ => {
                ui.label(" ");
            }
        }
        ui.separator();
        let running = self.is_running();
        if let Some(song) = self.replacing_draft.clone() {
            ui.horizontal_wrapped(|ui| {
                ui.label(format!(
                    "Replace your draft with the recipe of \"{}\"? The draft's text would be lost.",
                    song.title
                ));
                if ui.button("Replace the draft").clicked() {
                    self.draft = song.recipe.clone();
                    self.replacing_draft = None;
                }
                if ui.button("Keep my draft").clicked() {
                    self.replacing_draft = None;
                }
            });
        }
        let action = egui::ScrollArea::vertical()
            .id_salt("library")
            .show(ui, |ui| self.library.ui(ui, &mut self.settings, running, self.engine.is_remote()))
            .inner;
        self.landmarks.export = self.library.newest_export;
        if let Some(action) = action {
            match action {
                crate::panels::library::Action::Send(request) => self.engine.send(request),
                crate::panels::library::Action::UseRecipe(song) => self.use_recipe(&song),
                crate::panels::library::Action::Variation(song) => self.variation(&song, now),
            }
        }
    }
}

/// A seed for a variation of a song made with `seed`: different from it and from the other
/// variations of this session (`job` counts them).
fn variation_seed(seed: u64, job: JobId) -> u64 {
    let mut h = seed ^ job.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h = (h ^ (h >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    // Six digits at most, as a person would type a seed.
    let h = (h ^ (h >> 27)) % 1_000_000;
    if h == seed { (h + 1) % 1_000_000 } else { h }
}
