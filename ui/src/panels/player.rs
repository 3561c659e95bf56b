//! `PlayerPanel`: what is loaded, play/pause, the playhead's time, a level meter, the volume,
//! what playback waits for (a song being made starts once the rest can play through; a song that
//! caught up with its making waits for the next part), and the waveform as it grows on a timeline
//! as long as the song asked for, with a time axis, the playhead drawn on it, click-to-seek and a
//! range selected by dragging. Under it, for a library song, its edits: each makes a new version
//! (the song itself stays as it is) by extending it, taking another path from a point, rendering
//! the selection again, or singing it again from a line picked in its lyrics.

use std::ops::Range;

use egui::{Color32, Sense, Stroke, Vec2};

use super::{Command, Panel, PanelContext};
use crate::contract::{Edit, EditRequest, JobId, Request, SongEntry, SongId};
use crate::duration::{MAX_SECONDS, format_duration, parse_duration};
use crate::progress::{clock, in_words};
use crate::state::Track;
use songloom_wire::notice::INSTRUMENTAL_LYRICS;

/// Seconds an extension adds unless another length is typed.
pub const EXTEND_S: f64 = 30.0;

/// The player panel: the track and the playback are the app's and the engine's; it keeps the
/// selection and the edit fields of the track it shows.
#[derive(Default)]
pub struct PlayerPanel {
    /// The track the selection and the edit fields belong to.
    shown: Option<TrackKey>,
    /// The range dragged on the waveform, in stereo frames.
    selection: Option<Range<usize>>,
    /// Where the drag under way began, in stereo frames.
    drag_from: Option<usize>,
    edit: EditFields,
}

/// A track told apart from the one before: its job while it is made, its library song once saved.
type TrackKey = (Option<JobId>, Option<SongId>);

/// The fields of the edits, as typed.
struct EditFields {
    /// How much longer an extension makes the song.
    extend_by: String,
    /// The description from the chosen point on, for another path; empty for the song's own.
    description: String,
    /// The edit's seed; empty for the default (an extension keeps the song's, the other edits
    /// draw a new one).
    seed: String,
    /// The line picked in the song's lyrics to sing again from, with the lyrics typed for it.
    resing: Option<ResingFields>,
}

impl Default for EditFields {
    fn default() -> Self {
        EditFields {
            extend_by: format_duration_field(EXTEND_S),
            description: String::new(),
            seed: String::new(),
            resing: None,
        }
    }
}

/// `0:30` rather than `30`, so the field reads as a length.
fn format_duration_field(seconds: f64) -> String {
    if seconds < 60.0 { format!("0:{}", format_duration(seconds)) } else { format_duration(seconds) }
}

/// A lyrics line picked to sing again from.
struct ResingFields {
    /// The line, from 0, every line of the lyrics counted.
    line: usize,
    /// What is sung from that line on (its old lyrics until changed).
    lyrics: String,
}

impl Panel for PlayerPanel {
    fn ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>) {
        (ctx.landmarks.extend, ctx.landmarks.extend_by) = (None, None);
        let Some(track) = ctx.track else {
            ui.label("Nothing to play yet: generate a song, or listen to one from the library.");
            return;
        };
        let key = (track.job, track.song.as_ref().map(|s| s.id));
        if self.shown != Some(key) {
            // Another song: what was selected and typed for the last one goes (the lengths stay).
            *self = PlayerPanel {
                shown: Some(key),
                edit: EditFields { extend_by: std::mem::take(&mut self.edit.extend_by), ..EditFields::default() },
                ..PlayerPanel::default()
            };
        }
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
            // A version starts where it changes.
            let at =
                track.changed.map(|c| format!(" at {}, where the edit begins,", clock(c.from_s))).unwrap_or_default();
            ui.label(match wait {
                Some(s) if s >= 0.5 => {
                    format!("Starts playing{at} in about {}, when the rest can play through", in_words(s))
                }
                Some(_) => "Starts playing now".into(),
                None => format!("Starts playing{at} once enough is made to play through (Play starts it now)"),
            });
        } else if making && playback.playing && playback.position + (rate as usize) / 10 >= frames {
            ui.label("Waiting for the next part…");
        }
        let response = waveform_ui(
            ui,
            &Waveform {
                audio: &track.audio,
                length,
                sample_rate: track.sample_rate,
                sections: &track.sections,
                playhead: (frames > 0).then_some(playback.position),
                selection: self.selection.clone(),
                changed: track.changed.map(|c| c.frames(track.sample_rate)),
            },
        );
        self.pointer_ui(ui, &response, ctx, frames, length);
        time_axis_ui(ui, response.rect, length as f64 / rate);
        if let Some(song) = &track.song {
            self.edits_ui(ui, ctx, song, track);
        }
    }
}

impl PlayerPanel {
    /// A click on the waveform plays from there and clears the selection; a drag selects the range
    /// it covers.
    fn pointer_ui(
        &mut self,
        ui: &egui::Ui,
        response: &egui::Response,
        ctx: &mut PanelContext<'_>,
        frames: usize,
        length: usize,
    ) {
        if frames == 0 {
            return;
        }
        let rect = response.rect;
        let frame_at = |x: f32| {
            let column = (x - rect.left()).max(0.0) as usize;
            (column * frames_per_column(length, rect.width())).min(frames)
        };
        if response.drag_started() {
            let origin = ui.input(|i| i.pointer.press_origin()).or(response.interact_pointer_pos());
            self.drag_from = origin.map(|p| frame_at(p.x));
        }
        if response.dragged()
            && let (Some(from), Some(pos)) = (self.drag_from, response.interact_pointer_pos())
        {
            let to = frame_at(pos.x);
            self.selection = (from != to).then(|| from.min(to)..from.max(to));
        }
        if response.drag_stopped() {
            self.drag_from = None;
        }
        if response.clicked()
            && let Some(pos) = response.interact_pointer_pos()
        {
            self.selection = None;
            ctx.send(Command::Send(Request::Seek { frame: frame_at(pos.x) }));
        }
    }

    /// The edits of library song `song`, loaded as `track`: each asks for a new version.
    fn edits_ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>, song: &SongEntry, track: &Track) {
        let rate = f64::from(track.sample_rate.max(1));
        let frames = track.audio.len() / 2;
        let selection_s = self.selection.as_ref().map(|r| (r.start as f64 / rate, r.end as f64 / rate));
        let playhead_s = ctx.playback.position.min(frames) as f64 / rate;
        // Why no edit can be asked for now, if none can.
        let blocked = if ctx.running {
            Some("Edits wait until the song being made is done.".to_string())
        } else {
            song.editable.clone().err().map(|why| format!("This song cannot be edited: {why}"))
        };
        let seed = match self.edit.seed.trim() {
            "" => Ok(None),
            text => text.parse::<u64>().map(Some).map_err(|_| format!("`{text}` is not a seed: write a whole number")),
        };
        // What keeps every edit back: the block, else a seed that is no number.
        let held = blocked.clone().or_else(|| seed.clone().err());
        let mut asked: Option<Edit> = None;

        ui.horizontal_wrapped(|ui| {
            whole_label_ui(ui, egui::RichText::new("Edit as a new version").strong());
            match selection_s {
                Some((a, b)) => whole_label_ui(ui, format!("Selected {}–{}", clock(a), clock(b))),
                None => whole_label_ui(ui, egui::RichText::new("drag on the waveform to select a part").weak()),
            };
        });
        if let Err(why) = &song.editable {
            ui.colored_label(ui.visuals().warn_fg_color, format!("This song cannot be edited: {why}"));
        }
        // Rows that wrap between widgets, never inside a label, so a field stays by its label.
        ui.horizontal_wrapped(|ui| {
            let extend_s = parse_duration(&self.edit.extend_by).and_then(|s| {
                if s <= 0.0 {
                    Err("Extend by a length above zero".to_string())
                } else if song.seconds + s > MAX_SECONDS + 0.5 {
                    Err(format!("A song is at most {}: this one is {} long", clock(MAX_SECONDS), clock(song.seconds)))
                } else {
                    Ok(s)
                }
            });
            let why = held.clone().or_else(|| extend_s.clone().err());
            let hint = match &extend_s {
                Ok(s) => format!(
                    "A new song: this one going on for {} more, with its seed unless one is typed",
                    in_words(*s)
                ),
                Err(_) => String::new(),
            };
            let extend = edit_button_ui(ui, "Extend", why, &hint);
            ctx.landmarks.extend = Some(extend.rect);
            if extend.clicked()
                && let Ok(s) = extend_s
            {
                asked = Some(Edit::Extend { seconds: Some(s) });
            }
            whole_label_ui(ui, "by");
            let field =
                ui.add(egui::TextEdit::singleline(&mut self.edit.extend_by).desired_width(44.0).hint_text("0:30"));
            field.widget_info(|| egui::WidgetInfo::labeled(egui::Role::TextInput, true, "Extend by"));
            ctx.landmarks.extend_by = Some(field.rect);

            let why = held
                .clone()
                .or_else(|| selection_s.is_none().then(|| "Select a part first: drag on the waveform".to_string()));
            let hint = selection_s.map_or(String::new(), |(a, b)| {
                format!("A new song: {}–{} rendered again with a new seed, the rest as it is", clock(a), clock(b))
            });
            if edit_button_ui(ui, "Re-render selection", why, &hint).clicked()
                && let Some((from_s, to_s)) = selection_s
            {
                asked = Some(Edit::Rerender { from_s, to_s });
            }

            // The seed's label and field on one row.
            if ui.available_size_before_wrap().x < 130.0 {
                ui.end_row();
            }
            let label = whole_label_ui(ui, "Edit seed");
            ui.add(egui::TextEdit::singleline(&mut self.edit.seed).hint_text("new").desired_width(60.0))
                .labelled_by(label.id)
                .on_hover_text("Left empty, Extend keeps the song's seed and the other edits draw a new one");
        });
        ui.horizontal_wrapped(|ui| {
            let at_s = selection_s.map_or(playhead_s, |(a, _)| a);
            let at_end = at_s >= song.seconds - 0.5;
            let why = held.clone().or_else(|| at_end.then(|| "Place the playhead before the song's end".to_string()));
            let from = if selection_s.is_some() { "the selection's start" } else { "the playhead" };
            let hint = format!(
                "A new song: this one to {} ({from}), then drawn again from there, with the new description if one is typed",
                clock(at_s)
            );
            if edit_button_ui(ui, "Take another path from here", why, &hint).clicked() {
                let description = Some(self.edit.description.trim().to_string()).filter(|d| !d.is_empty());
                asked = Some(Edit::From { at_s, description });
            }
            if ui.available_size_before_wrap().x < 160.0 {
                ui.end_row();
            }
            let width = (ui.available_size_before_wrap().x - 4.0).min(320.0);
            let field = ui
                .add(
                    egui::TextEdit::singleline(&mut self.edit.description)
                        .hint_text("new description (optional)")
                        .desired_width(width),
                )
                .on_hover_text("What the song becomes from that point on; left empty, the song's own description");
            field.widget_info(|| egui::WidgetInfo::labeled(egui::Role::TextInput, true, "New description from here"));
        });
        if let Err(why) = &seed {
            ui.colored_label(ui.visuals().error_fg_color, why);
        }
        egui::CollapsingHeader::new("Re-sing from a line").id_salt("resing").show(ui, |ui| {
            if let Some(edit) = self.resing_ui(ui, song, held, selection_s.map(|(a, _)| a)) {
                asked = Some(edit);
            }
        });
        if let Some(edit) = asked {
            let seed = seed.unwrap_or_default();
            ctx.send(Command::Edit { song: song.clone(), edit: EditRequest { edit, seed } });
        }
    }

    /// The song's lyrics, a line of them to pick, the lyrics to sing from it on and the button that
    /// asks for it (from `at_s` when given, the selection's start; else where the engine places
    /// the line).
    fn resing_ui(
        &mut self,
        ui: &mut egui::Ui,
        song: &SongEntry,
        held: Option<String>,
        at_s: Option<f64>,
    ) -> Option<Edit> {
        let lyrics = &song.recipe.lyrics;
        if lyrics.trim().is_empty() || lyrics.trim() == INSTRUMENTAL_LYRICS {
            ui.label("This song has no lyrics to sing again.");
            return None;
        }
        ui.weak("Pick the line to sing again from; what you write below replaces the lyrics from it on.");
        let lines: Vec<&str> = lyrics.split('\n').collect();
        egui::ScrollArea::vertical().id_salt("song lyrics").max_height(120.0).show(ui, |ui| {
            for (n, line) in lines.iter().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
                let picked = self.edit.resing.as_ref().is_some_and(|r| r.line == n);
                if ui.selectable_label(picked, format!("{}  {line}", n + 1)).clicked() {
                    self.edit.resing = Some(ResingFields { line: n, lyrics: lines[n..].join("\n") });
                }
            }
        });
        let fields = self.edit.resing.as_mut()?;
        let label = ui.label(format!("New lyrics from line {}", fields.line + 1));
        let editor = egui::TextEdit::multiline(&mut fields.lyrics).desired_rows(4).desired_width(f32::INFINITY);
        ui.add(editor).labelled_by(label.id);
        let why = held.or_else(|| fields.lyrics.trim().is_empty().then(|| "Write the lyrics to sing".to_string()));
        let hint = match at_s {
            Some(at) => format!("A new song: sung again from {} (the selection's start) with these lyrics", clock(at)),
            None => "A new song: sung again from where this line is sung, with these lyrics".to_string(),
        };
        edit_button_ui(ui, "Re-sing from this line", why, &hint).clicked().then(|| Edit::Resing {
            line: fields.line,
            lyrics: fields.lyrics.clone(),
            at_s,
        })
    }
}

/// A label that moves to the next row of a wrapping row whole, rather than wrapping inside.
fn whole_label_ui(ui: &mut egui::Ui, text: impl Into<egui::WidgetText>) -> egui::Response {
    ui.add(egui::Label::new(text).wrap_mode(egui::TextWrapMode::Extend))
}

/// An edit's button: enabled unless `why_not` says why not (its hover text then), else `hint`
/// on hover.
fn edit_button_ui(ui: &mut egui::Ui, label: &str, why_not: Option<String>, hint: &str) -> egui::Response {
    let button = ui.add_enabled(why_not.is_none(), egui::Button::new(label));
    match why_not {
        Some(why) => button.on_disabled_hover_text(why),
        None if hint.is_empty() => button,
        None => button.on_hover_text(hint),
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

/// What the waveform shows.
pub struct Waveform<'a> {
    /// The song so far, interleaved stereo.
    pub audio: &'a [f32],
    /// The timeline's length in stereo frames (the length asked for while the song is made).
    pub length: usize,
    pub sample_rate: u32,
    /// Where each section after the first starts, in stereo frames.
    pub sections: &'a [usize],
    pub playhead: Option<usize>,
    /// The range selected, in stereo frames.
    pub selection: Option<Range<usize>>,
    /// A version's new part, in stereo frames (to `usize::MAX` for one that runs to the end).
    pub changed: Option<Range<usize>>,
}

/// The accent of a version's new part, along the waveform's top edge.
const CHANGED_COLOR: Color32 = Color32::from_rgb(230, 150, 60);

/// The song so far, as min/max bars per pixel column of the mixed-down signal, on a timeline of
/// `length` frames (the part not made yet shaded), with a mark where each section starts, the
/// selection shaded, a version's new part marked along the top and the playhead. Clicked or
/// dragged: the panel seeks or selects.
pub fn waveform_ui(ui: &mut egui::Ui, waveform: &Waveform<'_>) -> egui::Response {
    let Waveform { audio: interleaved, length, sample_rate, sections, playhead, .. } = *waveform;
    // Taller on a wide window, where there is room to see the song's shape.
    let height = (ui.available_width() / 8.0).clamp(80.0, 140.0);
    let (rect, response) = ui.allocate_exact_size(Vec2::new(ui.available_width(), height), Sense::click_and_drag());
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 4.0, ui.visuals().extreme_bg_color);
    let frames = interleaved.len() / 2;
    let length = length.max(frames);
    let per_column = frames_per_column(length, rect.width());
    let x_of = |frame: usize| rect.left() + (frame.min(length) / per_column) as f32;
    if length > frames {
        let mut unmade = rect;
        unmade.set_left(x_of(frames));
        painter.rect_filled(unmade, 4.0, ui.visuals().faint_bg_color);
    }
    if let Some(selected) = &waveform.selection {
        let span = egui::Rect::from_x_y_ranges(
            x_of(selected.start)..=x_of(selected.end).max(x_of(selected.start) + 1.0),
            rect.y_range(),
        );
        painter.rect_filled(span, 0.0, ui.visuals().selection.bg_fill.gamma_multiply(0.35));
        let edge = Stroke::new(1.0, ui.visuals().selection.stroke.color);
        for x in [span.left(), span.right()] {
            painter.line_segment([egui::pos2(x, rect.top()), egui::pos2(x, rect.bottom())], edge);
        }
    }
    if frames > 0 {
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
            let x = x_of(start);
            painter.line_segment([egui::pos2(x, rect.top()), egui::pos2(x, rect.bottom())], mark);
        }
    }
    if let Some(changed) = waveform.changed.as_ref().filter(|c| c.start < length) {
        let band = egui::Rect::from_x_y_ranges(
            x_of(changed.start)..=x_of(changed.end).max(x_of(changed.start) + 1.0),
            rect.top()..=rect.top() + 3.0,
        );
        painter.rect_filled(band, 0.0, CHANGED_COLOR);
    }
    if let Some(position) = playhead.filter(|_| frames > 0) {
        // Columns hold `per_column` frames each, so the playhead lines up with the bars.
        let x = x_of(position.min(frames));
        painter
            .line_segment([egui::pos2(x, rect.top()), egui::pos2(x, rect.bottom())], Stroke::new(2.0, Color32::WHITE));
    }
    response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Image, true, "Waveform"));
    let changed = if waveform.changed.is_some() { "; the orange band marks what this version changed" } else { "" };
    response.on_hover_text(format!(
        "{:.1} s; click to play from there, drag to select a part{changed}",
        frames as f64 / sample_rate.max(1) as f64
    ))
}
