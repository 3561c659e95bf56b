//! `SongloomApp`: the window's contents. Compose (description, lyrics with tag help), parameters,
//! Generate/Cancel, per-stage progress with ETA and time to first audio, the player (waveform as
//! it grows, playhead, seek, play/pause, level) and the library. It owns no thread, file or audio
//! device: everything goes through an [`Engine`].

use egui::Color32;
use serde::{Deserialize, Serialize};

use crate::contract::{
    DeviceStatus, Engine, EngineEvent, ExportFormat, InstalledModel, JobId, PRECISIONS, Recipe, Request, SongEntry,
    SongId, WEIGHTS,
};
use crate::duration;
use crate::library_view::LibraryView;
use crate::lyrics::{TAGS, dropped_text, insert_tag};
use crate::player_view;
use crate::progress::{Progress, in_words};

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

/// Points the progress band takes, whatever it shows: the bar and one line of details.
const PROGRESS_BAND: f32 = 44.0;

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
    pub library: LibraryView,
    /// The last notice or problem outside a job, whether it is a problem, and when it came; shown
    /// under the player for [`NOTICE_S`].
    pub notice: Option<(String, bool, f64)>,
    /// The model the last model information was asked for, and the answer once it came.
    model_info: Option<(String, Option<Result<String, String>>)>,
    /// The device choices the engine offers, once it has said.
    devices: Vec<DeviceStatus>,
    /// The models folder and what it holds, once the engine has said.
    models: Option<(String, Vec<InstalledModel>)>,
    /// A model download in progress: bytes there, of all, and the file.
    download: Option<(u64, u64, String)>,
    next_job: JobId,
    lyrics_cursor: usize,
    /// The Duration field's text, the length it last showed, and what to say of what was typed
    /// (a clamp, or why it is no length; `true` for the latter, which holds Generate back).
    duration_text: String,
    duration_shown: Option<f64>,
    duration_note: Option<(String, bool)>,
    /// Set by the banner: the Model field takes the focus.
    focus_model_field: bool,
    /// Set by a tag button: the Lyrics editor takes the focus back with its cursor here.
    refocus_lyrics: Option<usize>,
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
            library: LibraryView::default(),
            notice: None,
            model_info: None,
            devices: Vec::new(),
            models: None,
            download: None,
            next_job: 1,
            lyrics_cursor: 0,
            duration_text: String::new(),
            duration_shown: None,
            duration_note: None,
            focus_model_field: false,
            refocus_lyrics: None,
            replacing_draft: None,
            library_requested: false,
        }
    }

    pub fn engine(&self) -> &E {
        &self.engine
    }

    /// The device choices the engine has offered (none until it has said).
    pub fn devices(&self) -> &[DeviceStatus] {
        &self.devices
    }

    pub fn is_running(&self) -> bool {
        self.job.as_ref().is_some_and(|j| !j.progress.is_done())
    }

    /// Starts a song from the draft, or queues it while another is made.
    pub fn generate(&mut self, now_s: f64) {
        if !self.draft_is_valid() {
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
                EngineEvent::ModelInfo { model, summary } => {
                    if let Some((asked, answer)) = &mut self.model_info
                        && *asked == model
                    {
                        *answer = Some(summary);
                    }
                }
                EngineEvent::Devices { devices } => self.devices = devices,
                EngineEvent::Models { folder, models } => self.models = Some((folder, models)),
                EngineEvent::Download { done, total, file } => self.download = Some((done, total, file)),
                EngineEvent::DownloadEnded { result } => {
                    self.download = None;
                    match result {
                        Ok(path) => {
                            self.notice = Some((format!("The model is in {path}; it is now the Model"), false, now_s));
                            self.draft.model = path;
                        }
                        Err(why) => self.notice = Some((format!("The download stopped: {why}"), true, now_s)),
                    }
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
            ui.columns(2, |columns| {
                egui::ScrollArea::vertical()
                    .id_salt("compose")
                    .show(&mut columns[0], |ui| self.compose_column(ui, now));
                self.listen_column(&mut columns[1], now);
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

    /// The song being written: description, lyrics, Generate and its progress, the parameters.
    fn compose_column(&mut self, ui: &mut egui::Ui, now: f64) {
        ui.heading("Songloom");
        if self.draft.model.trim().is_empty() && !self.engine.is_remote() {
            self.embedded_model_banner(ui);
        }
        self.compose_ui(ui);
        ui.horizontal(|ui| {
            let running = self.is_running();
            let hint = if running { "Ctrl+Enter; waits its turn after the song being made" } else { "Ctrl+Enter" };
            let generate = ui.add_enabled(self.draft_is_valid(), egui::Button::new("Generate")).on_hover_text(hint);
            self.landmarks.generate = Some(generate.rect);
            if generate.clicked() {
                self.generate(now);
            }
            if ui.add_enabled(running, egui::Button::new("Cancel")).clicked() {
                self.cancel();
            }
        });
        self.progress_ui(ui, now);
        let mut removed = None;
        for (place, waiting) in self.queue.iter().enumerate() {
            ui.horizontal(|ui| {
                ui.label(format!("Waiting ({}): {}, {}", place + 1, waiting.title, in_words(waiting.duration_s)));
                let remove = ui.small_button("Remove");
                let label = format!("Remove {} from the queue", waiting.title);
                remove.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Button, true, &label));
                if remove.clicked() {
                    removed = Some(waiting.id);
                }
            });
        }
        if let Some(id) = removed {
            self.unqueue(id);
        }
        ui.separator();
        self.parameters_ui(ui);
    }

    /// Said while the embedded model is the one in use: what it can do, and how to get the real one.
    fn embedded_model_banner(&mut self, ui: &mut egui::Ui) {
        egui::Frame::group(ui.style()).fill(ui.visuals().faint_bg_color).show(ui, |ui| {
            ui.strong("You are using the built-in model, Songloom Mini.");
            ui.label(
                "It is a small model the project trained on synthesized public-domain scores: instrumental \
                 pieces (organ, piano, strings, guitar, flute, clarinet, harp, bass, drums) from a description \
                 of the style, instruments, key and tempo; it cannot sing. For songs with vocals, download \
                 MiniMaxAI/MiniMax-Music3 (28.5 GB: `songloom model download` in a \
                 terminal fetches, resumes and verifies it; it needs a GPU with 7 GB or more: on an H200 a minute \
                 of music takes about 22 s, other GPUs are not measured yet, a CPU takes hours), then give its \
                 folder as the Model below.",
            );
            ui.horizontal(|ui| {
                if self.download.is_none() && ui.button("Download it").clicked() {
                    self.engine.send(Request::DownloadModel);
                }
                ui.hyperlink_to("The model on Hugging Face", "https://huggingface.co/MiniMaxAI/MiniMax-Music3");
                if ui.button("Enter its folder").clicked() {
                    self.focus_model_field = true;
                }
            });
        });
    }

    /// What there is to hear: the player, a notice line, the library.
    fn listen_column(&mut self, ui: &mut egui::Ui, now: f64) {
        let playback = self.engine.playback();
        match &self.track {
            Some(track) => {
                for request in player_view::show(ui, track, &playback) {
                    self.engine.send(request);
                }
            }
            None => {
                ui.label("Nothing to play yet: generate a song, or listen to one from the library.");
            }
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
                crate::library_view::Action::Send(request) => self.engine.send(request),
                crate::library_view::Action::UseRecipe(song) => self.use_recipe(&song),
                crate::library_view::Action::Variation(song) => self.variation(&song, now),
            }
        }
    }

    fn compose_ui(&mut self, ui: &mut egui::Ui) {
        let label = ui.label("Description");
        let description = ui
            .add(
                egui::TextEdit::multiline(&mut self.draft.description)
                    .hint_text("dreamy synth-pop, female vocals, 100 BPM")
                    .desired_rows(2)
                    .desired_width(f32::INFINITY),
            )
            .labelled_by(label.id);
        self.landmarks.description = Some(description.rect);
        ui.label("Lyrics");
        let mut output = egui::TextEdit::multiline(&mut self.draft.lyrics)
            .id_salt("lyrics")
            .hint_text("[verse]\nfirst line\n[chorus]\n...")
            .desired_rows(8)
            .desired_width(f32::INFINITY)
            .show(ui);
        output.response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::TextInput, true, "Lyrics editor"));
        self.landmarks.lyrics = Some(output.response.rect);
        // After a tag button: the focus back in the editor, the cursor after the tag, so the next
        // keystrokes land in the lyrics.
        if let Some(at) = self.refocus_lyrics.take() {
            output.response.request_focus();
            let chars = self.draft.lyrics[..at.min(self.draft.lyrics.len())].chars().count();
            let cursor = egui::text::CCursor::new(chars);
            output.state.cursor.set_char_range(Some(egui::text::CCursorRange::one(cursor)));
            output.state.store(ui.ctx(), output.response.id);
        } else if let Some(range) = output.cursor_range {
            let chars = range.primary.index.0;
            self.lyrics_cursor =
                self.draft.lyrics.char_indices().nth(chars).map_or(self.draft.lyrics.len(), |(i, _)| i);
        }
        // Below the editor, so Tab goes from the description straight to the lyrics.
        ui.horizontal_wrapped(|ui| {
            ui.label("Insert a tag:");
            for tag in TAGS {
                if ui.small_button(tag).clicked() {
                    let (text, cursor) = insert_tag(&self.draft.lyrics, self.lyrics_cursor, tag);
                    self.draft.lyrics = text;
                    self.lyrics_cursor = cursor;
                    self.refocus_lyrics = Some(cursor);
                }
            }
        });
        for dropped in dropped_text(&self.draft.lyrics) {
            ui.colored_label(Color32::from_rgb(200, 120, 0), dropped.message());
        }
    }

    /// The length as text: `90`, `1:30`, `1m30s`, `2m`; clamped to 1 s..6:00 with a note that says
    /// so, and an error line for text that is no length (Generate waits for a good one).
    fn duration_ui(&mut self, ui: &mut egui::Ui, label: egui::Id) {
        if self.duration_shown != Some(self.draft.duration_s) {
            self.duration_text = duration::format_duration(self.draft.duration_s);
            self.duration_shown = Some(self.draft.duration_s);
            self.duration_note = None;
        }
        ui.horizontal(|ui| {
            let edit = egui::TextEdit::singleline(&mut self.duration_text).desired_width(70.0).hint_text("1:30");
            if ui.add(edit).labelled_by(label).changed() {
                self.duration_note = match duration::parse_duration(&self.duration_text) {
                    Ok(seconds) => {
                        let taken = seconds.clamp(1.0, duration::MAX_SECONDS);
                        self.draft.duration_s = taken;
                        self.duration_shown = Some(taken);
                        (taken != seconds).then(|| {
                            let length = duration::format_duration(taken);
                            (format!("taken as {length}: a song is 1 s to 6:00"), false)
                        })
                    }
                    Err(why) => Some((why, true)),
                };
            }
            match &self.duration_note {
                Some((note, false)) => {
                    ui.small(note);
                }
                Some((why, true)) => {
                    ui.colored_label(Color32::LIGHT_RED, why);
                }
                None => {}
            }
        });
    }

    /// Whether the draft can be made: a length that parses.
    fn draft_is_valid(&self) -> bool {
        !matches!(self.duration_note, Some((_, true)))
    }

    fn parameters_ui(&mut self, ui: &mut egui::Ui) {
        egui::Grid::new("parameters").num_columns(2).show(ui, |ui| {
            let label = ui.label("Duration");
            self.duration_ui(ui, label.id);
            ui.end_row();
            let label = ui.label("Seed");
            ui.horizontal(|ui| {
                ui.add(egui::DragValue::new(&mut self.draft.seed)).labelled_by(label.id);
                if ui.button("New seed").clicked() {
                    self.draft.seed = ui.input(|i| (i.time * 1e6) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 16;
                }
            });
            ui.end_row();
            let label = ui.label("Steps");
            ui.add(egui::DragValue::new(&mut self.draft.steps).range(1..=100)).labelled_by(label.id);
            ui.end_row();
            let label = ui.label("Guidance");
            ui.add(egui::DragValue::new(&mut self.draft.guidance).range(0.0..=20.0).speed(0.05).max_decimals(2))
                .labelled_by(label.id)
                .on_hover_text("How closely the music follows the description (the model's own: 1.7)");
            ui.end_row();
            if self.engine.is_remote() {
                return;
            }
            let label = ui.label("Device");
            device_choice_ui(ui, label.id, &mut self.draft.device, &self.devices);
            ui.end_row();
            let chosen = self.devices.iter().find(|d| d.name == self.draft.device);
            if let Some(advice) = chosen.and_then(|d| d.advice.as_ref()) {
                ui.label("");
                ui.add(egui::Label::new(egui::RichText::new(advice).small()).wrap());
                ui.end_row();
            }
            let label = ui.label("Precision");
            text_choice_ui(ui, label.id, "precision", &mut self.draft.precision, &PRECISIONS);
            ui.end_row();
            let label = ui.label("Weights");
            text_choice_ui(ui, label.id, "weights", &mut self.draft.weights, &WEIGHTS).on_hover_text(
                "The language model's weights: 8bit and 4bit take less GPU memory (auto: the most exact that fits)",
            );
            ui.end_row();
            let label = ui.label("GPU memory (GB)");
            ui.horizontal(|ui| {
                let mut limited = self.draft.max_memory_gb.is_some();
                ui.checkbox(&mut limited, "at most").labelled_by(label.id);
                if limited {
                    let gb = self.draft.max_memory_gb.get_or_insert(12.0);
                    ui.add(egui::DragValue::new(gb).range(1.0..=1024.0).speed(0.5).max_decimals(1))
                        .labelled_by(label.id);
                } else {
                    self.draft.max_memory_gb = None;
                    ui.label("what the device has free");
                }
            });
            ui.end_row();
            let label = ui.label("Model");
            let model = ui
                .add(egui::TextEdit::singleline(&mut self.draft.model).hint_text("built-in model"))
                .labelled_by(label.id);
            if std::mem::take(&mut self.focus_model_field) {
                model.request_focus();
            }
            ui.end_row();
            ui.label("");
            ui.vertical(|ui| self.models_ui(ui));
            ui.end_row();
        });
        if self.model_info.as_ref().is_none_or(|(asked, _)| *asked != self.draft.model) {
            self.model_info = Some((self.draft.model.clone(), None));
            self.engine.send(Request::ModelInfo { model: self.draft.model.clone() });
        }
        if self.engine.is_remote() {
            ui.small("The device, precision, weights, memory and model are the server's:");
        }
        match self.model_info.as_ref().and_then(|(_, answer)| answer.as_ref()) {
            Some(Ok(summary)) => ui.small(summary),
            Some(Err(why)) => ui.colored_label(Color32::from_rgb(200, 120, 0), format!("Model: {why}")),
            None => ui.small("reading the model..."),
        };
    }

    /// The models folder's complete models to choose, and the download: its button, or its
    /// progress with Pause.
    fn models_ui(&mut self, ui: &mut egui::Ui) {
        if let Some((_, models)) = &self.models {
            for model in models.iter().filter(|m| m.complete) {
                ui.horizontal(|ui| {
                    if ui.small_button("Use").on_hover_text(&model.path).clicked() {
                        self.draft.model = model.path.clone();
                    }
                    ui.small(&model.summary);
                });
            }
        }
        match &self.download {
            Some((done, total, file)) => {
                let fraction = if *total > 0 { *done as f32 / *total as f32 } else { 0.0 };
                let text = format!("Downloading the model: {:.1} of {:.1} GB", *done as f64 / 1e9, *total as f64 / 1e9);
                ui.add(egui::ProgressBar::new(fraction).text(text)).on_hover_text(file);
                if ui.small_button("Pause").on_hover_text("Download again to resume").clicked() {
                    self.engine.send(Request::PauseDownload);
                }
            }
            None => {
                let partial = self.models.as_ref().is_some_and(|(_, m)| m.iter().any(|m| !m.complete));
                let label = if partial { "Resume the model's download" } else { "Download MiniMax-Music3 (28.5 GB)" };
                let folder = self.models.as_ref().map(|(f, _)| f.as_str()).unwrap_or("the models folder");
                if ui.small_button(label).on_hover_text(format!("into {folder}; resumes and verifies")).clicked() {
                    self.engine.send(Request::DownloadModel);
                }
            }
        }
    }

    /// The progress, in a band of fixed height, so nothing below it moves as it changes.
    fn progress_ui(&self, ui: &mut egui::Ui, now: f64) {
        let top = ui.cursor().top();
        self.progress_lines(ui, now);
        let used = ui.cursor().top() - top;
        ui.add_space((PROGRESS_BAND - used).max(0.0));
    }

    fn progress_lines(&self, ui: &mut egui::Ui, now: f64) {
        let Some(job) = &self.job else { return };
        let p = &job.progress;
        // A failed or cancelled job: its progress cleared, one line that says what happened.
        if let Some(error) = &p.error {
            let line = if error == "cancelled" {
                "Cancelled: nothing was kept.".to_string()
            } else {
                format!("Could not make the song: {error}")
            };
            ui.colored_label(Color32::LIGHT_RED, line);
            return;
        }
        if let Some(timings) = &p.finished {
            let first =
                timings.time_to_first_audio_s.map(|f| format!(", first audio after {f:.1} s")).unwrap_or_default();
            ui.label(format!("Finished: {:.1} s of audio in {}{first}", p.audio_s(), in_words(timings.total_s)));
            return;
        }
        let eta = p.eta_s(now).map(|e| format!(" · about {} left", in_words(e))).unwrap_or_default();
        ui.add(egui::ProgressBar::new(p.fraction() as f32).text(format!("{}{eta}", p.headline(job.duration_s))));
        // One line whatever the width (the whole of it on hover), so the band keeps its height.
        let details = p.details(now);
        let plan = p.plan.as_deref().map_or(String::new(), |plan| format!("\nPlan: {plan}"));
        ui.add(egui::Label::new(egui::RichText::new(&details).small()).truncate())
            .on_hover_text(format!("{details}{plan}"));
    }
}

/// A drop-down of `options` for `value`, named by the label `label`.
/// A seed for a variation of a song made with `seed`: different from it and from the other
/// variations of this session (`job` counts them).
fn variation_seed(seed: u64, job: JobId) -> u64 {
    let mut h = seed ^ job.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h = (h ^ (h >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    // Six digits at most, as a person would type a seed.
    let h = (h ^ (h >> 27)) % 1_000_000;
    if h == seed { (h + 1) % 1_000_000 } else { h }
}

pub(crate) fn choice_ui<T: PartialEq + Clone>(
    ui: &mut egui::Ui,
    label: egui::Id,
    id: &str,
    value: &mut T,
    options: &[(T, &str)],
) -> egui::Response {
    let selected = options.iter().find(|(v, _)| v == value).map_or("", |(_, name)| *name);
    egui::ComboBox::from_id_salt(id)
        .selected_text(selected)
        .show_ui(ui, |ui| {
            for (option, name) in options {
                ui.selectable_value(value, option.clone(), *name);
            }
        })
        .response
        .labelled_by(label)
}

/// The device drop-down: each choice the engine offers, those that cannot run here disabled with
/// their reason; until the engine has said, the draft's choice alone.
fn device_choice_ui(
    ui: &mut egui::Ui,
    label: egui::Id,
    value: &mut String,
    devices: &[DeviceStatus],
) -> egui::Response {
    egui::ComboBox::from_id_salt("device")
        .selected_text(value.as_str())
        .show_ui(ui, |ui| {
            for device in devices {
                let enabled = device.available.is_ok();
                let response = ui.add_enabled(enabled, egui::Button::selectable(*value == device.name, &device.name));
                let response = match &device.available {
                    Ok(what) => response.on_hover_text(what),
                    Err(why) => response.on_disabled_hover_text(format!("not available: {why}")),
                };
                if response.clicked() {
                    *value = device.name.clone();
                }
            }
        })
        .response
        .labelled_by(label)
}

fn text_choice_ui(
    ui: &mut egui::Ui,
    label: egui::Id,
    id: &str,
    value: &mut String,
    options: &[&str],
) -> egui::Response {
    let options: Vec<(String, &str)> = options.iter().map(|o| (o.to_string(), *o)).collect();
    choice_ui(ui, label, id, value, &options)
}
