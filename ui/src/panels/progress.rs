//! `ProgressPanel`: the song being made, in the listener's words (one bar with the time left, the
//! engine's figures in a details line), then the songs waiting their turn, each removable.

use egui::Color32;

use crate::app::{Job, Queued};
use crate::contract::JobId;
use crate::progress::in_words;

/// Points the progress band takes, whatever it shows: the bar and one line of details.
const PROGRESS_BAND: f32 = 44.0;

/// The progress panel; the job and the queue are the app's.
pub struct ProgressPanel;

impl ProgressPanel {
    /// Draws the job's progress and the queue; returns the waiting job the user removed.
    pub fn ui(ui: &mut egui::Ui, job: Option<&Job>, queue: &[Queued], now: f64) -> Option<JobId> {
        // A band of fixed height, so nothing below it moves as the progress changes.
        let top = ui.cursor().top();
        if let Some(job) = job {
            progress_lines(ui, job, now);
        }
        let used = ui.cursor().top() - top;
        ui.add_space((PROGRESS_BAND - used).max(0.0));
        let mut removed = None;
        for (place, waiting) in queue.iter().enumerate() {
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
        removed
    }
}

fn progress_lines(ui: &mut egui::Ui, job: &Job, now: f64) {
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
        let first = timings.time_to_first_audio_s.map(|f| format!(", first audio after {f:.1} s")).unwrap_or_default();
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
