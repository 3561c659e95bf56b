//! MiniMax's cloud API shape on `songloom serve` (`POST /v1/music_generation`), driven as a cloud
//! client would: the README's `curl` example, taken from the README itself and run with the real
//! curl but for the address and the token, answers a playable song; the `url` answer fetches the
//! same song; other rates and FLAC are what `extra_info` says; a stream gives pieces of status 1,
//! then a last of status 2, that make the same file; bad requests are the cloud's 2013 naming the
//! field; a missing or wrong key is the cloud's 1004; a client that leaves loses no song.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use songloom_wire::minimax::{BaseResp, MusicAudio, MusicGenerationAnswer, MusicInfo};

mod common;

use common::{Server, request};

const TOKEN: &str = "cloud-key-0123456789abcdef";
const ROUTE: &str = "/v1/music_generation";

/// MiniMax's own English example, as its documentation gives it.
const CLOUD_EXAMPLE: &str = r#"curl --request POST \
  --url https://api.minimax.io/v1/music_generation \
  --header 'Authorization: Bearer <token>' \
  --header 'Content-Type: application/json' \
  --data '{
  "model": "music-2.6",
  "prompt": "Indie folk, melancholic, introspective, longing, solitary walk, coffee shop",
  "lyrics": "[verse]\nStreetlights flicker, the night breeze sighs\nShadows stretch as I walk alone\nAn old coat wraps my silent sorrow\nWandering, longing, where should I go\n[chorus]\nPushing the wooden door, the aroma spreads\nIn a familiar corner, a stranger gazes",
  "audio_setting": {"sample_rate": 44100, "bitrate": 256000, "format": "mp3"}
}'"#;

/// A server whose every request needs `TOKEN`, making songs of at most 2 s.
fn start(dir: &std::path::Path) -> Server {
    let args = ["--listen", "127.0.0.1:0", "--token", TOKEN, "--cloud-duration", "2", "--batch", "1"];
    let (server, token) = Server::start_with(dir, &args);
    assert_eq!(token.as_deref(), Some(TOKEN));
    server
}

/// The README's example: the `curl` block of its section on the cloud's shape.
fn readme_example() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let section = readme.split("\n## MiniMax's cloud API shape").nth(1).expect("the README's section on the shape");
    let start = section.find("```\ncurl --request POST").expect("a curl example in the section") + 4;
    let end = start + section[start..].find("\n```").expect("the example's end");
    section[start..end].to_string()
}

/// The example's body (its `--data '...'`).
fn example_body(example: &str) -> Value {
    let data = example.split("--data '").nth(1).expect("a --data argument");
    serde_json::from_str(&data[..data.rfind('\'').unwrap()]).unwrap()
}

fn bearer(key: &str) -> String {
    format!("Authorization: Bearer {key}")
}

/// A request with the token; the status and the body.
fn call(server: &Server, method: &str, path: &str, body: Option<&Value>) -> (u16, Vec<u8>) {
    let body = body.map(Value::to_string);
    let (status, _, bytes) = request(&server.addr, method, path, &[&bearer(TOKEN)], body.as_deref());
    (status, bytes)
}

fn get_json(server: &Server, path: &str) -> Value {
    let (status, bytes) = call(server, "GET", path, None);
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&bytes));
    serde_json::from_slice(&bytes).unwrap()
}

/// One answer: every field of the cloud's present (`analysis_info` as null), read as its type,
/// which writes it back field for field.
fn answer(bytes: &[u8]) -> MusicGenerationAnswer {
    let text = String::from_utf8_lossy(bytes);
    let raw: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text:.300}"));
    for field in ["data", "trace_id", "extra_info", "analysis_info", "base_resp"] {
        assert!(raw.get(field).is_some(), "no `{field}` in {text:.300}");
    }
    let answer: MusicGenerationAnswer = serde_json::from_value(raw.clone()).unwrap();
    assert!(serde_json::to_value(&answer).unwrap() == raw, "the wire type drops or changes a field of {text:.300}");
    assert!(
        answer.trace_id.len() == 32 && answer.trace_id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{}",
        answer.trace_id
    );
    answer
}

/// A successful answer's audio text and `extra_info`.
fn song_of(answer: MusicGenerationAnswer) -> (String, MusicInfo) {
    assert_eq!(answer.base_resp, BaseResp::success(), "{answer:?}");
    let data = answer.data.expect("data");
    assert_eq!(data.status, MusicAudio::DONE);
    (data.audio, answer.extra_info.expect("extra_info"))
}

fn post(server: &Server, body: &Value) -> (String, MusicInfo) {
    let (status, bytes) = call(server, "POST", ROUTE, Some(body));
    assert_eq!(status, 200);
    song_of(answer(&bytes))
}

fn unhex(text: &str) -> Vec<u8> {
    assert!(text.len().is_multiple_of(2), "an odd number of hex digits");
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex digits")).collect()
}

/// A WAV answer checked against its `extra_info` (rate, channels, length, size) and for sound;
/// its samples.
fn check_wav(bytes: &[u8], info: &MusicInfo, sample_rate: u32) -> Vec<f32> {
    let wav = songloom_wire::wav::read(bytes).unwrap_or_else(|e| panic!("not a WAV: {e}"));
    assert_eq!((wav.channels, wav.sample_rate), (2, sample_rate));
    assert_eq!((info.music_sample_rate, info.music_channel), (sample_rate, 2));
    let frames = (wav.samples.len() / 2) as u64;
    let rate = u64::from(sample_rate);
    assert!(frames > 0, "no audio");
    assert_eq!(info.music_duration, (frames * 1000 + rate / 2) / rate, "{frames} frames at {rate} Hz");
    assert_eq!(info.music_size, bytes.len() as u64);
    assert_eq!(info.bitrate, rate * 32);
    assert!(wav.samples.iter().all(|s| s.is_finite()) && wav.samples.iter().any(|&s| s != 0.0), "silent");
    wav.samples
}

/// A FLAC answer's STREAMINFO checked against its `extra_info`: rate, channels, 24 bits, length.
fn check_flac(bytes: &[u8], info: &MusicInfo, sample_rate: u32) {
    assert_eq!(&bytes[..4], b"fLaC");
    // The first block, STREAMINFO: after its 4-byte header, 10 bytes of block and frame sizes,
    // then 20 bits of rate, 3 of channels less one, 5 of bits less one, 36 of frames.
    let s = &bytes[8..];
    let rate = (u32::from(s[10]) << 12) | (u32::from(s[11]) << 4) | (u32::from(s[12]) >> 4);
    let channels = ((s[12] >> 1) & 7) + 1;
    let bits = (((s[12] & 1) << 4) | (s[13] >> 4)) + 1;
    let frames = (u64::from(s[13] & 15) << 32) | u64::from(u32::from_be_bytes(s[14..18].try_into().unwrap()));
    assert_eq!((rate, channels, bits), (sample_rate, 2, 24));
    assert_eq!((info.music_sample_rate, info.music_channel, info.music_size), (rate, 2, bytes.len() as u64));
    let rate = u64::from(rate);
    assert!(frames > 0);
    assert_eq!(info.music_duration, (frames * 1000 + rate / 2) / rate);
    assert_eq!(info.bitrate, bytes.len() as u64 * 8 * rate / frames);
}

/// A streamed answer's events: each piece's bytes and status, and the last one's `extra_info`.
fn events(body: &[u8]) -> (Vec<(Vec<u8>, u8)>, MusicInfo) {
    let text = String::from_utf8(body.to_vec()).unwrap();
    let mut pieces = Vec::new();
    let mut info = None;
    for event in text.split("\n\n").filter(|e| !e.is_empty()) {
        let json = event.strip_prefix("data: ").unwrap_or_else(|| panic!("not a data line: {event:.200}"));
        assert!(info.is_none(), "an event after the last");
        let answer = answer(json.as_bytes());
        assert_eq!(answer.base_resp, BaseResp::success());
        let data = answer.data.expect("data");
        if data.status == MusicAudio::DONE {
            info = Some(answer.extra_info.expect("the last event's extra_info"));
        } else {
            assert_eq!(data.status, MusicAudio::MAKING);
            assert!(answer.extra_info.is_none());
        }
        pieces.push((unhex(&data.audio), data.status));
    }
    (pieces, info.expect("a last event of status 2"))
}

/// The README's example differs from the cloud's only in the address, the key and the format
/// (which the README says); run with curl as written, it answers a 44.1 kHz stereo WAV in hex.
#[test]
fn the_readme_example_runs_with_curl_and_answers_a_playable_song() {
    let example = readme_example();
    let as_cloud = example
        .replace("http://localhost:7878/", "https://api.minimax.io/")
        .replace("Bearer TOKEN", "Bearer <token>")
        .replace(r#""format": "wav""#, r#""format": "mp3""#);
    assert_eq!(as_cloud, CLOUD_EXAMPLE, "the README's example is not the cloud's but for address, key and format");
    if let Err(why) = std::process::Command::new("curl").arg("--version").output() {
        assert!(std::env::var_os("SONGLOOM_REQUIRE_CURL").is_none(), "curl must run here: {why}");
        println!("skipped: no curl to run the README's example with ({why})");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let command = example
        .replace("http://localhost:7878/", &format!("http://{}/", server.addr))
        .replace("Bearer TOKEN", &format!("Bearer {TOKEN}"));
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("{command} --silent --show-error --fail-with-body"))
        .output()
        .unwrap();
    assert!(out.status.success(), "curl: {}", String::from_utf8_lossy(&out.stderr));
    let (audio, info) = song_of(answer(&out.stdout));
    check_wav(&unhex(&audio), &info, 44_100);
    // Kept in the library with the example's words.
    let library = get_json(&server, "/api/library");
    let body = example_body(&example);
    assert_eq!(library["songs"][0]["recipe"]["description"], body["prompt"], "{library}");
    assert_eq!(library["songs"][0]["recipe"]["lyrics"], body["lyrics"]);
}

/// The same request as hex, as an address, resampled, as FLAC and streamed: each what its
/// `extra_info` says, and the same song.
#[test]
fn url_rates_flac_and_streams_answer_the_same_song() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let body = example_body(&readme_example());
    let with = |changes: Value| {
        let mut changed = body.clone();
        for (key, value) in changes.as_object().unwrap() {
            changed[key] = value.clone();
        }
        changed
    };
    let (audio, info) = post(&server, &body);
    let samples = check_wav(&unhex(&audio), &info, 44_100);

    // The address: on the host the client used, fetched with the same key, the same song.
    let (address, url_info) = post(&server, &with(json!({"output_format": "url"})));
    let origin = format!("http://{}", server.addr);
    let path = address.strip_prefix(&origin).unwrap_or_else(|| panic!("{address} is not on {origin}"));
    assert!(path.starts_with("/api/library/"), "{address}");
    let (status, fetched) = call(&server, "GET", path, None);
    assert_eq!(status, 200, "{address}");
    assert_eq!(check_wav(&fetched, &url_info, 44_100), samples);
    let (status, _, _) = request(&server.addr, "GET", path, &[], None);
    assert_eq!(status, 401, "the address needs the key");

    // 16 kHz, resampled: as long in time, within a frame.
    let (audio, low) = post(&server, &with(json!({"audio_setting": {"sample_rate": 16000, "format": "wav"}})));
    let low_samples = check_wav(&unhex(&audio), &low, 16_000);
    let seconds = |n: usize, rate: f64| n as f64 / 2.0 / rate;
    assert!((seconds(low_samples.len(), 16e3) - seconds(samples.len(), 44.1e3)).abs() <= 1.0 / 16e3);

    // FLAC at 24 kHz, as hex and as an address.
    let flac = json!({"audio_setting": {"sample_rate": 24000, "bitrate": 256000, "format": "flac"}});
    let (audio, flac_info) = post(&server, &with(flac.clone()));
    let flac_bytes = unhex(&audio);
    check_flac(&flac_bytes, &flac_info, 24_000);
    let mut flac_url = flac.clone();
    flac_url["output_format"] = json!("url");
    let (address, _) = post(&server, &with(flac_url));
    assert!(address.contains("/audio.flac?sample_rate=24000"), "{address}");
    let (status, fetched) = call(&server, "GET", address.strip_prefix(&origin).unwrap(), None);
    assert_eq!((status, fetched.len()), (200, flac_bytes.len()));

    // Streamed WAV: the head and the samples as they are made, then the last piece; the file is
    // the same song.
    let (status, streamed) = call(&server, "POST", ROUTE, Some(&with(json!({"stream": true}))));
    assert_eq!(status, 200);
    let (pieces, stream_info) = events(&streamed);
    let (last, making) = pieces.split_last().unwrap();
    assert!(making.len() >= 2 && making.iter().all(|(_, s)| *s == MusicAudio::MAKING), "{} pieces", pieces.len());
    assert_eq!(last.1, MusicAudio::DONE);
    let file: Vec<u8> = pieces.iter().flat_map(|(bytes, _)| bytes.clone()).collect();
    assert_eq!(u32::from_le_bytes(file[40..44].try_into().unwrap()), u32::MAX, "the data size is unknown");
    let mut sized = stream_info.clone();
    sized.music_size = file.len() as u64;
    assert_eq!(sized, stream_info, "music_size is the streamed bytes");
    assert_eq!(check_wav(&file, &stream_info, 44_100), samples);

    // Streamed FLAC: once done, the same file as the hex answer.
    let (status, streamed) =
        call(&server, "POST", ROUTE, Some(&with(json!({"stream": true, "audio_setting": flac["audio_setting"]}))));
    assert_eq!(status, 200);
    let (pieces, stream_info) = events(&streamed);
    let file: Vec<u8> = pieces.iter().flat_map(|(bytes, _)| bytes.clone()).collect();
    assert_eq!((file.len(), &stream_info), (flac_bytes.len(), &flac_info));
    check_flac(&file, &stream_info, 24_000);

    // An instrumental song needs no lyrics: the model is sent `[instrumental]`.
    let mut instrumental = with(json!({"is_instrumental": true}));
    instrumental.as_object_mut().unwrap().remove("lyrics");
    post(&server, &instrumental);
    let library = get_json(&server, "/api/library");
    assert_eq!(library["songs"][0]["recipe"]["lyrics"], "[instrumental]", "{library}");
}

/// Every bad request is the cloud's 2013 naming the field to fix, and queues nothing; a missing or
/// wrong key is a 401 in the cloud's shape, 1004.
#[test]
fn bad_requests_and_keys_are_answered_in_the_clouds_shape() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let body = example_body(&readme_example());
    let cases: Vec<(Value, &str)> = vec![
        (json!({"prompt": ""}), "`prompt`"),
        (json!({"model": ""}), "`model`"),
        (json!({"lyrics": ""}), "`lyrics`"),
        (json!({"lyrics_optimizer": true}), "`lyrics_optimizer`"),
        (json!({"audio_setting": {"format": "mp3"}}), "`audio_setting.format` mp3"),
        (json!({"audio_setting": {"format": "ogg"}}), "`audio_setting.format` must be wav or flac"),
        (json!({"audio_setting": {"sample_rate": 22050}}), "`audio_setting.sample_rate`"),
        (json!({"audio_setting": {"sample_rate": "fast"}}), "`audio_setting`"),
        (json!({"stream": true, "output_format": "url"}), "`output_format`"),
        (json!({"output_format": "base64"}), "`output_format`"),
        (json!({"is_instrumental": "yes"}), "`is_instrumental`"),
        (json!({"refer_voice": "x"}), "`refer_voice`"),
    ];
    for (change, field) in cases {
        let mut bad = body.clone();
        for (key, value) in change.as_object().unwrap() {
            bad[key] = value.clone();
        }
        let (status, bytes) = call(&server, "POST", ROUTE, Some(&bad));
        assert_eq!(status, 200, "{change}");
        let answer = answer(&bytes);
        assert_eq!(answer.base_resp.status_code, BaseResp::INVALID_PARAMS, "{change}: {answer:?}");
        let message = &answer.base_resp.status_msg;
        assert!(message.starts_with("invalid params: ") && message.contains(field), "{change}: {message}");
        assert!(answer.data.is_none() && answer.extra_info.is_none());
    }
    let (status, bytes) = call(&server, "POST", ROUTE, None);
    assert_eq!((status, answer(&bytes).base_resp.status_code), (200, BaseResp::INVALID_PARAMS));
    // A body past the limit keeps its HTTP status, in the cloud's shape.
    let mut too_large = body.clone();
    too_large["lyrics"] = json!("la ".repeat(30_000));
    let (status, bytes) = call(&server, "POST", ROUTE, Some(&too_large));
    let refused = answer(&bytes).base_resp;
    assert_eq!((status, refused.status_code), (413, BaseResp::INVALID_PARAMS), "{refused:?}");
    assert!(refused.status_msg.contains("too large"), "{}", refused.status_msg);
    assert_eq!(get_json(&server, "/api/songs")["songs"], json!([]), "a refused request queued a song");

    for headers in [vec![], vec![bearer("wrong-key-0123456789")]] {
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        let (status, head, bytes) = request(&server.addr, "POST", ROUTE, &headers, Some(&body.to_string()));
        assert_eq!(status, 401, "{headers:?}");
        assert!(head.contains("content-type: application/json"), "{head}");
        let answer = answer(&bytes);
        assert_eq!(answer.base_resp.status_code, BaseResp::AUTHENTICATION_FAILED);
        assert!(answer.base_resp.status_msg.contains("token"), "{}", answer.base_resp.status_msg);
    }
    // The native API's 401 keeps its own shape.
    let (status, _, bytes) = request(&server.addr, "GET", "/api/songs", &[], None);
    let error: Value = serde_json::from_slice(&bytes).unwrap();
    assert!(status == 401 && error["error"].is_string(), "{error}");
}

/// A client that goes away before the answer leaves its song to finish into the library.
#[test]
fn a_client_that_leaves_loses_no_song() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    // A native song ahead of it, so the cloud's is still to be made when its client leaves.
    let ahead = json!({"description": "ahead", "lyrics": "[verse]\nla", "duration": 20, "steps": 2});
    let (status, _) = call(&server, "POST", "/api/songs", Some(&ahead));
    assert_eq!(status, 201);
    let body = example_body(&readme_example()).to_string();
    let mut client = TcpStream::connect(&server.addr).unwrap();
    write!(
        client,
        "POST {ROUTE} HTTP/1.1\r\nHost: {}\r\n{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        server.addr,
        bearer(TOKEN),
        body.len()
    )
    .unwrap();
    let start = Instant::now();
    let id = loop {
        let songs = get_json(&server, "/api/songs");
        if let Some(song) = songs["songs"].as_array().unwrap().get(1) {
            assert_eq!(song["state"], "queued", "the song was made before its client left: {song}");
            break song["id"].as_u64().unwrap();
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the request never queued a song");
        std::thread::sleep(Duration::from_millis(10));
    };
    drop(client);
    let song = loop {
        let song = get_json(&server, &format!("/api/songs/{id}"));
        if !matches!(song["state"].as_str(), Some("queued" | "running")) {
            break song;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "{song}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(song["state"], "finished", "{song}");
    let library_id = song["library_id"].as_i64().unwrap();
    let (status, wav) = call(&server, "GET", &format!("/api/library/{library_id}/audio.wav"), None);
    assert_eq!(status, 200);
    let wav = songloom_wire::wav::read(&wav).unwrap();
    assert!(!wav.samples.is_empty() && wav.samples.iter().all(|s| s.is_finite()));
    let partial: Vec<_> = std::fs::read_dir(dir.path().join("library/songs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.ends_with(".wav") || name.starts_with('.'))
        .collect();
    assert!(partial.is_empty(), "{partial:?}");
}
