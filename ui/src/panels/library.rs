//! `LibraryPanel`: search, and for each song listen, take its recipe into the composer, make a
//! variation (its recipe with a new seed), rename, export (float32 or 16-bit, to a folder the
//! settings keep) and delete (after a confirmation).

use super::{Command, Panel, PanelContext, choice_ui};
use crate::contract::{ExportFormat, Recipe, Request, SongEntry, SongId};

#[derive(Default)]
pub struct LibraryPanel {
    /// The songs matching `search`, newest first, as the engine last listed them.
    pub songs: Vec<SongEntry>,
    pub search: String,
    /// The song being renamed and the title typed so far.
    renaming: Option<Renaming>,
    /// The song whose Delete was pressed once.
    confirming_delete: Option<SongId>,
    /// A song whose recipe would replace a draft that holds text: asked first.
    replacing_draft: Option<SongEntry>,
}

/// A song being renamed.
struct Renaming {
    id: SongId,
    /// The title typed so far.
    title: String,
}

impl LibraryPanel {
    /// Loads a library song's recipe into the composer; a draft with text of its own that would
    /// be lost is asked about first.
    pub fn use_recipe(&mut self, song: &SongEntry, draft: &mut Recipe, keep_seed: &mut bool) {
        let draft_has_text = !draft.description.trim().is_empty() || !draft.lyrics.trim().is_empty();
        if draft_has_text && *draft != song.recipe {
            self.replacing_draft = Some(song.clone());
        } else {
            take_recipe(song, draft, keep_seed);
        }
    }

    /// The question before a song's recipe replaces the draft.
    fn replace_draft_ui(&mut self, ui: &mut egui::Ui, draft: &mut Recipe, keep_seed: &mut bool) {
        let Some(song) = &self.replacing_draft else { return };
        let mut answered = false;
        ui.horizontal_wrapped(|ui| {
            ui.label(format!(
                "Replace your draft with the recipe of \"{}\"? The draft's text would be lost.",
                song.title
            ));
            if ui.button("Replace the draft").clicked() {
                take_recipe(song, draft, keep_seed);
                answered = true;
            }
            if ui.button("Keep my draft").clicked() {
                answered = true;
            }
        });
        if answered {
            self.replacing_draft = None;
        }
    }

    /// The list: a heading, the search, the export settings and each song.
    fn songs_ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>) {
        ui.heading("Library");
        ui.horizontal(|ui| {
            let label = ui.label("Search library");
            if ui.text_edit_singleline(&mut self.search).labelled_by(label.id).changed() {
                ctx.send(Command::Send(Request::ListSongs { search: self.search.clone() }));
            }
        });
        // Where an export is a browser's download there is no folder to choose.
        let settings = &mut *ctx.settings;
        ui.horizontal_wrapped(|ui| {
            let label = if ctx.remote {
                ui.label("Export downloads")
            } else {
                let label = ui.label("Export to");
                let width = (ui.available_width() - 140.0).clamp(80.0, 280.0);
                ui.add(
                    egui::TextEdit::singleline(&mut settings.export_folder)
                        .hint_text("your Music folder")
                        .desired_width(width),
                )
                .labelled_by(label.id);
                ui.label("as")
            };
            choice_ui(
                ui,
                label.id,
                "export format",
                &mut settings.export_format,
                &[
                    (ExportFormat::Float32, "32-bit float"),
                    (ExportFormat::Pcm16, "16-bit PCM"),
                    (ExportFormat::Flac, "FLAC (24-bit)"),
                ],
            );
        });
        if self.songs.is_empty() {
            ui.label(if self.search.is_empty() { "No songs yet." } else { "No song matches." });
        }
        let songs = std::mem::take(&mut self.songs);
        ctx.landmarks.export = None;
        for (i, song) in songs.iter().enumerate() {
            ui.separator();
            self.song_ui(ui, ctx, song, i == 0);
        }
        self.songs = songs;
    }

    /// One song; `newest` for the first, whose Export button is a landmark.
    fn song_ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>, song: &SongEntry, newest: bool) {
        match &mut self.renaming {
            Some(renaming) if renaming.id == song.id => {
                let mut done = false;
                ui.horizontal(|ui| {
                    let label = ui.label("New title");
                    let edit = ui.text_edit_singleline(&mut renaming.title).labelled_by(label.id);
                    let enter = edit.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                    if ui.button("Save title").clicked() || enter {
                        let title = renaming.title.trim().into();
                        ctx.send(Command::Send(Request::RenameSong { id: song.id, title }));
                        done = true;
                    }
                    done |= ui.button("Keep title").clicked();
                });
                if done {
                    self.renaming = None;
                }
            }
            _ => {
                ui.strong(&song.title);
            }
        }
        ui.label(format!(
            "{:.1} s · seed {} · {} steps · {}",
            song.seconds,
            song.recipe.seed,
            song.recipe.steps,
            song.recipe.description.chars().take(80).collect::<String>()
        ));
        // While a song is being made, listening takes the player from it.
        let busy = ctx.running;
        ui.horizontal_wrapped(|ui| {
            let listen = ui.button("Listen");
            let hint = "the song being made goes on into the library; listen to it there when it is done";
            if (if busy { listen.on_hover_text(hint) } else { listen }).clicked() {
                ctx.send(Command::Send(Request::PlaySong { id: song.id }));
            }
            if ui.button("Use recipe").on_hover_text("load this song's recipe into the composer").clicked() {
                self.use_recipe(song, ctx.draft, &mut ctx.settings.keep_seed);
            }
            let hint = if busy {
                "the same recipe with a new seed, after the song being made"
            } else {
                "the same recipe with a new seed"
            };
            if ui.button("Variation").on_hover_text(hint).clicked() {
                ctx.send(Command::Variation(song.clone()));
            }
            if ui.button("Rename").clicked() {
                self.renaming = Some(Renaming { id: song.id, title: song.title.clone() });
            }
            let export = ui.button("Export");
            if newest {
                ctx.landmarks.export = Some(export.rect);
            }
            if export.clicked() {
                ctx.send(Command::Send(Request::ExportSong {
                    id: song.id,
                    folder: ctx.settings.export_folder.clone(),
                    format: ctx.settings.export_format,
                }));
            }
            if self.confirming_delete == Some(song.id) {
                if ui.button("Delete for good").clicked() {
                    ctx.send(Command::Send(Request::DeleteSong { id: song.id }));
                    self.confirming_delete = None;
                }
                if ui.button("Keep it").clicked() {
                    self.confirming_delete = None;
                }
            } else if ui.button("Delete").clicked() {
                self.confirming_delete = Some(song.id);
            }
        });
    }
}

impl Panel for LibraryPanel {
    /// The question before a recipe replaces the draft, then the list, which scrolls.
    fn ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>) {
        self.replace_draft_ui(ui, ctx.draft, &mut ctx.settings.keep_seed);
        egui::ScrollArea::vertical().id_salt("library").show(ui, |ui| self.songs_ui(ui, ctx));
    }
}

/// A song's recipe as the draft, its seed kept, so Generate makes that song again.
fn take_recipe(song: &SongEntry, draft: &mut Recipe, keep_seed: &mut bool) {
    *draft = song.recipe.clone();
    *keep_seed = true;
}
