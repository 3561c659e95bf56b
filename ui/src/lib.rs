//! The Songloom user interface. It talks to an engine only through the request/event contract in
//! [`contract`], so the same interface can run in a browser later; nothing here touches threads,
//! files or audio devices, and the crate builds for wasm32.

pub mod app;
pub mod closing;
pub mod contract;
pub mod duration;
pub mod edits;
pub mod lyrics;
pub mod panels;
pub mod progress;
pub mod state;
