//! `songloom serve` on the embedded default model, driven over HTTP as a script would: a song
//! queued, its events streamed, its audio streamed and then fetched as a WAV that matches; a queue
//! of two with one cancelled; every bad request a 4xx with a one-line JSON error; Ctrl-C stops the
//! server and leaves no half-written file.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_songloom"))
            .args(["serve", "--listen", "127.0.0.1:0", "--device", "cpu", "--library"])
            .arg(dir.join("library"))
            .env("XDG_CACHE_HOME", dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("a line").unwrap();
        let addr = first.strip_prefix("serving on http://").unwrap_or_else(|| panic!("{first}")).to_string();
        Server { child, addr }
    }

    /// One request; the status and the body.
    fn call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, Vec<u8>) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        let body = body.unwrap_or("");
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head");
        let head = String::from_utf8_lossy(&raw[..split]).to_string();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        let mut body = raw[split + 4..].to_vec();
        if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
            body = dechunk(&body);
        }
        (status, body)
    }

    fn json(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let (status, bytes) = self.call(method, path, body.map(|b| b.to_string()).as_deref());
        let text = String::from_utf8_lossy(&bytes);
        (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}")))
    }

    /// Polls a song until it is over.
    fn wait(&self, id: u64) -> Value {
        let start = Instant::now();
        loop {
            let (_, song) = self.json("GET", &format!("/api/songs/{id}"), None);
            if !matches!(song["state"].as_str(), Some("queued" | "running")) {
                return song;
            }
            assert!(start.elapsed() < Duration::from_secs(120), "song {id} never ended: {song}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&body[..line_end]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[line_end + 2..line_end + 2 + size]);
        body = &body[line_end + 2 + size + 2..];
    }
}

fn song(description: &str, duration: Value) -> Value {
    json!({"description": description, "lyrics": "[verse]\nla la la", "duration": duration, "seed": 3, "steps": 2})
}

#[test]
fn a_song_is_queued_streamed_and_fetched_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let (status, created) = server.json("POST", "/api/songs", Some(song("warm lo-fi piano", json!("0:03"))));
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_u64().unwrap();
    // The events from the first, whenever the client connects: progress, audio, finished, saved.
    let (status, events) = server.call("GET", &format!("/api/songs/{id}/events"), None);
    assert_eq!(status, 200);
    let events = String::from_utf8(events).unwrap();
    let names: Vec<&str> = events.lines().filter_map(|l| l.strip_prefix("event: ")).collect();
    for expected in ["stage", "audio", "finished", "saved"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    assert!(names.iter().position(|n| *n == "finished") < names.iter().position(|n| *n == "saved"));
    let song = server.wait(id);
    assert_eq!(song["state"], "finished", "{song}");
    // The raw stream holds the same samples as the WAV.
    let (status, pcm) = server.call("GET", &format!("/api/songs/{id}/stream.pcm"), None);
    assert_eq!(status, 200);
    let (status, wav) = server.call("GET", &format!("/api/songs/{id}/audio.wav"), None);
    assert_eq!(status, 200);
    let reader = hound::WavReader::new(std::io::Cursor::new(wav)).unwrap();
    assert_eq!((reader.spec().channels, reader.spec().sample_rate), (2, 44_100));
    let samples: Vec<f32> = reader.into_samples::<f32>().map(Result::unwrap).collect();
    let streamed: Vec<f32> = pcm.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    assert!(!samples.is_empty() && samples.len() == streamed.len(), "{} against {}", samples.len(), streamed.len());
    assert!(samples.iter().zip(&streamed).all(|(a, b)| (a - b).abs() <= 1e-6));
    // Kept in the library, which the API lists and renames.
    let library_id = song["library_id"].as_i64().unwrap();
    let (_, list) = server.json("GET", "/api/library", None);
    assert_eq!(list["songs"][0]["id"], library_id, "{list}");
    let (status, _) = server.json("PATCH", &format!("/api/library/{library_id}"), Some(json!({"title": "Morning"})));
    assert_eq!(status, 200);
    let (_, list) = server.json("GET", "/api/library", None);
    assert_eq!(list["songs"][0]["title"], "Morning");
}

#[test]
fn a_queue_of_two_with_one_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let (_, first) = server.json("POST", "/api/songs", Some(song("first", json!(30))));
    let (_, second) = server.json("POST", "/api/songs", Some(song("second", json!(2))));
    let (first, second) = (first["id"].as_u64().unwrap(), second["id"].as_u64().unwrap());
    // Once the first runs, the second waits next, and says so.
    let start = Instant::now();
    while server.json("GET", &format!("/api/songs/{first}"), None).1["state"] == "queued" {
        assert!(start.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(10));
    }
    let (_, waiting) = server.json("GET", &format!("/api/songs/{second}"), None);
    assert_eq!((&waiting["state"], &waiting["place"]), (&json!("queued"), &json!(1)), "{waiting}");
    let (status, _) = server.json("DELETE", &format!("/api/songs/{first}"), None);
    assert_eq!(status, 200);
    assert_eq!(server.wait(first)["state"], "cancelled");
    assert_eq!(server.wait(second)["state"], "finished");
    let (status, error) = server.json("GET", &format!("/api/songs/{first}/audio.wav"), None);
    assert_eq!(status, 409, "{error}");
    // Only the finished song is in the library; the cancelled one left no file.
    let (_, list) = server.json("GET", "/api/library", None);
    assert_eq!(list["songs"].as_array().unwrap().len(), 1, "{list}");
    let files = std::fs::read_dir(dir.path().join("library/songs")).unwrap().count();
    assert_eq!(files, 1);
}

#[test]
fn bad_requests_are_one_line_json_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let too_long = "a".repeat(100_000);
    let cases: Vec<(&str, &str, Option<String>, u16, &str)> = vec![
        ("POST", "/api/songs", Some(song("", json!(5)).to_string()), 400, "description is empty"),
        ("POST", "/api/songs", Some("{nope".into()), 400, "not a song"),
        (
            "POST",
            "/api/songs",
            Some(json!({"description": "x", "lyrics": "y", "colour": 1}).to_string()),
            400,
            "colour",
        ),
        ("POST", "/api/songs", Some(song("x", json!(9999)).to_string()), 400, "at most 360 s"),
        ("POST", "/api/songs", Some(song("x", json!("soon")).to_string()), 400, "soon"),
        (
            "POST",
            "/api/songs",
            Some(json!({"description": "x", "lyrics": "y", "precision": "bf16"}).to_string()),
            400,
            "reference precision",
        ),
        ("POST", "/api/songs", Some(json!({"description": too_long, "lyrics": "y"}).to_string()), 413, "too large"),
        ("GET", "/api/songs/99", None, 404, "no such song"),
        ("GET", "/api/songs/abc", None, 400, "not a song id"),
        ("DELETE", "/api/library/5", None, 404, "no such song"),
        ("PATCH", "/api/library/5", Some("{}".into()), 400, "title"),
        ("GET", "/api/nowhere", None, 404, "no such endpoint"),
    ];
    for (method, path, body, status, words) in cases {
        let (got, bytes) = server.call(method, path, body.as_deref());
        let text = String::from_utf8_lossy(&bytes);
        assert_eq!(got, status, "{method} {path}: {text}");
        let error: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{method} {path}: not JSON: {text}"));
        let message = error["error"].as_str().unwrap_or_else(|| panic!("{text}"));
        assert!(message.contains(words) && !message.contains('\n'), "{method} {path}: {message}");
    }
    let (status, devices) = server.json("GET", "/api/devices", None);
    assert_eq!(status, 200);
    assert_eq!(devices["devices"][0]["name"], "cpu", "{devices}");
    let (_, model) = server.json("GET", "/api/model", None);
    assert_eq!(model["embedded"], true, "{model}");
}

#[test]
fn ctrl_c_stops_the_server_and_cancels_the_song_in_progress() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path());
    let (_, created) = server.json("POST", "/api/songs", Some(song("long", json!(60))));
    let id = created["id"].as_u64().unwrap();
    let start = Instant::now();
    while server.json("GET", &format!("/api/songs/{id}"), None).1["state"] != "running" {
        assert!(start.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: the child's pid; SIGINT is what Ctrl-C sends.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGINT) };
    let status = server.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let mut stderr = String::new();
    server.child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(stderr.contains("cancelled"), "{stderr}");
    let songs = dir.path().join("library/songs");
    let left: Vec<_> = std::fs::read_dir(&songs).map(|d| d.map(|e| e.unwrap().path()).collect()).unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_long_running_server_keeps_only_the_newest_streams_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let ids: Vec<u64> = (0..6)
        .map(|i| {
            server.json("POST", "/api/songs", Some(song(&format!("song {i}"), json!(1)))).1["id"].as_u64().unwrap()
        })
        .collect();
    for &id in &ids {
        assert_eq!(server.wait(id)["state"], "finished");
    }
    // The oldest's stream is gone and says where the song is; the newest streams; both WAVs remain.
    let (status, error) = server.json("GET", &format!("/api/songs/{}/stream.pcm", ids[0]), None);
    assert_eq!(status, 410, "{error}");
    assert!(error["error"].as_str().unwrap().contains("audio.wav"), "{error}");
    let (status, pcm) = server.call("GET", &format!("/api/songs/{}/stream.pcm", ids[5]), None);
    assert!(status == 200 && !pcm.is_empty());
    for id in [ids[0], ids[5]] {
        assert_eq!(server.call("GET", &format!("/api/songs/{id}/audio.wav"), None).0, 200);
    }
}
