//! Every route of `songloom serve` and the methods it takes. The router is built from this list
//! (a path missing here is not served), and app/tests/serve_errors.rs includes this file to walk
//! every route with bad ids and wrong methods; so it holds plain data only.

/// MiniMax's cloud music API, answered in its shape (`api::minimax`).
pub const MUSIC_GENERATION: &str = "/v1/music_generation";

/// A route's path (axum's syntax: `{id}` is a part of the address) and the methods it takes (a
/// route that takes GET takes HEAD too).
pub const ROUTES: &[(&str, &[&str])] = &[
    ("/api/songs", &["GET", "POST"]),
    ("/api/songs/{id}", &["GET", "DELETE"]),
    ("/api/songs/{id}/events", &["GET"]),
    ("/api/songs/{id}/stream.pcm", &["GET"]),
    ("/api/songs/{id}/audio.wav", &["GET"]),
    // `{id}` here is a library id: the song edited, as `/api/library` lists it.
    ("/api/songs/{id}/edits", &["POST"]),
    ("/api/library", &["GET"]),
    ("/api/library/{id}", &["PATCH", "DELETE"]),
    ("/api/library/{id}/{file}", &["GET"]),
    ("/api/devices", &["GET"]),
    ("/api/model", &["GET"]),
    (MUSIC_GENERATION, &["POST"]),
    ("/", &["GET"]),
    ("/pkg/songloom_web.js", &["GET"]),
    ("/pkg/songloom_web_bg.wasm", &["GET"]),
];
