//! The browser page `songloom serve` serves at `/`: web/index.html and the wasm bundle of the
//! `songloom-web` crate, embedded at build time (app/build.rs) when scripts/build-web.sh has made
//! it.

use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

const INDEX: &str = include_str!("../../../web/index.html");

#[cfg(web_bundle)]
const BUNDLE: Option<(&[u8], &[u8])> = Some((
    include_bytes!("../../../web/dist/songloom_web.js"),
    include_bytes!("../../../web/dist/songloom_web_bg.wasm"),
));
#[cfg(not(web_bundle))]
const BUNDLE: Option<(&[u8], &[u8])> = None;

/// Whether this binary holds the page's bundle.
pub const HAS_PAGE: bool = BUNDLE.is_some();

pub async fn index() -> Response {
    if HAS_PAGE {
        return Html(INDEX).into_response();
    }
    let note = "<!doctype html><title>Songloom</title><p>This songloom was built without its web page. \
                Run <code>bash scripts/build-web.sh</code>, build songloom again, and serve. The HTTP API \
                under <code>/api</code> works without it.</p>";
    (StatusCode::NOT_FOUND, Html(note)).into_response()
}

pub async fn script() -> Response {
    match BUNDLE {
        Some((js, _)) => ([(header::CONTENT_TYPE, "text/javascript")], js).into_response(),
        None => index().await,
    }
}

pub async fn wasm() -> Response {
    match BUNDLE {
        Some((_, wasm)) => ([(header::CONTENT_TYPE, "application/wasm")], wasm).into_response(),
        None => index().await,
    }
}
