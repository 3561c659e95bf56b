//! The server, the CLI's `--json` and the browser client agree on every body: each answer of a
//! real server (and each line of a real `generate --json`) reads as its wire type, that type writes
//! it back field for field (so no field is unknown to the client or missing), and the browser
//! client's own functions (`songloom_web::client`, its Server-Sent Event reader) make of it what
//! the window shows.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use songloom_ui::contract::{EngineEvent, Recipe, Timings};
use songloom_web::client;
use songloom_web::sse::SseReader;
use songloom_wire::{
    Deleted, Devices, ErrorBody, Event, LibraryList, Rename, Renamed, ServedModel, SongCreated, SongState, SongStatus,
};

mod common;

use common::Server;

/// `raw` read as `T`, which writes it back exactly.
fn agree<T: Serialize + DeserializeOwned>(raw: &Value) -> T {
    let typed: T = serde_json::from_value(raw.clone())
        .unwrap_or_else(|e| panic!("{raw} is not a {}: {e}", std::any::type_name::<T>()));
    // Through text, as it travels (an f32 written as text reads back as the same f64).
    let written: Value = serde_json::from_str(&serde_json::to_string(&typed).unwrap()).unwrap();
    assert_eq!(&written, raw, "{} drops or changes a field", std::any::type_name::<T>());
    typed
}

fn body_of<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap()
}

#[test]
fn the_browser_client_reads_every_answer_of_the_server_as_the_server_writes_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let recipe = Recipe {
        description: "warm lo-fi piano".into(),
        lyrics: "[verse]\nla la la".into(),
        duration_s: 2.0,
        seed: 3,
        steps: 2,
        ..Recipe::default()
    };
    let (status, created) = server.json("POST", "/api/songs", Some(body_of(&client::song_request(&recipe))));
    assert_eq!(status, 201, "{created}");
    let created: SongCreated = agree(&created);
    assert_eq!(created.state, SongState::Queued { place: Some(1) });
    let id = created.id;

    // Every event, through the page's own reader, as the page's progress.
    let (status, stream) = server.call("GET", &format!("/api/songs/{id}/events"), None);
    assert_eq!(status, 200);
    let mut reader = SseReader::default();
    let mut names = Vec::new();
    let mut stages = 0;
    let mut saved = None;
    for sse in reader.feed(&stream) {
        let event: Event = agree(&serde_json::from_str(&sse.data).unwrap());
        assert_eq!(sse.name, event.name());
        names.push(sse.name);
        if let Some(progress) = client::progress_event(7, &event) {
            assert!(matches!(progress, EngineEvent::Stage { job: 7, .. }));
            stages += 1;
        }
        match event {
            Event::Finished(stats) => assert_eq!(Timings::from(&stats).frames, stats.frames),
            Event::Saved { library_id, title } => saved = Some((library_id, title)),
            _ => {}
        }
    }
    assert!(stages > 0 && names.contains(&"audio".to_string()) && names.contains(&"finished".to_string()), "{names:?}");
    let (library_id, title) = saved.expect("a saved event");

    let status: SongStatus = agree(&server.wait(id));
    assert_eq!(status.state, SongState::Finished { library_id });
    assert_eq!((status.description.as_str(), status.seed), ("warm lo-fi piano", 3));

    let (_, list) = server.json("GET", "/api/library", None);
    let list: LibraryList = agree(&list);
    let entry = client::song_entry(list.songs[0].clone());
    assert_eq!(
        (entry.id, entry.title.as_str(), entry.recipe.description.as_str()),
        (library_id, title.as_str(), "warm lo-fi piano")
    );

    // The stored file through the one WAV reader: the stream's samples.
    let (_, pcm) = server.call("GET", &format!("/api/songs/{id}/stream.pcm"), None);
    let (_, file) = server.call("GET", &format!("/api/library/{library_id}/audio.wav"), None);
    let wav = songloom_wire::wav::read(&file).unwrap();
    assert_eq!(wav.info.title.as_deref(), Some(title.as_str()));
    let streamed: Vec<f32> = pcm.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    assert_eq!((wav.sample_rate, wav.into_stereo().unwrap()), (44_100, streamed));

    let rename = Rename { title: "Morning".into() };
    let (status, renamed) = server.json("PATCH", &format!("/api/library/{library_id}"), Some(body_of(&rename)));
    assert_eq!(status, 200);
    assert_eq!(agree::<Renamed>(&renamed), Renamed { id: library_id, title: "Morning".into() });

    let (_, devices) = server.json("GET", "/api/devices", None);
    let devices: Devices = agree(&devices);
    let cpu = client::device_status(&devices.devices[0]);
    assert_eq!(cpu.name, "cpu");
    assert!(cpu.available.is_ok(), "{cpu:?}");

    let (_, model) = server.json("GET", "/api/model", None);
    let model: ServedModel = agree(&model);
    assert!(client::model_summary(&model).contains("the built-in model"), "{model:?}");

    // A song cancelled while it waits behind another.
    let long = Recipe { duration_s: 30.0, ..recipe.clone() };
    let first = agree::<SongCreated>(&server.json("POST", "/api/songs", Some(body_of(&client::song_request(&long)))).1);
    let second =
        agree::<SongCreated>(&server.json("POST", "/api/songs", Some(body_of(&client::song_request(&recipe)))).1);
    let (status, cancelled) = server.json("DELETE", &format!("/api/songs/{}", second.id), None);
    assert_eq!(status, 200);
    assert_eq!(agree::<SongStatus>(&cancelled).state, SongState::Cancelled);
    server.json("DELETE", &format!("/api/songs/{}", first.id), None);

    let (status, deleted) = server.json("DELETE", &format!("/api/library/{library_id}"), None);
    assert_eq!(status, 200);
    assert_eq!(agree::<Deleted>(&deleted), Deleted { id: library_id, deleted: true });
    for (method, path) in [("GET", "/api/songs/99"), ("DELETE", "/api/library/5"), ("GET", "/api/nowhere")] {
        let (status, error) = server.json(method, path, None);
        assert_eq!(status, 404);
        assert!(agree::<ErrorBody>(&error).error.starts_with("no such"), "{error}");
    }
}

/// The page's takes: one request for three takes, answered with three ids, which the page follows
/// as a job each: three songs of seeds 3, 4 and 5, each saved in the library on its own.
#[test]
fn the_browser_clients_takes_are_a_song_each_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &["--listen", "127.0.0.1:0", "--batch", "4"]).0;
    let recipe = Recipe { description: "three takes".into(), duration_s: 2.0, seed: 3, steps: 2, ..Recipe::default() };
    let body = body_of(&client::takes_request(&recipe, 3));
    assert_eq!(body["takes"], 3);
    let (status, created) = server.json("POST", "/api/songs", Some(body));
    assert_eq!(status, 201, "{created}");
    let ids = client::song_ids(&agree::<SongCreated>(&created));
    assert_eq!(ids.len(), 3, "{created}");
    let mut saved = Vec::new();
    for (k, &id) in ids.iter().enumerate() {
        let (_, stream) = server.call("GET", &format!("/api/songs/{id}/events"), None);
        let ends: Vec<Event> = SseReader::default()
            .feed(&stream)
            .iter()
            .filter_map(|sse| serde_json::from_str::<Event>(&sse.data).ok())
            .filter(|e| matches!(e, Event::Saved { .. } | Event::Error { .. } | Event::Cancelled))
            .collect();
        let Some(Event::Saved { library_id, .. }) = ends.first() else { panic!("take {} not saved: {ends:?}", k + 1) };
        let status: SongStatus = agree(&server.wait(id));
        assert_eq!((status.seed, &status.state), (3 + k as u64, &SongState::Finished { library_id: *library_id }));
        saved.push(*library_id);
    }
    let (_, list) = server.json("GET", "/api/library", None);
    let mut seeds: Vec<(i64, u64)> = agree::<LibraryList>(&list)
        .songs
        .into_iter()
        .map(client::song_entry)
        .map(|song| (song.id, song.recipe.seed))
        .collect();
    seeds.sort();
    let mut expected: Vec<(i64, u64)> = saved.into_iter().zip([3, 4, 5]).collect();
    expected.sort();
    assert_eq!(seeds, expected);
    // One take asks as a song alone does, and is answered with its id alone.
    let one = body_of(&client::takes_request(&recipe, 1));
    assert!(one.get("takes").is_none(), "{one}");
}

#[test]
fn every_line_of_generate_json_is_a_wire_event() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("song.wav");
    let r = std::process::Command::new(env!("CARGO_BIN_EXE_songloom"))
        .args(["generate", "--device", "cpu", "--duration", "2", "--steps", "2", "--no-play", "--json", "--save"])
        .args(["--prompt", "piano", "--lyrics", "[verse] la\\nla la", "--out"])
        .arg(&out)
        .arg("--library")
        .arg(dir.path().join("library"))
        .env("XDG_CACHE_HOME", dir.path())
        .env("SONGLOOM_MODEL", common::tiny_model())
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let events: Vec<Event> =
        String::from_utf8(r.stdout).unwrap().lines().map(|l| agree(&serde_json::from_str(l).unwrap())).collect();
    let names: Vec<&str> = events.iter().map(Event::name).collect();
    for expected in ["warning", "plan", "start", "stage", "audio", "finished", "written", "saved"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
}
