//! `FolderChooser`: the window's own folder chooser for the Model, over the window: the folder's
//! path (typed, `~` for home), Up, its subfolders (those holding a model marked), and Choose.
//! It works wherever the window runs; the system's dialog is offered from it where the system
//! has one, and a dialog that never opens leaves this one open rather than nothing.

use super::{Command, PanelContext};
use crate::contract::{FolderListing, Request};

#[derive(Default)]
pub struct FolderChooser {
    /// Whether it is open.
    open: bool,
    /// The folder shown, once the engine has listed it.
    listing: Option<FolderListing>,
    /// The path field's text.
    typed: String,
}

impl FolderChooser {
    /// Opens it on the models folder.
    pub fn open(&mut self, ctx: &mut PanelContext<'_>) {
        self.open = true;
        self.listing = None;
        ctx.send(Command::Send(Request::ListFolder { path: String::new() }));
    }

    /// The engine's listing of the folder asked for.
    pub fn show(&mut self, listing: FolderListing) {
        if listing.error.is_none() {
            self.typed = listing.path.clone();
        }
        self.listing = Some(listing);
    }

    /// A folder was chosen (here or in the system's dialog): the chooser's work is done.
    pub fn close(&mut self) {
        self.open = false;
    }

    pub fn ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>) {
        if !self.open {
            return;
        }
        let mut go_to: Option<String> = None;
        let mut chosen: Option<String> = None;
        let mut cancel = false;
        let modal = egui::Modal::new(egui::Id::unique("model-folder-chooser")).show(ui.ctx(), |ui| {
            ui.set_width(520.0_f32.min(ui.ctx().content_rect().width() - 40.0));
            ui.heading("Choose the model's folder");
            ui.label("The MiniMax-Music3 folder in the diffusers layout (language_model/, transformer/ and the rest).");
            ui.horizontal(|ui| {
                let label = ui.label("Folder");
                let field =
                    ui.add(egui::TextEdit::singleline(&mut self.typed).desired_width(330.0)).labelled_by(label.id);
                if field.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter)) || ui.button("Go").clicked() {
                    go_to = Some(self.typed.clone());
                }
            });
            match &self.listing {
                None => {
                    ui.label("Reading the folder…");
                }
                Some(listing) => {
                    if let Some(why) = &listing.error {
                        ui.colored_label(egui::Color32::LIGHT_RED, why);
                    }
                    if let Some(parent) = &listing.parent
                        && ui.button("Up").on_hover_text(parent).clicked()
                    {
                        go_to = Some(parent.clone());
                    }
                    egui::ScrollArea::vertical().max_height(240.0).show(ui, |ui| {
                        if listing.folders.is_empty() && listing.error.is_none() {
                            ui.weak("No folders in here.");
                        }
                        for folder in &listing.folders {
                            let text = if folder.is_model {
                                format!("{}  · a model", folder.name)
                            } else {
                                folder.name.clone()
                            };
                            if ui.selectable_label(false, text).clicked() {
                                go_to = Some(join(&listing.path, &folder.name));
                            }
                        }
                    });
                    if listing.is_model {
                        ui.label("This folder holds a model.");
                    }
                }
            }
            ui.separator();
            ui.horizontal(|ui| {
                let here = self.listing.as_ref().filter(|l| l.error.is_none()).map(|l| l.path.clone());
                if ui.add_enabled(here.is_some(), egui::Button::new("Choose this folder")).clicked() {
                    chosen = here;
                }
                if ui
                    .button("System dialog…")
                    .on_hover_text("the desktop's own folder picker, where it has one")
                    .clicked()
                {
                    ctx.send(Command::Send(Request::ChooseModelFolder));
                }
                cancel = ui.button("Cancel").clicked();
            });
        });
        if let Some(path) = go_to {
            ctx.send(Command::Send(Request::ListFolder { path }));
        }
        if let Some(path) = chosen {
            ctx.draft.model = path;
            self.open = false;
        }
        if cancel || modal.should_close() {
            self.open = false;
        }
    }
}

/// `folder/name`, with the separator the path already uses.
fn join(folder: &str, name: &str) -> String {
    let separator = if folder.contains('\\') && !folder.contains('/') { '\\' } else { '/' };
    if folder.ends_with(separator) { format!("{folder}{name}") } else { format!("{folder}{separator}{name}") }
}
