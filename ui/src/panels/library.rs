//! `LibraryPanel`: search, and for each song listen, take its recipe into the composer, make a
//! variation (its recipe with a new seed), rename, export (float32 or 16-bit, to a folder the
//! settings keep) and delete (after a confirmation).

use crate::app::Settings;
use crate::contract::{ExportFormat, Request, SongEntry, SongId};
use crate::panels::choice_ui;

/// What the user asked for in the panel.
pub enum Action {
    Send(Request),
    /// Load this song's recipe into the composer.
    UseRecipe(SongEntry),
    /// Make this song's recipe again with a new seed, the draft untouched.
    Variation(SongEntry),
}

#[derive(Default)]
pub struct LibraryPanel {
    /// The songs matching `search`, newest first, as the engine last listed them.
    pub songs: Vec<SongEntry>,
    pub search: String,
    /// The song being renamed and the title typed so far.
    renaming: Option<(SongId, String)>,
    /// The song whose Delete was pressed once.
    confirming_delete: Option<SongId>,
    /// Where the newest song's Export button was last drawn ([`Landmarks`](crate::app::Landmarks)).
    pub newest_export: Option<egui::Rect>,
}

impl LibraryPanel {
    /// Draws the panel; `busy` while a song is being made (listening takes the player from it);
    /// `downloads` where an export is a browser's download (no folder to choose).
    pub fn ui(&mut self, ui: &mut egui::Ui, settings: &mut Settings, busy: bool, downloads: bool) -> Option<Action> {
        let mut action = None;
        ui.heading("Library");
        ui.horizontal(|ui| {
            let label = ui.label("Search library");
            if ui.text_edit_singleline(&mut self.search).labelled_by(label.id).changed() {
                action = Some(Action::Send(Request::ListSongs { search: self.search.clone() }));
            }
        });
        ui.horizontal_wrapped(|ui| {
            let label = if downloads {
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
        self.newest_export = None;
        for (i, song) in songs.iter().enumerate() {
            ui.separator();
            if let Some(a) = self.song_ui(ui, song, settings, busy, i == 0) {
                action = Some(a);
            }
        }
        self.songs = songs;
        action
    }

    fn song_ui(
        &mut self,
        ui: &mut egui::Ui,
        song: &SongEntry,
        settings: &Settings,
        busy: bool,
        newest: bool,
    ) -> Option<Action> {
        let mut action = None;
        let renaming = &mut self.renaming;
        match renaming {
            Some((id, title)) if *id == song.id => {
                let mut done = false;
                ui.horizontal(|ui| {
                    let label = ui.label("New title");
                    let edit = ui.text_edit_singleline(title).labelled_by(label.id);
                    let enter = edit.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                    if ui.button("Save title").clicked() || enter {
                        action = Some(Action::Send(Request::RenameSong { id: song.id, title: title.trim().into() }));
                    }
                    done = ui.button("Keep title").clicked();
                });
                if done || action.is_some() {
                    *renaming = None;
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
        ui.horizontal_wrapped(|ui| {
            let listen = ui.button("Listen");
            let hint = "the song being made goes on into the library; listen to it there when it is done";
            if (if busy { listen.on_hover_text(hint) } else { listen }).clicked() {
                action = Some(Action::Send(Request::PlaySong { id: song.id }));
            }
            if ui.button("Use recipe").on_hover_text("load this song's recipe into the composer").clicked() {
                action = Some(Action::UseRecipe(song.clone()));
            }
            let hint = if busy {
                "the same recipe with a new seed, after the song being made"
            } else {
                "the same recipe with a new seed"
            };
            if ui.button("Variation").on_hover_text(hint).clicked() {
                action = Some(Action::Variation(song.clone()));
            }
            if ui.button("Rename").clicked() {
                self.renaming = Some((song.id, song.title.clone()));
            }
            let export = ui.button("Export");
            if newest {
                self.newest_export = Some(export.rect);
            }
            if export.clicked() {
                action = Some(Action::Send(Request::ExportSong {
                    id: song.id,
                    folder: settings.export_folder.clone(),
                    format: settings.export_format,
                }));
            }
            if self.confirming_delete == Some(song.id) {
                if ui.button("Delete for good").clicked() {
                    action = Some(Action::Send(Request::DeleteSong { id: song.id }));
                    self.confirming_delete = None;
                }
                if ui.button("Keep it").clicked() {
                    self.confirming_delete = None;
                }
            } else if ui.button("Delete").clicked() {
                self.confirming_delete = Some(song.id);
            }
        });
        action
    }
}
