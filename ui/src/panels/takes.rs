//! `TakesPanel`: a row for each take of a recipe made together, under the progress: which take and
//! its seed, its own progress (or how it ended), and its buttons: Cancel while it is made; once it
//! is, Play (from the library), Keep (the row goes, the song stays) and Discard (the song is
//! deleted, with the library's Undo); Dismiss for one that failed or was cancelled.

use egui::Color32;

use super::{Command, Panel, PanelContext};
use crate::contract::Request;
use crate::progress::{clock, in_words};
use crate::state::Take;

/// The takes panel; the takes are the app's.
#[derive(Default)]
pub struct TakesPanel;

impl Panel for TakesPanel {
    fn ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>) {
        ctx.landmarks.take_buttons.clear();
        if ctx.takes.is_empty() {
            return;
        }
        ui.add_space(4.0);
        ui.strong("Takes");
        let mut commands = Vec::new();
        let buttons = &mut ctx.landmarks.take_buttons;
        for take in ctx.takes {
            ui.push_id(("take", take.job), |ui| take_ui(ui, take, ctx.now_s, &mut commands, buttons));
        }
        for command in commands {
            ctx.send(command);
        }
    }
}

/// A button named `label` for a screen reader and a test (several rows show the same word).
fn named_button(ui: &mut egui::Ui, enabled: bool, text: &str, label: String) -> egui::Response {
    let button = ui.add_enabled(enabled, egui::Button::new(text).small());
    button.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Button, enabled, &label));
    button
}

/// One take's row: its name and seed, its progress or end, and its buttons (Keep and Discard
/// recorded in `buttons`).
fn take_ui(
    ui: &mut egui::Ui,
    take: &Take,
    now_s: f64,
    commands: &mut Vec<Command>,
    buttons: &mut Vec<(String, egui::Rect)>,
) {
    let n = take.number;
    let p = &take.progress;
    ui.horizontal(|ui| {
        ui.label(format!("Take {n} · seed {}", take.seed));
        if !p.is_done() {
            let eta = p.eta_s(now_s).map(|e| format!(" · about {} left", in_words(e))).unwrap_or_default();
            let bar = egui::ProgressBar::new(p.fraction() as f32)
                .desired_width((ui.available_width() - 80.0).clamp(60.0, 320.0))
                .text(format!("{}{eta}", p.headline(take.duration_s)));
            ui.add(bar);
            if named_button(ui, true, "Cancel", format!("Cancel take {n}")).clicked() {
                commands.push(Command::CancelTake(take.job));
            }
            return;
        }
        if let Some(error) = &p.error {
            let why = if error == "cancelled" { "Cancelled: nothing was kept.".to_string() } else { error.clone() };
            ui.colored_label(Color32::LIGHT_RED, why);
            if named_button(ui, true, "Dismiss", format!("Dismiss take {n}")).clicked() {
                commands.push(Command::KeepTake(take.job));
            }
            return;
        }
        let length = take.song.as_ref().map_or(p.audio_s(), |song| song.seconds);
        ui.label(format!("Finished: {}", clock(length)));
        let song = take.song.as_ref();
        let play = named_button(ui, song.is_some(), "Play", format!("Play take {n}"))
            .on_disabled_hover_text("It plays once it is in the library");
        if let Some(song) = song.filter(|_| play.clicked()) {
            commands.push(Command::Send(Request::PlaySong { id: song.id }));
        }
        let keep = named_button(ui, true, "Keep", format!("Keep take {n}")).on_hover_text("It stays in the library");
        buttons.push((format!("keep_take_{n}"), keep.rect));
        if keep.clicked() {
            commands.push(Command::KeepTake(take.job));
        }
        let discard = named_button(ui, song.is_some(), "Discard", format!("Discard take {n}"))
            .on_hover_text("Deletes it from the library (Undo there brings it back for a few seconds)");
        buttons.push((format!("discard_take_{n}"), discard.rect));
        if discard.clicked() {
            commands.push(Command::DiscardTake(take.job));
        }
    });
}
