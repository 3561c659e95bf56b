//! `PlayerPanel`: what is loaded, play/pause, the playhead's time, a level meter, the volume,
//! what playback waits for (a song being made starts once the rest can play through; a song that
//! caught up with its making waits for the next part), and the waveform as it grows on a timeline
//! as long as the song asked for, with a time axis, the playhead drawn on it and click-to-seek.

use egui::{Color32, Sense, Stroke, Vec2};

use super::{Command, Panel, PanelContext};
use crate::contract::Request;
use crate::progress::{clock, in_words};

/// The player panel; it keeps nothing of its own (the track and the playback are the app's and
/// the engine's).
#[derive(Default)]
pub struct PlayerPanel;

impl Panel for PlayerPanel {
    fn ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>) {
        let Some(track) = ctx.track else {
            ui.label("Nothing to play yet: generate a song, or listen to one from the library.");
            return;
        };
        let playback = ctx.playback;
        let rate = track.sample_rate.max(1) as f64;
        let frames = track.audio.len() / 2;
        // While a song is made, the timeline is as long as the song asked for, the made part filled.
        let length = track.expected_s.map_or(frames, |s| ((s * rate) as usize).max(frames));
        ui.add(egui::Label::new(egui::RichText::new(&track.title).strong()).truncate());
        ui.horizontal(|ui| {
            let label = if playback.playing { "Pause" } else { "Play" };
            let enabled = playback.unavailable.is_none() && frames > 0;
            if ui.add_enabled(enabled, egui::Button::new(label)).on_hover_text("Space").clicked() {
                ctx.send(Command::Send(Request::TogglePlayback));
            }
            let made =
                if length > frames { format!(" · {} made", clock(frames as f64 / rate)) } else { String::new() };
            ui.label(format!("{} / {}{made}", clock(playback.position as f64 / rate), clock(length as f64 / rate)));
            level_meter(ui, if playback.playing { playback.level } else { 0.0 });
            let volume =
                ui.add(egui::Slider::new(&mut ctx.settings.volume, 0.0..=1.0).show_value(false).text("Volume"));
            if volume.changed() {
                ctx.send(Command::Send(Request::SetVolume { volume: ctx.settings.volume }));
            }
        });
        let making = track.job.is_some();
        if let Some(why) = &playback.unavailable {
            ui.label(format!("Not playing: {why}"));
        } else if let Some(wait) = ctx.pending_start {
            ui.label(match wait {
                Some(s) if s >= 0.5 => {
                    format!("Starts playing in about {}, when the rest can play through", in_words(s))
                }
                Some(_) => "Starts playing now".into(),
                None => "Starts playing once enough is made to play through (Play starts it now)".into(),
            });
        } else if making && playback.playing && playback.position + (rate as usize) / 10 >= frames {
            ui.label("Waiting for the next part…");
        }
        let playhead = (frames > 0).then_some(playback.position);
        let response = waveform_ui(ui, &track.audio, length, track.sample_rate, &track.sections, playhead);
        if let Some(pos) = response.interact_pointer_pos().filter(|_| response.clicked() && frames > 0) {
            let column = (pos.x - response.rect.left()).max(0.0) as usize;
            let frame = column * frames_per_column(length, response.rect.width());
            ctx.send(Command::Send(Request::Seek { frame: frame.min(frames) }));
        }
        time_axis_ui(ui, response.rect, length as f64 / rate);
    }
}

/// Tick marks under the waveform, at a round number of seconds apart that leaves room for their
/// labels.
fn time_axis_ui(ui: &mut egui::Ui, waveform: egui::Rect, length_s: f64) {
    let (rect, _) = ui.allocate_exact_size(Vec2::new(waveform.width(), 14.0), Sense::hover());
    if length_s <= 0.0 {
        return;
    }
    let painter = ui.painter_at(rect);
    let px_per_s = rect.width() as f64 / length_s;
    let step_s = [1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0]
        .into_iter()
        .find(|step| step * px_per_s >= 64.0)
        .unwrap_or(600.0);
    let color = ui.visuals().weak_text_color();
    let font = egui::FontId::proportional(10.0);
    let mut at_s = step_s;
    while at_s < length_s {
        let x = rect.left() + (at_s * px_per_s) as f32;
        painter.line_segment([egui::pos2(x, rect.top()), egui::pos2(x, rect.top() + 3.0)], Stroke::new(1.0, color));
        painter.text(egui::pos2(x, rect.top() + 3.0), egui::Align2::CENTER_TOP, clock(at_s), font.clone(), color);
        at_s += step_s;
    }
}

/// Frames behind one pixel column of a waveform `width` wide.
fn frames_per_column(frames: usize, width: f32) -> usize {
    frames.div_ceil(width.max(1.0) as usize).max(1)
}

fn level_meter(ui: &mut egui::Ui, level: f32) {
    let (rect, response) = ui.allocate_exact_size(Vec2::new(80.0, 10.0), Sense::hover());
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 2.0, ui.visuals().extreme_bg_color);
    let mut filled = rect;
    filled.set_width(rect.width() * level.clamp(0.0, 1.0));
    let color = if level >= 0.99 { Color32::LIGHT_RED } else { Color32::from_rgb(90, 180, 110) };
    painter.rect_filled(filled, 2.0, color);
    response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::ProgressIndicator, true, "Level"));
}

/// The song so far, as min/max bars per pixel column of the mixed-down signal, on a timeline of
/// `length` frames (the part not made yet shaded), with a mark where each of `sections` starts and
/// the playhead.
pub fn waveform_ui(
    ui: &mut egui::Ui,
    interleaved: &[f32],
    length: usize,
    sample_rate: u32,
    sections: &[usize],
    playhead: Option<usize>,
) -> egui::Response {
    // Taller on a wide window, where there is room to see the song's shape.
    let height = (ui.available_width() / 8.0).clamp(80.0, 140.0);
    let (rect, response) = ui.allocate_exact_size(Vec2::new(ui.available_width(), height), Sense::click());
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 4.0, ui.visuals().extreme_bg_color);
    let frames = interleaved.len() / 2;
    let length = length.max(frames);
    if length > frames {
        let per_column = frames_per_column(length, rect.width());
        let mut unmade = rect;
        unmade.set_left(rect.left() + (frames / per_column) as f32);
        painter.rect_filled(unmade, 4.0, ui.visuals().faint_bg_color);
    }
    if frames > 0 {
        let per_column = frames_per_column(length, rect.width());
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
        let mark = Stroke::new(1.0, ui.visuals().weak_text_color().gamma_multiply(0.6));
        for &start in sections.iter().filter(|&&s| s < frames) {
            let x = rect.left() + (start / per_column) as f32;
            painter.line_segment([egui::pos2(x, rect.top()), egui::pos2(x, rect.bottom())], mark);
        }
        if let Some(position) = playhead {
            // Columns hold `per_column` frames each, so the playhead lines up with the bars.
            let x = rect.left() + (position.min(frames) / per_column) as f32;
            painter.line_segment(
                [egui::pos2(x, rect.top()), egui::pos2(x, rect.bottom())],
                Stroke::new(2.0, Color32::WHITE),
            );
        }
    }
    response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Image, true, "Waveform"));
    response.on_hover_text(format!("{:.1} s; click to play from there", frames as f64 / sample_rate.max(1) as f64))
}
