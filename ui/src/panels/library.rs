//! `LibraryPanel`: search, and for each song (its length, when it was made, its recipe's seed and
//! steps) listen, take its recipe into the composer, make a variation (its recipe with a new
//! seed), rename, export (float32, 16-bit or FLAC, to a folder the settings keep) and delete, with
//! an Undo in the row's place for [`UNDO_S`] before the song is really deleted. The versions of a
//! song (made by its edits) stand indented under it, each with its edit's name.

use super::{Command, Panel, PanelContext, choice_ui};
use crate::contract::{ExportFormat, Recipe, Request, SongEntry, SongId};
use crate::edits::{edit_name, library_rows};
use crate::progress::clock;

/// Seconds a deleted song can be brought back before the engine deletes it.
pub const UNDO_S: f64 = 10.0;

#[derive(Default)]
pub struct LibraryPanel {
    /// The songs matching `search`, newest first, as the engine last listed them.
    pub songs: Vec<SongEntry>,
    pub search: String,
    /// The song being renamed and the title typed so far.
    renaming: Option<Renaming>,
    /// The song deleted last, hidden from the list while it can be brought back.
    pending_delete: Option<PendingDelete>,
    /// A song whose recipe would replace a draft that holds text: asked first.
    replacing_draft: Option<SongEntry>,
}

/// A deleted song that Undo still brings back.
struct PendingDelete {
    id: SongId,
    title: String,
    /// When Delete was pressed, on the window's clock.
    at_s: f64,
}

/// A song being renamed.
struct Renaming {
    id: SongId,
    /// The title typed so far.
    title: String,
    /// Whether the field is still to take the focus (the frame Rename was pressed).
    focus: bool,
}

impl LibraryPanel {
    /// The song deleted last, for the engine to delete now (its Undo is over: the time is up, or
    /// the window closes).
    pub fn take_pending_delete(&mut self) -> Option<SongId> {
        self.pending_delete.take().map(|p| p.id)
    }

    /// Deletes `song` with an Undo in its row for [`UNDO_S`] (from `now_s`). One song waits for
    /// its Undo at a time: the one before, returned, is for the engine to delete now.
    pub fn delete_with_undo(&mut self, song: &SongEntry, now_s: f64) -> Option<SongId> {
        let earlier = self.take_pending_delete().filter(|&id| id != song.id);
        self.pending_delete = Some(PendingDelete { id: song.id, title: song.title.clone(), at_s: now_s });
        earlier
    }

    /// Seconds until the song deleted last is deleted for good, while it can be brought back.
    pub fn undo_left_s(&self, now_s: f64) -> Option<f64> {
        self.pending_delete.as_ref().map(|p| UNDO_S - (now_s - p.at_s))
    }

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

    /// The question before a song's recipe replaces the draft, over the window (the list stays
    /// where it is).
    fn replace_draft_ui(&mut self, ui: &mut egui::Ui, draft: &mut Recipe, keep_seed: &mut bool) {
        let Some(song) = &self.replacing_draft else { return };
        let mut answered = false;
        let modal = egui::Modal::new(egui::Id::unique("replace-draft")).show(ui.ctx(), |ui| {
            ui.set_max_width(420.0);
            ui.label(format!(
                "Replace your draft with the recipe of \u{201c}{}\u{201d}? The draft's text would be lost.",
                song.title
            ));
            ui.horizontal(|ui| {
                if ui.button("Replace the draft").clicked() {
                    take_recipe(song, draft, keep_seed);
                    answered = true;
                }
                if ui.button("Keep my draft").clicked() {
                    answered = true;
                }
            });
        });
        if answered || modal.should_close() {
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
        if let Some(pending) = self.pending_delete.as_ref().filter(|p| !songs.iter().any(|s| s.id == p.id)) {
            // The list no longer holds it (a new search): its Undo goes with it.
            let id = pending.id;
            self.pending_delete = None;
            ctx.send(Command::Send(Request::DeleteSong { id }));
        }
        for row in library_rows(&songs) {
            let song = &songs[row.index];
            ui.separator();
            indented_ui(ui, row.depth, song.id, |ui| {
                if self.pending_delete.as_ref().is_some_and(|p| p.id == song.id) {
                    self.deleted_row_ui(ui);
                } else {
                    self.song_ui(ui, ctx, song, row.index == 0);
                }
            });
        }
        self.songs = songs;
    }

    /// A deleted song's row while it can be brought back: as tall as a song's, so nothing moves.
    fn deleted_row_ui(&mut self, ui: &mut egui::Ui) {
        let Some(pending) = &self.pending_delete else { return };
        ui.label(format!("\u{201c}{}\u{201d} is deleted.", pending.title));
        let mut undo = false;
        ui.horizontal(|ui| {
            undo = ui.button("Undo").clicked();
        });
        ui.label("");
        if undo {
            self.pending_delete = None;
        }
    }

    /// One song; `newest` for the first, whose Export button is a landmark.
    fn song_ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>, song: &SongEntry, newest: bool) {
        match &mut self.renaming {
            Some(renaming) if renaming.id == song.id => {
                let mut done = false;
                ui.horizontal(|ui| {
                    let label = ui.label("New title");
                    let edit = ui.text_edit_singleline(&mut renaming.title).labelled_by(label.id);
                    if std::mem::take(&mut renaming.focus) {
                        edit.request_focus();
                    }
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
            _ => match &song.recipe.edit {
                // A version: its edit's name after its title.
                Some(edit) => {
                    ui.horizontal_wrapped(|ui| {
                        ui.strong(&song.title);
                        ui.weak(edit_name(&edit.edit));
                    });
                }
                None => {
                    ui.strong(&song.title);
                }
            },
        }
        let made = date_time(song.created_unix + ctx.utc_offset_s);
        let mut details = format!("{} · {made} · seed {}", clock(song.seconds), song.recipe.seed);
        // The description when the title is not it already (a renamed song).
        let description = song.recipe.description.trim();
        if !description.is_empty() && !song.title.starts_with(description.chars().take(40).collect::<String>().as_str())
        {
            details.push_str(" · ");
            details.extend(description.chars().take(80));
        }
        ui.add(egui::Label::new(egui::RichText::new(details).weak()).truncate());
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
                self.renaming = Some(Renaming { id: song.id, title: song.title.clone(), focus: true });
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
            if ui.button("Delete").on_hover_text("Undo brings it back for a few seconds").clicked()
                && let Some(earlier) = self.delete_with_undo(song, ctx.now_s)
            {
                ctx.send(Command::Send(Request::DeleteSong { id: earlier }));
            }
        });
    }
}

impl Panel for LibraryPanel {
    /// The question before a recipe replaces the draft, then the list, which scrolls.
    fn ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>) {
        self.replace_draft_ui(ui, ctx.draft, &mut ctx.settings.keep_seed);
        if self.undo_left_s(ctx.now_s).is_some_and(|left| left <= 0.0)
            && let Some(id) = self.take_pending_delete()
        {
            ctx.send(Command::Send(Request::DeleteSong { id }));
        }
        egui::ScrollArea::vertical().id_salt("library").show(ui, |ui| self.songs_ui(ui, ctx));
    }
}

/// Versions shown nested below their song; a version of a version of a version... stops moving
/// right at the fourth level, so the row keeps its room.
fn indented_ui(ui: &mut egui::Ui, depth: usize, song: SongId, add_contents: impl FnOnce(&mut egui::Ui)) {
    if depth == 0 {
        add_contents(ui);
    } else {
        ui.indent(("version", song, depth), |ui| indented_ui(ui, depth.min(4) - 1, song, add_contents));
    }
}

/// A song's recipe as the draft, its seed kept, so Generate makes that song again.
fn take_recipe(song: &SongEntry, draft: &mut Recipe, keep_seed: &mut bool) {
    *draft = song.recipe.clone();
    *keep_seed = true;
}

/// `4 Dec 2026, 14:03` for seconds since 1970 on the user's clock.
fn date_time(local_s: i64) -> String {
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let (days, second) = (local_s.div_euclid(86_400), local_s.rem_euclid(86_400));
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{day} {} {year}, {:02}:{:02}", MONTHS[(month - 1) as usize], second / 3600, second % 3600 / 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_read_as_a_calendar_does() {
        assert_eq!(date_time(0), "1 Jan 1970, 00:00");
        assert_eq!(date_time(1_796_386_980), "4 Dec 2026, 12:23");
        assert_eq!(date_time(951_782_400), "29 Feb 2000, 00:00");
        assert_eq!(date_time(-60), "31 Dec 1969, 23:59");
        assert_eq!((clock(7.98), clock(90.4)), ("0:08".to_string(), "1:30".to_string()));
    }
}
