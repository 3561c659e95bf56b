//! The HTTP API's request and answer bodies, by endpoint (the README's "HTTP API" section).

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

use crate::Recipe;

/// Every error answer: a 4xx or 5xx with one line, `{"error": "..."}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
}

/// The most takes of a recipe made at once (`generate --takes`, a request's `takes`, the window's
/// Takes): a batch of up to 8 songs is bit for bit the songs alone on the CPU.
pub const MAX_TAKES: usize = 8;

/// `POST /api/songs`: the fields of `songloom generate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SongRequest {
    pub description: String,
    /// May be left out for an instrumental song, and on a server of the built-in model, which
    /// cannot sing.
    #[serde(default)]
    pub lyrics: String,
    /// A song without singing: the lyrics become `[instrumental]` (give no other lyrics with it).
    /// `is_instrumental` is taken too, the name MiniMax's cloud API uses.
    #[serde(default, alias = "is_instrumental", skip_serializing_if = "std::ops::Not::not")]
    pub instrumental: bool,
    /// 30 s without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<SongLength>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "crate::short_f32_option")]
    pub guidance: Option<f32>,
    /// Must be the server's own, if given (one engine, one precision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<String>,
    /// Several takes of the recipe (1 to [`MAX_TAKES`]), seeds `seed`, `seed + 1`, ...: a song each, made
    /// together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub takes: Option<usize>,
}

/// A song's length: seconds, or text as `generate --duration` takes it ("1:30", "2m").
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SongLength {
    Seconds(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for SongLength {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Length;
        impl Visitor<'_> for Length {
            type Value = SongLength;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("seconds or text like \"1:30\"")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<SongLength, E> {
                Ok(SongLength::Seconds(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SongLength, E> {
                Ok(SongLength::Seconds(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SongLength, E> {
                Ok(SongLength::Seconds(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SongLength, E> {
                Ok(SongLength::Text(v.to_string()))
            }
        }
        deserializer.deserialize_any(Length)
    }
}

/// The answer to `POST /api/songs` (201): the song's id, queued at its place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SongCreated {
    pub id: u64,
    #[serde(flatten)]
    pub state: SongState,
    /// What the model will not hear in the lyrics (text after a tag on its line), as
    /// `generate` warns of it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Every take's song id when several were asked for (`id` is the first's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub takes: Vec<u64>,
}

/// `GET` or `DELETE /api/songs/ID`: where a song is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SongStatus {
    pub id: u64,
    #[serde(flatten)]
    pub state: SongState,
    pub description: String,
    pub duration_s: f64,
    pub seed: u64,
    /// Seconds of audio made so far.
    pub seconds_made: f64,
    /// The share of the song's work done, 0 to 1 (the AR frames and the denoising, weighted
    /// equally, as the window's progress bar).
    #[serde(default)]
    pub fraction: f64,
    /// Seconds left at the rate so far, once there is a rate to go by.
    #[serde(default)]
    pub eta_s: Option<f64>,
}

/// `GET /api/songs`: every song the server knows, the queue's order (oldest first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SongList {
    pub songs: Vec<SongStatus>,
}

/// A song's state, its `state` field, with what goes with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SongState {
    /// Waiting; `place` 1 runs next.
    Queued {
        place: Option<usize>,
    },
    Running,
    /// Kept in the library under `library_id`.
    Finished {
        library_id: i64,
    },
    Failed {
        error: String,
    },
    Cancelled,
}

impl SongState {
    /// The `state` field's value.
    pub fn name(&self) -> &'static str {
        match self {
            SongState::Queued { .. } => "queued",
            SongState::Running => "running",
            SongState::Finished { .. } => "finished",
            SongState::Failed { .. } => "failed",
            SongState::Cancelled => "cancelled",
        }
    }
}

/// `GET /api/library`: the library's songs, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LibraryList {
    pub songs: Vec<LibrarySong>,
}

/// A song of the library.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LibrarySong {
    pub id: i64,
    pub title: String,
    pub seconds: f64,
    pub created_unix: i64,
    pub recipe: Recipe,
    /// The song this version was made from (its recipe's `edit.parent`), for a list to group by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<i64>,
    /// The edit that made it from its parent ([`Edit::name`](crate::Edit::name): `extend`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit_kind: Option<String>,
    /// Why the song cannot be edited (its file holds no codes); absent for one that can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_editable: Option<String>,
}

/// `PATCH /api/library/ID`: a library song's new title.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rename {
    pub title: String,
}

/// The answer to a rename.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Renamed {
    pub id: i64,
    pub title: String,
}

/// The answer to `DELETE /api/library/ID`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deleted {
    pub id: i64,
    pub deleted: bool,
}

/// `GET /api/devices`: each backend, and the device the server's engine runs on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Devices {
    pub devices: Vec<DeviceProbe>,
    pub serving_on: String,
}

/// A backend and whether it runs here: `description` when `available`, `reason` when not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceProbe {
    pub name: String,
    pub available: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl DeviceProbe {
    /// A backend `name` that is available (what it is) or not (why).
    pub fn new(name: impl Into<String>, status: Result<String, String>) -> Self {
        let name = name.into();
        match status {
            Ok(description) => DeviceProbe { name, available: true, description: Some(description), reason: None },
            Err(reason) => DeviceProbe { name, available: false, description: None, reason: Some(reason) },
        }
    }

    /// What the backend is, or why it does not run here.
    pub fn status(&self) -> Result<String, String> {
        if self.available {
            Ok(self.description.clone().unwrap_or_default())
        } else {
            Err(self.reason.clone().unwrap_or_else(|| "not available".into()))
        }
    }
}

/// `GET /api/model`: the model the server loaded, its memory plan and its device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServedModel {
    /// The model directory.
    pub path: String,
    /// Whether it is the model built into the binary (no `--model` given).
    pub embedded: bool,
    /// The memory plan, in words.
    pub plan: String,
    pub sample_rate: u32,
    /// The device, in words.
    pub device: String,
    /// The LoRA adapters merged into its weights (`serve --lora`), as the songs' recipes record
    /// them; left out when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adapters: Vec<crate::AdapterRecipe>,
}
