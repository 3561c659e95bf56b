//! `ModelPanel`: which model makes the songs. The built-in model's banner (what it can do, how to
//! get the real one), the Model folder (typed or chosen with the system's folder picker), the
//! models folder's installed models, the download with its progress and Pause, and what the
//! chosen model holds and needs (the engine's answer).

use egui::Color32;

use super::{Command, Panel, PanelContext};
use crate::contract::{DownloadProgress, EngineEvent, InstalledModel, Request};

#[derive(Default)]
pub struct ModelPanel {
    /// The model the last information was asked for, and the answer once it came.
    info: Option<ModelInfo>,
    /// The models folder and what it holds, once the engine has said.
    models: Option<ModelsFolder>,
    /// A download in progress.
    download: Option<DownloadProgress>,
    /// The window's own folder chooser for the Model.
    chooser: super::folder_chooser::FolderChooser,
    /// Set by the banner: the Model field takes the focus.
    focus_field: bool,
    /// Whether the Model field had the keyboard in the last frame.
    field_focused: bool,
    /// Whether the built-in model's banner shows: decided while the Model field is not being typed
    /// in, so the first key typed does not take the banner, and the field with it, away.
    builtin_banner: bool,
}

/// What the engine said a model holds.
struct ModelInfo {
    /// The model asked about, as in [`Recipe::model`](crate::contract::Recipe::model).
    model: String,
    /// Its summary, or why it cannot be used; `None` until the engine answers.
    summary: Option<Result<String, String>>,
    /// Its name as the engine read it.
    name: Option<String>,
}

/// The models folder and what it holds.
struct ModelsFolder {
    folder: String,
    models: Vec<InstalledModel>,
}

impl ModelPanel {
    /// Takes one of the engine's model events (what becomes of the draft and the notice line is
    /// the app's part).
    pub fn apply(&mut self, event: &EngineEvent) {
        match event {
            EngineEvent::ModelInfo { model, summary, name } => {
                if let Some(info) = &mut self.info
                    && info.model == *model
                {
                    info.summary = Some(summary.clone());
                    info.name = name.clone();
                }
            }
            EngineEvent::Models { folder, models } => {
                self.models = Some(ModelsFolder { folder: folder.clone(), models: models.clone() });
                // What is on disk changed: the model is asked about again.
                self.info = None;
            }
            EngineEvent::Download { progress } => self.download = Some(progress.clone()),
            EngineEvent::DownloadEnded { .. } => {
                self.download = None;
                self.info = None;
            }
            EngineEvent::ModelFolderChosen { .. } => {
                self.info = None;
                self.chooser.close();
            }
            EngineEvent::Folder { listing } => self.chooser.show(listing.clone()),
            _ => {}
        }
    }

    /// The name of the model the songs are made with, as its licence asks it shown: for a local
    /// engine the draft's (the built-in model when it names none), for a server what it said.
    pub fn name_in_use(&self, draft_model: &str, remote: bool) -> Option<String> {
        if remote {
            return self.info.as_ref().and_then(|i| i.name.clone());
        }
        Some(songloom_wire::notice::model_name(draft_model.trim().is_empty()).to_string())
    }

    /// Why `model` (as the draft names it) cannot be used, once the engine has said it cannot.
    pub fn unusable(&self, model: &str) -> Option<&str> {
        match &self.info {
            Some(ModelInfo { model: asked, summary: Some(Err(why)), .. }) if asked == model => Some(why),
            _ => None,
        }
    }

    /// Said while the built-in model is the one in use on a local engine: what it can do, and how
    /// to get the real one.
    pub fn banner_ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>) {
        if !self.field_focused {
            self.builtin_banner = ctx.draft.model.trim().is_empty();
        }
        if !self.builtin_banner || ctx.remote {
            return;
        }
        egui::Frame::group(ui.style()).fill(ui.visuals().faint_bg_color).show(ui, |ui| {
            ui.strong("You are using the built-in model, Songloom Mini: instrumental pieces, no singing.");
            // The whole story folded, so the banner stays a few lines on a small screen.
            egui::CollapsingHeader::new("What it can do, and the real model").id_salt("builtin-banner").show(
                ui,
                |ui| {
                    ui.label(
                        "It is a small model the project trained on synthesized public-domain scores: \
                         instrumental pieces (organ, piano, strings, guitar, flute, clarinet, harp, bass, drums) \
                         from a description of the style, instruments, key and tempo; it cannot sing. For songs \
                         with vocals, download MiniMaxAI/MiniMax-Music3 (28.5 GB: `songloom model download` in \
                         a terminal fetches, resumes and verifies it; it needs a GPU with 7 GB or more: on an \
                         H200 a minute of music takes about 17 s, other GPUs are not measured yet, a CPU takes \
                         hours), then choose its folder as the Model.",
                    );
                    ui.hyperlink_to("The model on Hugging Face", "https://huggingface.co/MiniMaxAI/MiniMax-Music3");
                },
            );
            ui.horizontal_wrapped(|ui| {
                if self.download.is_none() && ui.button("Download it").clicked() {
                    ctx.send(Command::Send(Request::DownloadModel));
                }
                if ui.button("Choose its folder…").clicked() {
                    self.chooser.open(ctx);
                }
                if ui.button("Enter its folder").clicked() {
                    self.focus_field = true;
                }
            });
        });
    }

    /// The models folder's complete models to choose, and the download: its button, or its
    /// progress with Pause.
    fn installed_ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>) {
        if let Some(folder) = &self.models {
            for model in folder.models.iter().filter(|m| m.complete) {
                ui.horizontal(|ui| {
                    if ui.small_button("Use").on_hover_text(&model.path).clicked() {
                        ctx.draft.model = model.path.clone();
                    }
                    ui.small(&model.summary);
                });
            }
        }
        match &self.download {
            Some(download) => {
                let (done, total) = (download.done_bytes, download.total_bytes);
                let fraction = if total > 0 { done as f32 / total as f32 } else { 0.0 };
                let text = format!("Downloading the model: {:.1} of {:.1} GB", done as f64 / 1e9, total as f64 / 1e9);
                ui.add(egui::ProgressBar::new(fraction).text(text)).on_hover_text(&download.file);
                ui.horizontal(|ui| {
                    if ui.small_button("Pause").on_hover_text("Download again to resume").clicked() {
                        ctx.send(Command::Send(Request::PauseDownload));
                    }
                    if ui
                        .small_button("Cancel the download")
                        .on_hover_text("stops it and removes what it fetched")
                        .clicked()
                    {
                        ctx.send(Command::Send(Request::CancelDownload));
                    }
                });
            }
            None => {
                let partial = self.models.as_ref().is_some_and(|f| f.models.iter().any(|m| !m.complete));
                let label = if partial { "Resume the model's download" } else { "Download MiniMax-Music3 (28.5 GB)" };
                let folder = self.models.as_ref().map(|f| f.folder.as_str()).unwrap_or("the models folder");
                ui.horizontal(|ui| {
                    if ui.small_button(label).on_hover_text(format!("into {folder}; resumes and verifies")).clicked() {
                        ctx.send(Command::Send(Request::DownloadModel));
                    }
                    if partial && ui.small_button("Discard the partial download").clicked() {
                        ctx.send(Command::Send(Request::CancelDownload));
                    }
                });
            }
        }
    }
}

impl Panel for ModelPanel {
    /// The Model row and what goes with it; on a remote engine the server's model, no choice here.
    fn ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>) {
        if !ctx.remote {
            ui.horizontal_wrapped(|ui| {
                let label = ui.label("Model");
                let field =
                    egui::TextEdit::singleline(&mut ctx.draft.model).hint_text("built-in model").desired_width(220.0);
                let model = ui.add(field).labelled_by(label.id);
                if std::mem::take(&mut self.focus_field) {
                    model.request_focus();
                }
                self.field_focused = model.has_focus();
                if ui
                    .button("Choose folder…")
                    .on_hover_text("a MiniMax-Music3 folder in the diffusers layout")
                    .clicked()
                {
                    self.chooser.open(ctx);
                }
            });
            self.installed_ui(ui, ctx);
            self.chooser.ui(ui, ctx);
        }
        if self.info.as_ref().is_none_or(|info| info.model != ctx.draft.model) {
            self.info = Some(ModelInfo { model: ctx.draft.model.clone(), summary: None, name: None });
            ctx.send(Command::Send(Request::ModelInfo { model: ctx.draft.model.clone() }));
        }
        match self.info.as_ref().and_then(|info| info.summary.as_ref()) {
            Some(Ok(summary)) => ui.add(egui::Label::new(egui::RichText::new(summary).small()).wrap()),
            Some(Err(why)) => ui.colored_label(Color32::from_rgb(200, 120, 0), format!("Model: {why}")),
            None => ui.small("reading the model..."),
        };
    }
}
