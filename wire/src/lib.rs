//! What crosses the wire between Songloom's ends: every body the server (`songloom serve`) writes
//! or reads, every line `songloom generate --json` prints, and the song's recipe they carry. The
//! server, the CLI and the browser all speak these types, so a renamed field is a compile error
//! on every end rather than a silent default on one. The README's "HTTP API" section describes
//! the same bodies; [`minimax`] holds those of MiniMax's cloud API, which the server answers too.
//!
//! Serde only, so it builds for the browser (wasm32) and the engine can name its [`Stage`]s here.

mod api;
mod edit;
mod event;
pub mod minimax;
pub mod notice;
mod recipe;
mod stage;
pub mod wav;

pub use api::{
    Deleted, DeviceProbe, Devices, ErrorBody, LibraryList, LibrarySong, MAX_TAKES, Rename, Renamed, ServedModel,
    SongCreated, SongLength, SongList, SongRequest, SongState, SongStatus,
};
pub use edit::{Edit, EditOf, EditRequest};
pub use event::{Event, Stats};
pub use recipe::{AdapterRecipe, DEFAULT_GUIDANCE, Recipe};
pub use stage::{Half, Stage};

/// An `f32` written as the shortest decimal that reads back as it (`1.7`), so a reader that goes
/// through `f64` (a JSON value, a script) does not see its binary tail (`1.7000000476837158`).
fn short_f32<S: serde::Serializer>(value: &f32, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(value.to_string().parse::<f64>().unwrap_or(f64::from(*value)))
}

fn short_f32_option<S: serde::Serializer>(value: &Option<f32>, serializer: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) => short_f32(v, serializer),
        None => serializer.serialize_none(),
    }
}
