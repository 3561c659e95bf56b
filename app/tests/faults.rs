//! The fault battery of issue 14, each finding a test against the binary: non-finite weights,
//! absurd configs, a reset or broken library, signals mid-song, a full disk, a directory as the
//! output, errors that name their file once, `model info` on a broken model, a closed pipe.
//! Nothing here may panic, leave a temporary, or write a file that is silently wrong.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use songloom_engine::weights::{Checkpoint, save_f32};

/// A home of its own (the embedded model's cache goes there) and a working folder.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        Sandbox { dir: tempfile::tempdir().unwrap() }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self, args: &[&str]) -> Command {
        // SONGLOOM_BIN runs the battery against another build (to show what an older one got wrong).
        let bin = std::env::var("SONGLOOM_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_songloom").to_string());
        let mut c = Command::new(bin);
        c.args(args).current_dir(self.dir.path()).env("HOME", self.dir.path()).env_remove("XDG_CACHE_HOME");
        c.env_remove("XDG_DATA_HOME").env("RUST_BACKTRACE", "0");
        c.env("SONGLOOM_MODEL", Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny-music3"));
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// A copy of the tiny model in the real layout, to break.
    fn model(&self) -> PathBuf {
        let target = self.path("model");
        copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny-music3"), &target);
        target
    }

    /// Every file under the sandbox but the model copy, the home's cache and the library database.
    fn files(&self) -> Vec<String> {
        let mut out = Vec::new();
        walk(self.dir.path(), &mut out);
        out.into_iter()
            .map(|p| p.strip_prefix(self.dir.path()).unwrap().display().to_string())
            .filter(|p| !p.starts_with("model/") && !p.starts_with(".cache/") && !p.contains("library.sqlite3"))
            .collect()
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.path().is_dir() {
            walk(&entry.path(), out);
        } else {
            out.push(entry.path());
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target)
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The arguments of a short song from `model` (the embedded one when `None`) to `out`.
fn song<'a>(model: Option<&'a str>, out: &'a str) -> Vec<&'a str> {
    let mut args = vec!["generate", "--prompt", "warm piano", "--lyrics", "[verse]\\nla la", "--duration", "1"];
    args.extend(["--steps", "2", "--no-play", "--device", "cpu", "--out", out]);
    if let Some(m) = model {
        args.extend(["--model", m]);
    }
    args
}

/// Rewrites one tensor of a component's weights through `edit`.
fn edit_tensor(component: &Path, name: &str, edit: impl FnOnce(&mut Vec<f32>)) {
    let ckpt = Checkpoint::open(component).unwrap();
    let mut names: Vec<String> = ckpt.tensor_names().map(str::to_string).collect();
    names.sort();
    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> = names
        .iter()
        .map(|n| {
            let t = ckpt.read(n).unwrap();
            (n.clone(), t.shape().to_vec(), t.to_f32_vec())
        })
        .collect();
    drop(ckpt);
    let tensor = tensors.iter_mut().find(|t| t.0 == name).unwrap_or_else(|| panic!("no tensor {name}"));
    edit(&mut tensor.2);
    for entry in std::fs::read_dir(component).unwrap().flatten() {
        if entry.file_name().to_string_lossy().contains(".safetensors") {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
    save_f32(&component.join("diffusion_pytorch_model.safetensors"), &tensors).unwrap();
}

fn edit_config(component: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = component.join("config.json");
    let mut cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut cfg);
    std::fs::write(path, serde_json::to_string_pretty(&cfg).unwrap()).unwrap();
}

/// Fixed by 9e572ab (the per-window check of the DiT's and the vocoder's output on the device).
/// Non-finite weights are refused at load since (app/tests/nonfinite.rs); finite ones that overflow
/// the DiT's output still meet the per-window check.
#[test]
fn a_non_finite_weight_is_an_error_naming_the_stage_not_a_silent_file() {
    let sandbox = Sandbox::new();
    let model = sandbox.model();
    edit_tensor(&model.join("transformer"), "proj_out.weight", |w| w.iter_mut().for_each(|v| *v = f32::MAX));
    let m = model.to_str().unwrap();
    for format in ["f32", "pcm16"] {
        let mut args = song(Some(m), "nan.wav");
        args.extend(["--format", format]);
        let r = sandbox.run(&args);
        let err = stderr(&r);
        assert!(!r.status.success(), "{format}: exit 0 with a NaN weight");
        assert!(err.contains("DiT") && err.contains("window 1") && err.contains("NaN"), "{format}: {err}");
        assert!(sandbox.files().is_empty(), "{format} left {:?}", sandbox.files());
    }
    let vocoder = sandbox.model();
    let weight = Checkpoint::open(&vocoder.join("vocoder"))
        .unwrap()
        .tensor_names()
        .find(|n| n.ends_with("_v"))
        .unwrap()
        .to_string();
    edit_tensor(&vocoder.join("vocoder"), &weight, |w| w[0] = f32::INFINITY);
    let r = sandbox.run(&song(Some(vocoder.to_str().unwrap()), "inf.wav"));
    let err = stderr(&r);
    assert!(!r.status.success() && err.contains("vocoder") && err.contains(&format!("`{weight}`")), "{err}");
    assert!(sandbox.files().is_empty(), "left {:?}", sandbox.files());
}

/// Fixed by 9e572ab (configs checked at load).
#[test]
fn an_absurd_sample_rate_is_refused_at_load_naming_the_field() {
    let sandbox = Sandbox::new();
    let model = sandbox.model();
    edit_config(&model.join("vocoder"), |c| c["sampling_rate"] = 1_000_000_000.into());
    let r = sandbox.run(&song(Some(model.to_str().unwrap()), "fast.wav"));
    let err = stderr(&r);
    assert!(!r.status.success() && err.contains("sampling_rate") && err.contains("config.json"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(sandbox.files().is_empty(), "left {:?}", sandbox.files());
}

fn library_ids(sandbox: &Sandbox, library: &str) -> Vec<i64> {
    let r = sandbox.run(&["library", "list", "--json", "--library", library]);
    assert!(r.status.success(), "{}", stderr(&r));
    String::from_utf8_lossy(&r.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_i64().unwrap())
        .collect()
}

/// Fixed by the commit after c7b0c21 (ids past every song file).
#[test]
fn a_reset_library_never_overwrites_a_song_file() {
    let sandbox = Sandbox::new();
    let library = sandbox.path("lib");
    let lib = library.to_str().unwrap();
    let save = |out: &str, seed: &str| {
        let mut args = song(None, out);
        args.extend(["--save", "--library", lib, "--seed", seed]);
        let r = sandbox.run(&args);
        assert!(r.status.success(), "{}", stderr(&r));
    };
    save("one.wav", "1");
    let first = std::fs::read(library.join("songs/1.wav")).unwrap();
    // The database deleted while the songs stay; then the table dropped by hand.
    std::fs::remove_file(library.join("library.sqlite3")).unwrap();
    save("two.wav", "2");
    assert_eq!(std::fs::read(library.join("songs/1.wav")).unwrap(), first, "song 1 was overwritten");
    assert_eq!(library_ids(&sandbox, lib), vec![2]);
    let conn = rusqlite::Connection::open(library.join("library.sqlite3")).unwrap();
    conn.execute_batch("DROP TABLE songs").unwrap();
    drop(conn);
    save("three.wav", "3");
    assert_eq!(std::fs::read(library.join("songs/1.wav")).unwrap(), first, "song 1 was overwritten");
    assert_eq!(library_ids(&sandbox, lib), vec![3]);
}

/// Fixed by the commit after c7b0c21 (errors name the database, `library repair`).
#[test]
fn a_damaged_library_database_names_itself_and_is_repaired_from_the_song_files() {
    let sandbox = Sandbox::new();
    let library = sandbox.path("lib");
    let lib = library.to_str().unwrap();
    let mut args = song(None, "kept.wav");
    args.extend(["--save", "--library", lib]);
    assert!(sandbox.run(&args).status.success());
    let database = library.join("library.sqlite3");
    std::fs::write(&database, b"this is not a database, only some bytes that look nothing like one").unwrap();
    let r = sandbox.run(&["library", "list", "--library", lib]);
    let err = stderr(&r);
    assert!(!r.status.success() && err.contains(&database.display().to_string()) && err.contains("repair"), "{err}");
    let r = sandbox.run(&["library", "repair", "--library", lib]);
    let out = String::from_utf8_lossy(&r.stdout).into_owned();
    assert!(r.status.success() && out.contains("1 songs listed") && out.contains("kept as"), "{out}{}", stderr(&r));
    let r = sandbox.run(&["library", "list", "--json", "--library", lib]);
    let listed: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&r.stdout).lines().next().unwrap()).unwrap();
    assert_eq!((listed["id"].as_i64(), listed["title"].as_str()), (Some(1), Some("warm piano")));
    assert_eq!(listed["description"].as_str(), Some("warm piano"), "the recipe comes back from the file");
    // A database from a newer Songloom is refused, not misread.
    let conn = rusqlite::Connection::open(&database).unwrap();
    conn.execute_batch("PRAGMA user_version = 99").unwrap();
    drop(conn);
    let err = stderr(&sandbox.run(&["library", "list", "--library", lib]));
    assert!(err.contains("newer Songloom") && err.contains("99"), "{err}");
}

/// Starts a long song and waits until it is under way (its temporary exists).
fn start_long_song(sandbox: &Sandbox) -> Child {
    let mut args = song(None, "long.wav");
    let at = args.iter().position(|a| *a == "1").unwrap();
    args[at] = "60";
    let child = sandbox.command(&args).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !sandbox.files().iter().any(|f| f.ends_with(".partial")) {
        assert!(Instant::now() < deadline, "the song never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Fixed by the commit after c7b0c21 (SIGTERM and SIGHUP cancel as SIGINT does).
#[test]
fn a_terminate_or_hang_up_signal_cancels_and_leaves_nothing() {
    for signal in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
        let sandbox = Sandbox::new();
        let child = start_long_song(&sandbox);
        // SAFETY: signalling the child process this test started, by its id.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let r = child.wait_with_output().unwrap();
        assert_eq!(r.status.code(), Some(130), "signal {signal}: {:?} {}", r.status, stderr(&r));
        assert!(stderr(&r).contains("cancelled, nothing written"), "{}", stderr(&r));
        assert!(sandbox.files().is_empty(), "signal {signal} left {:?}", sandbox.files());
    }
}

/// A run killed outright cannot clean up; the next run in that folder does, and says so.
#[test]
fn a_killed_runs_leftover_is_removed_by_the_next_run() {
    let sandbox = Sandbox::new();
    let mut child = start_long_song(&sandbox);
    child.kill().unwrap();
    child.wait().unwrap();
    let left = sandbox.files();
    assert!(left.iter().any(|f| f.ends_with(".partial")), "a SIGKILL leaves its temporary: {left:?}");
    let r = sandbox.run(&song(None, "next.wav"));
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(stderr(&r).contains("left by an interrupted run"), "{}", stderr(&r));
    assert_eq!(sandbox.files(), vec!["next.wav".to_string()]);
}

/// Fixed by 80fc322 (temporaries through `tempfile`, removed on every error path); the cause
/// named with the song's file since the commit after c7b0c21.
#[test]
fn a_full_disk_at_the_last_write_leaves_nothing_and_names_the_file() {
    let sandbox = Sandbox::new();
    // The song's size before its tags, from a run without a limit, then a limit just past the
    // audio (a file size limit stands in for a full disk: an error at the same, last, write).
    let long_lyrics = format!("[verse]\\n{}", "la ".repeat(300));
    let args = |out: &'static str| -> Vec<String> {
        let mut a: Vec<String> = song(None, out).into_iter().map(String::from).collect();
        let at = a.iter().position(|x| x == "[verse]\\nla la").unwrap();
        a[at] = long_lyrics.clone();
        a
    };
    let r = sandbox.command(&args("free.wav").iter().map(String::as_str).collect::<Vec<_>>()).output().unwrap();
    assert!(r.status.success(), "{}", stderr(&r));
    let info = songloom_wav_info_size(&sandbox.path("free.wav"));
    let full = std::fs::metadata(sandbox.path("free.wav")).unwrap().len() as usize;
    let audio = full - info;
    std::fs::remove_file(sandbox.path("free.wav")).unwrap();
    assert!(info > 64, "the tags ({info} bytes) outgrow the room left for them");
    // Room for the audio and a few bytes of the tags: the last write fails.
    let limit = (audio + 16) as libc::rlim_t;
    let mut c = sandbox.command(&args("full.wav").iter().map(String::as_str).collect::<Vec<_>>());
    // SAFETY: only setrlimit, which is async-signal-safe, runs between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        c.pre_exec(move || {
            let rl = libc::rlimit { rlim_cur: limit, rlim_max: limit };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &rl) == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
        });
    }
    let r = c.output().unwrap();
    let err = stderr(&r);
    assert!(!r.status.success(), "the song was written past the limit");
    assert!(err.contains("full.wav") && err.contains("too large"), "{err}");
    assert!(!err.contains("partial"), "the error names the song's file, not its temporary: {err}");
    assert!(sandbox.files().is_empty(), "left {:?}", sandbox.files());
}

/// The size of the `LIST` chunk Songloom appends (its header included).
fn songloom_wav_info_size(path: &Path) -> usize {
    let bytes = std::fs::read(path).unwrap();
    let at = bytes.windows(4).rposition(|w| w == b"LIST").unwrap();
    bytes.len() - at
}

/// Fixed by 80fc322 (the output is checked before any work is done).
#[test]
fn a_directory_as_the_output_is_refused_before_any_work() {
    let sandbox = Sandbox::new();
    std::fs::create_dir(sandbox.path("songs")).unwrap();
    let started = Instant::now();
    let r = sandbox.run(&song(None, "songs"));
    assert!(!r.status.success() && stderr(&r).contains("is a directory"), "{}", stderr(&r));
    assert!(sandbox.files().is_empty(), "left {:?}", sandbox.files());
    assert!(started.elapsed() < Duration::from_secs(30));
    // `library export --out DIR` likewise.
    let mut args = song(None, "kept.wav");
    args.extend(["--save", "--library", "lib"]);
    assert!(sandbox.run(&args).status.success());
    let r = sandbox.run(&["library", "export", "1", "--out", "songs", "--library", "lib"]);
    assert!(!r.status.success() && stderr(&r).contains("is a directory"), "{}", stderr(&r));
    assert!(std::fs::read_dir(sandbox.path("songs")).unwrap().next().is_none());
}

/// Fixed by 9e572ab (the cause is part of the message, not a repeated source).
#[test]
fn checkpoint_errors_name_the_file_and_the_tensor_once() {
    let sandbox = Sandbox::new();
    let model = sandbox.model();
    for entry in std::fs::read_dir(model.join("vocoder")).unwrap().flatten() {
        if entry.file_name().to_string_lossy().ends_with(".safetensors") {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
    let err = stderr(&sandbox.run(&song(Some(model.to_str().unwrap()), "x.wav")));
    assert_eq!(err.matches("expected one .safetensors file").count(), 1, "{err}");
    assert!(err.contains(&model.join("vocoder").display().to_string()), "{err}");

    let model = sandbox.model();
    edit_config(&model.join("condition_encoder"), |c| c["condition_hidden_dim"] = 48.into());
    let err = stderr(&sandbox.run(&song(Some(model.to_str().unwrap()), "x.wav")));
    assert!(err.contains("`proj.weight`") && err.contains("condition_encoder"), "{err}");
    assert!(err.contains("expected shape") && err.contains("found"), "{err}");

    // A component that is a file, not a folder, says so.
    let model = sandbox.model();
    std::fs::remove_dir_all(model.join("vocoder")).unwrap();
    std::fs::write(model.join("vocoder"), b"").unwrap();
    let err = stderr(&sandbox.run(&song(Some(model.to_str().unwrap()), "x.wav")));
    assert!(err.contains("not a folder"), "{err}");
    assert!(sandbox.files().is_empty(), "left {:?}", sandbox.files());
}

/// Fixed by the commit after c7b0c21 (`model info` fails when a component is broken).
#[test]
fn model_info_fails_on_a_broken_component_and_still_lists_the_rest() {
    let sandbox = Sandbox::new();
    let good = sandbox.model();
    assert!(sandbox.run(&["model", "info", good.to_str().unwrap()]).status.success());
    std::fs::remove_file(good.join("vocoder/config.json")).unwrap();
    let r = sandbox.run(&["model", "info", "--json", good.to_str().unwrap()]);
    // The report, then (as with every --json command) the error as an event.
    let mut values = serde_json::Deserializer::from_slice(&r.stdout).into_iter::<serde_json::Value>();
    let report = values.next().unwrap().unwrap();
    assert_eq!(values.next().unwrap().unwrap()["event"], "error");
    assert!(!r.status.success() && stderr(&r).contains("vocoder"), "{}", stderr(&r));
    assert!(report["components"]["transformer"]["parameters"].as_u64().is_some(), "the rest is still listed");
    let model = sandbox.model();
    edit_config(&model.join("transformer"), |c| c["num_layers"] = "many".into());
    let r = sandbox.run(&["model", "info", model.to_str().unwrap()]);
    assert!(!r.status.success() && stderr(&r).contains("transformer"), "{}", stderr(&r));
    let r = sandbox.run(&["model", "info", sandbox.dir.path().to_str().unwrap()]);
    assert!(!r.status.success(), "a folder that is no model");
}

/// Fixed by the commit after c7b0c21 (standard output that ends quietly).
#[test]
fn a_closed_pipe_ends_every_command_quietly() {
    let sandbox = Sandbox::new();
    let model = sandbox.model();
    let m = model.to_str().unwrap();
    let mut json_song = song(None, "piped.wav");
    json_song.push("--json");
    let commands: [Vec<&str>; 5] = [
        vec!["model", "info", m],
        vec!["devices"],
        vec!["prompt", "--prompt", "piano", "--lyrics", "[verse]\\nla"],
        vec!["library", "list", "--library", "lib"],
        json_song,
    ];
    for args in commands {
        let mut child = sandbox.command(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        drop(child.stdout.take());
        let r = child.wait_with_output().unwrap();
        let err = stderr(&r);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(matches!(r.status.code(), Some(0) | Some(141)), "{args:?}: {:?} {err}", r.status);
    }
    assert!(sandbox.files().is_empty(), "left {:?}", sandbox.files());
}

#[test]
fn a_memory_budget_too_small_is_one_line_naming_the_smallest_plan_and_nothing_is_written() {
    let sandbox = Sandbox::new();
    let mut args = song(None, "song.wav");
    args.extend(["--max-memory", "0.001"]);
    let out = sandbox.run(&args);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no plan fits in 1 MB") && err.contains("the smallest") && err.contains("needs"), "{err}");
    assert!(sandbox.files().is_empty(), "{:?}", sandbox.files());
}

#[test]
fn generate_prints_its_plan_and_a_quantized_copy_makes_the_same_song() {
    let sandbox = Sandbox::new();
    let model = sandbox.model();
    let copy = sandbox.path("model-8bit");
    let quantize = sandbox.run(&["model", "quantize", model.to_str().unwrap(), "--weights", "8bit"]);
    assert!(quantize.status.success(), "{}", stderr(&quantize));
    let mut args = song(Some(model.to_str().unwrap()), "a.wav");
    args.extend(["--max-memory", "12", "--weights", "8bit"]);
    let first = sandbox.run(&args);
    let err = stderr(&first);
    assert!(first.status.success(), "{err}");
    assert!(err.contains("plan: q8 AR weights") && err.contains("of a 12.0 GB budget"), "{err}");
    let mut args = song(Some(copy.to_str().unwrap()), "b.wav");
    args.extend(["--max-memory", "12"]);
    let second = sandbox.run(&args);
    assert!(second.status.success(), "{}", stderr(&second));
    let samples = |name: &str| songloom_wav_samples(&sandbox.path(name));
    assert!(samples("a.wav") == samples("b.wav"), "the copy's song differs from quantizing at load");
}

/// The sample bytes of a WAV file (its data chunk).
fn songloom_wav_samples(path: &Path) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    let mut i = 12;
    while i + 8 <= bytes.len() {
        let size = u32::from_le_bytes(bytes[i + 4..i + 8].try_into().unwrap()) as usize;
        if &bytes[i..i + 4] == b"data" {
            return bytes[i + 8..i + 8 + size].to_vec();
        }
        i += 8 + size + (size & 1);
    }
    panic!("{} has no data chunk", path.display());
}
