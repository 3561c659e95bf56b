//! `ComposePanel`: the description and the lyrics, with tag buttons that keep the cursor in the
//! lyrics and a warning for text the model would drop.

use egui::Color32;

use super::{Panel, PanelContext};
use crate::lyrics::{TAGS, dropped_text, insert_tag};
use songloom_wire::notice::INSTRUMENTAL_LYRICS;

/// Points the left column takes besides the lyrics (banner, description, tags, Instrumental,
/// Generate, progress, parameters, model), about.
const LEFT_COLUMN_WITHOUT_LYRICS: f32 = 585.0;

#[derive(Default)]
pub struct ComposePanel {
    /// Where a tag goes: the Lyrics editor's cursor, as a byte offset.
    lyrics_cursor: usize,
    /// Set by a tag button: the Lyrics editor takes the focus back with its cursor here.
    refocus_lyrics: Option<usize>,
    /// The lyrics as they were when Instrumental was ticked, back when it is unticked.
    lyrics_before_instrumental: Option<String>,
}

impl Panel for ComposePanel {
    fn ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>) {
        let (draft, landmarks) = (&mut *ctx.draft, &mut *ctx.landmarks);
        let label = ui.label("Description");
        let description = ui
            .add(
                egui::TextEdit::multiline(&mut draft.description)
                    .hint_text("dreamy synth-pop, female vocals, 100 BPM")
                    .desired_rows(2)
                    .desired_width(f32::INFINITY),
            )
            .labelled_by(label.id);
        landmarks.description = Some(description.rect);
        ui.label("Lyrics");
        // The lyrics take the height the window has to spare: a whole song's words in view on a
        // tall screen, a few lines on a small one.
        let row_height = ui.text_style_height(&egui::TextStyle::Body);
        let spare_height = ui.ctx().content_rect().height() - LEFT_COLUMN_WITHOUT_LYRICS;
        let rows = ((spare_height / row_height) as usize).clamp(6, 40);
        let mut output = egui::TextEdit::multiline(&mut draft.lyrics)
            .id_salt("lyrics")
            .hint_text("[verse]\nfirst line\n[chorus]\n...")
            .desired_rows(rows)
            .desired_width(f32::INFINITY)
            .show(ui);
        output.response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::TextInput, true, "Lyrics editor"));
        landmarks.lyrics = Some(output.response.rect);
        // After a tag button: the focus back in the editor, the cursor after the tag, so the next
        // keystrokes land in the lyrics.
        if let Some(at) = self.refocus_lyrics.take() {
            output.response.request_focus();
            let chars = draft.lyrics[..at.min(draft.lyrics.len())].chars().count();
            let cursor = egui::text::CCursor::new(chars);
            output.state.cursor.set_char_range(Some(egui::text::CCursorRange::one(cursor)));
            output.state.store(ui.ctx(), output.response.id);
        } else if let Some(range) = output.cursor_range {
            let chars = range.primary.index.0;
            self.lyrics_cursor = draft.lyrics.char_indices().nth(chars).map_or(draft.lyrics.len(), |(i, _)| i);
        }
        // Below the editor, so Tab goes from the description straight to the lyrics.
        ui.horizontal_wrapped(|ui| {
            ui.label("Insert a tag:");
            for tag in TAGS {
                if ui.small_button(tag).clicked() {
                    let (text, cursor) = insert_tag(&draft.lyrics, self.lyrics_cursor, tag);
                    draft.lyrics = text;
                    self.lyrics_cursor = cursor;
                    self.refocus_lyrics = Some(cursor);
                }
            }
        });
        // Ticked, the lyrics become the tag the model knows for music without singing; what was
        // written comes back when it is unticked. Below the editor too, for Tab's sake.
        let mut instrumental = draft.lyrics.trim() == INSTRUMENTAL_LYRICS;
        let checkbox = ui
            .checkbox(&mut instrumental, "Instrumental (no singing)")
            .on_hover_text("The song is made without vocals: its lyrics are the tag [instrumental].");
        if checkbox.changed() {
            if instrumental {
                let written = std::mem::replace(&mut draft.lyrics, INSTRUMENTAL_LYRICS.to_string());
                self.lyrics_before_instrumental = Some(written).filter(|w| !w.trim().is_empty());
            } else {
                draft.lyrics = self.lyrics_before_instrumental.take().unwrap_or_default();
            }
        }
        for dropped in dropped_text(&draft.lyrics) {
            ui.colored_label(Color32::from_rgb(200, 120, 0), dropped.message());
        }
    }
}
