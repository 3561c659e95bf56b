//! What the window keeps between frames: the song being made and those waiting their turn, what
//! the player holds, the settings that outlive a session, the notice line, and where the fields a
//! shell drives were drawn. [`SongloomApp`](crate::app::SongloomApp) owns these; the panels see
//! them through their [`PanelContext`](crate::panels::PanelContext).

use serde::{Deserialize, Serialize};

use crate::contract::{ExportFormat, JobId, SongEntry};
use crate::edits::Changed;
use crate::progress::Progress;

/// The job in the window and its progress.
pub struct Job {
    pub id: JobId,
    pub progress: Progress,
    /// The length asked for, in seconds.
    pub duration_s: f64,
}

/// A song asked for while another is made: it waits its turn in the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    pub id: JobId,
    pub title: String,
    pub duration_s: f64,
    /// For a version of a song (an edit's): the part expected to be new.
    pub changed: Option<Changed>,
    /// For takes of a recipe made together: each take (the first's job is `id`); empty for one
    /// song.
    pub takes: Vec<Take>,
}

/// A take of several made together, in its row while it is made and after: its progress, then its
/// library song, until it is kept or discarded.
#[derive(Debug, Clone, PartialEq)]
pub struct Take {
    pub job: JobId,
    /// Which take of its batch, from 1.
    pub number: usize,
    pub seed: u64,
    /// The length asked for, in seconds.
    pub duration_s: f64,
    pub progress: Progress,
    /// Its library entry, once it is saved.
    pub song: Option<SongEntry>,
}

/// What the player holds: the song being made, or one from the library.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Track {
    pub title: String,
    /// Interleaved stereo.
    pub audio: Vec<f32>,
    pub sample_rate: u32,
    /// The job making it, while it is made.
    pub job: Option<JobId>,
    /// Its library entry, once it has one.
    pub song: Option<SongEntry>,
    /// The length asked for while it is being made, in seconds (the timeline's length then).
    pub expected_s: Option<f64>,
    /// Where each section after the first starts, in stereo frames: the parts the song came in
    /// while it was made (one per acoustic window).
    pub sections: Vec<usize>,
    /// For a version of a song: the part that is new (expected while it is made, as the engine
    /// recorded it once saved). Playback of a version being made starts where it begins.
    pub changed: Option<Changed>,
}

/// Settings that outlive a session (the shell persists them with the draft).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Where exports go; empty for the user's music folder.
    pub export_folder: String,
    pub export_format: ExportFormat,
    /// Whether Generate keeps the seed as it is; without it, each Generate draws a new one (so a
    /// second press makes another song), shown in the seed field. For this session only: a new
    /// one starts drawing seeds again.
    #[serde(skip)]
    pub keep_seed: bool,
    /// Playback volume, 0..=1.
    pub volume: f32,
    /// How many takes of the draft Generate makes at once (1 to [`MAX_TAKES`](crate::contract::MAX_TAKES)),
    /// seeds the draft's, the draft's + 1, ...
    pub takes: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            export_folder: String::new(),
            export_format: ExportFormat::Float32,
            keep_seed: false,
            volume: 1.0,
            takes: 1,
        }
    }
}

/// Seconds a notice stays.
pub const NOTICE_S: f64 = 8.0;

/// The last notice, or problem outside a job, shown under the player: a notice for [`NOTICE_S`],
/// a problem until it is dismissed.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub message: String,
    /// Something the user asked for failed (shown in red).
    pub problem: bool,
    /// When it came, on the window's clock.
    pub at_s: f64,
}

impl Notice {
    /// Something the user asked for happened.
    pub fn info(message: impl Into<String>, now_s: f64) -> Self {
        Notice { message: message.into(), problem: false, at_s: now_s }
    }

    /// Something the user asked for failed.
    pub fn problem(message: impl Into<String>, now_s: f64) -> Self {
        Notice { message: message.into(), problem: true, at_s: now_s }
    }

    /// Seconds it still stays at `now_s` (zero or less once it has gone; a problem stays).
    pub fn left_s(&self, now_s: f64) -> f64 {
        if self.problem { f64::INFINITY } else { NOTICE_S - (now_s - self.at_s) }
    }
}

/// Where the fields a user starts with were last drawn, for a shell that drives the window from
/// outside (the browser test clicks and types there).
#[derive(Debug, Clone, Default)]
pub struct Landmarks {
    pub description: Option<egui::Rect>,
    pub lyrics: Option<egui::Rect>,
    pub generate: Option<egui::Rect>,
    /// The Takes field beside Generate.
    pub takes: Option<egui::Rect>,
    /// The newest library song's Export button.
    pub export: Option<egui::Rect>,
    /// The player's Extend button and its length field, for the song loaded there.
    pub extend: Option<egui::Rect>,
    pub extend_by: Option<egui::Rect>,
    /// The takes' rows' Keep and Discard buttons, named `keep_take_N` and `discard_take_N`.
    pub take_buttons: Vec<(String, egui::Rect)>,
}

impl Landmarks {
    /// Each drawn landmark by name.
    pub fn all(&self) -> Vec<(String, egui::Rect)> {
        let fixed = [
            ("description", self.description),
            ("lyrics", self.lyrics),
            ("generate", self.generate),
            ("takes", self.takes),
            ("export", self.export),
            ("extend", self.extend),
            ("extend_by", self.extend_by),
        ];
        let fixed = fixed.into_iter().filter_map(|(name, rect)| Some((name.to_string(), rect?)));
        fixed.chain(self.take_buttons.iter().cloned()).collect()
    }
}
