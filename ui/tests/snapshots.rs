//! The window as pictures, at 1280x800, 800x600 and 1600x1000: the first run (the built-in model's
//! banner), a song being made, a song whose playback waits for its next part, a song finished, a
//! failed start, a song's version in the player with a part of it selected (the version under
//! its song in the library), and three takes in their rows. Rendered by egui-wgpu on
//! lavapipe and compared with `tests/snapshots/*.png`; write them anew with `UPDATE_SNAPSHOTS=1`.
//! Without a software adapter the test says so and skips.

#[allow(dead_code)]
mod common;

use common::{ScriptedEngine, library_song};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use songloom_ui::app::SongloomApp;
use songloom_ui::contract::{Edit, EditOf, EngineEvent, Recipe, Request, SongEntry, Stage, Timings};

const SIZES: [(f32, f32); 3] = [(1280.0, 800.0), (800.0, 600.0), (1600.0, 1000.0)];

/// A software rasterizer (lavapipe), which the harness prefers and the committed pictures come
/// from: a GPU's rasterizer differs from it in a few edge pixels.
fn software_adapter_available() -> bool {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    adapters.iter().any(|a| a.get_info().device_type == wgpu::DeviceType::Cpu)
}

fn window(size: (f32, f32), engine: ScriptedEngine, draft: Recipe) -> Harness<'static, SongloomApp<ScriptedEngine>> {
    let mut app = SongloomApp::new(engine, draft);
    app.library.songs = vec![library_song()];
    Harness::builder().with_size(egui::vec2(size.0, size.1)).wgpu().build_ui_state(
        // As the desktop shell draws it.
        |ui, app: &mut SongloomApp<ScriptedEngine>| {
            egui::CentralPanel::default().show(ui, |ui| {
                egui::ScrollArea::vertical().show(ui, |ui| app.ui(ui));
            });
        },
        app,
    )
}

fn written_draft() -> Recipe {
    Recipe {
        description: "a folk song played on piano with bass with drums in D major at 100 BPM".into(),
        lyrics: "[intro]\n[verse]\n[chorus]\n[outro]".into(),
        duration_s: 30.0,
        ..Recipe::default()
    }
}

/// A song of 30 s, a third composed and the first seconds heard.
fn generating(h: &mut Harness<'static, SongloomApp<ScriptedEngine>>) {
    h.state().engine().paused.set(true);
    h.state_mut().generate(0.0);
    let queue = &h.state().engine().queue;
    queue.borrow_mut().clear();
    let job = 1;
    queue.borrow_mut().extend([
        EngineEvent::Stage { job, stage: Stage::Tokenize, done: 1, total: 1 },
        EngineEvent::Stage { job, stage: Stage::ArFrames, done: 250, total: 750 },
        EngineEvent::Audio {
            job,
            first_sample: 0,
            samples: (0..2 * 44_100 * 4).map(|i| ((i as f32) * 0.01).sin() * 0.4).collect(),
            sample_rate: 44_100,
        },
    ]);
    h.state().engine().paused.set(false);
}

/// A song being made whose playback caught up with it: it waits for the next part.
fn waiting(h: &mut Harness<'static, SongloomApp<ScriptedEngine>>) {
    generating(h);
    h.run();
    let frames = 44_100 * 4;
    h.state().engine().playback.replace(songloom_ui::contract::PlaybackState {
        playing: true,
        position: frames,
        frames,
        sample_rate: 44_100,
        ..Default::default()
    });
}

fn finished(h: &mut Harness<'static, SongloomApp<ScriptedEngine>>) {
    generating(h);
    h.run();
    let job = 1;
    let song = SongEntry { id: 8, title: "Folk song in D".into(), recipe: written_draft(), ..library_song() };
    let rest = 2 * 44_100 * 26;
    h.state().engine().queue.borrow_mut().extend([
        EngineEvent::Stage { job, stage: Stage::ArFrames, done: 750, total: 750 },
        EngineEvent::Audio {
            job,
            first_sample: 44_100 * 4,
            samples: (0..rest).map(|i| ((i as f32) * 0.01).sin() * 0.4 * ((i / 20_000) % 3) as f32).collect(),
            sample_rate: 44_100,
        },
        EngineEvent::Saved { job, song: song.clone() },
        EngineEvent::Library { songs: vec![song, library_song()] },
        EngineEvent::Finished {
            job,
            timings: Timings { total_s: 23.0, time_to_first_audio_s: Some(13.9), ..Timings::default() },
        },
    ]);
}

fn failed(h: &mut Harness<'static, SongloomApp<ScriptedEngine>>) {
    h.state().engine().paused.set(true);
    h.state_mut().draft.model = "/home/me/MiniMax-Music3".into();
    h.state_mut().generate(0.0);
    assert!(
        h.state().engine().sent.borrow().iter().any(|r| matches!(r, Request::Generate { .. })),
        "the failed start was asked for"
    );
    // The job's scripted events give way to its failure.
    let queue = &h.state().engine().queue;
    queue.borrow_mut().retain(|e| e.job().is_none());
    queue.borrow_mut().push_back(EngineEvent::Failed {
        job: 1,
        message: "model directory not found: /home/me/MiniMax-Music3 (download it with Download, or choose its folder)"
            .into(),
    });
    h.state().engine().paused.set(false);
}

/// The version of a 30 s song extended by 30 s, listened to, 0:12 to 0:24 of it selected.
fn editing(h: &mut Harness<'static, SongloomApp<ScriptedEngine>>) {
    let original = library_song();
    let mut version = SongEntry { id: 9, title: "Harbour lights, longer".into(), seconds: 60.0, ..original.clone() };
    version.recipe.edit = Some(Box::new(EditOf {
        parent: original.id,
        edit: Edit::Extend { seconds: Some(30.0) },
        changed_from_s: 30.0,
        changed_to_s: None,
    }));
    let rate = 44_100;
    let samples = (0..2 * rate * 60).map(|i| ((i as f32) * 0.01).sin() * 0.4 * ((i / 40_000) % 3) as f32).collect();
    h.state().engine().queue.borrow_mut().extend([
        EngineEvent::Library { songs: vec![version.clone(), original] },
        EngineEvent::Loaded { song: version, samples, sample_rate: rate as u32 },
    ]);
    h.run();
    let waveform = h.get_by_label("Waveform").rect();
    let at = |share: f32| egui::pos2(waveform.left() + share * waveform.width(), waveform.center().y);
    h.drag_at(at(0.2));
    h.run();
    for share in [0.25, 0.3, 0.35, 0.4] {
        h.hover_at(at(share));
        h.run();
    }
    h.drop_at(at(0.4));
}

/// Three takes of the draft: the first being made (in the player), the second finished and in
/// the library, the third cancelled.
fn takes(h: &mut Harness<'static, SongloomApp<ScriptedEngine>>) {
    h.state().engine().paused.set(true);
    h.state_mut().settings.takes = 3;
    h.state_mut().settings.keep_seed = true;
    h.state_mut().draft.seed = 7;
    h.state_mut().generate(0.0);
    let queue = &h.state().engine().queue;
    queue.borrow_mut().clear();
    let second = SongEntry { id: 8, title: "Folk song in D".into(), seconds: 30.0, ..library_song() };
    queue.borrow_mut().extend([
        EngineEvent::Stage { job: 1, stage: Stage::ArFrames, done: 500, total: 750 },
        EngineEvent::Audio {
            job: 1,
            first_sample: 0,
            samples: (0..2 * 44_100 * 8).map(|i| ((i as f32) * 0.01).sin() * 0.4).collect(),
            sample_rate: 44_100,
        },
        EngineEvent::Stage { job: 2, stage: Stage::ArFrames, done: 750, total: 750 },
        EngineEvent::Saved { job: 2, song: second.clone() },
        EngineEvent::Finished { job: 2, timings: Timings { total_s: 20.0, ..Timings::default() } },
        EngineEvent::Library { songs: vec![second, library_song()] },
        EngineEvent::Cancelled { job: 3 },
    ]);
    h.state().engine().paused.set(false);
}

/// One picture: the window with `draft` in it, then what `play` does to it.
struct Scene {
    state: &'static str,
    draft: fn() -> Recipe,
    play: fn(&mut Harness<'static, SongloomApp<ScriptedEngine>>),
}

#[test]
fn the_window_looks_as_committed_at_each_size() {
    if !software_adapter_available() {
        println!(
            "skipped: no software wgpu adapter here to render the window as committed (the test command installs lavapipe)"
        );
        return;
    }
    let scenes = [
        Scene { state: "first-run", draft: Recipe::default, play: |_| {} },
        Scene { state: "generating", draft: written_draft, play: generating },
        Scene { state: "waiting", draft: written_draft, play: waiting },
        Scene { state: "finished", draft: written_draft, play: finished },
        Scene { state: "error", draft: written_draft, play: failed },
        Scene { state: "editing", draft: written_draft, play: editing },
        Scene { state: "takes", draft: written_draft, play: takes },
    ];
    let mut results = egui_kittest::SnapshotResults::new();
    for size in SIZES {
        for scene in &scenes {
            let mut h = window(size, ScriptedEngine::default(), (scene.draft)());
            h.run();
            (scene.play)(&mut h);
            h.run_steps(3);
            results.add(h.try_snapshot(format!("{}-{}x{}", scene.state, size.0, size.1)));
        }
    }
    results.unwrap();
}
