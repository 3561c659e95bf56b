//! Who may use the server. Listening on loopback, anyone on this machine; beyond it, only requests
//! that carry the server's token (generated at start and printed, or given with `--token`): as
//! `Authorization: Bearer TOKEN`, as `?token=TOKEN` in the page's address (which then keeps it in
//! a same-site, HTTP-only cookie for the page's own requests), or as that cookie. Anything else
//! is a 401 with a one-line JSON error (in MiniMax's cloud shape on that API's route). No CORS
//! headers are sent, so other sites' pages cannot read the API.

use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Json, Response};
use songloom_wire::ErrorBody;

use super::api::MUSIC_GENERATION;

const COOKIE: &str = "songloom_token";

/// The token requests must carry, if any: the one given, else a fresh one when `listen` is beyond
/// loopback.
pub fn token_for(listen: SocketAddr, given: Option<String>) -> anyhow::Result<Option<String>> {
    match given {
        Some(token) if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) => {
            anyhow::bail!("--token must be at least 16 letters, digits, `-`, `_` or `.`")
        }
        Some(token) => Ok(Some(token)),
        None if listen.ip().is_loopback() => Ok(None),
        None => Ok(Some(random_id())),
    }
}

/// 128 bits from the standard library's per-process random hash keys, as 32 hex digits: a token,
/// or a MiniMax-shaped answer's `trace_id`.
pub(super) fn random_id() -> String {
    (0..2)
        .map(|i| {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(i);
            format!("{:016x}", h.finish())
        })
        .collect()
}

/// What a request says its token is, and whether it came in the address.
fn presented(headers: &HeaderMap, query: Option<&str>) -> Option<(String, bool)> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| (t.trim().to_string(), false));
    let in_query =
        query.unwrap_or("").split('&').find_map(|pair| pair.strip_prefix("token=")).map(|t| (t.to_string(), true));
    let cookie = headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).find_map(|v| {
        v.split(';')
            .find_map(|c| c.trim().strip_prefix(COOKIE).and_then(|r| r.strip_prefix('=')))
            .map(|t| (t.to_string(), false))
    });
    bearer.or(in_query).or(cookie)
}

/// The same bytes, compared in time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

pub async fn check(State(token): State<Arc<Option<String>>>, request: Request, next: Next) -> Response {
    let Some(token) = token.as_deref() else { return next.run(request).await };
    match presented(request.headers(), request.uri().query()) {
        Some((given, in_address)) if same(&given, token) => {
            let mut response = next.run(request).await;
            if in_address {
                let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
                if let Ok(value) = HeaderValue::from_str(&cookie) {
                    response.headers_mut().insert(header::SET_COOKIE, value);
                }
            }
            response
        }
        // MiniMax's cloud clients send their key as the bearer token and read the cloud's
        // `base_resp`, so they are told in that shape.
        _ if request.uri().path() == MUSIC_GENERATION => super::api::minimax::unauthorized(
            "authentication failed: this server needs its token (printed when it started) as the API key, \
             `Authorization: Bearer TOKEN`",
        ),
        _ => (
            StatusCode::UNAUTHORIZED,
            Json(ErrorBody {
                error: "this server needs its token (printed when it started): `Authorization: Bearer TOKEN`, \
                        or ?token=TOKEN in the page's address"
                    .into(),
            }),
        )
            .into_response(),
    }
}
