//! What happens to a song, as one JSON object a line (`songloom generate --json`) or one
//! Server-Sent Event each (`GET /api/songs/ID/events`, the event's name its `event` field).

use serde::{Deserialize, Serialize};

use crate::Stage;

/// One event of a song, tagged by its `event` field (`{"event": "stage", ...}`). The server sends
/// `stage`, `audio`, `finished`, then `saved`, `error` or `cancelled`; the CLI prints `warning`,
/// `plan`, `start` and `written` too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// Text after a tag on its line in the lyrics, which the model drops.
    Warning {
        message: String,
    },
    /// The memory plan the model is loaded under.
    Plan {
        /// The AR half's weight formats, in words.
        weights: String,
        mode: String,
        peak_bytes: u64,
        /// `None` for what the device has free.
        budget_bytes: Option<u64>,
    },
    /// Generation begins on `device`, for at most `max_frames` frames.
    Start {
        device: String,
        max_frames: usize,
    },
    Stage {
        stage: Stage,
        done: usize,
        total: usize,
    },
    /// `frames` stereo frames of audio from stereo frame `first_sample` on (the samples themselves
    /// come on the song's `stream.pcm`).
    Audio {
        first_sample: usize,
        frames: usize,
        sample_rate: u32,
    },
    Finished(Stats),
    /// The CLI wrote the song to `path`.
    Written {
        path: String,
        seconds: f64,
        frames: usize,
        windows: usize,
        samples: usize,
        sample_rate: u32,
    },
    /// The song was kept in the library.
    Saved {
        library_id: i64,
        #[serde(default)]
        title: String,
    },
    Error {
        message: String,
    },
    Cancelled,
}

impl Event {
    /// The `event` field's value, which the server also gives as the Server-Sent Event's name.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Warning { .. } => "warning",
            Event::Plan { .. } => "plan",
            Event::Start { .. } => "start",
            Event::Stage { .. } => "stage",
            Event::Audio { .. } => "audio",
            Event::Finished(_) => "finished",
            Event::Written { .. } => "written",
            Event::Saved { .. } => "saved",
            Event::Error { .. } => "error",
            Event::Cancelled => "cancelled",
        }
    }

    /// The event as one line of JSON.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("an event is plain data")
    }
}

/// What a finished song took: its size and the time of each part, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub frames: usize,
    pub windows: usize,
    /// Stereo sample frames at `sample_rate`.
    pub samples: usize,
    pub sample_rate: u32,
    pub tokenize_s: f64,
    pub ar_s: f64,
    pub acoustic_s: f64,
    pub total_s: f64,
    pub time_to_first_audio_s: Option<f64>,
    /// Of `ar_s`, how long the AR loop waited for the device; the rest its thread was busy.
    #[serde(default)]
    pub ar_device_wait_s: f64,
    /// How long both halves ran at once: the acoustic half's busy time inside the AR loop's.
    #[serde(default)]
    pub overlap_s: f64,
    /// Of `ar_s`, the host's time drawing the codes (their distributions and the draws) and
    /// handing the frames on; the rest of the thread's busy time went to issuing the device's work.
    #[serde(default)]
    pub ar_sampling_s: f64,
    #[serde(default)]
    pub ar_handing_on_s: f64,
    /// `ar_s` by the part of a frame it went to, each part's wall time on the AR loop's thread
    /// (its waits for the device included): the language model's logits, their shortlist read
    /// back and the semantic draw;
    #[serde(default)]
    pub ar_semantic_s: f64,
    /// the depth decoder's residual codes, drawn and read back;
    #[serde(default)]
    pub ar_depth_s: f64,
    /// the frame's hidden states read back and the frame handed on;
    #[serde(default)]
    pub ar_states_s: f64,
    /// the frame's codes fed back and the language model's decode step issued.
    #[serde(default)]
    pub ar_feed_s: f64,
}
