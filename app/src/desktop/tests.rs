//! The window's main flow with the real engine and the embedded tiny model, by label: compose,
//! generate, pause and play through ALSA's `null` device, export, the library (listen, rename,
//! delete, regenerate), and a cancel that leaves nothing behind; and the engine's edits of a
//! library song, request by request. Each test holds a home of its own
//! (ALSA's configuration, the model cache) while it runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use songloom_ui::app::SongloomApp;
use songloom_ui::contract::{Edit, EditRequest, Engine, EngineEvent, JobId, Recipe, Request, SongEntry, Stage};
use songloom_ui::state::Notice;

use songloom_engine::{DeviceChoice, DeviceKind};

use super::InProcessEngine;
use crate::library::Library;

type App = SongloomApp<InProcessEngine>;

/// A home with ALSA's `null` device as the default output, a library and an export folder.
struct Setup {
    home: tempfile::TempDir,
    _home_held: std::sync::MutexGuard<'static, ()>,
}

impl Setup {
    fn new() -> Setup {
        let home = tempfile::tempdir().unwrap();
        let _home_held = crate::test_home::null_sound_home(home.path());
        Setup { home, _home_held }
    }

    fn library_dir(&self) -> PathBuf {
        self.home.path().join("library")
    }

    fn export_dir(&self) -> PathBuf {
        self.home.path().join("exports")
    }

    fn harness(&self) -> Harness<'static, App> {
        let engine = InProcessEngine::spawn(Some(self.library_dir()), || {});
        let draft =
            Recipe { duration_s: 12.0, steps: 4, device: "cpu".into(), model: tiny_model(), ..Recipe::default() };
        let mut app = SongloomApp::new(engine, draft);
        app.settings.export_folder = self.export_dir().display().to_string();
        // Tall enough that the library panel is on screen, where clicks reach it.
        let mut h =
            Harness::builder().with_size(egui::vec2(900.0, 2400.0)).build_ui_state(|ui, app: &mut App| app.ui(ui), app);
        // The engine probes the devices on a thread of its own, which opens wgpu's adapter (lavapipe
        // here, with LLVM inside): a test that ended while it did would exit under it, which LLVM
        // aborts. So each test starts once the devices are known.
        wait_until(&mut h, "the devices", |app| !app.devices().is_empty());
        h
    }
}

/// The tiny test model: fast, and it never ends a song early (the trained default may).
fn tiny_model() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tiny-music3").to_string()
}

/// Steps the window until `done` holds (the engine works on its own threads meanwhile).
fn wait_until(h: &mut Harness<'static, App>, what: &str, done: impl Fn(&App) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while !done(h.state()) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
        h.step();
    }
    h.step();
}

/// Focuses the field labelled `label` and types `text` into it.
fn type_into(h: &mut Harness<'static, App>, label: &str, text: &str) {
    h.get_by_label(label).focus();
    h.step();
    h.get_by_label(label).type_text(text);
    h.step();
}

/// One song of 0.1 s in the library, "Library piano", written as the engine writes them.
fn add_library_song(setup: &Setup) {
    let recipe = Recipe { description: "library piano".into(), lyrics: "[verse]\nla".into(), ..Recipe::default() };
    add_song(setup, "Library piano", &recipe, None);
}

/// A song of 0.1 s in the library, with `score` if given.
fn add_song(
    setup: &Setup,
    title: &str,
    recipe: &Recipe,
    score: Option<&songloom_engine::pipeline::score::Score>,
) -> crate::library::Song {
    let mut library = Library::open(&setup.library_dir()).unwrap();
    let mut wav =
        crate::wav::WavFile::create_in(library.songs_dir(), "take.wav", 44100, crate::wav::WavFormat::F32).unwrap();
    wav.write(&vec![0.25; 2 * 4410]).unwrap();
    let complete = wav.finish(title, &serde_json::to_string(recipe).unwrap()).unwrap();
    library.add(title, recipe, 0.1, &Default::default(), complete, score).unwrap()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.flatten().flat_map(|e| if e.path().is_dir() { files_under(&e.path()) } else { vec![e.path()] }).collect()
}

#[test]
fn compose_generate_pause_play_export_and_find_it_in_the_library() {
    let setup = Setup::new();
    let mut h = setup.harness();
    type_into(&mut h, "Description", "kittest piano");
    h.get_by_label("[verse]").click();
    h.step();
    type_into(&mut h, "Lyrics editor", "la la la");
    let deadline = Instant::now() + Duration::from_secs(60);
    while h.query_by_label_contains("language_model").is_none() {
        assert!(Instant::now() < deadline, "the model field never said what the model holds");
        std::thread::sleep(Duration::from_millis(10));
        h.step();
    }
    h.get_by_label("Generate").click();
    h.step();

    // The song is held until the rest can play through; Play plays it at once, and Pause
    // pauses it while the rest is still being made.
    wait_until(&mut h, "the first audio", |app| app.track.as_ref().is_some_and(|t| !t.audio.is_empty()));
    if !h.state().engine().playback().playing {
        h.get_by_label("Play").click();
        h.step();
        wait_until(&mut h, "playback to start", |app| app.engine().playback().playing);
    }
    h.get_by_label("Pause").click();
    h.step();
    assert!(!h.state().engine().playback().playing, "Pause pauses");

    wait_until(&mut h, "the song to finish", |app| app.job.as_ref().is_some_and(|j| j.progress.is_done()));
    let app = h.state();
    let job = app.job.as_ref().unwrap();
    assert!(job.progress.finished.is_some(), "{:?}", job.progress.error);
    assert_eq!(job.progress.frames.0, job.progress.frames.1, "every AR frame made");
    let frames = app.track.as_ref().unwrap().audio.len() / 2;
    assert!(frames > 44100 * 10, "about 12 s of audio in the waveform, got {frames} frames");
    assert!(h.query_by_label("Waveform").is_some());
    assert!(h.query_by_label_contains("Finished").is_some());
    let playback = app.engine().playback();
    assert_eq!(playback.frames, frames, "the player holds the whole song");
    assert!(playback.position < frames, "paused before the end: {playback:?}");

    // Play from where it paused to the end (ALSA's null device plays as fast as it is fed).
    h.get_by_label("Play").click();
    h.step();
    wait_until(&mut h, "playback to reach the end", |app| {
        let p = app.engine().playback();
        p.position == p.frames && !p.playing
    });

    // The finished song is in the library panel; export it as 16-bit with its recipe.
    wait_until(&mut h, "the library to list the song", |app| app.library.songs.len() == 1);
    assert!(h.query_by_label("Listen").is_some());
    h.state_mut().settings.export_format = songloom_ui::contract::ExportFormat::Pcm16;
    h.get_by_label("Export").click();
    h.step();
    wait_until(&mut h, "the export", |app| app.notice.is_some());
    let Notice { message: notice, problem, .. } = h.state().notice.clone().unwrap();
    assert!(!problem && notice.starts_with("Exported to"), "{notice}");
    let exported = setup.export_dir().join("kittest piano.wav");
    let (samples, rate) = crate::wav::read_song(&exported).unwrap();
    assert_eq!((samples.len() / 2, rate), (frames, 44100));
    let comment = crate::wav::read_info(&exported).unwrap().comment.unwrap();
    assert!(comment.contains("kittest piano") && comment.contains("la la la"), "{comment}");
    let songs = Library::open(&setup.library_dir()).unwrap().list("").unwrap();
    assert_eq!(songs.len(), 1);
    assert_eq!(songs[0].recipe.description, "kittest piano");
    assert!(songs[0].wav.exists());
}

#[test]
fn cancel_mid_way_leaves_no_entry_and_no_file() {
    let setup = Setup::new();
    let mut h = setup.harness();
    h.state_mut().draft.description = "cancelled song".into();
    h.state_mut().draft.lyrics = "[verse]\nla la".into();
    h.get_by_label("Generate").click();
    h.step();
    wait_until(&mut h, "the first AR frames", |app| {
        app.job.as_ref().is_some_and(|j| j.progress.frames.0 > 0 || j.progress.is_done())
    });
    assert!(h.state().is_running(), "still running when cancelled: {:?}", h.state().job.as_ref().unwrap().progress);
    h.get_by_label("Cancel").click();
    h.step();
    wait_until(&mut h, "the cancel", |app| app.job.as_ref().is_some_and(|j| j.progress.is_done()));
    let job = h.state().job.as_ref().unwrap();
    assert_eq!(job.progress.error.as_deref(), Some("cancelled"));
    assert!(job.progress.finished.is_none());
    assert!(h.query_by_label("Cancelled: nothing was kept.").is_some(), "the window says so, and no more");
    assert!(h.query_by_label_contains("Composing").is_none(), "the progress is cleared");
    assert!(Library::open(&setup.library_dir()).unwrap().list("").unwrap().is_empty());
    let wavs: Vec<PathBuf> = files_under(&setup.library_dir())
        .into_iter()
        .filter(|p| !p.ends_with("library.sqlite3") && !p.to_string_lossy().contains("sqlite3-"))
        .collect();
    assert!(wavs.is_empty(), "left behind: {wavs:?}");
    assert!(!h.state().engine().playback().playing, "a cancelled song stops playing");
}

#[test]
fn the_library_panel_lists_searches_plays_renames_and_deletes() {
    let setup = Setup::new();
    add_library_song(&setup);

    let mut h = setup.harness();
    wait_until(&mut h, "the library list", |app| app.library.songs.len() == 1);
    assert!(h.query_by_label("Library piano").is_some());

    type_into(&mut h, "Search library", "techno");
    wait_until(&mut h, "the search", |app| app.library.songs.is_empty());
    assert!(h.query_by_label("No song matches.").is_some());
    h.state_mut().library.search.clear();
    h.state().engine().send(songloom_ui::contract::Request::ListSongs { search: String::new() });
    wait_until(&mut h, "the full list", |app| app.library.songs.len() == 1);

    h.get_by_label("Listen").click();
    h.step();
    wait_until(&mut h, "the song to load", |app| app.track.as_ref().is_some_and(|t| t.song.is_some()));
    assert_eq!(h.state().track.as_ref().unwrap().audio.len(), 2 * 4410);
    wait_until(&mut h, "the player to hold it", |app| app.engine().playback().frames == 4410);

    h.get_by_label("Rename").click();
    h.run_steps(2);
    type_into(&mut h, "New title", " (keeper)");
    h.get_by_label("Save title").click();
    h.step();
    wait_until(&mut h, "the rename", |app| app.library.songs.first().is_some_and(|s| s.title.ends_with("(keeper)")));
    assert_eq!(Library::open(&setup.library_dir()).unwrap().list("").unwrap()[0].title, "Library piano (keeper)");

    h.get_by_label("Variation").click();
    h.step();
    assert!(h.state().is_running(), "a variation of the song is being made");
    h.get_by_label("Cancel").click();
    wait_until(&mut h, "the cancel", |app| !app.is_running());

    // Deleted, brought back with Undo, deleted again: gone once its Undo is over.
    h.get_by_label("Delete").click();
    h.run_steps(2);
    h.get_by_label("Undo").click();
    h.run_steps(2);
    assert!(h.query_by_label("Library piano (keeper)").is_some());
    h.get_by_label("Delete").click();
    h.run_steps(2);
    assert!(h.query_by_label_contains("is deleted").is_some());
    assert_eq!(Library::open(&setup.library_dir()).unwrap().list("").unwrap().len(), 1, "not yet");
    h.input_mut().time = Some(h.ctx.input(|i| i.time) + songloom_ui::panels::library::UNDO_S + 1.0);
    h.step();
    wait_until(&mut h, "the delete", |app| app.library.songs.is_empty());
    assert!(Library::open(&setup.library_dir()).unwrap().list("").unwrap().is_empty());
    assert!(files_under(&setup.library_dir().join("songs")).is_empty());
}

#[test]
fn a_missing_model_or_gpu_is_said_in_the_window_and_the_next_song_still_runs() {
    let setup = Setup::new();
    let mut h = setup.harness();
    h.state_mut().draft.description = "ambient pads".into();
    h.state_mut().draft.lyrics = "[verse]\nla".into();
    h.state_mut().draft.model = setup.home.path().join("no-such-model").display().to_string();
    // Generate waits for a model that can be loaded, and says why, instead of failing after the click.
    wait_until(&mut h, "the model's check", |app| app.generate_blocked().is_some());
    let why = h.state().generate_blocked().unwrap();
    assert!(why.contains("no-such-model"), "{why}");
    assert!(h.query_by_label_contains("no-such-model").is_some(), "said in the window");
    h.get_by_label("Generate").click();
    h.step();
    assert!(h.state().job.is_none(), "a song was started with a model that cannot be loaded");

    let cuda = DeviceChoice::Kind(DeviceKind::Cuda);
    if songloom_engine::Device::from_choice(cuda).is_err() {
        h.state_mut().draft.model.clear();
        h.state_mut().draft.device = cuda.name().into();
        h.step();
        h.get_by_label("Generate").click();
        h.step();
        wait_until(&mut h, "the GPU error", |app| app.job.as_ref().is_some_and(|j| j.progress.is_done()));
        let error = h.state().job.as_ref().unwrap().progress.error.clone().expect("an error");
        assert!(error.to_lowercase().contains(cuda.name()) || error.contains("NVIDIA"), "{error}");
    }

    h.state_mut().draft.model.clear();
    h.state_mut().draft.device = "cpu".into();
    // One frame first: the built-in model's banner comes back above Generate.
    h.step();
    h.get_by_label("Generate").click();
    h.step();
    wait_until(&mut h, "the next song", |app| app.job.as_ref().is_some_and(|j| j.progress.is_done()));
    let progress = &h.state().job.as_ref().unwrap().progress;
    assert!(progress.finished.is_some(), "the window is still usable: {:?}", progress.error);
    assert!(Library::open(&setup.library_dir()).unwrap().list("").unwrap().len() == 1, "only the good song is kept");
}

/// The CLI and the window run one song job: the same request and seed give the same samples.
#[test]
fn a_cli_song_and_a_window_song_of_one_request_are_the_same_audio() {
    use clap::Parser;
    let setup = Setup::new();
    let (description, lyrics, seed) = ("same song twice", "[verse]\nla la", 11u64);
    let cli_wav = setup.home.path().join("cli.wav");
    let cli = crate::Cli::try_parse_from(
        [
            "songloom",
            "generate",
            "--prompt",
            description,
            "--lyrics",
            lyrics,
            "--duration",
            "2",
            "--seed",
            "11",
            "--steps",
            "2",
            "--guidance",
            "1.7",
            "--device",
            "cpu",
            "--model",
            &tiny_model(),
            "--no-play",
            "--out",
        ]
        .into_iter()
        .map(String::from)
        .chain([cli_wav.display().to_string()]),
    )
    .unwrap();
    crate::run(cli).unwrap();

    let mut h = setup.harness();
    let app = h.state_mut();
    app.draft = Recipe {
        description: description.into(),
        lyrics: "[verse]\nla la".into(),
        duration_s: 2.0,
        seed,
        steps: 2,
        guidance: 1.7,
        device: "cpu".into(),
        model: tiny_model(),
        ..Recipe::default()
    };
    app.settings.keep_seed = true;
    h.get_by_label("Generate").click();
    h.step();
    wait_until(&mut h, "the window's song", |app| app.job.as_ref().is_some_and(|j| j.progress.is_done()));
    let songs = Library::open(&setup.library_dir()).unwrap().list("").unwrap();
    assert_eq!(songs.len(), 1, "{:?}", h.state().job.as_ref().unwrap().progress.error);
    let (window, window_rate) = crate::wav::read_song(&songs[0].wav).unwrap();
    let (cli, cli_rate) = crate::wav::read_song(&cli_wav).unwrap();
    assert_eq!(cli_rate, window_rate);
    assert!(cli.len() > 2 * cli_rate as usize, "about 2 s of audio, got {} samples", cli.len());
    let same = cli.len() == window.len() && cli.iter().zip(&window).all(|(a, b)| a.to_bits() == b.to_bits());
    assert!(same, "the CLI's {} samples and the window's {} differ", cli.len(), window.len());
}

/// eframe's storage, in memory.
#[derive(Default)]
struct MemoryStorage(std::collections::HashMap<String, String>);

impl eframe::Storage for MemoryStorage {
    fn get_string(&self, key: &str) -> Option<String> {
        self.0.get(key).cloned()
    }
    fn set_string(&mut self, key: &str, value: String) {
        self.0.insert(key.to_string(), value);
    }
    fn remove_string(&mut self, key: &str) {
        self.0.remove(key);
    }
    fn flush(&mut self) {}
}

#[test]
fn the_draft_and_the_settings_survive_a_restart() {
    let (first_draft, first_settings) = super::restore(None);
    assert!(!first_draft.description.is_empty(), "a first start offers an example song");
    // For the embedded model it starts with, which cannot sing.
    assert_eq!((first_draft.model.as_str(), first_draft.lyrics.as_str()), ("", "[instrumental]"));
    let draft =
        Recipe { description: "kept".into(), lyrics: "[chorus]\nla".into(), seed: 42, guidance: 2.0, ..first_draft };
    let settings = songloom_ui::state::Settings {
        export_folder: "/music".into(),
        export_format: songloom_ui::contract::ExportFormat::Pcm16,
        keep_seed: false,
        volume: 0.4,
        takes: 3,
    };
    assert_ne!(settings, first_settings);
    let mut storage = MemoryStorage::default();
    super::persist(&mut storage, &draft, &settings);
    assert_eq!(super::restore(Some(&storage)), (draft, settings));
}

#[test]
fn a_queue_of_two_with_the_waiting_one_removed_makes_only_the_first() {
    let setup = Setup::new();
    let mut h = setup.harness();
    h.state_mut().draft.lyrics = "[verse]\nla la".into();
    h.state_mut().draft.duration_s = 20.0;
    h.state_mut().draft.description = "first in line".into();
    h.get_by_label("Generate").click();
    h.step();
    h.state_mut().draft.description = "second in line".into();
    h.get_by_label("Generate").click();
    h.step();
    assert_eq!(h.state().queue.len(), 1, "the second waits");
    h.get_by_label("Remove second in line from the queue").click();
    h.step();
    h.step();
    assert!(h.state().queue.is_empty());
    wait_until(&mut h, "the first song", |app| app.job.as_ref().is_some_and(|j| j.progress.is_done()));
    assert_eq!(h.state().job.as_ref().unwrap().progress.error, None, "the first finished");
    // The engine makes songs in order: had the second not been skipped, it would be made before
    // a third asked for now.
    h.state_mut().draft.description = "third in line".into();
    h.get_by_label("Generate").click();
    h.step();
    wait_until(&mut h, "the third song", |app| app.job.as_ref().is_some_and(|j| j.id == 3 && j.progress.is_done()));
    let songs = Library::open(&setup.library_dir()).unwrap().list("").unwrap();
    let kept: Vec<&str> = songs.iter().map(|s| s.recipe.description.as_str()).collect();
    assert_eq!(kept, ["third in line", "first in line"]);
}

/// Asks for `takes` takes of a short recipe of seed 41 through the Takes field and Generate.
fn generate_takes(h: &mut Harness<'static, App>, description: &str, duration_s: f64, takes: &str) {
    h.state_mut().draft.description = description.into();
    h.state_mut().draft.lyrics = "[verse]\nla la".into();
    h.state_mut().draft.duration_s = duration_s;
    h.state_mut().draft.seed = 41;
    h.state_mut().settings.keep_seed = true;
    h.get_by_label("Takes").focus();
    h.step();
    h.key_press(egui::Key::Backspace);
    h.get_by_label("Takes").type_text(takes);
    h.step();
    h.key_press(egui::Key::Enter);
    h.step();
    h.get_by_label("Generate").click();
    h.step();
}

/// Every take in the window is done.
fn takes_done(app: &App) -> bool {
    !app.takes.is_empty() && app.takes.iter().all(|t| t.progress.is_done())
}

/// The songs files in the library's folder.
fn song_files(setup: &Setup) -> Vec<PathBuf> {
    files_under(&setup.library_dir().join("songs"))
}

/// Three takes from the window: three jobs, each finished with its own library song of seed 41,
/// 42 and 43 (three different songs), the first played as it was made; one discarded from its row
/// is gone from the library and its file with it once the Undo is over, the others stay.
#[test]
fn three_takes_are_three_library_songs_and_a_discarded_one_goes() {
    let setup = Setup::new();
    let mut h = setup.harness();
    generate_takes(&mut h, "three takes", 8.0, "3");
    wait_until(&mut h, "the takes to finish", takes_done);
    let app = h.state();
    let ends: Vec<(usize, u64, Option<String>)> =
        app.takes.iter().map(|t| (t.number, t.seed, t.progress.error.clone())).collect();
    assert_eq!(ends, [(1, 41, None), (2, 42, None), (3, 43, None)]);
    let jobs: std::collections::HashSet<JobId> = app.takes.iter().map(|t| t.job).collect();
    assert_eq!(jobs.len(), 3, "a job each");
    let songs: Vec<SongEntry> = app.takes.iter().map(|t| t.song.clone().expect("saved")).collect();
    assert_eq!(songs.iter().map(|s| s.recipe.seed).collect::<Vec<_>>(), [41, 42, 43]);
    for take in &app.takes {
        assert!(take.progress.finished.is_some() && take.progress.frames.0 == take.progress.frames.1);
    }
    // The first take streamed into the player as a song alone does.
    let first = app.track.as_ref().expect("the first take in the player");
    assert_eq!(app.job.as_ref().map(|j| j.id), Some(app.takes[0].job));
    assert!(first.audio.len() / 2 > 44100 * 6, "about 8 s of the first take: {}", first.audio.len() / 2);
    wait_until(&mut h, "the player to hold the first take", |app| {
        let p = app.engine().playback();
        p.frames > 0 && p.frames == app.track.as_ref().map_or(0, |t| t.audio.len() / 2)
    });

    // Three songs in the library, each its seed's, each a different song.
    let library = Library::open(&setup.library_dir()).unwrap().list("").unwrap();
    let mut seeds: Vec<u64> = library.iter().map(|s| s.recipe.seed).collect();
    seeds.sort();
    assert_eq!(seeds, [41, 42, 43]);
    let audio: Vec<Vec<f32>> = songs
        .iter()
        .map(|s| crate::wav::read_song(&library.iter().find(|l| l.id == s.id).unwrap().wav).unwrap().0)
        .collect();
    for (a, b) in [(0, 1), (0, 2), (1, 2)] {
        assert!(!audio[a].is_empty() && audio[a] != audio[b], "takes {} and {} are the same song", a + 1, b + 1);
    }
    assert_eq!(song_files(&setup).len(), 3);

    // Take 2 is played from its row, then discarded: gone once its Undo is over.
    h.get_by_label("Play take 2").click();
    h.step();
    wait_until(&mut h, "take 2 to load", |app| {
        app.track.as_ref().and_then(|t| t.song.as_ref()).is_some_and(|s| s.id == songs[1].id)
    });
    wait_until(&mut h, "the library to list the takes", |app| app.library.songs.len() == 3);
    h.get_by_label("Discard take 2").click();
    h.run_steps(2);
    assert!(h.query_by_label("Discard take 2").is_none(), "its row is gone");
    assert_eq!(Library::open(&setup.library_dir()).unwrap().list("").unwrap().len(), 3, "not before its Undo");
    h.input_mut().time = Some(h.ctx.input(|i| i.time) + songloom_ui::panels::library::UNDO_S + 1.0);
    h.step();
    wait_until(&mut h, "the delete", |app| app.library.songs.len() == 2);
    let left = Library::open(&setup.library_dir()).unwrap().list("").unwrap();
    let mut seeds: Vec<u64> = left.iter().map(|s| s.recipe.seed).collect();
    seeds.sort();
    assert_eq!(seeds, [41, 43]);
    assert!(!left.iter().any(|s| s.id == songs[1].id));
    assert_eq!(song_files(&setup).len(), 2, "its file went with it");

    // Keep the first: its row goes, its song stays.
    h.get_by_label("Keep take 1").click();
    h.step();
    assert_eq!(h.state().takes.iter().map(|t| t.number).collect::<Vec<_>>(), [3]);
    assert_eq!(Library::open(&setup.library_dir()).unwrap().list("").unwrap().len(), 2);
}

/// A take cancelled from its row mid-way keeps nothing; the other takes go on to the library.
#[test]
fn a_take_cancelled_alone_leaves_the_others_to_finish() {
    let setup = Setup::new();
    let mut h = setup.harness();
    generate_takes(&mut h, "one of three cancelled", 20.0, "3");
    wait_until(&mut h, "the takes' first AR frames", |app| {
        app.takes.len() == 3 && app.takes.iter().all(|t| t.progress.frames.0 > 0 || t.progress.is_done())
    });
    assert!(!h.state().takes[1].progress.is_done(), "take 2 still being made when cancelled");
    h.get_by_label("Cancel take 2").click();
    h.step();
    wait_until(&mut h, "the takes to end", takes_done);
    let ends: Vec<(u64, Option<String>, bool)> =
        h.state().takes.iter().map(|t| (t.seed, t.progress.error.clone(), t.song.is_some())).collect();
    assert_eq!(ends, [(41, None, true), (42, Some("cancelled".into()), false), (43, None, true)]);
    assert!(h.query_by_label("Cancelled: nothing was kept.").is_some(), "its row says so");
    let mut seeds: Vec<u64> =
        Library::open(&setup.library_dir()).unwrap().list("").unwrap().iter().map(|s| s.recipe.seed).collect();
    seeds.sort();
    assert_eq!(seeds, [41, 43]);
    assert_eq!(song_files(&setup).len(), 2, "nothing left of the cancelled take: {:?}", song_files(&setup));
}

/// The window runs a song with Device set to wgpu through the Device drop-down (lavapipe in CI,
/// wherever an adapter exists; skipped with the reason elsewhere).
#[test]
fn a_song_runs_with_the_device_set_to_wgpu() {
    if let Err(e) = songloom_engine::Device::from_choice(DeviceChoice::Kind(DeviceKind::Wgpu)) {
        println!("skipped: no wgpu adapter here ({e})");
        return;
    }
    let setup = Setup::new();
    let mut h = setup.harness();
    h.state_mut().draft.description = "wgpu organ".into();
    h.state_mut().draft.lyrics = "[verse]\nla la".into();
    // Short and few steps: lavapipe runs the shaders on two CPU cores in CI.
    h.state_mut().draft.duration_s = 2.0;
    h.state_mut().draft.steps = 1;
    // The device is an engine setting, under Advanced.
    h.get_by_label_contains("Advanced:").click();
    h.run_steps(2);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        h.get_by_role_and_label(egui::accesskit::Role::ComboBox, "Device").click();
        // The drop-down's list is drawn from the frame after the click.
        h.step();
        h.step();
        if let Some(option) = h.query_by_label("wgpu") {
            option.click();
            h.step();
            break;
        }
        if Instant::now() >= deadline {
            panic!("the Device drop-down never offered wgpu: {:?}", h.root());
        }
        h.key_press(egui::Key::Escape);
        std::thread::sleep(Duration::from_millis(20));
        h.step();
    }
    assert_eq!(h.state().draft.device, "wgpu", "the drop-down set the device");
    h.step();
    h.get_by_label("Generate").click();
    h.step();
    wait_until(&mut h, "the song on wgpu", |app| app.job.as_ref().is_some_and(|j| j.progress.is_done()));
    let app = h.state();
    let progress = &app.job.as_ref().unwrap().progress;
    assert!(progress.finished.is_some(), "{:?}", progress.error);
    let frames = app.track.as_ref().unwrap().audio.len() / 2;
    assert!(frames > 44100 * 3 / 2, "about 2 s of audio, got {frames} frames");
    let songs = Library::open(&setup.library_dir()).unwrap().list("").unwrap();
    assert_eq!(songs[0].recipe.device, "wgpu", "the library keeps the device it was made on");
}

/// While a song is made the library stays usable: a library song is listened to (the player is
/// its alone: the song being made no longer reaches it) and renamed, and the song being made
/// still lands in the library.
#[test]
fn the_library_is_usable_while_a_song_is_made() {
    let setup = Setup::new();
    add_library_song(&setup);

    let mut h = setup.harness();
    wait_until(&mut h, "the library list", |app| app.library.songs.len() == 1);
    type_into(&mut h, "Description", "made meanwhile");
    type_into(&mut h, "Lyrics editor", "[verse]\nla la la");
    // Long enough to be still in the making while the library is used.
    h.state_mut().draft.steps = 30;
    h.get_by_label("Generate").click();
    h.step();
    wait_until(&mut h, "the song's first audio", |app| {
        app.track.as_ref().is_some_and(|t| !t.audio.is_empty())
            || app.job.as_ref().is_some_and(|j| j.progress.error.is_some())
    });
    assert!(
        h.state().job.as_ref().unwrap().progress.error.is_none(),
        "{:?}",
        h.state().job.as_ref().unwrap().progress.error
    );
    assert!(h.state().is_running());

    h.get_by_label("Listen").click();
    h.step();
    wait_until(&mut h, "the library song to load", |app| app.track.as_ref().is_some_and(|t| t.song.is_some()));
    wait_until(&mut h, "the player to hold it", |app| app.engine().playback().frames == 4410);
    assert!(h.state().is_running(), "listened to while the other song is made");
    h.get_by_label("Rename").click();
    h.run_steps(2);
    type_into(&mut h, "New title", " (kept)");
    h.get_by_label("Save title").click();
    h.step();
    wait_until(&mut h, "the rename", |app| app.library.songs.iter().any(|s| s.title == "Library piano (kept)"));

    wait_until(&mut h, "the song being made", |app| !app.is_running());
    wait_until(&mut h, "it in the library", |app| app.library.songs.len() == 2);
    assert_eq!(h.state().engine().playback().frames, 4410, "the song made meanwhile never reached the player");
    assert_eq!(h.state().track.as_ref().unwrap().audio.len(), 2 * 4410, "the window still shows the library song");
}

#[path = "../../tests/hub/mod.rs"]
mod hub;

/// The window's Download runs on the engine's own thread against a hub on loopback: the model
/// lands in the models folder, verified, becomes the Model, and is listed to choose.
#[test]
fn the_window_downloads_the_model_and_makes_it_the_model() {
    let setup = Setup::new();
    let hub = hub::Hub::start(hub::Faults::default());
    let data = setup.home.path().join("data");
    // SAFETY: as in `null_sound_home`: this test holds the home's lock while they are set.
    unsafe {
        std::env::set_var("HF_ENDPOINT", hub.endpoint());
        std::env::set_var("XDG_DATA_HOME", &data);
    }
    let mut h = setup.harness();
    h.get_by_label("Download MiniMax-Music3 (28.5 GB)").click();
    h.step();
    wait_until(&mut h, "the download's end", |app| app.notice.is_some());
    let Notice { message: notice, problem, .. } = h.state().notice.clone().unwrap();
    assert!(!problem && notice.starts_with("The model is in "), "{notice}");
    let model = PathBuf::from(&h.state().draft.model);
    assert!(model.starts_with(data.join("songloom/models")), "{}", model.display());
    for file in
        ["language_model/config.json", "language_model/model-00003-of-00005.safetensors", "tokenizer/tokenizer.json"]
    {
        let fetched = std::fs::read(model.join(file)).unwrap();
        assert_eq!(fetched, std::fs::read(hub::fixture().join(file)).unwrap(), "{file}");
    }
    assert!(hub.seen.lock().unwrap().iter().any(|(path, _)| path.contains("/resolve/main/")));
    // The models folder listed again, the new model in it, one click from the Model field.
    let deadline = Instant::now() + Duration::from_secs(30);
    while h.query_by_label("Use").is_none() {
        assert!(Instant::now() < deadline, "the downloaded model was never listed");
        std::thread::sleep(Duration::from_millis(10));
        h.step();
    }
}

/// What an interrupted download left is offered to resume or to discard; Discard removes it (and
/// only it) and says so.
#[test]
fn a_partial_download_can_be_discarded_from_the_window() {
    let setup = Setup::new();
    let data = setup.home.path().join("data");
    // SAFETY: as in `null_sound_home`: this test holds the home's lock while it is set.
    unsafe { std::env::set_var("XDG_DATA_HOME", &data) };
    let partial = crate::model_download::default_dir();
    std::fs::create_dir_all(partial.join("language_model")).unwrap();
    std::fs::write(partial.join("language_model/config.json"), "{}").unwrap();
    let mut h = setup.harness();
    h.run_steps(2);
    h.get_by_label("Resume the model's download");
    h.get_by_label("Discard the partial download").click();
    h.step();
    wait_until(&mut h, "the discard", |app| app.notice.is_some());
    assert_eq!(h.state().notice.as_ref().unwrap().message, "The partial download is removed");
    assert!(!partial.exists(), "{} is still there", partial.display());
    assert!(data.join("songloom/models").exists(), "the models folder itself stays");
}

#[test]
fn closing_mid_song_and_discarding_leaves_no_partial_file() {
    let setup = Setup::new();
    let mut h = setup.harness();
    h.state_mut().draft.description = "song closed mid-way".into();
    h.state_mut().draft.lyrics = "[verse]\nla la".into();
    h.get_by_label("Generate").click();
    h.step();
    wait_until(&mut h, "the first AR frames", |app| {
        app.job.as_ref().is_some_and(|j| j.progress.frames.0 > 0 || j.progress.is_done())
    });
    assert!(h.state().is_running(), "still running when the window closes");
    h.input_mut().viewports.entry(egui::ViewportId::ROOT).or_default().events.push(egui::ViewportEvent::Close);
    h.step();
    h.step();
    h.get_by_label("Discard and quit").click();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        h.step();
        let asked = h.output().viewport_output.get(&egui::ViewportId::ROOT).map(|o| o.commands.clone());
        if asked.unwrap_or_default().contains(&egui::ViewportCommand::Close) {
            // Closed because the engine confirmed the cancel, not because the wait ran out.
            assert!(!h.state().is_running(), "closed before the cancel was confirmed");
            break;
        }
        assert!(Instant::now() < deadline, "the window never closed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let left: Vec<PathBuf> = files_under(&setup.library_dir())
        .into_iter()
        .filter(|p| !p.ends_with("library.sqlite3") && !p.to_string_lossy().contains("sqlite3-"))
        .collect();
    assert!(left.is_empty(), "left behind when the window closed: {left:?}");
    assert!(Library::open(&setup.library_dir()).unwrap().list("").unwrap().is_empty());
}

/// A song made with the window's LoRA adapters: the engine merges them, the library keeps each
/// one's checksum in the recipe; an adapter that is not there fails the song with its path named.
#[test]
fn the_windows_lora_adapters_are_merged_and_recorded() {
    let setup = Setup::new();
    let mut h = setup.harness();
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/lora/pytorch_lora_weights.safetensors");
    let adapter = songloom_ui::contract::AdapterRecipe {
        path: file.into(),
        name: "pytorch_lora_weights.safetensors".into(),
        sha256: String::new(),
        scale: 0.5,
    };
    {
        let draft = &mut h.state_mut().draft;
        (draft.description, draft.lyrics, draft.duration_s, draft.steps) =
            ("lora piano".into(), "[verse]\nla".into(), 1.0, 1);
        draft.adapters = vec![adapter.clone()];
    }
    h.get_by_label("Generate").click();
    h.step();
    wait_until(&mut h, "the song to finish", |app| app.job.as_ref().is_some_and(|j| j.progress.is_done()));
    let job = h.state().job.as_ref().unwrap();
    assert!(job.progress.finished.is_some(), "{:?}", job.progress.error);
    wait_until(&mut h, "the library to list the song", |app| app.library.songs.len() == 1);
    let songs = Library::open(&setup.library_dir()).unwrap().list("").unwrap();
    let expected =
        songloom_engine::lora::Adapters::open(&[songloom_engine::lora::AdapterSpec { path: file.into(), scale: 0.5 }])
            .unwrap();
    let recorded = &songs[0].recipe.adapters;
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].sha256, expected.iter().next().unwrap().sha256);
    assert_eq!((recorded[0].path.as_str(), recorded[0].scale), (file, 0.5));

    h.state_mut().draft.adapters =
        vec![songloom_ui::contract::AdapterRecipe { path: "/nowhere/x.safetensors".into(), ..adapter }];
    h.get_by_label("Generate").click();
    h.step();
    wait_until(&mut h, "the song to fail", |app| app.job.as_ref().is_some_and(|j| j.progress.error.is_some()));
    let error = h.state().job.as_ref().unwrap().progress.error.clone().unwrap();
    assert!(error.contains("LoRA adapter /nowhere/x.safetensors"), "{error}");
}

/// The engine alone, driven by requests as the window sends them.
struct Host {
    engine: InProcessEngine,
}

impl Host {
    /// Started once the devices are known (see [`Setup::harness`]).
    fn start(setup: &Setup) -> Host {
        let host = Host { engine: InProcessEngine::spawn(Some(setup.library_dir()), || {}) };
        host.events_until("the devices", |e| matches!(e, EngineEvent::Devices { .. }));
        host
    }

    /// The events up to the first that `last` holds for, that one included.
    fn events_until(&self, what: &str, last: impl Fn(&EngineEvent) -> bool) -> Vec<EngineEvent> {
        let deadline = Instant::now() + Duration::from_secs(300);
        let mut events = Vec::new();
        loop {
            for event in self.engine.poll() {
                let done = last(&event);
                events.push(event);
                if done {
                    return events;
                }
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}: {events:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `request` and returns job `job`'s events up to its end (finished, failed or cancelled).
    fn run(&self, job: JobId, request: Request) -> Vec<EngineEvent> {
        self.engine.send(request);
        let events = self.events_until(&format!("job {job}"), |e| match e {
            EngineEvent::Finished { job: j, .. } | EngineEvent::Failed { job: j, .. } => *j == job,
            EngineEvent::Cancelled { job: j } => *j == job,
            _ => false,
        });
        events.into_iter().filter(|e| job_of(e) == Some(job)).collect()
    }

    /// The library as listed to the window.
    fn list(&self) -> Vec<SongEntry> {
        self.engine.send(Request::ListSongs { search: String::new() });
        match self.events_until("the list", |e| matches!(e, EngineEvent::Library { .. })).pop() {
            Some(EngineEvent::Library { songs }) => songs,
            other => unreachable!("{other:?}"),
        }
    }
}

fn job_of(event: &EngineEvent) -> Option<JobId> {
    match event {
        EngineEvent::Plan { job, .. }
        | EngineEvent::Stage { job, .. }
        | EngineEvent::Audio { job, .. }
        | EngineEvent::Saved { job, .. }
        | EngineEvent::Finished { job, .. }
        | EngineEvent::Failed { job, .. }
        | EngineEvent::Cancelled { job } => Some(*job),
        _ => None,
    }
}

/// The song a job's events say was saved.
fn saved(events: &[EngineEvent]) -> SongEntry {
    let song = events.iter().find_map(|e| match e {
        EngineEvent::Saved { song, .. } => Some(song.clone()),
        _ => None,
    });
    song.unwrap_or_else(|| panic!("no song saved: {:?}", events.last()))
}

/// Why a job failed.
fn failure(events: &[EngineEvent]) -> String {
    match events.last() {
        Some(EngineEvent::Failed { message, .. }) => message.clone(),
        other => panic!("the job did not fail: {other:?}"),
    }
}

fn extend_by(seconds: f64) -> EditRequest {
    EditRequest { edit: Edit::Extend { seconds: Some(seconds) }, seed: None }
}

/// A song made, then extended through the engine as the window asks: a new version, its kept
/// audio first and the original's sample for sample, then the new audio, played as it comes and
/// saved with its parent; a time outside the song fails the edit with the engine's reason, and a
/// cancelled edit keeps nothing.
#[test]
fn an_extension_keeps_the_songs_audio_then_goes_on_as_a_new_version() {
    let setup = Setup::new();
    let host = Host::start(&setup);
    // 12 s: two windows, the last one full, so the extension keeps a whole window's audio.
    let recipe = Recipe {
        description: "extended piano".into(),
        lyrics: "[verse]\nla la".into(),
        duration_s: 12.0,
        seed: 1,
        steps: 2,
        device: "cpu".into(),
        model: tiny_model(),
        ..Recipe::default()
    };
    let made = host.run(1, Request::Generate { job: 1, recipe });
    let original = saved(&made);
    assert_eq!(original.editable, Ok(()), "a song made now keeps its codes");
    let library = Library::open(&setup.library_dir()).unwrap();
    let (original_audio, rate) = crate::wav::read_song(&library.get(original.id).unwrap().unwrap().wav).unwrap();

    let events = host.run(2, Request::Edit { job: 2, song: original.id, edit: extend_by(4.0) });
    assert!(matches!(events.last(), Some(EngineEvent::Finished { .. })), "{:?}", events.last());
    assert!(events.iter().any(|e| matches!(e, EngineEvent::Stage { .. })), "the edit's stages are shown");
    // The song's recipe names the weights the model was loaded with (not `auto`): the same model.
    let loads = events.iter().filter(|e| matches!(e, EngineEvent::Stage { stage: Stage::Load { .. }, .. })).count();
    assert_eq!(loads, 0, "the loaded model makes the edit");
    let audio: Vec<(usize, &[f32])> = events
        .iter()
        .filter_map(|e| match e {
            EngineEvent::Audio { first_sample, samples, .. } => Some((*first_sample, samples.as_slice())),
            _ => None,
        })
        .collect();
    let mut next = 0;
    for (first_sample, samples) in &audio {
        assert_eq!(*first_sample, next, "the audio comes in order, without gaps");
        next += samples.len() / 2;
    }
    let (first_sample, kept) = audio[0];
    assert_eq!(first_sample, 0);
    assert!(!kept.is_empty() && kept.len() < original_audio.len());
    let same = kept.iter().zip(&original_audio).all(|(a, b)| a.to_bits() == b.to_bits());
    assert!(same, "the kept audio is the original's");

    let version = saved(&events);
    let edit = version.recipe.edit.as_deref().expect("the new version records its edit");
    assert_eq!((edit.parent, &edit.edit), (original.id, &Edit::Extend { seconds: Some(4.0) }));
    assert_eq!((edit.changed_from_s * f64::from(rate)).round() as usize, kept.len() / 2, "the change starts after it");
    assert_eq!(version.editable, Ok(()), "a version can be edited in turn");
    assert!(next > original_audio.len() / 2 + 3 * rate as usize, "about 4 s more, got {next} frames");
    let saved_at = events.iter().position(|e| matches!(e, EngineEvent::Saved { .. })).unwrap();
    assert_eq!(saved_at, events.len() - 2, "saved, then finished");
    let (version_audio, _) = crate::wav::read_song(&library.get(version.id).unwrap().unwrap().wav).unwrap();
    let sent: Vec<f32> = audio.iter().flat_map(|(_, s)| s.iter().copied()).collect();
    assert!(version_audio == sent, "the library keeps what was sent");
    assert_eq!(host.engine.playback().frames, next, "the player holds the new version");
    let listed = host.list();
    assert_eq!(listed.iter().map(|s| s.parent()).collect::<Vec<_>>(), [Some(original.id), None]);

    let late = EditRequest { edit: Edit::Rerender { from_s: 500.0, to_s: 600.0 }, seed: None };
    let message = failure(&host.run(3, Request::Edit { job: 3, song: original.id, edit: late }));
    assert!(message.contains("within the song"), "{message}");
    assert_eq!(host.list().len(), 2, "a failed edit keeps nothing");

    host.engine.send(Request::Edit { job: 4, song: original.id, edit: extend_by(4.0) });
    let events = host.run(4, Request::Cancel { job: 4 });
    assert!(matches!(events.last(), Some(EngineEvent::Cancelled { job: 4 })), "{:?}", events.last());
    assert_eq!(host.list().len(), 2, "a cancelled edit keeps nothing");
    assert_eq!(files_under(&setup.library_dir().join("songs")).len(), 2, "nor a file");
}

/// Spoils the magic of the score in the WAV at `path`, its length unchanged.
fn damage_score(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = bytes.windows(8).position(|w| w == b"SLSCORE1").expect("the score's magic");
    bytes[at..at + 8].copy_from_slice(b"XXSCORE1");
    std::fs::write(path, bytes).unwrap();
}

/// A song without codes, one whose codes are damaged and one by another model are listed as
/// they are, and an edit of each fails saying why.
#[test]
fn an_edit_the_song_cannot_take_fails_and_says_why() {
    let setup = Setup::new();
    add_library_song(&setup);
    let score = crate::wav::tests::made_up_score();
    let damaged = add_song(&setup, "Damaged", &Recipe::default(), Some(&score));
    damage_score(&damaged.wav);
    let tiny = Recipe {
        lyrics: "[verse]\nla".into(),
        description: "piano".into(),
        device: "cpu".into(),
        model: tiny_model(),
        ..Recipe::default()
    };
    let other_model = add_song(&setup, "Other model", &tiny, Some(&score));
    let host = Host::start(&setup);

    let listed = host.list();
    let why = |title: &str| listed.iter().find(|s| s.title == title).unwrap().editable.clone().unwrap_err();
    let no_codes = why("Library piano");
    assert!(no_codes.contains("no codes") && no_codes.contains("before Songloom kept them"), "{no_codes}");
    assert!(why("Damaged").contains("damaged"), "{}", why("Damaged"));
    assert_eq!(listed.iter().find(|s| s.title == "Other model").unwrap().editable, Ok(()));

    for (job, title, reason) in [(1, "Library piano", "no codes"), (2, "Damaged", "damaged")] {
        let id = listed.iter().find(|s| s.title == title).unwrap().id;
        let events = host.run(job, Request::Edit { job, song: id, edit: extend_by(2.0) });
        let message = failure(&events);
        assert!(message.contains(&format!("song {id} cannot be edited")) && message.contains(reason), "{message}");
        assert_eq!(events.len(), 1, "refused before a model is loaded: {events:?}");
    }
    let message = failure(&host.run(3, Request::Edit { job: 3, song: other_model.id, edit: extend_by(2.0) }));
    assert!(message.contains("another model"), "{message}");
    assert_eq!(host.list().len(), 3, "no version was kept");

    // What the list remembers of a song is read again once its file changes.
    damage_score(&other_model.wav);
    let listed = host.list();
    let now = listed.iter().find(|s| s.id == other_model.id).unwrap().editable.clone();
    assert!(now.as_ref().is_err_and(|why| why.contains("damaged")), "{now:?}");
}
