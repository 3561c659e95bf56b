//! `ParametersPanel`: the song's length (typed as people write it, clamped visibly), seed, steps
//! and guidance, and on a local engine the device (those that cannot run here shown disabled with
//! their reason, the chosen one's advice beneath), precision, weights and the memory budget.

use egui::Color32;

use super::{Panel, PanelContext, choice_ui};
use crate::contract::{DeviceStatus, PRECISIONS, Recipe, WEIGHTS};
use crate::duration;

#[derive(Default)]
pub struct ParametersPanel {
    /// The device choices the engine offers, once it has said.
    pub devices: Vec<DeviceStatus>,
    /// The Duration field's text, the length it last showed, and what to say of what was typed.
    duration_text: String,
    duration_shown: Option<f64>,
    duration_note: Option<DurationNote>,
}

/// What the Duration field says of what was typed.
enum DurationNote {
    /// The length was taken clamped to a song's range: which length.
    Clamped(String),
    /// The text is no length: why (Generate waits for a good one).
    Invalid(String),
}

impl ParametersPanel {
    /// Whether the draft can be made: a length that parses.
    pub fn draft_is_valid(&self) -> bool {
        !matches!(self.duration_note, Some(DurationNote::Invalid(_)))
    }

    /// The length as text: `90`, `1:30`, `1m30s`, `2m`; clamped to 1 s..6:00 with a note that says
    /// so, and an error line for text that is no length (Generate waits for a good one).
    fn duration_ui(&mut self, ui: &mut egui::Ui, label: egui::Id, draft: &mut Recipe) {
        if self.duration_shown != Some(draft.duration_s) {
            self.duration_text = duration::format_duration(draft.duration_s);
            self.duration_shown = Some(draft.duration_s);
            self.duration_note = None;
        }
        ui.horizontal(|ui| {
            let edit = egui::TextEdit::singleline(&mut self.duration_text).desired_width(70.0).hint_text("1:30");
            if ui.add(edit).labelled_by(label).changed() {
                self.duration_note = match duration::parse_duration(&self.duration_text) {
                    Ok(seconds) => {
                        let taken = seconds.clamp(1.0, duration::MAX_SECONDS);
                        draft.duration_s = taken;
                        self.duration_shown = Some(taken);
                        (taken != seconds).then(|| {
                            let length = duration::format_duration(taken);
                            DurationNote::Clamped(format!("taken as {length}: a song is 1 s to 6:00"))
                        })
                    }
                    Err(why) => Some(DurationNote::Invalid(why)),
                };
            }
            match &self.duration_note {
                Some(DurationNote::Clamped(note)) => {
                    ui.small(note);
                }
                Some(DurationNote::Invalid(why)) => {
                    ui.colored_label(Color32::LIGHT_RED, why);
                }
                None => {}
            }
        });
    }
}

impl ParametersPanel {
    /// The device (with its advice), precision, weights and memory budget: grid rows.
    fn engine_settings_ui(&self, ui: &mut egui::Ui, draft: &mut Recipe) {
        let label = ui.label("Device");
        device_choice_ui(ui, label.id, &mut draft.device, &self.devices);
        ui.end_row();
        let chosen = self.devices.iter().find(|d| d.name == draft.device);
        if let Some(advice) = chosen.and_then(|d| d.advice.as_ref()) {
            ui.label("");
            ui.add(egui::Label::new(egui::RichText::new(advice).small()).wrap());
            ui.end_row();
        }
        let label = ui.label("Precision");
        text_choice_ui(ui, label.id, "precision", &mut draft.precision, &PRECISIONS);
        ui.end_row();
        let label = ui.label("Weights");
        text_choice_ui(ui, label.id, "weights", &mut draft.weights, &WEIGHTS).on_hover_text(
            "The language model's weights: 8bit and 4bit take less GPU memory (auto: the most exact that fits)",
        );
        ui.end_row();
        let label = ui.label("GPU memory (GB)");
        ui.horizontal(|ui| {
            let mut limited = draft.max_memory_gb.is_some();
            ui.checkbox(&mut limited, "at most").labelled_by(label.id);
            if limited {
                let gb = draft.max_memory_gb.get_or_insert(12.0);
                ui.add(egui::DragValue::new(gb).range(1.0..=1024.0).speed(0.5).max_decimals(1)).labelled_by(label.id);
            } else {
                draft.max_memory_gb = None;
                ui.label("what the device has free");
            }
        });
        ui.end_row();
    }
}

impl Panel for ParametersPanel {
    /// On a remote engine the server decides the device and what goes with it.
    fn ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>) {
        let (draft, remote, now_s) = (&mut *ctx.draft, ctx.remote, ctx.now_s);
        let keep_seed = &mut ctx.settings.keep_seed;
        egui::Grid::new("parameters").num_columns(2).show(ui, |ui| {
            let label = ui.label("Duration");
            self.duration_ui(ui, label.id, draft);
            ui.end_row();
            let label = ui.label("Seed");
            ui.horizontal(|ui| {
                // A seed typed in is one to keep: the next Generate uses it.
                if ui.add(egui::DragValue::new(&mut draft.seed)).labelled_by(label.id).changed() {
                    *keep_seed = true;
                }
                ui.checkbox(keep_seed, "Keep seed").on_hover_text(
                    "Generate uses this seed again (the same recipe makes the same song); \
                     without it, every Generate draws a new one",
                );
                if ui.button("New seed").clicked() {
                    draft.seed = crate::app::fresh_seed(now_s, draft.seed);
                }
            });
            ui.end_row();
        });
        // The engine's settings, folded: a first song needs none of them.
        let device = if remote { String::new() } else { format!(", {}", draft.device) };
        let summary = format!("Advanced: {} steps, guidance {:.2}{device}", draft.steps, draft.guidance);
        egui::CollapsingHeader::new(summary).id_salt("advanced").show(ui, |ui| {
            egui::Grid::new("advanced parameters").num_columns(2).show(ui, |ui| {
                let label = ui.label("Steps");
                ui.add(egui::DragValue::new(&mut draft.steps).range(1..=100)).labelled_by(label.id);
                ui.end_row();
                let label = ui.label("Guidance");
                ui.add(egui::DragValue::new(&mut draft.guidance).range(0.0..=20.0).speed(0.05).max_decimals(2))
                    .labelled_by(label.id)
                    .on_hover_text("How closely the music follows the description (the model's own: 1.7)");
                ui.end_row();
                if !remote {
                    self.engine_settings_ui(ui, draft);
                }
            });
        });
        if remote {
            ui.small("The device, precision, weights, memory and model are the server's:");
        }
    }
}

/// The device drop-down: each choice the engine offers, those that cannot run here disabled with
/// their reason; until the engine has said, the draft's choice alone.
fn device_choice_ui(
    ui: &mut egui::Ui,
    label: egui::Id,
    value: &mut String,
    devices: &[DeviceStatus],
) -> egui::Response {
    egui::ComboBox::from_id_salt("device")
        .selected_text(value.as_str())
        .show_ui(ui, |ui| {
            for device in devices {
                let enabled = device.available.is_ok();
                let response = ui.add_enabled(enabled, egui::Button::selectable(*value == device.name, &device.name));
                let response = match &device.available {
                    Ok(what) => response.on_hover_text(what),
                    Err(why) => response.on_disabled_hover_text(format!("not available: {why}")),
                };
                if response.clicked() {
                    *value = device.name.clone();
                }
            }
        })
        .response
        .labelled_by(label)
}

fn text_choice_ui(
    ui: &mut egui::Ui,
    label: egui::Id,
    id: &str,
    value: &mut String,
    options: &[&str],
) -> egui::Response {
    let options: Vec<(String, &str)> = options.iter().map(|o| (o.to_string(), *o)).collect();
    choice_ui(ui, label, id, value, &options)
}
