//! `songloom serve` on the embedded default model, driven over HTTP as a script would: a song
//! queued, its events streamed, its audio streamed and then fetched as a WAV that matches; a queue
//! of two with one cancelled; every bad request a 4xx with a one-line JSON error; Ctrl-C stops the
//! server and leaves no half-written file.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod common;

use common::{Server, request};

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
    // The same request and seed through the CLI make the same samples.
    let cli_wav = dir.path().join("cli.wav");
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_songloom"))
        .args(["generate", "--device", "cpu", "--duration", "0:03", "--seed", "3", "--steps", "2", "--lyrics"])
        .arg("[verse]\nla la la")
        .arg("--out")
        .arg(&cli_wav)
        .args(["--prompt", "warm lo-fi piano"])
        .env("XDG_CACHE_HOME", dir.path())
        .env("SONGLOOM_MODEL", common::tiny_model())
        .output()
        .unwrap();
    assert!(cli.status.success(), "{}", String::from_utf8_lossy(&cli.stderr));
    let from_cli: Vec<f32> =
        hound::WavReader::open(&cli_wav).unwrap().into_samples::<f32>().map(Result::unwrap).collect();
    assert_eq!(from_cli, streamed, "the CLI's song and the server's stream differ");
    // Kept in the library, which the API lists and renames.
    let library_id = song["library_id"].as_i64().unwrap();
    let (_, list) = server.json("GET", "/api/library", None);
    assert_eq!(list["songs"][0]["id"], library_id, "{list}");
    let (status, _) = server.json("PATCH", &format!("/api/library/{library_id}"), Some(json!({"title": "Morning"})));
    assert_eq!(status, 200);
    let (_, list) = server.json("GET", "/api/library", None);
    assert_eq!(list["songs"][0]["title"], "Morning");
    // A library song's file, as stored and as 16-bit PCM for a download, with its title in it.
    let (status, stored) = server.call("GET", &format!("/api/library/{library_id}/audio.wav"), None);
    assert_eq!(status, 200);
    let stored: Vec<f32> =
        hound::WavReader::new(std::io::Cursor::new(stored)).unwrap().into_samples().map(Result::unwrap).collect();
    assert_eq!(stored, samples);
    let (status, pcm16) =
        server.call("GET", &format!("/api/library/{library_id}/audio.wav?format=pcm16&download=1"), None);
    assert_eq!(status, 200);
    let reader = hound::WavReader::new(std::io::Cursor::new(&pcm16)).unwrap();
    assert_eq!((reader.spec().bits_per_sample, reader.len() as usize), (16, samples.len()));
    assert!(pcm16.windows(7).any(|w| w == b"Morning"), "the title is in the file's tags");
    let (status, head, flac) =
        request(&server.addr, "GET", &format!("/api/library/{library_id}/audio.flac?download=1"), &[], None);
    assert_eq!(status, 200);
    assert!(flac.starts_with(b"fLaC") && head.contains("filename=\"morning.flac\""), "{head}");
}

#[test]
fn a_queue_of_three_with_one_cancelled_running_and_one_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let ids: Vec<u64> = [("first", 30), ("second", 2), ("third", 2)]
        .into_iter()
        .map(|(name, seconds)| {
            server.json("POST", "/api/songs", Some(song(name, json!(seconds)))).1["id"].as_u64().unwrap()
        })
        .collect();
    let (first, second, third) = (ids[0], ids[1], ids[2]);
    // Once the first runs, the others wait in order, and say so.
    let start = Instant::now();
    while server.json("GET", &format!("/api/songs/{first}"), None).1["state"] == "queued" {
        assert!(start.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(10));
    }
    for (id, place) in [(second, 1), (third, 2)] {
        let (_, waiting) = server.json("GET", &format!("/api/songs/{id}"), None);
        assert_eq!((&waiting["state"], &waiting["place"]), (&json!("queued"), &json!(place)), "{waiting}");
    }
    // The running one and a waiting one cancelled: the waiting one never runs, the third moves up.
    assert_eq!(server.json("DELETE", &format!("/api/songs/{second}"), None).0, 200);
    assert_eq!(server.json("GET", &format!("/api/songs/{third}"), None).1["place"], 1);
    assert_eq!(server.json("DELETE", &format!("/api/songs/{first}"), None).0, 200);
    assert_eq!(server.wait(first)["state"], "cancelled");
    assert_eq!(server.wait(second)["state"], "cancelled");
    assert_eq!(server.wait(third)["state"], "finished");
    let (status, error) = server.json("GET", &format!("/api/songs/{first}/audio.wav"), None);
    assert_eq!(status, 409, "{error}");
    // Only the finished song is in the library; the cancelled ones left no file.
    let (_, list) = server.json("GET", "/api/library", None);
    assert_eq!(list["songs"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["songs"][0]["recipe"]["description"], "third");
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
        (
            "POST",
            "/api/songs",
            Some(json!({"description": "x", "lyrics": "[verse]\nla", "instrumental": true}).to_string()),
            400,
            "not both",
        ),
        ("GET", "/api/songs/99", None, 404, "no such song"),
        ("GET", "/api/songs/abc", None, 400, "not a song id"),
        ("DELETE", "/api/library/5", None, 404, "no such song"),
        ("PATCH", "/api/library/5", Some("{}".into()), 400, "title"),
        ("GET", "/api/library/5/audio.wav", None, 404, "no such song"),
        ("GET", "/api/library/5/audio.wav?format=mp3", None, 400, "float32 or pcm16"),
        ("GET", "/api/library/5/audio.flac?sample_rate=22050", None, 400, "16000, 24000, 32000, 44100"),
        ("GET", "/api/library/5/audio.mp3", None, 404, "audio.wav or audio.flac"),
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

#[test]
fn beyond_loopback_every_request_needs_the_token() {
    let dir = tempfile::tempdir().unwrap();
    // Listening on every interface without a token: one is made up and printed.
    let (server, token) = Server::start_with(dir.path(), &["--listen", "0.0.0.0:0"]);
    let token = token.expect("a token");
    assert!(token.len() >= 32, "{token}");
    // The printed address is one another machine can open: not the unspecified one.
    assert!(!server.addr.starts_with("0.0.0.0") && !server.addr.ends_with(":0"), "{}", server.addr);
    let addr = server.addr.clone();
    let (status, _, body) = request(&addr, "GET", "/api/model", &[], None);
    assert_eq!(status, 401);
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert!(error["error"].as_str().unwrap().contains("token"), "{error}");
    for path in ["/", "/api/library", "/api/songs/1/events", "/pkg/songloom_web_bg.wasm"] {
        assert_eq!(request(&addr, "GET", path, &[], None).0, 401, "{path} without the token");
    }
    let bearer = format!("Authorization: Bearer {token}");
    assert_eq!(request(&addr, "GET", "/api/model", &[&bearer], None).0, 200);
    assert_eq!(request(&addr, "GET", "/api/model", &["Authorization: Bearer wrong"], None).0, 401);
    // The page's address carries it once; the cookie it sets carries it after.
    let (status, head, _) = request(&addr, "GET", &format!("/?token={token}"), &[], None);
    assert_ne!(status, 401);
    assert!(head.contains(&format!("set-cookie: songloom_token={}; httponly; samesite=strict", token.to_lowercase())));
    let cookie = format!("Cookie: songloom_token={token}");
    assert_eq!(request(&addr, "GET", "/api/library", &[&cookie], None).0, 200);
    // No CORS: no other site's page may read the answers.
    let (_, head, _) = request(&addr, "GET", "/api/model", &[&bearer, "Origin: http://elsewhere"], None);
    assert!(!head.contains("access-control-allow-origin"), "{head}");
}

#[test]
fn a_token_given_on_loopback_is_checked_there_too_and_must_be_long() {
    let dir = tempfile::tempdir().unwrap();
    let token = "a-long-enough-token-1234";
    let (server, printed) = Server::start_with(dir.path(), &["--listen", "127.0.0.1:0", "--token", token]);
    assert_eq!(printed.as_deref(), Some(token));
    assert_eq!(request(&server.addr, "GET", "/api/model", &[], None).0, 401);
    assert_eq!(request(&server.addr, "GET", "/api/model", &[&format!("Authorization: Bearer {token}")], None).0, 200);
    let short = std::process::Command::new(env!("CARGO_BIN_EXE_songloom"))
        .args(["serve", "--listen", "127.0.0.1:0", "--token", "short"])
        .output()
        .unwrap();
    assert!(!short.status.success());
    assert!(
        String::from_utf8_lossy(&short.stderr).contains("at least 16"),
        "{}",
        String::from_utf8_lossy(&short.stderr)
    );
}

#[test]
fn a_client_that_leaves_mid_song_does_not_stop_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let (_, created) = server.json("POST", "/api/songs", Some(song("left behind", json!(8))));
    let id = created["id"].as_u64().unwrap();
    // Two clients start reading the events and the audio, and go away after their first bytes.
    for path in [format!("/api/songs/{id}/events"), format!("/api/songs/{id}/stream.pcm")] {
        let mut stream = std::net::TcpStream::connect(&server.addr).unwrap();
        write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
        let mut first = [0u8; 64];
        assert!(stream.read(&mut first).unwrap() > 0);
        drop(stream);
    }
    let song = server.wait(id);
    assert_eq!(song["state"], "finished", "{song}");
    // And a client that comes after reads the whole song.
    let (status, pcm) = server.call("GET", &format!("/api/songs/{id}/stream.pcm"), None);
    assert_eq!(status, 200);
    assert_eq!(pcm.len() / 8, (song["seconds_made"].as_f64().unwrap() * 44_100.0).round() as usize, "{song}");
}

/// `GET /api/songs` lists the server's songs with how far each has come, and a song whose lyrics
/// have text the model drops comes back with the same warning `generate` prints.
#[test]
fn the_queue_is_listed_and_lyrics_warnings_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let warned = json!({"description": "piano", "lyrics": "[verse] la la\n[chorus]\noh", "duration": 1, "steps": 2});
    let (status, first) = server.json("POST", "/api/songs", Some(warned));
    assert_eq!(status, 201, "{first}");
    let warning = first["warnings"][0].as_str().unwrap_or_default();
    assert!(warning.contains("\"la la\" after [verse]"), "{first}");
    let (_, second) = server.json("POST", "/api/songs", Some(song("organ", json!(1))));
    assert!(second.get("warnings").is_none(), "clean lyrics were warned about: {second}");
    let (first, second) = (first["id"].as_u64().unwrap(), second["id"].as_u64().unwrap());
    let (status, listed) = server.json("GET", "/api/songs", None);
    assert_eq!(status, 200, "{listed}");
    let ids: Vec<u64> = listed["songs"].as_array().unwrap().iter().map(|s| s["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, vec![first, second], "{listed}");
    for song in listed["songs"].as_array().unwrap() {
        let fraction = song["fraction"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&fraction), "{song}");
        if song["state"] == "queued" {
            assert_eq!(fraction, 0.0, "{song}");
        }
    }
    server.wait(first);
    server.wait(second);
    let (_, listed) = server.json("GET", "/api/songs", None);
    for song in listed["songs"].as_array().unwrap() {
        assert_eq!((song["state"].as_str(), song["fraction"].as_f64()), (Some("finished"), Some(1.0)), "{song}");
        assert!(song["eta_s"].is_null(), "{song}");
    }
}

/// `instrumental` (or the cloud's `is_instrumental`) makes a song without lyrics: the recipe kept
/// in the library has the lyrics the model knows for no singing.
#[test]
fn an_instrumental_song_needs_no_lyrics() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let ask = json!({"description": "calm ambient pads", "is_instrumental": true, "duration": 1, "steps": 1});
    let (status, created) = server.json("POST", "/api/songs", Some(ask));
    assert_eq!(status, 201, "{created}");
    let song = server.wait(created["id"].as_u64().unwrap());
    assert_eq!(song["state"], "finished", "{song}");
    let (_, list) = server.json("GET", "/api/library", None);
    assert_eq!(list["songs"][0]["recipe"]["lyrics"], "[instrumental]", "{list}");
}

/// `serve --lora`: the server says which adapters it merged, and each song's recipe records them
/// with their checksums.
#[test]
fn a_server_with_lora_adapters_names_them_and_records_them_in_each_song() {
    let dir = tempfile::tempdir().unwrap();
    let file = common::tiny_model().join("../lora/pytorch_lora_weights.safetensors");
    let lora = format!("{}:0.5", file.display());
    let (server, _) = Server::start_with(dir.path(), &["--listen", "127.0.0.1:0", "--lora", &lora]);
    let (_, model) = server.json("GET", "/api/model", None);
    let adapters = model["adapters"].as_array().unwrap_or_else(|| panic!("{model}"));
    assert_eq!(adapters.len(), 1, "{model}");
    assert_eq!(
        (adapters[0]["name"].as_str(), adapters[0]["scale"].as_f64()),
        (Some("pytorch_lora_weights.safetensors"), Some(0.5))
    );
    assert_eq!(adapters[0]["sha256"].as_str().map(str::len), Some(64), "{model}");
    let (_, created) = server.json("POST", "/api/songs", Some(song("lora piano", json!(1))));
    let song = server.wait(created["id"].as_u64().unwrap());
    assert_eq!(song["state"], "finished", "{song}");
    let (_, library) = server.json("GET", "/api/library", None);
    assert_eq!(library["songs"][0]["recipe"]["adapters"], Value::Array(adapters.clone()), "{library}");
}

/// `POST /api/songs/ID/edits` (ID a library id): the edit is queued and followed like a song, its
/// new version kept in the library under its parent with the parent's audio before the splice;
/// an edit that cannot be made is a one-line 4xx.
#[test]
fn a_song_is_edited_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let (status, created) = server.json("POST", "/api/songs", Some(song("warm lo-fi piano", json!(12))));
    assert_eq!(status, 201, "{created}");
    let original = server.wait(created["id"].as_u64().unwrap());
    let library_id = original["library_id"].as_i64().unwrap();
    let (_, list) = server.json("GET", "/api/library", None);
    assert!(list["songs"][0].get("not_editable").is_none(), "a new song can be edited: {list}");

    let (status, created) = server.json(
        "POST",
        &format!("/api/songs/{library_id}/edits"),
        Some(json!({"kind": "rerender", "from_s": 6, "to_s": 9, "seed": 8})),
    );
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_u64().unwrap();
    let (status, events) = server.call("GET", &format!("/api/songs/{id}/events"), None);
    assert_eq!(status, 200);
    let events = String::from_utf8(events).unwrap();
    let names: Vec<&str> = events.lines().filter_map(|l| l.strip_prefix("event: ")).collect();
    for expected in ["audio", "finished", "saved"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    let edited = server.wait(id);
    assert_eq!(edited["state"], "finished", "{edited}");
    let version_id = edited["library_id"].as_i64().unwrap();
    let (_, list) = server.json("GET", "/api/library", None);
    let version = list["songs"].as_array().unwrap().iter().find(|s| s["id"] == version_id).unwrap().clone();
    assert_eq!(version["parent"], library_id, "{version}");
    assert_eq!(version["edit_kind"], "rerender");
    let edit = &version["recipe"]["edit"];
    let wav = |id: i64| -> Vec<f32> {
        let (status, bytes) = server.call("GET", &format!("/api/library/{id}/audio.wav"), None);
        assert_eq!(status, 200);
        hound::WavReader::new(std::io::Cursor::new(bytes)).unwrap().into_samples().map(Result::unwrap).collect()
    };
    let (before, after) = (wav(library_id), wav(version_id));
    let from = (edit["changed_from_s"].as_f64().unwrap() * 44100.0).round() as usize * 2;
    let to = (edit["changed_to_s"].as_f64().unwrap() * 44100.0).round() as usize * 2;
    assert_eq!(before.len(), after.len());
    assert_eq!(before[..from], after[..from], "the audio before the range");
    assert_eq!(before[to..], after[to..], "the audio after the range");
    assert_ne!(before[from..to], after[from..to], "the range is drawn again");
    // The streamed audio is the version's, kept part first.
    let (_, pcm) = server.call("GET", &format!("/api/songs/{id}/stream.pcm"), None);
    let streamed: Vec<f32> = pcm.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    assert_eq!(streamed, after);

    // The other kinds, each a version under the song with its audio before the splice kept.
    for body in [
        json!({"kind": "extend", "seconds": 3}),
        json!({"kind": "from", "at_s": 10, "description": "fast bright strings"}),
        json!({"kind": "resing", "line": 1, "lyrics": "we sail away", "at_s": 10}),
    ] {
        let (status, created) = server.json("POST", &format!("/api/songs/{library_id}/edits"), Some(body.clone()));
        assert_eq!(status, 201, "{body}: {created}");
        let edited = server.wait(created["id"].as_u64().unwrap());
        assert_eq!(edited["state"], "finished", "{body}: {edited}");
        let version_id = edited["library_id"].as_i64().unwrap();
        let (_, list) = server.json("GET", "/api/library", None);
        let version = list["songs"].as_array().unwrap().iter().find(|s| s["id"] == version_id).unwrap().clone();
        assert_eq!((&version["parent"], &version["edit_kind"]), (&json!(library_id), &body["kind"]), "{version}");
        let from = (version["recipe"]["edit"]["changed_from_s"].as_f64().unwrap() * 44100.0).round() as usize * 2;
        let after = wav(version_id);
        assert!(from > 0 && after[..from] == before[..from], "{body}: the audio before the splice");
    }

    for (path, body, status, expected) in [
        ("/api/songs/99/edits", json!({"kind": "extend"}), 404, "no song 99"),
        ("/api/songs/x/edits", json!({"kind": "extend"}), 400, "not a library id"),
        (&format!("/api/songs/{library_id}/edits") as &str, json!({"kind": "remix"}), 400, "not an edit"),
        (
            &format!("/api/songs/{library_id}/edits"),
            json!({"kind": "from", "at_s": 99, "seed": 4}),
            400,
            "within the song",
        ),
        (&format!("/api/songs/{library_id}/edits"), json!({"kind": "rerender", "from_s": 5}), 400, "to_s"),
    ] {
        let (got, answer) = server.json("POST", path, Some(body.clone()));
        assert_eq!(got, status, "{path} {body}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains(expected), "{path} {body}: {answer}");
    }
}
