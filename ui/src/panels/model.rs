//! `ModelPanel`: which model makes the songs. The built-in model's banner (what it can do, how to
//! get the real one), the Model folder (typed or chosen with the system's folder picker), the
//! models folder's installed models, the download with its progress and Pause, and what the
//! chosen model holds and needs (the engine's answer).

use egui::Color32;

use crate::contract::{EngineEvent, InstalledModel, Recipe, Request};

#[derive(Default)]
pub struct ModelPanel {
    /// The model the last information was asked for, and the answer once it came.
    info: Option<(String, Option<Result<String, String>>)>,
    /// The models folder and what it holds, once the engine has said.
    models: Option<(String, Vec<InstalledModel>)>,
    /// A download in progress: bytes there, of all, and the file.
    download: Option<(u64, u64, String)>,
    /// Set by the banner: the Model field takes the focus.
    focus_field: bool,
}

/// What became of a finished download, for the app to tell.
pub enum DownloadOutcome {
    Installed(String),
    Stopped(String),
}

impl ModelPanel {
    /// Takes one of the engine's model events (others are no concern of the panel); a finished
    /// download's outcome.
    pub fn apply(&mut self, event: EngineEvent, draft: &mut Recipe) -> Option<DownloadOutcome> {
        match event {
            EngineEvent::ModelInfo { model, summary } => {
                if let Some((asked, answer)) = &mut self.info
                    && *asked == model
                {
                    *answer = Some(summary);
                }
            }
            EngineEvent::Models { folder, models } => self.models = Some((folder, models)),
            EngineEvent::Download { done, total, file } => self.download = Some((done, total, file)),
            EngineEvent::DownloadEnded { result } => {
                self.download = None;
                return Some(match result {
                    Ok(path) => {
                        draft.model = path.clone();
                        DownloadOutcome::Installed(path)
                    }
                    Err(why) => DownloadOutcome::Stopped(why),
                });
            }
            EngineEvent::ModelFolderChosen { path } => draft.model = path,
            _ => {}
        }
        None
    }

    /// Said while the built-in model is the one in use: what it can do, and how to get the real
    /// one.
    pub fn banner_ui(&mut self, ui: &mut egui::Ui) -> Vec<Request> {
        let mut requests = Vec::new();
        egui::Frame::group(ui.style()).fill(ui.visuals().faint_bg_color).show(ui, |ui| {
            ui.strong("You are using the built-in model, Songloom Mini.");
            ui.label(
                "It is a small model the project trained on synthesized public-domain scores: instrumental \
                 pieces (organ, piano, strings, guitar, flute, clarinet, harp, bass, drums) from a description \
                 of the style, instruments, key and tempo; it cannot sing. For songs with vocals, download \
                 MiniMaxAI/MiniMax-Music3 (28.5 GB: `songloom model download` in a \
                 terminal fetches, resumes and verifies it; it needs a GPU with 7 GB or more: on an H200 a minute \
                 of music takes about 22 s, other GPUs are not measured yet, a CPU takes hours), then choose its \
                 folder as the Model.",
            );
            ui.horizontal_wrapped(|ui| {
                if self.download.is_none() && ui.button("Download it").clicked() {
                    requests.push(Request::DownloadModel);
                }
                ui.hyperlink_to("The model on Hugging Face", "https://huggingface.co/MiniMaxAI/MiniMax-Music3");
                if ui.button("Choose its folder…").clicked() {
                    requests.push(Request::ChooseModelFolder);
                }
                if ui.button("Enter its folder").clicked() {
                    self.focus_field = true;
                }
            });
        });
        requests
    }

    /// The Model row and what goes with it; `remote`: the server's model, no choice here.
    pub fn ui(&mut self, ui: &mut egui::Ui, draft: &mut Recipe, remote: bool) -> Vec<Request> {
        let mut requests = Vec::new();
        if !remote {
            ui.horizontal_wrapped(|ui| {
                let label = ui.label("Model");
                let field =
                    egui::TextEdit::singleline(&mut draft.model).hint_text("built-in model").desired_width(220.0);
                let model = ui.add(field).labelled_by(label.id);
                if std::mem::take(&mut self.focus_field) {
                    model.request_focus();
                }
                if ui
                    .button("Choose folder…")
                    .on_hover_text("a MiniMax-Music3 folder in the diffusers layout")
                    .clicked()
                {
                    requests.push(Request::ChooseModelFolder);
                }
            });
            self.installed_ui(ui, draft, &mut requests);
        }
        if self.info.as_ref().is_none_or(|(asked, _)| *asked != draft.model) {
            self.info = Some((draft.model.clone(), None));
            requests.push(Request::ModelInfo { model: draft.model.clone() });
        }
        match self.info.as_ref().and_then(|(_, answer)| answer.as_ref()) {
            Some(Ok(summary)) => ui.add(egui::Label::new(egui::RichText::new(summary).small()).wrap()),
            Some(Err(why)) => ui.colored_label(Color32::from_rgb(200, 120, 0), format!("Model: {why}")),
            None => ui.small("reading the model..."),
        };
        requests
    }

    /// The models folder's complete models to choose, and the download: its button, or its
    /// progress with Pause.
    fn installed_ui(&mut self, ui: &mut egui::Ui, draft: &mut Recipe, requests: &mut Vec<Request>) {
        if let Some((_, models)) = &self.models {
            for model in models.iter().filter(|m| m.complete) {
                ui.horizontal(|ui| {
                    if ui.small_button("Use").on_hover_text(&model.path).clicked() {
                        draft.model = model.path.clone();
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
                ui.horizontal(|ui| {
                    if ui.small_button("Pause").on_hover_text("Download again to resume").clicked() {
                        requests.push(Request::PauseDownload);
                    }
                    if ui
                        .small_button("Cancel the download")
                        .on_hover_text("stops it and removes what it fetched")
                        .clicked()
                    {
                        requests.push(Request::CancelDownload);
                    }
                });
            }
            None => {
                let partial = self.models.as_ref().is_some_and(|(_, m)| m.iter().any(|m| !m.complete));
                let label = if partial { "Resume the model's download" } else { "Download MiniMax-Music3 (28.5 GB)" };
                let folder = self.models.as_ref().map(|(f, _)| f.as_str()).unwrap_or("the models folder");
                ui.horizontal(|ui| {
                    if ui.small_button(label).on_hover_text(format!("into {folder}; resumes and verifies")).clicked() {
                        requests.push(Request::DownloadModel);
                    }
                    if partial && ui.small_button("Discard the partial download").clicked() {
                        requests.push(Request::CancelDownload);
                    }
                });
            }
        }
    }
}
