//! The window's panels. Each is a type with its own state that implements [`Panel`]: it reads the
//! window through a [`PanelContext`] and pushes what it asks for as [`Command`]s, which the app
//! routes once the frame is drawn.

pub mod adapters;
pub mod compose;
pub mod folder_chooser;
pub mod library;
pub mod model;
pub mod notice;
pub mod parameters;
pub mod player;
pub mod progress;
pub mod takes;

pub use adapters::AdaptersPanel;
pub use compose::ComposePanel;
pub use library::LibraryPanel;
pub use model::ModelPanel;
pub use notice::NoticePanel;
pub use parameters::ParametersPanel;
pub use player::PlayerPanel;
pub use progress::ProgressPanel;
pub use takes::TakesPanel;

use crate::contract::{EditRequest, JobId, PlaybackState, Recipe, Request, SongEntry};
use crate::state::{Job, Landmarks, Notice, Queued, Settings, Take, Track};

/// A part of the window.
pub trait Panel {
    /// Draws the panel from `ctx`, pushing what the user asked for onto it.
    fn ui(&mut self, ui: &mut egui::Ui, ctx: &mut PanelContext<'_>);
}

/// What a panel may see of the window in one frame, and where it asks for things.
pub struct PanelContext<'a> {
    /// The recipe being written: the composer, the parameters, the model and a library song's
    /// recipe change it in place.
    pub draft: &'a mut Recipe,
    /// The export folder and format, which the library edits.
    pub settings: &'a mut Settings,
    /// Where the panels record the landmarks they draw.
    pub landmarks: &'a mut Landmarks,
    /// The song being made, or the last one made.
    pub job: Option<&'a Job>,
    /// Songs waiting their turn, in order.
    pub queue: &'a [Queued],
    /// The takes in their rows, oldest first.
    pub takes: &'a [Take],
    pub track: Option<&'a Track>,
    pub playback: &'a PlaybackState,
    pub notice: Option<&'a Notice>,
    /// Whether a song is being made now.
    pub running: bool,
    /// Whether the draft can be made (a length that parses).
    pub draft_is_valid: bool,
    /// Why Generate cannot make the draft now (a model that cannot be used), if it cannot.
    pub generate_blocked: Option<String>,
    /// Whether the songs are made elsewhere ([`Engine::is_remote`](crate::contract::Engine::is_remote)).
    pub remote: bool,
    /// The window's clock, in seconds.
    pub now_s: f64,
    /// Seconds the user's clock is ahead of UTC (for the library's dates).
    pub utc_offset_s: i64,
    /// While the song being made is held until the rest can play through: the seconds until then,
    /// once there is a rate to tell.
    pub pending_start: Option<Option<f64>>,
    /// What the panels asked for this frame, in order ([`PanelContext::send`]).
    pub commands: Vec<Command>,
}

impl PanelContext<'_> {
    /// Asks for `command`; the app carries it out once the frame is drawn.
    pub fn send(&mut self, command: Command) {
        self.commands.push(command);
    }
}

/// What a panel asks of the app.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// A request for the engine, passed on as it is.
    Send(Request),
    /// Make the draft, or queue it while another song is made.
    Generate,
    /// Stop the song being made (every take of it).
    Cancel,
    /// Stop one take; the others go on.
    CancelTake(JobId),
    /// A take is done with: its row goes, its song stays in the library.
    KeepTake(JobId),
    /// A take is not wanted: its row goes and its song is deleted from the library (with an Undo).
    DiscardTake(JobId),
    /// Take a waiting song out of the queue.
    Unqueue(JobId),
    /// Make a library song's recipe again with a new seed, the draft untouched.
    Variation(SongEntry),
    /// Make a new version of a library song by an edit.
    Edit { song: SongEntry, edit: EditRequest },
    /// The problem under the player has been read.
    DismissNotice,
}

/// A drop-down of `options` for `value`, named by the label `label`.
pub(crate) fn choice_ui<T: PartialEq + Clone>(
    ui: &mut egui::Ui,
    label: egui::Id,
    id: &str,
    value: &mut T,
    options: &[(T, &str)],
) -> egui::Response {
    let selected = options.iter().find(|(v, _)| v == value).map_or("", |(_, name)| *name);
    egui::ComboBox::from_id_salt(id)
        .selected_text(selected)
        .show_ui(ui, |ui| {
            for (option, name) in options {
                ui.selectable_value(value, option.clone(), *name);
            }
        })
        .response
        .labelled_by(label)
}
