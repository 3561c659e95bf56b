//! Every error of `songloom serve` is a 4xx with the one-line JSON body (`{"error": "..."}`):
//! walked over every route of the router (its list, which the router is built from) with bad
//! ids, every method the route does not take, unknown paths and bodies it cannot take.

mod common;
#[path = "../src/serve/api/routes.rs"]
mod routes;

use common::{Server, request, request_head_only};
use routes::ROUTES;
use songloom_wire::ErrorBody;

/// The methods tried on every route; CONNECT is left out (hyper refuses a CONNECT to a path before
/// the router sees it). BREW stands for any method HTTP does not name.
const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "BREW"];

/// The route's path with `id` for its `{id}` and a file of a song for its `{file}`.
fn address(route: &str, id: &str) -> String {
    route.replace("{id}", id).replace("{file}", "audio.wav")
}

/// A body the route would take with `method` (sent with `Content-Type: application/json`).
fn body_for(route: &str, method: &str) -> Option<String> {
    match (route, method) {
        ("/api/songs", "POST") => Some(r#"{"description": "a song", "duration": 1}"#.into()),
        (_, "PATCH") => Some(r#"{"title": "a title"}"#.into()),
        _ => None,
    }
}

/// The methods a route takes as an `Allow` header lists them (GET brings HEAD).
fn allowed(takes: &[&str]) -> Vec<String> {
    let mut methods: Vec<String> = takes.iter().map(|m| m.to_string()).collect();
    if takes.contains(&"GET") {
        methods.push("HEAD".into());
    }
    methods.sort();
    methods
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')).map(str::trim)
}

/// Asserts the answer is a 4xx with the one-line JSON error; returns the status.
fn assert_json_error(what: &str, status: u16, head: &str, body: &[u8]) -> u16 {
    assert!((400..500).contains(&status), "{what}: status {status}, expected a 4xx");
    assert_eq!(header(head, "content-type"), Some("application/json"), "{what}: {head}");
    let text = String::from_utf8_lossy(body);
    let error: ErrorBody =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: not an error body ({e}): {text:?}"));
    assert!(!error.error.trim().is_empty(), "{what}: an empty message");
    assert!(!error.error.contains(['\n', '\r']), "{what}: a message of several lines: {:?}", error.error);
    status
}

#[test]
fn every_route_answers_bad_ids_wrong_methods_and_unknown_paths_with_the_json_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let addr = server.addr.as_str();
    let call = |method: &str, path: &str, body: Option<&str>| {
        let what = format!("{method} {path}");
        let (status, head, bytes) = request(addr, method, path, &[], body);
        assert_json_error(&what, status, &head, &bytes)
    };

    for &(route, takes) in ROUTES {
        // (a) Ids that are not ids: not UTF-8, not a number, negative, too large for any id, and
        // the largest id, which no song has.
        if route.contains("{id}") {
            for id in ["%FF", "%C3%28", "abc", "-1", "1.5", "99999999999999999999999", "18446744073709551615"] {
                for &method in takes {
                    call(method, &address(route, id), body_for(route, method).as_deref());
                }
            }
        }
        // (b) Every method the route does not take: a 405 naming those it takes.
        let allow = allowed(takes);
        for &method in METHODS.iter().filter(|m| !allow.iter().any(|a| a == *m)) {
            let path = address(route, "1");
            let what = format!("{method} {path}");
            let (status, head) = if method == "HEAD" {
                // A HEAD's answer has no body: its head says what the body would be.
                let (status, head) = request_head_only(addr, method, &path);
                assert_eq!(header(&head, "content-type"), Some("application/json"), "{what}: {head}");
                (status, head)
            } else {
                let (status, head, bytes) = request(addr, method, &path, &[], body_for(route, method).as_deref());
                (assert_json_error(&what, status, &head, &bytes), head)
            };
            assert_eq!(status, 405, "{what}");
            let mut given: Vec<String> = header(&head, "allow")
                .unwrap_or_else(|| panic!("{what}: no Allow header: {head}"))
                .split(',')
                .map(|m| m.trim().to_ascii_uppercase())
                .collect();
            given.sort();
            assert_eq!(given, allow, "{what}: the Allow header is not the route's methods");
        }
    }

    // (c) Unknown paths, with the methods the API's routes take.
    for path in
        ["/nope", "/api", "/api/", "/api/songs/", "/api/songs/1/nope", "/api/library/1/a/b", "/pkg/other.js", "/%FF"]
    {
        for method in ["GET", "POST", "DELETE"] {
            assert_eq!(call(method, path, None), 404, "{method} {path}");
        }
    }

    // Bodies the routes that read one cannot take: not JSON, the wrong JSON, too large.
    let too_large = format!(r#"{{"description": "{}"}}"#, "a".repeat(100 * 1024));
    for (method, path) in [("POST", "/api/songs"), ("PATCH", "/api/library/1")] {
        assert_eq!(call(method, path, Some("not json")), 400, "{method} {path}");
        assert_eq!(call(method, path, Some("[1, 2]")), 400, "{method} {path}");
        assert_eq!(call(method, path, Some(&too_large)), 413, "{method} {path}");
    }
    // A query the library's files do not take.
    assert_eq!(call("GET", "/api/library/1/audio.wav?format=%FF", None), 400);
}
