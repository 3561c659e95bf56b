//! `songloom serve --batch N`: songs queued while another runs join it at its next frame (they
//! finish before the long song they joined), each song is the one the CLI makes alone with its
//! recipe, a song cancelled mid-batch leaves the others as they are, and takes asked in one
//! request are songs of their seeds.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod common;

use common::Server;

fn song(description: &str, seconds: u64, seed: u64) -> Value {
    json!({"description": description, "lyrics": "[verse]\nla la la", "duration": seconds, "seed": seed, "steps": 2})
}

fn samples(wav: &[u8]) -> Vec<f32> {
    hound::WavReader::new(std::io::Cursor::new(wav)).unwrap().into_samples::<f32>().map(Result::unwrap).collect()
}

/// The song the CLI makes alone with the recipe of `song`.
fn alone(dir: &Path, song: &Value) -> Vec<f32> {
    let out = dir.join(format!("alone-{}.wav", song["seed"]));
    let result = std::process::Command::new(env!("CARGO_BIN_EXE_songloom"))
        .args(["generate", "--device", "cpu", "--steps", "2", "--lyrics", "[verse]\nla la la"])
        .args(["--duration", &song["duration"].to_string(), "--seed", &song["seed"].to_string()])
        .args(["--prompt", song["description"].as_str().unwrap(), "--out"])
        .arg(&out)
        .env("XDG_CACHE_HOME", dir)
        .env("SONGLOOM_MODEL", common::tiny_model())
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    hound::WavReader::open(&out).unwrap().into_samples::<f32>().map(Result::unwrap).collect()
}

fn state(server: &Server, id: u64) -> Value {
    server.json("GET", &format!("/api/songs/{id}"), None).1
}

/// Polls until `ready` holds for song `id`'s status.
fn until(server: &Server, id: u64, ready: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let status = state(server, id);
        if ready(&status) {
            return status;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "song {id}: {status}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn songs_join_a_running_batch_and_are_the_songs_made_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = Server::start_with(dir.path(), &["--listen", "127.0.0.1:0", "--batch", "3"]);
    let long = song("a long slow drone", 100, 21);
    let (short, cancelled, later) = (song("a short jig", 3, 22), song("cancel me", 100, 23), song("a waltz", 4, 24));
    let post = |s: &Value| server.json("POST", "/api/songs", Some(s.clone())).1["id"].as_u64().unwrap();
    let first = post(&long);
    until(&server, first, |s| s["state"] == "running");
    let joined = post(&short);
    let to_cancel = post(&cancelled);
    // The short song joins the long one and is over long before it.
    until(&server, joined, |s| s["state"] == "finished");
    assert_eq!(state(&server, first)["state"], "running", "the short song waited for the long one");
    until(&server, to_cancel, |s| s["state"] == "running" && s["fraction"].as_f64().unwrap_or(0.0) > 0.0);
    assert_eq!(server.json("DELETE", &format!("/api/songs/{to_cancel}"), None).0, 200);
    let third = post(&later);
    assert_eq!(server.wait(to_cancel)["state"], "cancelled");
    for id in [first, joined, third] {
        assert_eq!(server.wait(id)["state"], "finished");
    }
    for (id, recipe) in [(first, &long), (joined, &short), (third, &later)] {
        let (status, wav) = server.call("GET", &format!("/api/songs/{id}/audio.wav"), None);
        assert_eq!(status, 200);
        assert!(samples(&wav) == alone(dir.path(), recipe), "song {id} differs from the song made alone");
    }
    assert_eq!(server.json("GET", &format!("/api/songs/{to_cancel}/audio.wav"), None).0, 409);
    // Takes in one request: a song each, of seeds 30, 31, 32.
    let mut takes = song("three takes", 2, 30);
    takes["takes"] = json!(3);
    let (status, created) = server.json("POST", "/api/songs", Some(takes.clone()));
    assert_eq!(status, 201, "{created}");
    let ids: Vec<u64> = created["takes"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!((ids.len(), ids[0]), (3, created["id"].as_u64().unwrap()));
    for (k, id) in ids.into_iter().enumerate() {
        assert_eq!(server.wait(id)["state"], "finished");
        let (_, wav) = server.call("GET", &format!("/api/songs/{id}/audio.wav"), None);
        let recipe = song("three takes", 2, 30 + k as u64);
        assert!(samples(&wav) == alone(dir.path(), &recipe), "take {} is not its seed's song", k + 1);
    }
    takes["takes"] = json!(9);
    let (status, error) = server.json("POST", "/api/songs", Some(takes));
    assert!(status == 400 && error["error"].as_str().unwrap().contains("takes must be 1 to 8"), "{error}");
}
