//! Songloom in a browser: the same [`SongloomApp`](songloom_ui::app::SongloomApp) as the desktop
//! window, run by eframe's web runner, with an engine ([`remote::RemoteEngine`]) that is the
//! HTTP API of `songloom serve` (which serves this crate's bundle too) and a player on Web Audio.
//! Built by `scripts/build-web.sh`; on any target but wasm32 the crate is only what the page makes of
//! the server's answers ([`client`]) and its event reader ([`sse`]).

pub mod client;
#[cfg(target_arch = "wasm32")]
mod http;
#[cfg(target_arch = "wasm32")]
mod player;
#[cfg(target_arch = "wasm32")]
mod remote;
pub mod sse;
#[cfg(target_arch = "wasm32")]
mod start;
