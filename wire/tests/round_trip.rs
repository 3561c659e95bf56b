//! Every wire type and every variant: its JSON is the documented one (the README's API section,
//! the CLI's `--json` lines), and it reads back as the same value. A variant added without a case
//! here fails to compile (the `match`es name every variant).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use songloom_wire::*;

/// `value` is written as `expected` and `expected` reads back as `value`.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(value: &T, expected: Value) {
    assert_eq!(serde_json::to_value(value).unwrap(), expected, "{value:?} written");
    assert_eq!(&serde_json::from_value::<T>(expected.clone()).unwrap(), value, "{expected} read");
    let line = serde_json::to_string(value).unwrap();
    assert!(!line.contains('\n'), "{line}");
}

fn stats() -> (Stats, Value) {
    let stats = Stats {
        frames: 75,
        windows: 1,
        samples: 132_300,
        sample_rate: 44_100,
        tokenize_s: 0.01,
        ar_s: 1.5,
        acoustic_s: 2.0,
        total_s: 3.6,
        time_to_first_audio_s: Some(1.9),
        ar_device_wait_s: 1.25,
        overlap_s: 1.0,
        ar_sampling_s: 0.05,
        ar_handing_on_s: 0.01,
        ar_semantic_s: 0.5,
        ar_depth_s: 0.625,
        ar_states_s: 0.125,
        ar_feed_s: 0.25,
    };
    let value = json!({"frames": 75, "windows": 1, "samples": 132_300, "sample_rate": 44_100, "tokenize_s": 0.01,
                       "ar_s": 1.5, "acoustic_s": 2.0, "total_s": 3.6, "time_to_first_audio_s": 1.9,
                       "ar_device_wait_s": 1.25, "overlap_s": 1.0, "ar_sampling_s": 0.05, "ar_handing_on_s": 0.01,
                       "ar_semantic_s": 0.5, "ar_depth_s": 0.625, "ar_states_s": 0.125, "ar_feed_s": 0.25});
    (stats, value)
}

#[test]
fn every_stage_has_its_one_name() {
    let cases = [
        (Stage::Load { half: Half::Ar }, json!({"name": "load", "half": "ar"})),
        (Stage::Load { half: Half::Acoustic }, json!({"name": "load", "half": "acoustic"})),
        (Stage::Tokenize, json!({"name": "tokenize"})),
        (Stage::ArFrames, json!({"name": "ar_frames"})),
        (Stage::Dit { window: 1, windows: 3 }, json!({"name": "dit", "window": 1, "windows": 3})),
        (Stage::Vocoder { window: 2, windows: 3 }, json!({"name": "vocoder", "window": 2, "windows": 3})),
    ];
    let mut seen = [false; 5];
    for (stage, value) in cases {
        round_trip(&stage, value);
        seen[match stage {
            Stage::Load { .. } => 0,
            Stage::Tokenize => 1,
            Stage::ArFrames => 2,
            Stage::Dit { .. } => 3,
            Stage::Vocoder { .. } => 4,
        }] = true;
    }
    assert!(seen.iter().all(|&s| s), "{seen:?}");
}

#[test]
fn every_event_has_its_documented_fields() {
    let (stats, stats_json) = stats();
    let mut finished = stats_json.clone();
    finished["event"] = json!("finished");
    let cases = [
        (Event::Warning { message: "dropped".into() }, json!({"event": "warning", "message": "dropped"})),
        (
            Event::Plan {
                weights: "bf16".into(),
                mode: "streamed".into(),
                peak_bytes: 1_500_000_000,
                budget_bytes: None,
            },
            json!({"event": "plan", "weights": "bf16", "mode": "streamed", "peak_bytes": 1_500_000_000u64, "budget_bytes": null}),
        ),
        (
            Event::Start { device: "cpu".into(), max_frames: 75 },
            json!({"event": "start", "device": "cpu", "max_frames": 75}),
        ),
        (
            Event::Stage { stage: Stage::Dit { window: 0, windows: 2 }, done: 3, total: 30 },
            json!({"event": "stage", "stage": {"name": "dit", "window": 0, "windows": 2}, "done": 3, "total": 30}),
        ),
        (
            Event::Audio { first_sample: 88_200, frames: 44_100, sample_rate: 44_100 },
            json!({"event": "audio", "first_sample": 88_200, "frames": 44_100, "sample_rate": 44_100}),
        ),
        (Event::Finished(stats), finished),
        (
            Event::Written {
                path: "song.wav".into(),
                seconds: 3.0,
                frames: 75,
                windows: 1,
                samples: 132_300,
                sample_rate: 44_100,
            },
            json!({"event": "written", "path": "song.wav", "seconds": 3.0, "frames": 75, "windows": 1,
                   "samples": 132_300, "sample_rate": 44_100}),
        ),
        (
            Event::Saved { library_id: 4, title: "Warm piano".into() },
            json!({"event": "saved", "library_id": 4, "title": "Warm piano"}),
        ),
        (Event::Error { message: "no model".into() }, json!({"event": "error", "message": "no model"})),
        (Event::Cancelled, json!({"event": "cancelled"})),
    ];
    let mut seen = [false; 10];
    for (event, value) in cases {
        assert_eq!(value["event"], event.name(), "the Server-Sent Event's name is the event field");
        assert_eq!(serde_json::from_str::<Event>(&event.to_line()).unwrap(), event);
        round_trip(&event, value);
        seen[match event {
            Event::Warning { .. } => 0,
            Event::Plan { .. } => 1,
            Event::Start { .. } => 2,
            Event::Stage { .. } => 3,
            Event::Audio { .. } => 4,
            Event::Finished(_) => 5,
            Event::Written { .. } => 6,
            Event::Saved { .. } => 7,
            Event::Error { .. } => 8,
            Event::Cancelled => 9,
        }] = true;
    }
    assert!(seen.iter().all(|&s| s), "{seen:?}");
    // A time to first audio not known is null.
    let (mut stats, mut value) = self::stats();
    stats.time_to_first_audio_s = None;
    value["time_to_first_audio_s"] = Value::Null;
    value["event"] = json!("finished");
    round_trip(&Event::Finished(stats.clone()), value.clone());
    // A server from before the time breakdown sends no wait, overlap or host times: they read as
    // zero.
    let mut older = value;
    let newer = [
        "ar_device_wait_s",
        "overlap_s",
        "ar_sampling_s",
        "ar_handing_on_s",
        "ar_semantic_s",
        "ar_depth_s",
        "ar_states_s",
        "ar_feed_s",
    ];
    older.as_object_mut().unwrap().retain(|k, _| !newer.contains(&k.as_str()));
    let read: Event = serde_json::from_value(older).unwrap();
    let zeros = Stats {
        ar_device_wait_s: 0.0,
        overlap_s: 0.0,
        ar_sampling_s: 0.0,
        ar_handing_on_s: 0.0,
        ar_semantic_s: 0.0,
        ar_depth_s: 0.0,
        ar_states_s: 0.0,
        ar_feed_s: 0.0,
        ..stats
    };
    assert_eq!(read, Event::Finished(zeros));
}

#[test]
fn every_song_state_has_its_documented_fields() {
    let status = |state: SongState| SongStatus {
        id: 2,
        state,
        description: "lo-fi".into(),
        duration_s: 30.0,
        seed: 7,
        seconds_made: 1.5,
        fraction: 0.25,
        eta_s: Some(12.5),
    };
    let cases = [
        (SongState::Queued { place: Some(1) }, json!({"state": "queued", "place": 1})),
        (SongState::Queued { place: None }, json!({"state": "queued", "place": null})),
        (SongState::Running, json!({"state": "running"})),
        (SongState::Finished { library_id: 9 }, json!({"state": "finished", "library_id": 9})),
        (SongState::Failed { error: "out of memory".into() }, json!({"state": "failed", "error": "out of memory"})),
        (SongState::Cancelled, json!({"state": "cancelled"})),
    ];
    let mut seen = [false; 5];
    for (state, fields) in cases {
        assert_eq!(fields["state"], state.name());
        let mut value = json!({"id": 2, "description": "lo-fi", "duration_s": 30.0, "seed": 7, "seconds_made": 1.5,
                               "fraction": 0.25, "eta_s": 12.5});
        value.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
        seen[match state {
            SongState::Queued { .. } => 0,
            SongState::Running => 1,
            SongState::Finished { .. } => 2,
            SongState::Failed { .. } => 3,
            SongState::Cancelled => 4,
        }] = true;
        round_trip(&status(state), value);
    }
    assert!(seen.iter().all(|&s| s), "{seen:?}");
    round_trip(
        &SongCreated { id: 1, state: SongState::Queued { place: Some(1) }, warnings: Vec::new(), takes: Vec::new() },
        json!({"id": 1, "state": "queued", "place": 1}),
    );
    round_trip(
        &SongCreated { id: 4, state: SongState::Queued { place: Some(2) }, warnings: Vec::new(), takes: vec![4, 5, 6] },
        json!({"id": 4, "state": "queued", "place": 2, "takes": [4, 5, 6]}),
    );
    let warned = vec!["Line 1: \"la\" after [verse] is dropped by the model; put it on its own line.".to_string()];
    round_trip(
        &SongCreated {
            id: 1,
            state: SongState::Queued { place: Some(1) },
            warnings: warned.clone(),
            takes: Vec::new(),
        },
        json!({"id": 1, "state": "queued", "place": 1, "warnings": warned}),
    );
    round_trip(
        &SongList { songs: vec![status(SongState::Running)] },
        json!({"songs": [{"id": 2, "state": "running", "description": "lo-fi", "duration_s": 30.0, "seed": 7,
                          "seconds_made": 1.5, "fraction": 0.25, "eta_s": 12.5}]}),
    );
}

#[test]
fn a_song_request_takes_seconds_or_text_and_nothing_unknown() {
    let full = SongRequest {
        description: "warm lo-fi piano".into(),
        lyrics: "[verse]\nla la la".into(),
        instrumental: false,
        duration: Some(SongLength::Text("1:30".into())),
        seed: Some(7),
        steps: Some(30),
        guidance: Some(1.5),
        precision: Some("reference".into()),
        takes: Some(3),
    };
    round_trip(
        &full,
        json!({"description": "warm lo-fi piano", "lyrics": "[verse]\nla la la", "duration": "1:30", "seed": 7,
               "steps": 30, "guidance": 1.5, "precision": "reference", "takes": 3}),
    );
    let seconds = SongRequest {
        duration: Some(SongLength::Seconds(90.0)),
        seed: None,
        steps: None,
        guidance: None,
        precision: None,
        takes: None,
        ..full
    };
    round_trip(&seconds, json!({"description": "warm lo-fi piano", "lyrics": "[verse]\nla la la", "duration": 90.0}));
    // An instrumental song needs no lyrics; MiniMax's cloud name for the flag is taken too.
    for flag in ["instrumental", "is_instrumental"] {
        let song: SongRequest = serde_json::from_value(json!({"description": "x", flag: true})).unwrap();
        assert!(song.instrumental && song.lyrics.is_empty(), "{flag}");
    }
    let whole: SongRequest =
        serde_json::from_value(json!({"description": "x", "lyrics": "y", "duration": 90})).unwrap();
    assert_eq!(whole.duration, Some(SongLength::Seconds(90.0)));
    let bare: SongRequest = serde_json::from_value(json!({"description": "x", "lyrics": "y", "seed": null})).unwrap();
    assert_eq!((bare.duration, bare.seed), (None, None));
    let unknown = serde_json::from_value::<SongRequest>(json!({"description": "x", "lyrics": "y", "colour": 1}));
    assert!(unknown.unwrap_err().to_string().contains("colour"));
    let odd = serde_json::from_value::<SongRequest>(json!({"description": "x", "lyrics": "y", "duration": true}));
    assert!(odd.unwrap_err().to_string().contains("seconds or text like \"1:30\""));
}

#[test]
fn the_library_and_its_changes() {
    let recipe = Recipe { description: "lo-fi".into(), seed: 3, ..Recipe::default() };
    let song = LibrarySong {
        id: 3,
        title: "Morning".into(),
        seconds: 2.5,
        created_unix: 1_700_000_000,
        recipe,
        parent: None,
        edit_kind: None,
        not_editable: None,
    };
    let recipe_json = serde_json::to_value(&song.recipe).unwrap();
    assert_eq!(recipe_json["description"], "lo-fi");
    assert_eq!(recipe_json["max_memory_gb"], Value::Null);
    // A version made by an edit names its parent and the edit; a song made from scratch has neither
    // key, as before versions existed.
    let version = LibrarySong { id: 4, parent: Some(3), edit_kind: Some("extend".into()), ..song.clone() };
    round_trip(
        &LibraryList { songs: vec![song, version] },
        json!({"songs": [
            {"id": 3, "title": "Morning", "seconds": 2.5, "created_unix": 1_700_000_000, "recipe": recipe_json},
            {"id": 4, "title": "Morning", "seconds": 2.5, "created_unix": 1_700_000_000, "recipe": recipe_json,
             "parent": 3, "edit_kind": "extend"},
        ]}),
    );
    round_trip(&Rename { title: "Evening".into() }, json!({"title": "Evening"}));
    assert!(serde_json::from_value::<Rename>(json!({})).unwrap_err().to_string().contains("title"));
    assert!(serde_json::from_value::<Rename>(json!({"title": "a", "x": 1})).is_err());
    round_trip(&Renamed { id: 3, title: "Evening".into() }, json!({"id": 3, "title": "Evening"}));
    round_trip(&Deleted { id: 3, deleted: true }, json!({"id": 3, "deleted": true}));
}

#[test]
fn a_recipe_survives_json_and_missing_fields_take_defaults() {
    let recipe = Recipe { description: "lo-fi".into(), lyrics: "[verse]\nla".into(), seed: 9, ..Recipe::default() };
    let text = serde_json::to_string(&recipe).unwrap();
    assert_eq!(serde_json::from_str::<Recipe>(&text).unwrap(), recipe);
    let partial: Recipe = serde_json::from_str(r#"{"description": "x"}"#).unwrap();
    assert_eq!((partial.steps, partial.device.as_str(), partial.guidance), (30, "auto", DEFAULT_GUIDANCE));
    // A recipe without adapters writes no `adapters` (as one written before they existed reads).
    assert!(partial.adapters.is_empty() && !text.contains("adapters"), "{text}");
}

#[test]
fn a_recipe_records_each_adapter_with_its_checksum_and_scale() {
    let adapter =
        AdapterRecipe { path: "/loras/vinyl".into(), name: "vinyl".into(), sha256: "ab".repeat(32), scale: 0.7 };
    let recipe = Recipe { adapters: vec![adapter.clone()], ..Recipe::default() };
    let value = serde_json::to_value(&recipe).unwrap();
    assert_eq!(
        value["adapters"],
        json!([{"path": "/loras/vinyl", "name": "vinyl", "sha256": "ab".repeat(32), "scale": 0.7}])
    );
    assert_eq!(serde_json::from_value::<Recipe>(value).unwrap().adapters, vec![adapter]);
}

#[test]
fn devices_the_model_and_errors() {
    let cpu = DeviceProbe::new("cpu", Ok("16 threads".into()));
    let cuda = DeviceProbe::new("cuda", Err("no NVIDIA driver".into()));
    assert_eq!((cpu.status(), cuda.status()), (Ok("16 threads".into()), Err("no NVIDIA driver".into())));
    round_trip(
        &Devices { devices: vec![cpu, cuda], serving_on: "16 threads".into() },
        json!({"devices": [{"name": "cpu", "available": true, "description": "16 threads"},
                           {"name": "cuda", "available": false, "reason": "no NVIDIA driver"}],
               "serving_on": "16 threads"}),
    );
    round_trip(
        &ServedModel {
            path: "/models/tiny".into(),
            embedded: true,
            plan: "all resident".into(),
            sample_rate: 44_100,
            device: "cpu (16 threads)".into(),
            adapters: Vec::new(),
        },
        json!({"path": "/models/tiny", "embedded": true, "plan": "all resident", "sample_rate": 44_100,
               "device": "cpu (16 threads)"}),
    );
    round_trip(&ErrorBody { error: "no such song".into() }, json!({"error": "no such song"}));
}

/// A guidance scale reads as typed (1.7) also where the JSON passes through `f64`, as a
/// `serde_json::Value` or a script's numbers do, not as the f32's binary tail.
#[test]
fn a_guidance_scale_is_written_as_typed() {
    let recipe = Recipe { guidance: 1.7, ..Recipe::default() };
    assert_eq!(serde_json::to_value(&recipe).unwrap()["guidance"], json!(1.7));
    assert!(serde_json::to_string(&recipe).unwrap().contains("\"guidance\":1.7,"));
    let request = SongRequest {
        description: "piano".into(),
        lyrics: "[verse]".into(),
        instrumental: false,
        duration: None,
        seed: None,
        steps: None,
        guidance: Some(2.3),
        precision: None,
        takes: None,
    };
    assert_eq!(serde_json::to_value(&request).unwrap()["guidance"], json!(2.3));
    let read: Recipe = serde_json::from_value(serde_json::to_value(&recipe).unwrap()).unwrap();
    assert_eq!(read.guidance, 1.7);
}
