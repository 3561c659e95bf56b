//! `PlayerPanel`: what is loaded, play/pause, the playhead's time, a level meter, and the waveform
//! as it grows on a timeline as long as the song asked for, with the playhead drawn on it and
//! click-to-seek.

use egui::{Color32, Sense, Stroke, Vec2};

use super::{Command, Panel, PanelContext};
use crate::contract::Request;

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
        ui.horizontal(|ui| {
            let label = if playback.playing { "Pause" } else { "Play" };
            let enabled = playback.unavailable.is_none() && frames > 0;
            if ui.add_enabled(enabled, egui::Button::new(label)).on_hover_text("Space").clicked() {
                ctx.send(Command::Send(Request::TogglePlayback));
            }
            let made =
                if length > frames { format!(" · {} made", clock(frames as f64 / rate)) } else { String::new() };
            ui.label(format!("{} / {}{made}", clock(playback.position as f64 / rate), clock(length as f64 / rate)));
            level_meter(ui, playback.level);
            ui.add(egui::Label::new(&track.title).truncate());
        });
        if let Some(why) = &playback.unavailable {
            ui.label(format!("Not playing: {why}"));
        }
        let playhead = (frames > 0).then_some(playback.position);
        let response = waveform_ui(ui, &track.audio, length, track.sample_rate, playhead);
        if let Some(pos) = response.interact_pointer_pos().filter(|_| response.clicked() && frames > 0) {
            let column = (pos.x - response.rect.left()).max(0.0) as usize;
            let frame = column * frames_per_column(length, response.rect.width());
            ctx.send(Command::Send(Request::Seek { frame: frame.min(frames) }));
        }
    }
}

/// Frames behind one pixel column of a waveform `width` wide.
fn frames_per_column(frames: usize, width: f32) -> usize {
    frames.div_ceil(width.max(1.0) as usize).max(1)
}

/// `m:ss`.
fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0) as u64;
    format!("{}:{:02}", s / 60, s % 60)
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
/// `length` frames (the part not made yet shaded), with the playhead.
pub fn waveform_ui(
    ui: &mut egui::Ui,
    interleaved: &[f32],
    length: usize,
    sample_rate: u32,
    playhead: Option<usize>,
) -> egui::Response {
    let (rect, response) = ui.allocate_exact_size(Vec2::new(ui.available_width(), 80.0), Sense::click());
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
