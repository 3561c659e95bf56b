//! The messages between the interface and an engine. The interface sends [`Request`]s and
//! receives [`EngineEvent`]s; one job runs at a time and is cancelled by its id.

use serde::{Deserialize, Serialize};
/// The recipe and the progress stages are the wire's: the same types cross HTTP and the CLI.
pub use songloom_wire::{AdapterRecipe, DEFAULT_GUIDANCE, Edit, EditOf, EditRequest, Half, MAX_TAKES, Recipe, Stage};

/// The precision policies of the acoustic half, by the engine's names (the app ties the two).
pub const PRECISIONS: [&str; 4] = ["reference", "tf32", "bf16", "fp8"];

/// The AR half's weight choices, by the engine's names (the app ties the two).
pub const WEIGHTS: [&str; 5] = ["auto", "bf16", "8bit", "4bit", "4bit-all"];

/// A device choice and whether it can run here: what it is, or why not.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceStatus {
    pub name: String,
    pub available: Result<String, String>,
    /// What the real model would do there (its plan, how long a minute of music takes, as
    /// measured or estimated), for a device that runs here.
    pub advice: Option<String>,
}

pub type JobId = u64;

/// A song in the library.
pub type SongId = i64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExportFormat {
    /// 32-bit float, exactly what the model made.
    Float32,
    /// 16-bit PCM.
    Pcm16,
    /// FLAC, 24-bit.
    Flac,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Generate {
        job: JobId,
        recipe: Recipe,
    },
    /// Makes takes of `recipe` together, one a job (2 to [`MAX_TAKES`] of them): take k (from 0)
    /// is job `jobs[k]` with seed `recipe.seed + k`. Each job has a Generate's events and is saved
    /// in the library on its own; a take is cancelled alone by its job, and one that fails or is
    /// cancelled leaves the others. The first take plays as it is made, as a Generate's song does.
    Takes {
        jobs: Vec<JobId>,
        recipe: Recipe,
    },
    /// Makes a new song of library song `song` by `edit`; the song itself stays as it is. Run as
    /// a Generate is, with the same job events: the audio kept from `song` before the change
    /// first, then the new audio; the new song is saved in the library, its recipe recording the
    /// edit ([`Recipe::edit`]).
    Edit {
        job: JobId,
        song: SongId,
        edit: EditRequest,
    },
    Cancel {
        job: JobId,
    },
    /// Play or pause what is loaded; a song that played to its end starts again.
    TogglePlayback,
    /// Plays what is loaded from the playhead (a song being made starts paused, and the window
    /// asks for this once the rest can play through).
    Play,
    /// Sets the playback volume, 0..=1 (a gain on the samples, which stay as made).
    SetVolume {
        volume: f32,
    },
    /// Moves the playhead to stereo frame `frame`.
    Seek {
        frame: usize,
    },
    /// Loads a library song into the player and plays it; a song being made meanwhile goes on into
    /// the library, no longer heard.
    PlaySong {
        id: SongId,
    },
    /// Answered by [`EngineEvent::ModelInfo`]; `model` as in [`Recipe::model`].
    ModelInfo {
        model: String,
    },
    /// Answered by [`EngineEvent::Models`].
    ListModels,
    /// Fetches the real model into the models folder, resuming what is there
    /// ([`EngineEvent::Download`] as it goes, [`EngineEvent::DownloadEnded`] at the end).
    DownloadModel,
    /// Stops the download; the next one resumes where it stopped.
    PauseDownload,
    /// Stops the download, if one runs, and removes what it fetched; a complete model is never
    /// removed.
    CancelDownload,
    /// Opens the system's folder picker for a model folder ([`EngineEvent::ModelFolderChosen`]
    /// when one is chosen; nothing when the picker is closed, or where the system has none).
    ChooseModelFolder,
    /// Lists the folders in `path` (typed as a person types it, `~` their home; the models folder
    /// when empty) for the window's own folder chooser ([`EngineEvent::Folder`]).
    ListFolder {
        path: String,
    },
    /// Answered by [`EngineEvent::Library`].
    ListSongs {
        search: String,
    },
    RenameSong {
        id: SongId,
        title: String,
    },
    DeleteSong {
        id: SongId,
    },
    /// Writes the song to a WAV or FLAC file in `folder` (the user's music folder when empty),
    /// named after its title, with its recipe in the file.
    ExportSong {
        id: SongId,
        folder: String,
        format: ExportFormat,
    },
}

/// A folder's subfolders, as the folder chooser shows them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FolderListing {
    /// The folder, as an absolute path.
    pub path: String,
    /// The folder above it, where there is one.
    pub parent: Option<String>,
    /// Its subfolders by name (hidden ones left out), sorted.
    pub folders: Vec<FolderEntry>,
    /// Whether the folder itself holds a model (language_model/ and transformer/ in it).
    pub is_model: bool,
    /// Why it could not be read, if it could not.
    pub error: Option<String>,
}

/// A subfolder in a [`FolderListing`].
#[derive(Debug, Clone, PartialEq)]
pub struct FolderEntry {
    pub name: String,
    /// Whether it holds a model.
    pub is_model: bool,
}

/// A folder of the models folder.
#[derive(Debug, Clone, PartialEq)]
pub struct InstalledModel {
    pub path: String,
    /// Every file there and verified.
    pub complete: bool,
    /// What it is, in words ("MiniMaxAI/MiniMax-Music3 (main), 28.5 GB").
    pub summary: String,
}

/// How far a model download has come.
#[derive(Debug, Clone, PartialEq)]
pub struct DownloadProgress {
    /// Bytes fetched so far, of all the model's files.
    pub done_bytes: u64,
    pub total_bytes: u64,
    /// The file being fetched.
    pub file: String,
}

/// A library entry as the window lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct SongEntry {
    pub id: SongId,
    pub title: String,
    pub recipe: Recipe,
    pub seconds: f64,
    pub created_unix: i64,
    pub timings: Timings,
    /// Whether the song can be edited, or why not: an edit starts from the song's score (its
    /// codes), which songs made before scores were kept, and songs imported without one, lack.
    pub editable: Result<(), String>,
}

impl SongEntry {
    /// The song this one is a version of, when an edit made it.
    pub fn parent(&self) -> Option<SongId> {
        self.recipe.edit.as_ref().map(|edit| edit.parent)
    }
}

/// What the player is doing, read whenever the window draws.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlaybackState {
    /// The playhead, in stereo frames.
    pub position: usize,
    /// Frames loaded so far.
    pub frames: usize,
    pub sample_rate: u32,
    pub playing: bool,
    /// Peak of what is playing now, 0..=1.
    pub level: f32,
    /// Why nothing can play (no sound device), when so.
    pub unavailable: Option<String>,
}

/// Timings of a finished job, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    pub total_s: f64,
    pub time_to_first_audio_s: Option<f64>,
    pub ar_s: f64,
    pub acoustic_s: f64,
    pub frames: usize,
    pub windows: usize,
}

/// A finished run's timings as the engine reports them (every end reads them so).
impl From<&songloom_wire::Stats> for Timings {
    fn from(stats: &songloom_wire::Stats) -> Self {
        Timings {
            total_s: stats.total_s,
            time_to_first_audio_s: stats.time_to_first_audio_s,
            ar_s: stats.ar_s,
            acoustic_s: stats.acoustic_s,
            frames: stats.frames,
            windows: stats.windows,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum EngineEvent {
    /// The memory plan a job's model was loaded under, in words.
    Plan {
        job: JobId,
        plan: String,
    },
    Stage {
        job: JobId,
        stage: Stage,
        done: usize,
        total: usize,
    },
    /// Interleaved stereo samples from stereo frame `first_sample` on; in order, never revised.
    Audio {
        job: JobId,
        first_sample: usize,
        samples: Vec<f32>,
        sample_rate: u32,
    },
    Finished {
        job: JobId,
        timings: Timings,
    },
    Failed {
        job: JobId,
        message: String,
    },
    Cancelled {
        job: JobId,
    },
    /// The job's song was kept in the library (sent before `Finished`).
    Saved {
        job: JobId,
        song: SongEntry,
    },
    /// The library's songs matching the last search, newest first (after any change too).
    Library {
        songs: Vec<SongEntry>,
    },
    /// A library song loaded into the player.
    Loaded {
        song: SongEntry,
        samples: Vec<f32>,
        sample_rate: u32,
    },
    /// What a model directory holds (parameters per component), or why it cannot be used.
    ModelInfo {
        model: String,
        summary: Result<String, String>,
        /// The model's name as its licence asks it shown ("MiniMax-Music3", or "Songloom Mini"
        /// for the built-in one), where it could be read.
        name: Option<String>,
    },
    /// The models folder and what it holds.
    Models {
        folder: String,
        models: Vec<InstalledModel>,
    },
    /// How far a model download has come.
    Download {
        progress: DownloadProgress,
    },
    /// A download ended: the model's folder, or why not (a pause says so).
    DownloadEnded {
        result: Result<String, String>,
    },
    /// The folder the user chose in the folder picker.
    ModelFolderChosen {
        path: String,
    },
    /// What a folder holds, for the window's own folder chooser.
    Folder {
        listing: FolderListing,
    },
    /// Each device choice (`auto` first) and whether it can run here; sent once at the start.
    Devices {
        devices: Vec<DeviceStatus>,
    },
    /// Something the user asked for happened ("Exported to ...").
    Notice {
        message: String,
    },
    /// Something the user asked for, outside a job, failed.
    Problem {
        message: String,
    },
}

impl EngineEvent {
    /// The job the event belongs to, if it belongs to one.
    pub fn job(&self) -> Option<JobId> {
        match self {
            EngineEvent::Stage { job, .. }
            | EngineEvent::Plan { job, .. }
            | EngineEvent::Audio { job, .. }
            | EngineEvent::Finished { job, .. }
            | EngineEvent::Failed { job, .. }
            | EngineEvent::Cancelled { job }
            | EngineEvent::Saved { job, .. } => Some(*job),
            _ => None,
        }
    }
}

/// An engine the interface can drive: in process on the desktop, remote in a browser.
pub trait Engine {
    fn send(&self, request: Request);
    /// Events that arrived since the last call, oldest first; never blocks.
    fn poll(&self) -> Vec<EngineEvent>;
    /// The player's state now; never blocks.
    fn playback(&self) -> PlaybackState;
    /// Whether the songs are made elsewhere (a browser page's server): the device, precision,
    /// weights, memory budget and model are then the server's, and exports are downloads.
    fn is_remote(&self) -> bool {
        false
    }
    /// Seconds the user's clock is ahead of UTC at `unix_s`, for dates in their time.
    fn utc_offset_s(&self, _unix_s: i64) -> i64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recipe_survives_json_and_missing_fields_take_defaults() {
        let recipe = Recipe { description: "lo-fi".into(), lyrics: "[verse]\nla".into(), seed: 9, ..Recipe::default() };
        let text = serde_json::to_string(&recipe).unwrap();
        assert_eq!(serde_json::from_str::<Recipe>(&text).unwrap(), recipe);
        let partial: Recipe = serde_json::from_str(r#"{"description": "x"}"#).unwrap();
        assert_eq!(partial.steps, 30);
        assert_eq!(partial.device, "auto");
    }
}
