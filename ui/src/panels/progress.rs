//! `ProgressPanel`: Generate with its Takes (how many songs of the draft it makes at once) and
//! Cancel, the song being made in the listener's words (one bar
//! with the time left, the engine's figures in a details line), then the songs waiting their
//! turn, each removable.

use egui::Color32;

use super::{Command, Panel, PanelContext};
use crate::contract::MAX_TAKES;
use crate::progress::{Progress, in_words};

/// Points the progress band takes, whatever it shows: the bar and one line of details.
const PROGRESS_BAND: f32 = 44.0;

/// The progress panel; the job and the queue are the app's.
#[derive(Default)]
pub struct ProgressPanel;

impl Panel for ProgressPanel {
    fn ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>) {
        ui.horizontal(|ui| {
            let hint = if ctx.running { "Ctrl+Enter; waits its turn after the song being made" } else { "Ctrl+Enter" };
            let hint = ctx.generate_blocked.as_deref().unwrap_or(hint);
            let can_generate = ctx.draft_is_valid && ctx.generate_blocked.is_none();
            let generate = ui
                .add_enabled(can_generate, egui::Button::new("Generate"))
                .on_hover_text(hint)
                .on_disabled_hover_text(hint);
            ctx.landmarks.generate = Some(generate.rect);
            if generate.clicked() {
                ctx.send(Command::Generate);
            }
            let label = ui.label("Takes");
            let takes = ui
                .add(egui::DragValue::new(&mut ctx.settings.takes).range(1..=MAX_TAKES))
                .labelled_by(label.id)
                .on_hover_text("How many songs of the draft Generate makes at once: seeds the seed, the seed + 1, ...");
            ctx.landmarks.takes = Some(takes.rect);
            if ui.add_enabled(ctx.running, egui::Button::new("Cancel")).clicked() {
                ctx.send(Command::Cancel);
            }
        });
        // A band of fixed height, so nothing below it moves as the progress changes.
        let top = ui.cursor().top();
        if let Some(job) = ctx.job {
            progress_lines(ui, &job.progress, job.duration_s, ctx.now_s);
        }
        let used = ui.cursor().top() - top;
        ui.add_space((PROGRESS_BAND - used).max(0.0));
        let mut removed = None;
        for (place, waiting) in ctx.queue.iter().enumerate() {
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
            ctx.send(Command::Unqueue(id));
        }
    }
}

/// `p` of a song of `duration_s` seconds.
fn progress_lines(ui: &mut egui::Ui, p: &Progress, duration_s: f64, now: f64) {
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
        let first = timings.time_to_first_audio_s.map(|f| format!(", first audio after {f:.1} s")).unwrap_or_default();
        ui.label(format!("Finished: {:.1} s of audio in {}{first}", p.audio_s(), in_words(timings.total_s)));
        return;
    }
    let eta = p.eta_s(now).map(|e| format!(" · about {} left", in_words(e))).unwrap_or_default();
    ui.add(egui::ProgressBar::new(p.fraction() as f32).text(format!("{}{eta}", p.headline(duration_s))));
    // One line whatever the width (the whole of it on hover), so the band keeps its height.
    let details = p.details(now);
    let plan = p.plan.as_deref().map_or(String::new(), |plan| format!("\nPlan: {plan}"));
    ui.add(egui::Label::new(egui::RichText::new(&details).small()).truncate())
        .on_hover_text(format!("{details}{plan}"));
}
