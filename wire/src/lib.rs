//! What crosses the wire between Songloom's ends: every body the server (`songloom serve`) writes
//! or reads, every line `songloom generate --json` prints, and the song's recipe they carry. The
//! server, the CLI and the browser all speak these types, so a renamed field is a compile error
//! on every end rather than a silent default on one. The README's "HTTP API" section describes
//! the same bodies.
//!
//! Serde only, so it builds for the browser (wasm32) and the engine can name its [`Stage`]s here.

mod api;
mod event;
mod recipe;
mod stage;
pub mod wav;

pub use api::{
    Deleted, DeviceProbe, Devices, ErrorBody, LibraryList, LibrarySong, Rename, Renamed, ServedModel, SongCreated,
    SongLength, SongRequest, SongState, SongStatus,
};
pub use event::{Event, Stats};
pub use recipe::{DEFAULT_GUIDANCE, Recipe};
pub use stage::{Half, Stage};
