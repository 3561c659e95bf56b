//! `songloom edit` from the command line on the tiny test model (SONGLOOM_MODEL): each edit makes
//! a new library song linked to its parent, the audio before the splice the parent's sample for
//! sample, and a bad edit is a one-line error that leaves the library as it was.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn tiny_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny-music3")
}

fn songloom(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_songloom"))
        .args(args)
        .args(["--library", dir.join("lib").to_str().unwrap()])
        .env("XDG_CACHE_HOME", dir)
        .env("SONGLOOM_MODEL", tiny_model())
        .output()
        .unwrap()
}

fn ok(output: Output) -> String {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

fn error(output: Output) -> String {
    assert!(!output.status.success(), "expected a failure");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The library's songs by id, as `library list --json` gives them.
fn songs(dir: &Path) -> Vec<Value> {
    let out = ok(songloom(dir, &["library", "list", "--json"]));
    out.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn song(dir: &Path, id: i64) -> Value {
    songs(dir).into_iter().find(|s| s["id"] == id).unwrap_or_else(|| panic!("no song {id}"))
}

/// The samples of library song `id`'s file.
fn samples(dir: &Path, id: i64) -> Vec<f32> {
    let path = dir.join("lib").join("songs").join(format!("{id}.wav"));
    hound::WavReader::open(&path).unwrap().samples::<f32>().map(Result::unwrap).collect()
}

const LYRICS: &str = "[verse]\\nla la la\\nsun on the water\\n[chorus]\\noh oh\\nwe go home";

#[test]
fn each_edit_makes_a_new_version_that_keeps_the_parents_audio() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let generate = [
        "generate",
        "--prompt",
        "warm lo-fi piano",
        "--lyrics",
        LYRICS,
        "--duration",
        "16",
        "--steps",
        "2",
        "--seed",
        "4",
        "--no-play",
        "--save",
        "--out",
    ];
    let out = d.join("first.wav");
    ok(songloom(d, &[&generate[..], &[out.to_str().unwrap()]].concat()));
    let parent = samples(d, 1);
    let cases: [(&[&str], &str); 4] = [
        (&["edit", "1", "extend", "--seconds", "4", "--no-play"], "extend"),
        (&["edit", "1", "from", "--at", "0:10", "--description", "fast bright strings", "--no-play"], "from"),
        (&["edit", "1", "resing", "--line", "6", "--lyrics", "we sail away", "--at", "11", "--no-play"], "resing"),
        (&["edit", "1", "rerender", "--from", "5", "--to", "9.5", "--seed", "12", "--no-play"], "rerender"),
    ];
    for (i, (args, kind)) in cases.iter().enumerate() {
        let printed = ok(songloom(d, args));
        let id = i as i64 + 2;
        assert!(printed.contains(&format!("song {id}")), "{kind}: {printed}");
        let version = song(d, id);
        assert_eq!(version["parent"], 1, "{kind}: {version}");
        assert_eq!(version["edit_kind"], *kind, "{version}");
        let edit = &version["edit"];
        let from = (edit["changed_from_s"].as_f64().unwrap() * 44100.0).round() as usize;
        let audio = samples(d, id);
        assert!(from > 0, "{kind}: the splice is after the song's first window");
        assert_eq!(audio[..2 * from], parent[..2 * from], "{kind}: the audio before the splice changed");
        // Control: a window later, the audio is no longer the parent's.
        let later = (from + 4 * 44100).min(parent.len() / 2);
        assert_ne!(audio[..2 * later], parent[..2 * later], "{kind}: nothing changed");
        if *kind == "extend" {
            assert!(version["seconds"].as_f64().unwrap() > 19.9, "{version}");
            assert_eq!(version["seed"], 4, "an extension keeps the song's seed");
        }
        if *kind == "rerender" {
            let to = (edit["changed_to_s"].as_f64().unwrap() * 44100.0).round() as usize;
            assert_eq!(audio[2 * to..], parent[2 * to..], "the audio after the range changed");
            assert_eq!(version["seed"], 12);
        }
        if *kind == "resing" {
            let info = songloom_wire::wav::read_info(&std::fs::read(d.join("lib/songs/4.wav")).unwrap()).unwrap();
            let recipe: Value = serde_json::from_str(info.comment.as_deref().unwrap()).unwrap();
            let lyrics = recipe["lyrics"].as_str().unwrap();
            assert!(lyrics.ends_with("oh oh\nwe sail away"), "{lyrics}");
        }
    }
    // An edit of an edit: the version is a song like any other.
    ok(songloom(d, &["edit", "2", "rerender", "--from", "1", "--to", "2", "--no-play"]));
    assert_eq!(song(d, 6)["parent"], 2);
}

#[test]
fn edit_json_prints_the_events_and_the_saved_id() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = d.join("a.wav");
    ok(songloom(
        d,
        &["generate", "--prompt", "calm strings", "--lyrics", LYRICS, "--duration", "9", "--steps", "1", "--no-play"],
    ));
    // Not saved: nothing to edit yet.
    let missing = error(songloom(d, &["edit", "1", "extend", "--seconds", "2", "--no-play"]));
    assert!(missing.contains("no song 1"), "{missing}");
    ok(songloom(
        d,
        &[
            "generate",
            "--prompt",
            "calm strings",
            "--lyrics",
            LYRICS,
            "--duration",
            "9",
            "--steps",
            "1",
            "--no-play",
            "--save",
            "--force",
            "--out",
            out.to_str().unwrap(),
        ],
    ));
    let printed = ok(songloom(d, &["edit", "1", "extend", "--seconds", "2", "--no-play", "--json"]));
    let events: Vec<Value> = printed.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"audio") && kinds.contains(&"finished"), "{kinds:?}");
    let saved = events.iter().find(|e| e["event"] == "saved").expect("a saved event");
    assert_eq!(saved["library_id"], 2);
    let first_audio = events.iter().find(|e| e["event"] == "audio").unwrap();
    assert_eq!(first_audio["first_sample"], 0, "the kept audio comes first");
}

#[test]
fn a_bad_edit_says_what_to_fix_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = d.join("a.wav");
    ok(songloom(
        d,
        &[
            "generate",
            "--prompt",
            "calm strings",
            "--lyrics",
            LYRICS,
            "--duration",
            "6",
            "--steps",
            "1",
            "--no-play",
            "--save",
            "--out",
            out.to_str().unwrap(),
        ],
    ));
    for (args, expected) in [
        (&["edit", "7", "extend", "--no-play"][..], "no song 7"),
        (&["edit", "1", "resing", "--line", "40", "--lyrics", "x", "--no-play"][..], "no line 40"),
        (&["edit", "1", "resing", "--line", "0", "--lyrics", "x", "--no-play"][..], "counts from 1"),
        (&["edit", "1", "resing", "--line", "2", "--no-play"][..], "--lyrics"),
        (&["edit", "1", "rerender", "--from", "4", "--to", "2", "--no-play"][..], "must be after --from"),
        (&["edit", "1", "from", "--at", "99", "--no-play"][..], "not within song 1"),
        (&["edit", "1", "from", "--at", "2", "--seed", "0", "--no-play"][..], "another seed"),
        (&["edit", "1", "extend", "--seconds", "soon", "--no-play"][..], "--seconds"),
    ] {
        let message = error(songloom(d, args));
        assert!(message.contains(expected), "{args:?}: {message}");
        assert_eq!(message.trim().lines().count(), 1, "{args:?}: one line: {message}");
    }
    assert_eq!(songs(d).len(), 1, "no failed edit is kept");
    // A song without a score (as songs made before scores were kept) cannot be edited.
    strip_score(&d.join("lib").join("songs").join("1.wav"));
    let message = error(songloom(d, &["edit", "1", "extend", "--no-play"]));
    assert!(message.contains("no codes"), "{message}");
}

/// Removes the `slsc` chunk (the song's score) from a WAV, as a file from before scores were kept.
fn strip_score(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    let mut out = bytes[..12].to_vec();
    let mut at = 12;
    while at + 8 <= bytes.len() {
        let size = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        let end = (at + 8 + size + size % 2).min(bytes.len());
        if &bytes[at..at + 4] != b"slsc" {
            out.extend_from_slice(&bytes[at..end]);
        }
        at = end;
    }
    let riff = (out.len() - 8) as u32;
    out[4..8].copy_from_slice(&riff.to_le_bytes());
    std::fs::write(path, out).unwrap();
}
