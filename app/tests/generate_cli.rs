//! `songloom generate`, `prompt`, `devices` and `model info` from the command line, on the tiny
//! test model as the default (SONGLOOM_MODEL: it is fast, and never ends a song early) and once on
//! the embedded model; every bad input is a one-line error, a non-zero exit and no file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn songloom(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_songloom"))
        .args(args)
        .env("XDG_CACHE_HOME", cache)
        .env("SONGLOOM_MODEL", tiny_model())
        .output()
        .unwrap()
}

#[test]
fn the_embedded_model_makes_a_song() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("song.wav");
    let result = Command::new(env!("CARGO_BIN_EXE_songloom"))
        .args([
            "generate",
            "--prompt",
            "chorale, church organ, G major, 92 BPM, 4/4 time",
            "--lyrics",
            "[instrumental]",
        ])
        .args(["--duration", "3", "--steps", "4", "--device", "cpu", "--no-play", "--out", out.to_str().unwrap()])
        .env("XDG_CACHE_HOME", dir.path())
        .env_remove("SONGLOOM_MODEL")
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    let unpacked: Vec<_> = std::fs::read_dir(dir.path().join("songloom")).unwrap().flatten().collect();
    assert!(unpacked.iter().any(|e| e.file_name().to_string_lossy().starts_with("default-model-")));
    let samples: Vec<f32> = hound::WavReader::open(&out).unwrap().samples::<f32>().map(Result::unwrap).collect();
    assert!(!samples.is_empty() && samples.len() <= 2 * 3 * 44100, "{} samples", samples.len());
    assert!(samples.iter().all(|s| s.is_finite() && s.abs() <= 1.0));
    let rms = (samples.iter().map(|s| s * s).sum::<f32>() / samples.len() as f32).sqrt();
    assert!(rms > 1e-2, "the trained model's organ is near silent: rms {rms}");
}

fn tiny_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny-music3")
}

#[test]
fn generate_writes_the_song_and_streams_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("song.wav");
    let result = songloom(
        dir.path(),
        &[
            "generate",
            "--prompt",
            "warm lo-fi piano",
            "--lyrics",
            "[verse]\\nla la la",
            "--duration",
            "8",
            "--seed",
            "1",
            "--steps",
            "2",
            "--no-play",
            "--json",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    let events: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let finished = events.iter().find(|e| e["event"] == "finished").expect("a finished event");
    let first = finished["time_to_first_audio_s"].as_f64().unwrap();
    assert!(first < finished["total_s"].as_f64().unwrap());
    assert_eq!(finished["frames"], 200);
    assert!(events.iter().any(|e| e["event"] == "stage" && e["stage"]["name"] == "ar_frames"));
    assert!(events.iter().any(|e| e["event"] == "stage" && e["stage"]["name"] == "dit"));

    let mut reader = hound::WavReader::open(&out).unwrap();
    let spec = reader.spec();
    assert_eq!((spec.sample_rate, spec.channels, spec.bits_per_sample), (44100, 2, 32));
    // 200 frames -> int(200 * 44100 / 24000 * 960 / 512) = 689 latents -> 689 * 512 samples.
    assert_eq!(reader.duration(), 689 * 512);
    let samples: Vec<f32> = reader.samples::<f32>().map(Result::unwrap).collect();
    assert!(samples.iter().all(|s| s.is_finite() && s.abs() <= 1.0));
    let rms = (samples.iter().map(|s| s * s).sum::<f32>() / samples.len() as f32).sqrt();
    assert!(rms > 1e-3, "silent: rms {rms}");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn a_later_option_overrides_an_earlier_one() {
    // As `bash scripts/run.sh --duration 60` passes its own --duration first.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("song.wav");
    let mut args = gen_args("piano", "[verse]\\nla", "8");
    args.extend(["--duration", "1", "--out", out.to_str().unwrap()]);
    let r = songloom(dir.path(), &args);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(hound::WavReader::open(&out).unwrap().duration(), 86 * 512);
}

#[test]
fn pcm16_export_and_seed_determinism() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, seed: &str, format: &str| {
        let out = dir.path().join(name);
        let r = songloom(
            dir.path(),
            &[
                "generate",
                "--prompt",
                "piano",
                "--lyrics",
                "[verse]\\nla",
                "--duration",
                "1",
                "--seed",
                seed,
                "--steps",
                "2",
                "--no-play",
                "--format",
                format,
                "--out",
                out.to_str().unwrap(),
            ],
        );
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        std::fs::read(out).unwrap()
    };
    let (a, b, c) = (run("a.wav", "3", "f32"), run("b.wav", "3", "f32"), run("c.wav", "4", "f32"));
    assert_eq!(a, b, "the same seed must give the same bytes");
    assert_ne!(a, c, "another seed must give another song");
    let pcm = run("d.wav", "3", "pcm16");
    let reader = hound::WavReader::new(std::io::Cursor::new(pcm)).unwrap();
    assert_eq!(reader.spec().bits_per_sample, 16);
    assert_eq!(reader.duration(), 86 * 512);
}

/// Runs a command that must fail: one line on stderr containing `expect`, and no output file.
fn fails(args: &[&str], expect: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bad.wav");
    let mut full: Vec<&str> = args.to_vec();
    let out_str = out.to_str().unwrap().to_string();
    if !args.contains(&"--out") {
        full.extend(["--out", &out_str]);
    }
    let result = songloom(dir.path(), &full);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(!result.status.success(), "{args:?} succeeded");
    assert!(stderr.contains(expect), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: not one line: {stderr}");
    assert!(!out.exists(), "{args:?} wrote a file");
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
    assert!(names.iter().all(|n| n == "songloom"), "{args:?} left files behind: {names:?}");
}

fn gen_args<'a>(prompt: &'a str, lyrics: &'a str, duration: &'a str) -> Vec<&'a str> {
    vec!["generate", "--prompt", prompt, "--lyrics", lyrics, "--duration", duration, "--steps", "1", "--no-play"]
}

#[test]
fn bad_inputs_are_clear_errors() {
    fails(&gen_args("", "[verse]\\nla", "1"), "description is empty");
    fails(&gen_args("   ", "[verse]\\nla", "1"), "description is empty");
    fails(&gen_args("piano", " \\n ", "1"), "lyrics are empty");
    fails(&gen_args("piano", "la", "0"), "duration");
    fails(&gen_args("piano", "la", "-3"), "duration");
    fails(&gen_args("piano", "la", "361"), "duration");
    fails(&gen_args("piano", "la", "0.01"), "shorter than one frame");
    let long = "many different words of lyrics ".repeat(2000);
    fails(&gen_args("piano", &long, "1"), "tokens");
    let mut args = gen_args("piano", "la", "1");
    args.extend(["--device", "tpu"]);
    fails(&args, "unknown device");
    let mut args = gen_args("piano", "la", "1");
    args.extend(["--out", "/nonexistent-dir/song.wav"]);
    fails(&args, "cannot write");
    // A file given as the model (a song, say) is named as a file, not a missing folder.
    let file = tiny_model().join("songloom.json");
    let mut args = gen_args("piano", "la", "1");
    args.extend(["--model", file.to_str().unwrap()]);
    fails(&args, "is a file, not a model");
}

#[test]
fn the_same_binary_runs_without_cuda() {
    let dir = tempfile::tempdir().unwrap();
    let devices = songloom(dir.path(), &["devices"]);
    let text = String::from_utf8_lossy(&devices.stdout);
    if text.contains("cuda  available") {
        println!("skipped: this machine has a working CUDA GPU");
        return;
    }
    assert!(text.contains("cuda  unavailable: "), "{text}");
    let mut args = gen_args("piano", "la", "1");
    args.extend(["--device", "cuda"]);
    fails(&args, "device `cuda` is not available");
    // `auto` falls back to the CPU and still makes the song.
    let out = dir.path().join("auto.wav");
    let mut args = gen_args("piano", "[verse]\\nla", "1");
    args.extend(["--device", "auto", "--out", out.to_str().unwrap()]);
    let r = songloom(dir.path(), &args);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(out.exists());
}

/// The main job on the wgpu backend (lavapipe in CI), where an adapter exists: a song written,
/// and the same song as the CPU makes within the products' rounding.
#[test]
fn the_main_job_runs_on_wgpu() {
    let dir = tempfile::tempdir().unwrap();
    let devices = songloom(dir.path(), &["devices"]);
    let text = String::from_utf8_lossy(&devices.stdout);
    if !text.contains("wgpu  available") {
        println!("skipped: no wgpu adapter here ({})", text.lines().find(|l| l.contains("wgpu")).unwrap_or(""));
        return;
    }
    let mut samples = Vec::new();
    for device in ["wgpu", "cpu"] {
        let out = dir.path().join(format!("{device}.wav"));
        let mut args = gen_args("piano", "[verse]\\nla", "1");
        args.extend(["--device", device, "--seed", "7", "--out", out.to_str().unwrap()]);
        let r = songloom(dir.path(), &args);
        assert!(r.status.success(), "{device}: {}", String::from_utf8_lossy(&r.stderr));
        let mut reader = hound::WavReader::open(&out).unwrap();
        samples.push(reader.samples::<f32>().map(|s| s.unwrap()).collect::<Vec<_>>());
    }
    assert_eq!(samples[0].len(), samples[1].len());
    let worst = samples[0].iter().zip(&samples[1]).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    let peak = samples[1].iter().map(|s| s.abs()).fold(0.0, f32::max);
    println!("wgpu against the CPU: worst sample difference {worst:.3e}, peak {peak:.3e}");
    assert!(peak > 0.0, "the CPU's song is silent");
    assert!(worst <= 1e-3 * peak, "wgpu and the CPU differ by {worst} of a peak {peak}");
}

#[test]
fn a_broken_model_directory_is_a_clear_error() {
    let model = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(tiny_model()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "vocoder" {
            let status = Command::new("cp").arg("-r").arg(entry.path()).arg(model.path()).status().unwrap();
            assert!(status.success());
        }
    }
    let mut args = gen_args("piano", "la", "1");
    args.extend(["--model", model.path().to_str().unwrap()]);
    fails(&args, "vocoder");
}

#[test]
fn prompt_devices_and_model_info() {
    let dir = tempfile::tempdir().unwrap();
    let r = songloom(dir.path(), &["prompt", "--prompt", "# Synth-pop", "--lyrics", "[Verse] drop me\\nla"]);
    assert!(r.status.success());
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(
        v["text"],
        "<|im_start|><|caption_start|>Synth-pop<|caption_end|><|lyrics_start|>[start]\n[verse]\nla<|lyrics_end|><|im_end|><|audio_start|>"
    );
    assert_eq!(v["ids"].as_array().unwrap().len(), v["uncond_ids"].as_array().unwrap().len());

    let r = songloom(dir.path(), &["devices"]);
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success() && text.contains("cpu") && text.contains("cuda"), "{text}");

    let r = songloom(dir.path(), &["model", "info", tiny_model().to_str().unwrap()]);
    let table = String::from_utf8_lossy(&r.stdout).into_owned();
    assert!(r.status.success() && table.contains("parameters"), "{table}");
    let vocoder = table.lines().find(|l| l.trim_start().starts_with("vocoder")).unwrap_or_else(|| panic!("{table}"));
    assert!(vocoder.contains("90,790") && vocoder.contains("121") && vocoder.contains("f32"), "{vocoder}");
    let r = songloom(dir.path(), &["model", "info", "--json", tiny_model().to_str().unwrap()]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["components"]["vocoder"]["tensors"], 121);
    assert_eq!(v["components"]["language_model"]["runs_in"], "bf16");
}

#[test]
fn saved_songs_can_be_listed_renamed_exported_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("library");
    let lib_arg = lib.to_str().unwrap();
    let out = dir.path().join("song.wav");
    let mut args = gen_args("velvet jazz trio", "[verse]\\nla", "1");
    args.extend(["--save", "--library", lib_arg, "--out", out.to_str().unwrap()]);
    let r = songloom(dir.path(), &args);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let said = String::from_utf8_lossy(&r.stdout);
    assert!(said.contains("kept in the library as song 1 (\"velvet jazz trio\")"), "{said}");

    let list = |search: &str| -> Vec<serde_json::Value> {
        let r = songloom(dir.path(), &["library", "list", "--json", "--search", search, "--library", lib_arg]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        String::from_utf8_lossy(&r.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let songs = list("jazz");
    assert_eq!(songs.len(), 1);
    assert_eq!(songs[0]["seed"], 0);
    let id = songs[0]["id"].to_string();
    assert!(songloom(dir.path(), &["library", "rename", &id, "Night set", "--library", lib_arg]).status.success());
    assert_eq!(list("Night")[0]["title"], "Night set");
    // Without --json, a table a person reads.
    let r = songloom(dir.path(), &["library", "list", "--library", lib_arg]);
    let table = String::from_utf8_lossy(&r.stdout).into_owned();
    let rows: Vec<&str> = table.lines().collect();
    assert!(rows[0].contains("title") && rows[0].contains("length"), "{table}");
    assert!(
        rows[1].contains("Night set") && rows[1].contains("0:01.0") && rows[1].contains("velvet jazz trio"),
        "{table}"
    );

    let exported = dir.path().join("exported.wav");
    assert!(
        songloom(dir.path(), &["library", "export", &id, "--out", exported.to_str().unwrap(), "--library", lib_arg])
            .status
            .success()
    );
    let samples = |p: &std::path::Path| -> Vec<f32> {
        hound::WavReader::open(p).unwrap().samples::<f32>().map(Result::unwrap).collect()
    };
    assert_eq!(samples(&exported), samples(&out), "the same audio");
    let bytes = std::fs::read(&exported).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("velvet jazz trio"), "the recipe travels in the WAV");
    assert!(text.contains("INAM") && text.contains("Night set"), "with the song's title as it is now");
    assert!(text.contains("ISBJ") && text.contains("AI-generated"), "with the AI-generated note");

    // As FLAC: 24-bit stereo at the song's rate, every frame, the title and recipe in its tags;
    // a second export to the same path is refused and leaves the first.
    let flac = dir.path().join("exported.flac");
    let export_flac = || {
        let path = flac.to_str().unwrap();
        songloom(dir.path(), &["library", "export", &id, "--out", path, "--format", "flac", "--library", lib_arg])
    };
    let r = export_flac();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let bytes = std::fs::read(&flac).unwrap();
    assert_eq!(&bytes[..4], b"fLaC");
    // STREAMINFO: 20 bits of rate, 3 of channels - 1, 5 of bits - 1, 36 of frames, from byte 18.
    let info = u64::from_be_bytes(bytes[18..26].try_into().unwrap());
    let (rate, channels, bits, frames) =
        (info >> 44, ((info >> 41) & 7) + 1, ((info >> 36) & 31) + 1, info & 0xf_ffff_ffff);
    assert_eq!((rate, channels, bits, frames as usize), (44_100, 2, 24, samples(&out).len() / 2));
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("TITLE=Night set") && text.contains("velvet jazz trio"), "the tags");
    assert!(text.contains("DESCRIPTION=AI-generated"), "the AI-generated note");
    assert!(!export_flac().status.success(), "an existing file is not replaced");
    assert_eq!(std::fs::read(&flac).unwrap(), bytes);

    assert!(songloom(dir.path(), &["library", "delete", &id, "--library", lib_arg]).status.success());
    assert!(list("").is_empty());
    let r = songloom(dir.path(), &["library", "delete", &id, "--library", lib_arg]);
    assert!(!r.status.success() && String::from_utf8_lossy(&r.stderr).contains("no song"));

    // The exports come back: the recipe from their tags, the title theirs or the one given; the
    // song can be edited when the file carries its score.
    let import = |file: &std::path::Path, title: Option<&str>| -> serde_json::Value {
        let mut args = vec!["library", "import", file.to_str().unwrap(), "--json", "--library", lib_arg];
        args.extend(title.map(|t| ["--title", t]).iter().flatten());
        let r = songloom(dir.path(), &args);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        serde_json::from_slice(&r.stdout).unwrap()
    };
    for (file, title) in [(&exported, None), (&flac, Some("From FLAC"))] {
        let song = import(file, title);
        assert_eq!(
            (&song["title"], &song["description"]),
            (&title.unwrap_or("Night set").into(), &"velvet jazz trio".into())
        );
        let scored = std::fs::read(file).unwrap().windows(8).any(|w| w == b"SLSCORE1");
        assert_eq!(song["editable"], scored, "{song}");
        assert!(song.get("parent").is_none(), "a song made from scratch has no parent: {song}");
    }
    assert_eq!(list("velvet").len(), 2);
    let r =
        songloom(dir.path(), &["library", "import", out.with_extension("txt").to_str().unwrap(), "--library", lib_arg]);
    assert!(!r.status.success() && String::from_utf8_lossy(&r.stderr).contains("cannot import"));
}

#[test]
fn ctrl_c_cancels_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("song.wav");
    let child = Command::new(env!("CARGO_BIN_EXE_songloom"))
        .args(["generate", "--prompt", "piano", "--lyrics", "[verse]\\nla", "--duration", "120", "--no-play"])
        .args(["--out", out.to_str().unwrap()])
        .env("XDG_CACHE_HOME", dir.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the partial file exists (generation has started), then interrupt.
    let started = std::time::Instant::now();
    let has_partial = || {
        std::fs::read_dir(dir.path()).unwrap().flatten().any(|e| e.file_name().to_string_lossy().ends_with(".partial"))
    };
    while !has_partial() && started.elapsed().as_secs() < 30 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(has_partial(), "generation did not start");
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("cancelled"), "{stderr}");
    assert!(!out.exists());
    assert!(!has_partial(), "the partial file was left behind");
}

#[test]
fn the_cli_explains_itself() {
    let dir = tempfile::tempdir().unwrap();
    // The description without --prompt: what to type instead.
    let r = songloom(dir.path(), &["generate", "warm piano"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.code() == Some(2) && err.contains("--prompt \"warm piano\""), "{err}");
    // Text after a tag on its line: the window's warning, and an event with --json.
    let out = dir.path().join("song.wav");
    let mut args = gen_args("piano", "[verse] la la la", "1");
    args.extend(["--json", "--out", out.to_str().unwrap()]);
    let r = songloom(dir.path(), &args);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("warning: Line 1: \"la la la\" after [verse] is dropped"), "{err}");
    let first: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&r.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(first["event"], "warning", "{first}");
    let r = songloom(dir.path(), &["prompt", "--prompt", "piano", "--lyrics", "[chorus] sing"]);
    assert!(String::from_utf8_lossy(&r.stderr).contains("\"sing\" after [chorus]"));
    // The top-level help says what each command is for.
    let help = String::from_utf8_lossy(&songloom(dir.path(), &["--help"]).stdout).into_owned();
    let model_line = help.lines().find(|l| l.trim_start().starts_with("model ")).unwrap_or_default();
    assert!(model_line.contains("download"), "the help's model line: {model_line}");
    // With --json an error is an event too.
    let mut args = gen_args("piano", "la", "1");
    args.extend(["--json", "--model", "/nonexistent"]);
    let r = songloom(dir.path(), &args);
    let event: serde_json::Value = serde_json::from_str(String::from_utf8_lossy(&r.stdout).trim()).unwrap();
    assert!(!r.status.success() && event["event"] == "error", "{event}");
    assert!(event["message"].as_str().unwrap().contains("/nonexistent"), "{event}");
    // No display: what to use instead of the window.
    let r = Command::new(env!("CARGO_BIN_EXE_songloom"))
        .env("XDG_CACHE_HOME", dir.path())
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("WAYLAND_SOCKET")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success() && err.contains("no display") && err.contains("songloom serve"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// `generate` in `dir` (its working folder) with `extra` arguments after a short song's.
fn generate_in(dir: &Path, extra: &[&str]) -> Output {
    let mut args = gen_args("piano", "[verse]\\nla", "1");
    args.extend(extra);
    songloom_in(dir, &args)
}

/// `songloom` with `args` in `dir` (its working folder), on the tiny model.
fn songloom_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_songloom"))
        .args(args)
        .current_dir(dir)
        .env("XDG_CACHE_HOME", dir.join(".cache"))
        .env("SONGLOOM_MODEL", tiny_model())
        .output()
        .unwrap()
}

fn stderr_of(result: &Output) -> String {
    String::from_utf8_lossy(&result.stderr).into_owned()
}

#[test]
fn an_existing_file_is_replaced_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mine.wav");
    std::fs::write(&out, b"a file the user cares about").unwrap();
    let refused = generate_in(dir.path(), &["--out", "mine.wav"]);
    assert!(!refused.status.success(), "an existing file was replaced");
    let why = stderr_of(&refused);
    assert!(why.contains("already exists") && why.contains("--force"), "{why}");
    assert_eq!(why.trim().lines().count(), 1, "not one line: {why}");
    assert_eq!(std::fs::read(&out).unwrap(), b"a file the user cares about");
    let replaced = generate_in(dir.path(), &["--out", "mine.wav", "--force"]);
    assert!(replaced.status.success(), "{}", stderr_of(&replaced));
    assert_eq!(hound::WavReader::open(&out).unwrap().duration(), 86 * 512);
}

#[test]
fn without_out_each_song_gets_a_free_name() {
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..3 {
        let r = generate_in(dir.path(), &[]);
        assert!(r.status.success(), "{}", stderr_of(&r));
    }
    for name in ["song.wav", "song-2.wav", "song-3.wav"] {
        assert!(hound::WavReader::open(dir.path().join(name)).is_ok(), "{name} was not written");
    }
}

#[test]
fn the_extension_picks_the_format() {
    let dir = tempfile::tempdir().unwrap();
    let library = dir.path().join("library");
    let r = generate_in(dir.path(), &["--out", "song.FLAC", "--save", "--library", library.to_str().unwrap()]);
    assert!(r.status.success(), "{}", stderr_of(&r));
    let flac = std::fs::read(dir.path().join("song.FLAC")).unwrap();
    assert!(flac.starts_with(b"fLaC"), "song.FLAC holds no FLAC stream");
    // The library keeps the float WAV the FLAC was made from.
    let kept: Vec<_> = std::fs::read_dir(library.join("songs")).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(hound::WavReader::open(&kept[0]).unwrap().spec().sample_format, hound::SampleFormat::Float);
    let pcm = generate_in(dir.path(), &["--out", "pcm.wav", "--format", "pcm16"]);
    assert!(pcm.status.success(), "{}", stderr_of(&pcm));
    assert_eq!(hound::WavReader::open(dir.path().join("pcm.wav")).unwrap().spec().bits_per_sample, 16);
    let mut mismatched = gen_args("piano", "la", "1");
    mismatched.extend(["--format", "flac"]);
    fails(&mismatched, "does not match");
    let mut unknown = gen_args("piano", "la", "1");
    unknown.extend(["--out", "song.mp3"]);
    fails(&unknown, ".wav and .flac");
}

/// A written song has the permissions any new file gets from the user's umask, so a media server
/// or another account can read it where the umask allows.
#[cfg(unix)]
#[test]
fn written_files_follow_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    for (umask, mode) in [("022", 0o644), ("077", 0o600)] {
        let name = format!("umask-{umask}.wav");
        let script = format!("umask {umask}; exec \"$0\" \"$@\"");
        let mut args = gen_args("piano", "[verse]\\nla", "1");
        args.extend(["--out", &name]);
        let r = Command::new("sh")
            .arg("-c")
            .arg(&script)
            .arg(env!("CARGO_BIN_EXE_songloom"))
            .args(&args)
            .current_dir(dir.path())
            .env("XDG_CACHE_HOME", dir.path().join(".cache"))
            .env("SONGLOOM_MODEL", tiny_model())
            .output()
            .unwrap();
        assert!(r.status.success(), "{}", stderr_of(&r));
        let actual = std::fs::metadata(dir.path().join(&name)).unwrap().permissions().mode() & 0o777;
        assert_eq!(actual, mode, "umask {umask}: mode {actual:o}");
    }
}

/// `generate` of a 1 s piano piece in `dir`, one step, not played, with `extra` arguments.
fn one_second_piano(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["generate", "--prompt", "piano", "--duration", "1", "--steps", "1", "--no-play"];
    args.extend(extra);
    songloom_in(dir, &args)
}

/// The embedded model cannot sing: without lyrics it makes an instrumental song. Another model
/// needs lyrics or `--instrumental`, and the error says so.
#[test]
fn lyrics_are_optional_for_the_embedded_model() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| one_second_piano(dir.path(), extra);
    let r = run(&["--out", "built-in.wav"]);
    assert!(r.status.success(), "{}", stderr_of(&r));
    let recipe = songloom_wire::wav::read_info(&std::fs::read(dir.path().join("built-in.wav")).unwrap()).unwrap();
    assert!(recipe.comment.unwrap().contains(r#""lyrics":"[instrumental]""#), "not an instrumental recipe");
    let model = tiny_model();
    let other = run(&["--model", model.to_str().unwrap(), "--out", "other.wav"]);
    assert!(!other.status.success(), "another model ran without lyrics");
    assert!(stderr_of(&other).contains("--instrumental"), "{}", stderr_of(&other));
    assert!(!dir.path().join("other.wav").exists());
    let r = run(&["--model", model.to_str().unwrap(), "--instrumental", "--out", "other.wav"]);
    assert!(r.status.success(), "{}", stderr_of(&r));
    let both = run(&["--instrumental", "--lyrics", "[verse]\\nla", "--out", "both.wav"]);
    assert!(!both.status.success(), "--instrumental with --lyrics was taken");
}

/// Every file written says it is AI-generated and by which model, beside its recipe: the WAV in
/// its INFO subject, the FLAC in a Vorbis DESCRIPTION.
#[test]
fn every_written_file_says_it_is_ai_generated_and_by_which_model() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| one_second_piano(dir.path(), extra);
    let r = run(&["--out", "built-in.wav"]);
    assert!(r.status.success(), "{}", stderr_of(&r));
    let info = songloom_wire::wav::read_info(&std::fs::read(dir.path().join("built-in.wav")).unwrap()).unwrap();
    let note = info.subject.expect("no AI-generated note in the WAV");
    assert!(note.starts_with("AI-generated") && note.contains("Songloom Mini"), "{note}");
    assert!(info.comment.unwrap().contains("\"seed\""), "the recipe stays the comment");

    let model = tiny_model();
    let r = run(&["--model", model.to_str().unwrap(), "--instrumental", "--out", "real.flac"]);
    assert!(r.status.success(), "{}", stderr_of(&r));
    let flac = String::from_utf8_lossy(&std::fs::read(dir.path().join("real.flac")).unwrap()).into_owned();
    assert!(flac.contains("DESCRIPTION=AI-generated") && flac.contains("by the MiniMax-Music3 model"), "no note");
}

fn lora_fixture(name: &str) -> String {
    tiny_model().join("../lora").join(name).to_str().unwrap().to_string()
}

/// `--lora` merges adapters at load: the song changes, scale 0 leaves it bit-identical, and the
/// recipe in the WAV names each adapter with its checksum and scale.
#[test]
fn lora_adapters_change_the_song_and_travel_in_its_recipe() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline_file = lora_fixture("pytorch_lora_weights.safetensors");
    let song = |name: &str, loras: &[String]| -> (Vec<f32>, String) {
        let out = dir.path().join(name);
        let mut args = gen_args("warm lo-fi piano", "[verse]\\nla", "1");
        args.extend(["--seed", "5", "--out", out.to_str().unwrap()]);
        for lora in loras {
            args.extend(["--lora", lora.as_str()]);
        }
        let r = songloom(dir.path(), &args);
        assert!(r.status.success(), "{loras:?}: {}", String::from_utf8_lossy(&r.stderr));
        let samples = hound::WavReader::open(&out).unwrap().samples::<f32>().map(Result::unwrap).collect();
        (samples, String::from_utf8_lossy(&std::fs::read(&out).unwrap()).into_owned())
    };
    let (plain, plain_text) = song("plain.wav", &[]);
    assert!(!plain_text.contains("adapters"), "a song without adapters records none");
    let (zero, _) = song("zero.wav", &[format!("{pipeline_file}:0"), format!("{}:0", lora_fixture("lm-peft"))]);
    assert!(zero == plain, "adapters at scale 0 changed the song");
    let (adapted, text) = song("adapted.wav", &[format!("{pipeline_file}:0.5"), lora_fixture("lm-peft")]);
    assert!(adapted != plain, "the adapters did not change the song");
    assert!(adapted.iter().all(|s| s.is_finite() && s.abs() <= 1.0));
    for expected in
        ["\"name\":\"pytorch_lora_weights.safetensors\"", "\"name\":\"lm-peft\"", "\"scale\":0.5", "\"sha256\":\""]
    {
        assert!(text.contains(expected), "the recipe lacks {expected}");
    }
}

#[test]
fn a_lora_adapter_that_does_not_fit_is_a_clear_error() {
    let mut args = gen_args("piano", "la", "1");
    args.extend(["--lora", "/nonexistent/adapter.safetensors"]);
    fails(&args, "LoRA adapter /nonexistent/adapter.safetensors: no such file or folder");
    // The embedded model is wider than the tiny model its adapter was made for: refused, naming
    // the adapter and its key, before anything loads.
    let lm = lora_fixture("lm-peft");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.wav");
    let mut args = vec!["generate", "--prompt", "piano", "--instrumental", "--duration", "1", "--steps", "1"];
    args.extend(["--no-play", "--lora", lm.as_str(), "--out", out.to_str().unwrap()]);
    let r = Command::new(env!("CARGO_BIN_EXE_songloom"))
        .args(&args)
        .env("XDG_CACHE_HOME", dir.path())
        .env_remove("SONGLOOM_MODEL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success() && !out.exists(), "{stderr}");
    for expected in ["lm-peft", "lora_A.weight", "another size"] {
        assert!(stderr.contains(expected), "{expected}: {stderr}");
    }
    assert!(!stderr.contains("panicked") && stderr.trim().lines().count() == 1, "{stderr}");
}

fn samples(path: &Path) -> Vec<f32> {
    hound::WavReader::open(path).unwrap().samples::<f32>().map(Result::unwrap).collect()
}

/// `--takes 3` writes three songs at once, each the song its seed makes alone, and keeps each in
/// the library; a bad count or a taken file is a one-line error with nothing written.
#[test]
fn takes_are_the_songs_their_seeds_make_alone() {
    let dir = tempfile::tempdir().unwrap();
    let song = ["--duration", "2", "--steps", "2", "--library", "lib"];
    let mut args = song.to_vec();
    args.extend(["--takes", "3", "--seed", "7", "--out", "take.wav", "--save"]);
    let r = generate_in(dir.path(), &args);
    assert!(r.status.success(), "{}", stderr_of(&r));
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert_eq!(stdout.matches("kept in the library").count(), 3, "{stdout}");
    let takes: Vec<Vec<f32>> = (1..=3).map(|k| samples(&dir.path().join(format!("take-{k}.wav")))).collect();
    assert!(takes[0] != takes[1] && takes[1] != takes[2] && takes[0] != takes[2], "takes are not distinct");
    for (k, take) in takes.iter().enumerate() {
        let seed = (7 + k).to_string();
        let name = format!("alone-{seed}.wav");
        let mut args = song.to_vec();
        args.extend(["--seed", &seed, "--out", &name]);
        let r = generate_in(dir.path(), &args);
        assert!(r.status.success(), "{}", stderr_of(&r));
        assert!(*take == samples(&dir.path().join(&name)), "take {} is not seed {seed}'s song", k + 1);
    }
    for bad in ["0", "9"] {
        let r = generate_in(dir.path(), &["--takes", bad, "--out", "bad.wav"]);
        let why = stderr_of(&r);
        assert!(!r.status.success() && why.contains("--takes must be between 1 and 8"), "{why}");
        assert_eq!(why.trim().lines().count(), 1, "{why}");
    }
    let r = generate_in(dir.path(), &["--takes", "3", "--out", "take.wav"]);
    let why = stderr_of(&r);
    assert!(!r.status.success() && why.contains("take-1.wav already exists"), "{why}");
    assert!(!dir.path().join("bad-1.wav").exists());
    // Without --out, takes take the first set of free names, never a file already there.
    std::fs::write(dir.path().join("takes-2.wav"), b"kept").unwrap();
    for _ in 0..2 {
        let mut args = song.to_vec();
        args.extend(["--takes", "2"]);
        let r = generate_in(dir.path(), &args);
        assert!(r.status.success(), "{}", stderr_of(&r));
    }
    for name in ["takes-2-1.wav", "takes-2-2.wav", "takes-3-1.wav", "takes-3-2.wav"] {
        assert!(!samples(&dir.path().join(name)).is_empty(), "{name}");
    }
    assert_eq!(std::fs::read(dir.path().join("takes-2.wav")).unwrap(), b"kept");
}
