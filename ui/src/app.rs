//! `SongloomApp`: the window's contents. Compose (description, lyrics with tag help), parameters,
//! Generate/Cancel, per-stage progress with ETA and time to first audio, and the waveform as it
//! grows. It owns no thread, file or audio device: everything goes through an [`Engine`].

use egui::{Color32, Sense, Stroke, Vec2};

use crate::contract::{Engine, EngineEvent, JobId, Recipe, Request};
use crate::lyrics::{TAGS, dropped_text, insert_tag};
use crate::progress::Progress;

/// The job in the window: its progress and the audio it has made so far.
pub struct Job {
    pub id: JobId,
    pub progress: Progress,
    /// Interleaved stereo.
    pub audio: Vec<f32>,
    pub sample_rate: u32,
}

pub struct SongloomApp<E: Engine> {
    engine: E,
    /// The recipe being written; the shell persists it.
    pub draft: Recipe,
    pub job: Option<Job>,
    next_job: JobId,
    lyrics_cursor: usize,
}

impl<E: Engine> SongloomApp<E> {
    pub fn new(engine: E, draft: Recipe) -> Self {
        SongloomApp { engine, draft, job: None, next_job: 1, lyrics_cursor: 0 }
    }

    pub fn engine(&self) -> &E {
        &self.engine
    }

    pub fn is_running(&self) -> bool {
        self.job.as_ref().is_some_and(|j| !j.progress.is_done())
    }

    /// Starts a song from the draft.
    pub fn generate(&mut self, now_s: f64) {
        if self.is_running() {
            return;
        }
        let id = self.next_job;
        self.next_job += 1;
        self.job = Some(Job { id, progress: Progress::new(now_s), audio: Vec::new(), sample_rate: 44100 });
        self.engine.send(Request::Generate { job: id, recipe: self.draft.clone() });
    }

    pub fn cancel(&mut self) {
        if let Some(job) = &self.job
            && !job.progress.is_done()
        {
            self.engine.send(Request::Cancel { job: job.id });
        }
    }

    /// Takes the engine's events for the current job.
    pub fn pump(&mut self, now_s: f64) {
        for event in self.engine.poll() {
            let Some(job) = self.job.as_mut().filter(|j| j.id == event.job()) else { continue };
            if let EngineEvent::Audio { samples, sample_rate, .. } = &event {
                job.audio.extend_from_slice(samples);
                job.sample_rate = *sample_rate;
            }
            job.progress.apply(&event, now_s);
        }
    }

    pub fn ui(&mut self, ui: &mut egui::Ui) {
        let now = ui.input(|i| i.time);
        self.pump(now);
        if ui.input_mut(|i| i.consume_key(egui::Modifiers::COMMAND, egui::Key::Enter)) {
            self.generate(now);
        }
        ui.heading("Songloom");
        self.compose_ui(ui);
        ui.separator();
        self.parameters_ui(ui);
        ui.separator();
        ui.horizontal(|ui| {
            let running = self.is_running();
            if ui.add_enabled(!running, egui::Button::new("Generate")).on_hover_text("Ctrl+Enter").clicked() {
                self.generate(now);
            }
            if ui.add_enabled(running, egui::Button::new("Cancel")).clicked() {
                self.cancel();
            }
        });
        self.progress_ui(ui, now);
        if self.is_running() {
            ui.ctx().request_repaint_after(std::time::Duration::from_millis(50));
        }
    }

    fn compose_ui(&mut self, ui: &mut egui::Ui) {
        let label = ui.label("Description");
        ui.add(
            egui::TextEdit::multiline(&mut self.draft.description)
                .hint_text("dreamy synth-pop, female vocals, 100 BPM")
                .desired_rows(2)
                .desired_width(f32::INFINITY),
        )
        .labelled_by(label.id);
        ui.horizontal_wrapped(|ui| {
            let label = ui.label("Lyrics");
            for tag in TAGS {
                if ui.small_button(tag).clicked() {
                    let (text, cursor) = insert_tag(&self.draft.lyrics, self.lyrics_cursor, tag);
                    self.draft.lyrics = text;
                    self.lyrics_cursor = cursor;
                }
            }
            label
        });
        let output = egui::TextEdit::multiline(&mut self.draft.lyrics)
            .hint_text("[verse]\nfirst line\n[chorus]\n...")
            .desired_rows(8)
            .desired_width(f32::INFINITY)
            .show(ui);
        output.response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::TextInput, true, "Lyrics editor"));
        if let Some(range) = output.cursor_range {
            let chars = range.primary.index.0;
            self.lyrics_cursor =
                self.draft.lyrics.char_indices().nth(chars).map_or(self.draft.lyrics.len(), |(i, _)| i);
        }
        for dropped in dropped_text(&self.draft.lyrics) {
            ui.colored_label(
                Color32::from_rgb(200, 120, 0),
                format!(
                    "Line {}: \"{}\" after {} is dropped by the model; put it on its own line.",
                    dropped.line, dropped.dropped, dropped.tags
                ),
            );
        }
    }

    fn parameters_ui(&mut self, ui: &mut egui::Ui) {
        egui::Grid::new("parameters").num_columns(2).show(ui, |ui| {
            let label = ui.label("Duration (s)");
            ui.add(egui::DragValue::new(&mut self.draft.duration_s).range(1.0..=360.0).speed(1.0))
                .labelled_by(label.id);
            ui.end_row();
            let label = ui.label("Seed");
            ui.horizontal(|ui| {
                ui.add(egui::DragValue::new(&mut self.draft.seed)).labelled_by(label.id);
                if ui.button("New seed").clicked() {
                    self.draft.seed = ui.input(|i| (i.time * 1e6) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 16;
                }
            });
            ui.end_row();
            let label = ui.label("Steps");
            ui.add(egui::DragValue::new(&mut self.draft.steps).range(1..=100)).labelled_by(label.id);
            ui.end_row();
            let label = ui.label("Device");
            choice_ui(ui, label.id, "device", &mut self.draft.device, &["auto", "cpu", "cuda"]);
            ui.end_row();
            let label = ui.label("Precision");
            choice_ui(ui, label.id, "precision", &mut self.draft.precision, &["reference", "tf32"]);
            ui.end_row();
            let label = ui.label("Model");
            ui.add(egui::TextEdit::singleline(&mut self.draft.model).hint_text("embedded test model"))
                .labelled_by(label.id);
            ui.end_row();
        });
    }

    fn progress_ui(&self, ui: &mut egui::Ui, now: f64) {
        let Some(job) = &self.job else { return };
        let p = &job.progress;
        let (done, total) = p.frames;
        ui.add(
            egui::ProgressBar::new(if total == 0 { 0.0 } else { done as f32 / total as f32 })
                .text(format!("AR frames {done} / {total}")),
        );
        let denoise = match p.denoise {
            Some((window, windows, step, steps)) => {
                format!("DiT window {} / {windows}, step {step} / {steps}", window + 1)
            }
            None => "DiT waiting for frames".to_string(),
        };
        ui.add(egui::ProgressBar::new(p.fraction() as f32).text(denoise));
        ui.horizontal(|ui| {
            let elapsed = p.finished.as_ref().map_or(now - p.started_s, |t| t.total_s);
            ui.label(format!("Elapsed {elapsed:.1} s"));
            if let Some(eta) = p.eta_s(now) {
                ui.label(format!("ETA {eta:.0} s"));
            }
            if let Some(first) = p.first_audio_s {
                ui.label(format!("First audio after {first:.1} s"));
            }
        });
        if let Some(error) = &p.error {
            ui.colored_label(Color32::LIGHT_RED, error);
        } else if p.finished.is_some() {
            ui.label(format!("Finished: {:.1} s of audio", job.audio.len() as f64 / 2.0 / job.sample_rate as f64));
        }
        waveform_ui(ui, &job.audio);
    }
}

/// A drop-down of `options` for `value`, named by the label `label`.
fn choice_ui(ui: &mut egui::Ui, label: egui::Id, id: &str, value: &mut String, options: &[&str]) -> egui::Response {
    egui::ComboBox::from_id_salt(id)
        .selected_text(value.as_str())
        .show_ui(ui, |ui| {
            for option in options {
                ui.selectable_value(value, option.to_string(), *option);
            }
        })
        .response
        .labelled_by(label)
}

/// The song so far, as min/max bars per pixel column of the mixed-down signal.
pub fn waveform_ui(ui: &mut egui::Ui, interleaved: &[f32]) -> egui::Response {
    let (rect, response) = ui.allocate_exact_size(Vec2::new(ui.available_width(), 80.0), Sense::hover());
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 4.0, ui.visuals().extreme_bg_color);
    let frames = interleaved.len() / 2;
    let columns = rect.width().max(1.0) as usize;
    if frames > 0 {
        let per_column = frames.div_ceil(columns).max(1);
        let stroke = Stroke::new(1.0, ui.visuals().selection.bg_fill);
        for (c, chunk) in interleaved.chunks(2 * per_column).enumerate() {
            let (lo, hi) = chunk
                .chunks(2)
                .map(|s| 0.5 * (s[0] + s.get(1).copied().unwrap_or(0.0)))
                .fold((0.0f32, 0.0f32), |(lo, hi), v| (lo.min(v), hi.max(v)));
            let x = rect.left() + c as f32;
            let y = |v: f32| rect.center().y - v.clamp(-1.0, 1.0) * rect.height() * 0.5;
            painter.line_segment([egui::pos2(x, y(hi)), egui::pos2(x, y(lo))], stroke);
        }
    }
    response.on_hover_text(format!("{:.1} s", frames as f64 / 44100.0))
}
