//! The window's main flow by label, with a scripted engine: type a description and lyrics,
//! generate, watch the progress reach the end with audio in the waveform; cancel mid-way.

mod common;

use common::{ScriptedEngine, harness, library_song, sized_harness};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use songloom_ui::app::SongloomApp;
use songloom_ui::contract::{EngineEvent, Recipe, Request};
use songloom_ui::state::Notice;

#[test]
fn type_generate_and_finish() {
    let mut h = harness(ScriptedEngine::default());
    h.get_by_label("Description").focus();
    h.run();
    h.get_by_label("Description").type_text("warm lo-fi piano");
    h.run();
    h.get_by_label("[verse]").click();
    h.run();
    h.get_by_label("Lyrics editor").focus();
    h.run();
    h.get_by_label("Lyrics editor").type_text("la la la");
    h.run();
    assert_eq!(h.state().draft.description, "warm lo-fi piano");
    assert!(h.state().draft.lyrics.starts_with("[verse]\n"), "{:?}", h.state().draft.lyrics);

    h.get_by_label("Generate").click();
    h.run();
    h.run();
    let app = h.state();
    let generate = app.engine().sent.borrow().iter().find(|r| matches!(r, Request::Generate { .. })).cloned();
    let Some(Request::Generate { recipe, .. }) = generate else {
        panic!("no generate request was sent");
    };
    assert_eq!(recipe.description, "warm lo-fi piano");
    let job = app.job.as_ref().expect("a job");
    assert!(job.progress.finished.is_some());
    assert_eq!(job.progress.frames, (4, 4));
    assert_eq!(app.track.as_ref().expect("a track").audio.len(), 4);
    assert!(h.query_by_label_contains("Finished").is_some());
}

#[test]
fn text_after_a_tag_is_warned_about() {
    let mut h = harness(ScriptedEngine::default());
    h.state_mut().draft.lyrics = "[chorus] this gets dropped\nla".into();
    h.run();
    assert!(h.query_by_label_contains("is dropped by the model").is_some());
}

#[test]
fn cancel_mid_way() {
    let mut h = harness(ScriptedEngine { per_poll: 1, ..ScriptedEngine::default() });
    h.get_by_label("Generate").click();
    h.run_steps(3);
    assert!(h.state().is_running());
    h.get_by_label("Cancel").click();
    h.run_steps(3);
    let job = h.state().job.as_ref().unwrap();
    assert_eq!(job.progress.error.as_deref(), Some("cancelled"));
    assert!(job.progress.finished.is_none());
    assert!(!h.state().is_running());
}

#[test]
fn keyboard_ctrl_enter_generates_and_space_plays_or_pauses_outside_text_fields() {
    let mut h = harness(ScriptedEngine::default());
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Enter);
    h.run();
    let sent = |h: &Harness<'static, SongloomApp<ScriptedEngine>>, f: fn(&Request) -> bool| {
        h.state().engine().sent.borrow().iter().filter(|r| f(r)).count()
    };
    assert_eq!(sent(&h, |r| matches!(r, Request::Generate { .. })), 1);
    h.key_press(egui::Key::Space);
    h.run();
    assert_eq!(sent(&h, |r| matches!(r, Request::TogglePlayback)), 1);
    // In a text field, Space is a space.
    h.get_by_label("Description").focus();
    h.run();
    h.get_by_label("Description").type_text(" ");
    h.key_press(egui::Key::Space);
    h.run();
    assert_eq!(sent(&h, |r| matches!(r, Request::TogglePlayback)), 1);
}

#[test]
fn engine_problems_and_notices_show_in_the_window() {
    let mut h = harness(ScriptedEngine::default());
    h.run();
    h.state().engine().queue.borrow_mut().push_back(EngineEvent::Problem { message: "song 4 is gone".into() });
    h.run();
    assert!(h.query_by_label("song 4 is gone").is_some());
    h.state().engine().queue.borrow_mut().push_back(EngineEvent::Notice { message: "Exported to /tmp/x.wav".into() });
    h.run();
    assert!(h.query_by_label("Exported to /tmp/x.wav").is_some());
}

#[test]
fn the_model_field_shows_what_the_model_holds_or_why_not_and_guidance_travels() {
    let mut h = harness(ScriptedEngine { per_poll: 1, ..ScriptedEngine::default() });
    h.run_steps(3);
    assert!(h.query_by_label("6.1 M parameters: all there").is_some());
    h.state_mut().draft.model = "/tmp/nothing".into();
    h.run_steps(3);
    assert!(h.query_by_label("Model: /tmp/nothing is not a model").is_some());
    // Generate waits for a model that can be used, and says why.
    assert!(h.state().generate_blocked().is_some_and(|why| why.contains("/tmp/nothing is not a model")));
    h.get_by_label("Generate").click();
    h.run_steps(2);
    assert!(!h.state().engine().sent.borrow().iter().any(|r| matches!(r, Request::Generate { .. })));
    h.state_mut().draft.model = String::new();
    h.run_steps(3);
    assert!(h.state().generate_blocked().is_none());
    h.state_mut().draft.guidance = 2.5;
    h.get_by_label("Generate").click();
    h.run_steps(8);
    let generate = h.state().engine().sent.borrow().iter().find(|r| matches!(r, Request::Generate { .. })).cloned();
    let Some(Request::Generate { recipe, .. }) = generate else { panic!("no generate request") };
    assert_eq!(recipe.guidance, 2.5);
    assert!(h.query_by_label_contains("frames/s").is_some(), "the engine's figures in the details line");
    assert!(h.query_by_label_contains("vocoder").is_some());
    assert!(h.query_by_label_contains("Rendering sound").is_some(), "the headline in the listener's words");
}

#[test]
fn tag_buttons_keep_the_cursor_in_the_lyrics_and_tab_goes_from_description_to_lyrics() {
    let mut h = harness(ScriptedEngine::default());
    h.get_by_label("Lyrics editor").focus();
    h.run();
    h.event(egui::Event::Text("intro words".into()));
    h.run();
    h.get_by_label("[chorus]").click();
    h.run();
    h.run();
    // Typed without pointing anywhere: the keystrokes go where the focus is.
    h.event(egui::Event::Text("sing".into()));
    h.run();
    assert_eq!(h.state().draft.lyrics, "intro words\n[chorus]\nsing");
    // From the description, Tab goes to the lyrics, past no tag button.
    h.get_by_label("Description").focus();
    h.run();
    h.key_press(egui::Key::Tab);
    h.run();
    h.event(egui::Event::Text(" more".into()));
    h.run();
    assert!(
        h.state().draft.lyrics.ends_with("sing more") || h.state().draft.lyrics.starts_with(" more"),
        "{:?}",
        h.state().draft.lyrics
    );
    assert!(h.state().draft.description.is_empty(), "{:?}", h.state().draft.description);
}

/// A window tall enough to show the library under the composer and the player.
fn tall_harness(engine: ScriptedEngine) -> Harness<'static, SongloomApp<ScriptedEngine>> {
    let app = SongloomApp::new(engine, Recipe::default());
    Harness::builder()
        .with_size(egui::vec2(1000.0, 1600.0))
        .build_ui_state(|ui, app: &mut SongloomApp<ScriptedEngine>| app.ui(ui), app)
}

#[test]
fn use_recipe_asks_before_it_replaces_a_draft_and_variation_keeps_the_draft() {
    let mut h = tall_harness(ScriptedEngine::default());
    h.state_mut().library.songs = vec![library_song()];
    h.state_mut().draft.description = "my own idea".into();
    h.run();
    h.get_by_label("Use recipe").click();
    h.run();
    // The draft holds text of its own: asked, and kept when the answer is no.
    assert_eq!(h.state().draft.description, "my own idea");
    h.get_by_label("Keep my draft").click();
    h.run();
    assert_eq!(h.state().draft.description, "my own idea");
    assert!(h.query_by_label("Replace the draft").is_none());
    h.get_by_label("Use recipe").click();
    h.run();
    h.get_by_label("Replace the draft").click();
    h.run();
    assert_eq!(h.state().draft.description, "slow harbour ballad");
    assert_eq!(h.state().draft.seed, 42);

    // A variation: the same recipe with another seed, the draft left as it is.
    h.state_mut().draft.description = "changed again".into();
    h.get_by_label("Variation").click();
    h.run();
    let sent = h.state().engine().sent.borrow().clone();
    let Some(Request::Generate { recipe, .. }) = sent.iter().rev().find(|r| matches!(r, Request::Generate { .. }))
    else {
        panic!("no variation was sent: {sent:?}");
    };
    assert_eq!((recipe.description.as_str(), recipe.lyrics.as_str()), ("slow harbour ballad", "[verse]\nlanterns"));
    assert_ne!(recipe.seed, 42);
    assert_eq!(h.state().draft.description, "changed again");
    let title = &h.state().track.as_ref().expect("the variation plays").title;
    assert!(title.contains("Harbour lights") && title.contains("variation"), "{title}");
}

#[test]
fn an_empty_draft_takes_a_recipe_without_asking() {
    let mut h = tall_harness(ScriptedEngine::default());
    h.state_mut().library.songs = vec![library_song()];
    h.run();
    h.get_by_label("Use recipe").click();
    h.run();
    assert_eq!(h.state().draft.description, "slow harbour ballad");
    assert!(h.query_by_label("Replace the draft").is_none());
}

#[test]
fn while_a_song_is_made_the_timeline_is_the_length_asked_for() {
    let mut h = harness(ScriptedEngine { per_poll: 1, ..ScriptedEngine::default() });
    h.state_mut().draft.duration_s = 90.0;
    h.get_by_label("Generate").click();
    h.run_steps(9);
    assert!(h.state().is_running());
    assert!(h.query_by_label_contains("/ 1:30 · 0:00 made").is_some(), "the timeline of the song asked for");
    h.run_steps(4);
    assert!(!h.state().is_running());
    assert!(h.query_by_label_contains("/ 1:30").is_none(), "once made, the timeline is the song's own");
}

#[test]
fn generate_and_the_player_are_in_view_from_800x600_to_full_screen() {
    for (w, h) in [(800.0, 600.0), (1280.0, 800.0), (1600.0, 1000.0)] {
        let mut harness = sized_harness(egui::vec2(w, h));
        harness.run();
        let screen = egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(w, h));
        for label in ["Generate", "Play", "Lyrics editor", "Listen"] {
            let rect = harness.get_by_label(label).rect();
            assert!(screen.contains_rect(rect), "{label} at {rect:?} is outside {w}x{h}");
        }
    }
}

#[test]
fn a_notice_moves_nothing_and_goes_away() {
    let mut h = sized_harness(egui::vec2(1280.0, 800.0));
    h.run();
    let before = h.get_by_label("Search library").rect();
    h.state_mut().notice = Some(Notice::info("Exported to /music/a song.wav", 0.0));
    h.run();
    assert!(h.query_by_label("Exported to /music/a song.wav").is_some());
    assert_eq!(h.get_by_label("Search library").rect(), before, "the library stays where it was");
    h.state_mut().notice = Some(Notice::info("Exported to /music/a song.wav", -60.0));
    h.run();
    assert!(h.query_by_label("Exported to /music/a song.wav").is_none(), "gone after a while");
}

/// Replaces the Duration field's text with `text`, as a person selecting all and typing would.
fn type_duration(h: &mut Harness<'static, SongloomApp<ScriptedEngine>>, text: &str) {
    h.get_by_label("Duration").focus();
    h.run();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.run();
    h.event(egui::Event::Text(text.into()));
    h.run();
}

#[test]
fn duration_takes_the_forms_people_write_and_says_what_it_did() {
    let mut h = harness(ScriptedEngine::default());
    h.run();
    type_duration(&mut h, "1m30s");
    assert_eq!(h.state().draft.duration_s, 90.0);
    type_duration(&mut h, "2:15");
    assert_eq!(h.state().draft.duration_s, 135.0);
    type_duration(&mut h, "400");
    assert_eq!(h.state().draft.duration_s, 360.0);
    assert!(h.query_by_label_contains("taken as 6:00").is_some(), "the clamp is visible");
    type_duration(&mut h, "soon");
    assert!(h.query_by_label_contains("is not a length").is_some());
    assert_eq!(h.state().draft.duration_s, 360.0, "the last good length stays");
    h.get_by_label("Generate").click();
    h.run();
    assert!(!h.state().engine().sent.borrow().iter().any(|r| matches!(r, Request::Generate { .. })), "held back");
    type_duration(&mut h, "45");
    assert!(h.query_by_label_contains("is not a length").is_none());
    h.get_by_label("Generate").click();
    h.run();
    let sent = h.state().engine().sent.borrow().clone();
    assert!(
        sent.iter().any(|r| matches!(r, Request::Generate { recipe, .. } if recipe.duration_s == 45.0)),
        "{sent:?}"
    );
}

#[test]
fn generate_while_a_song_is_made_queues_it_and_a_waiting_song_can_be_removed() {
    let mut h = harness(ScriptedEngine { per_poll: 1, ..ScriptedEngine::default() });
    h.state_mut().draft.description = "first".into();
    h.get_by_label("Generate").click();
    h.run_steps(2);
    assert!(h.state().is_running());
    // The first takes its time while the others are asked for and one is removed.
    h.state().engine().paused.set(true);
    for name in ["second", "third"] {
        h.state_mut().draft.description = name.into();
        h.get_by_label("Generate").click();
        h.run_steps(1);
    }
    let waiting: Vec<String> = h.state().queue.iter().map(|q| q.title.clone()).collect();
    assert_eq!(waiting, ["second", "third"]);
    assert!(h.query_by_label_contains("Waiting (1): second").is_some());
    assert!(h.query_by_label_contains("Waiting (2): third").is_some());
    // The second is taken out; the third moves up and is made after the first.
    h.get_by_label("Remove second from the queue").click();
    h.run_steps(3);
    assert!(h.query_by_label_contains("Waiting (1): third").is_some());
    let sent = h.state().engine().sent.borrow().clone();
    assert!(sent.iter().any(|r| matches!(r, Request::Cancel { job: 2 })), "{sent:?}");
    h.state().engine().paused.set(false);
    h.run_steps(40);
    assert!(h.state().queue.is_empty());
    let job = h.state().job.as_ref().expect("the third");
    assert_eq!(job.id, 3);
    assert!(job.progress.finished.is_some(), "{:?}", job.progress);
    assert_eq!(h.state().track.as_ref().unwrap().title, "third");
}

#[test]
fn the_built_in_model_says_what_it_is_and_where_the_real_one_goes() {
    let mut h = harness(ScriptedEngine::default());
    h.run();
    assert!(
        h.query_by_label("You are using the built-in model, Songloom Mini: instrumental pieces, no singing.").is_some()
    );
    // The rest is one click away, folded so the banner stays small.
    assert!(h.query_by_label_contains("it cannot sing").is_none());
    h.get_by_label("What it can do, and the real model").click();
    h.run();
    assert!(h.query_by_label_contains("it cannot sing").is_some());
    h.get_by_label("Enter its folder").click();
    h.run();
    h.event(egui::Event::Text("/models/MiniMax-Music3".into()));
    h.run();
    assert_eq!(h.state().draft.model, "/models/MiniMax-Music3", "the Model field took the focus");
    // The banner goes once the field is left, not while it is typed in.
    h.get_by_label("Description").focus();
    h.run();
    h.run();
    assert!(
        h.query_by_label("You are using the built-in model, Songloom Mini: instrumental pieces, no singing.").is_none(),
        "and the banner goes"
    );
}

#[test]
fn the_chosen_device_says_what_the_real_model_would_do_there() {
    let mut h = harness(ScriptedEngine::default());
    let status = |name: &str, advice: &str| songloom_ui::contract::DeviceStatus {
        name: name.into(),
        available: Ok("here".into()),
        advice: Some(advice.into()),
    };
    h.state().engine().queue.borrow_mut().push_back(EngineEvent::Devices {
        devices: vec![status("auto", "the real model here: q8 AR weights, bf16 DiT, streamed"), status("cpu", "hours")],
    });
    h.run();
    assert!(h.query_by_label("Device").is_none(), "engine settings are folded under Advanced");
    h.get_by_label_contains("Advanced:").click();
    h.run();
    assert!(h.query_by_label_contains("q8 AR weights, bf16 DiT, streamed").is_some());
    h.state_mut().draft.device = "cpu".into();
    h.run();
    assert!(h.query_by_label("hours").is_some() && h.query_by_label_contains("q8 AR weights").is_none());
}

/// In a browser the machine is the server's: no device, precision, weights, memory or model to
/// choose (the server says what it runs), and an export is a download (no folder to pick).
#[test]
fn a_remote_engine_shows_the_servers_settings_instead_of_choices() {
    let mut h = harness(ScriptedEngine { remote: true, ..ScriptedEngine::default() });
    h.run();
    h.get_by_label_contains("Advanced:").click();
    h.run();
    for choice in ["Device", "Precision", "Weights", "Model", "Export to"] {
        assert!(h.query_by_label(choice).is_none(), "{choice} is the server's");
    }
    assert!(
        h.query_by_label("You are using the built-in model, Songloom Mini: instrumental pieces, no singing.").is_none()
    );
    h.get_by_label("The device, precision, weights, memory and model are the server's:");
    h.get_by_label("6.1 M parameters: all there");
    h.get_by_label("Export downloads");
    let mut local = harness(ScriptedEngine::default());
    local.run();
    local.get_by_label_contains("Advanced:").click();
    local.run();
    local.get_by_label("Device");
    local.get_by_label("Export to");
}

/// The model from inside the window: the banner's Download starts it, its progress shows with
/// Pause, a pause says so; a complete model of the models folder is one click from the Model field.
#[test]
fn the_model_is_downloaded_paused_and_chosen_in_the_window() {
    let mut h = harness(ScriptedEngine::default());
    // Tall enough that the Model row is in view without scrolling.
    h.set_size(egui::vec2(1280.0, 1400.0));
    h.run();
    h.run();
    h.get_by_label("MiniMaxAI/MiniMax-Music3 (main), 28.5 GB");
    h.get_by_label("Download it").click();
    h.run();
    h.run();
    assert!(h.state().engine().sent.borrow().iter().any(|r| matches!(r, Request::DownloadModel)));
    h.get_by_label("Downloading the model: 7.0 of 28.5 GB");
    assert!(h.query_by_label("Download it").is_none(), "one download at a time");
    h.get_by_label("Pause").click();
    h.run();
    h.run();
    let sent = format!("{:?}", h.state().engine().sent.borrow());
    assert!(sent.contains("PauseDownload"), "{sent}");
    assert!(h.state().notice.as_ref().is_some_and(|n| n.message.contains("paused")), "{:?}", h.state().notice);
    h.get_by_label("The download stopped: paused; downloading again resumes");
    h.get_by_label("Use").click();
    h.run();
    assert_eq!(h.state().draft.model, "/models/MiniMax-Music3");
    // Download again, then cancel: the engine stops it and removes what it fetched.
    h.get_by_label("Download MiniMax-Music3 (28.5 GB)").click();
    h.run();
    h.run();
    h.get_by_label("Cancel the download").click();
    h.run();
    h.run();
    assert!(h.state().engine().sent.borrow().iter().any(|r| matches!(r, Request::CancelDownload)));
    h.get_by_label("The download stopped: cancelled; what it had fetched is removed");
    assert!(h.query_by_label("Cancel the download").is_none(), "no download runs");
}

/// Choose folder… asks the engine for the system's folder picker (the shell opens it); the
/// folder chosen there becomes the Model, and the Model line then says what that model holds.
#[test]
fn choose_folder_asks_for_the_picker_and_the_chosen_folder_becomes_the_model() {
    let mut h = harness(ScriptedEngine::default());
    h.set_size(egui::vec2(1280.0, 1400.0));
    h.run();
    // The window's own chooser opens on the models folder, wherever the window runs.
    h.get_by_label("Choose folder…").click();
    h.run();
    h.get_by_label("Choose the model's folder");
    h.get_by_label_contains("MiniMax-Music3  · a model").click();
    h.run();
    assert!(
        h.state()
            .engine()
            .sent
            .borrow()
            .iter()
            .any(|r| matches!(r, Request::ListFolder { path } if path == "/models/MiniMax-Music3"))
    );
    h.get_by_label("This folder holds a model.");
    h.get_by_label("Up").click();
    h.run();
    h.get_by_label_contains("notes");
    h.get_by_label_contains("MiniMax-Music3  · a model").click();
    h.run();
    h.get_by_label("Choose this folder").click();
    h.run();
    assert_eq!(h.state().draft.model, "/models/MiniMax-Music3");
    assert!(h.query_by_label("Choose the model's folder").is_none(), "closed once chosen");

    // The system's dialog, from the chooser: what it picks becomes the Model and closes the chooser;
    // one that never opens leaves the chooser there to use.
    h.get_by_label("Choose folder…").click();
    h.run();
    h.get_by_label("System dialog…").click();
    h.run();
    assert!(h.state().engine().sent.borrow().iter().any(|r| matches!(r, Request::ChooseModelFolder)));
    h.get_by_label("Choose the model's folder");
    let chosen = EngineEvent::ModelFolderChosen { path: "/disks/big/MiniMax-Music3".into() };
    h.state().engine().queue.borrow_mut().push_back(chosen);
    h.run();
    h.run();
    assert_eq!(h.state().draft.model, "/disks/big/MiniMax-Music3");
    assert!(h.query_by_label("Choose the model's folder").is_none());
    h.get_by_label("Model: /disks/big/MiniMax-Music3 is not a model");
}

/// The seeds of the Generate requests sent so far.
fn sent_seeds(h: &Harness<'static, SongloomApp<ScriptedEngine>>) -> Vec<u64> {
    let sent = h.state().engine().sent.borrow().clone();
    sent.iter()
        .filter_map(|r| if let Request::Generate { recipe, .. } = r { Some(recipe.seed) } else { None })
        .collect()
}

#[test]
fn each_generate_draws_a_new_seed_unless_the_seed_is_kept() {
    let mut h = tall_harness(ScriptedEngine::default());
    h.state_mut().draft.description = "piano".into();
    for _ in 0..2 {
        h.get_by_label("Generate").click();
        h.run();
    }
    let seeds = sent_seeds(&h);
    assert_ne!(seeds[0], seeds[1], "two presses made the same song");
    assert_eq!(h.state().draft.seed, seeds[1], "the seed field does not show the seed used");
    // Kept: the same seed again, the same song.
    h.get_by_label("Keep seed").click();
    h.run();
    assert!(h.state().settings.keep_seed, "Keep seed did not keep it");
    for _ in 0..2 {
        h.get_by_label("Generate").click();
        h.run();
    }
    assert_eq!(sent_seeds(&h)[2..], [seeds[1], seeds[1]]);
    // A seed typed in is kept without asking.
    h.get_by_label("Keep seed").click();
    h.run();
    assert!(!h.state().settings.keep_seed);
    h.get_by_label("Seed").focus();
    h.run();
    h.get_by_label("Seed").type_text("4");
    h.run();
    h.key_press(egui::Key::Enter);
    h.run();
    assert!(h.state().settings.keep_seed, "a typed seed was not kept");
    let typed = h.state().draft.seed;
    h.get_by_label("Generate").click();
    h.run();
    assert_eq!(sent_seeds(&h).last(), Some(&typed));
}

/// A problem stays until it is dismissed (a notice goes by itself).
#[test]
fn a_problem_stays_until_dismissed() {
    let mut h = sized_harness(egui::vec2(1280.0, 800.0));
    h.run();
    h.state_mut().notice = Some(Notice::problem("The download stopped: the disk is full", -600.0));
    h.run();
    assert!(h.query_by_label("The download stopped: the disk is full").is_some(), "a problem went by itself");
    h.get_by_label("Dismiss").click();
    h.run();
    assert!(h.query_by_label("The download stopped: the disk is full").is_none());
    assert!(h.state().notice.is_none());
}

/// The Model field takes a folder typed key by key: the built-in model's banner stays while it
/// is typed in, so nothing moves under the field and no key is lost.
#[test]
fn the_model_field_takes_a_folder_typed_key_by_key() {
    let mut h = tall_harness(ScriptedEngine::default());
    h.run();
    assert!(h.query_by_label_contains("You are using the built-in model").is_some());
    let before = h.get_by_label("Model").rect();
    h.get_by_label("Model").focus();
    h.run();
    for key in "~/models/MiniMax-Music3".chars() {
        h.get_by_label("Model").type_text(&key.to_string());
        h.run();
        assert_eq!(h.get_by_label("Model").rect(), before, "the field moved while it was typed in");
    }
    assert_eq!(h.state().draft.model, "~/models/MiniMax-Music3");
    // Once the field is left, the banner makes way for the chosen model.
    h.get_by_label("Description").focus();
    h.run();
    h.run();
    assert!(h.query_by_label_contains("You are using the built-in model").is_none());
}

/// A model folder the engine said was not a model is asked about again once the models folder
/// changes (a download that ends there), so Generate is not held on an old answer.
#[test]
fn a_model_is_asked_about_again_when_the_models_folder_changes() {
    let mut h = harness(ScriptedEngine::default());
    h.state_mut().draft.model = "/tmp/nothing".into();
    h.run_steps(3);
    assert!(h.state().generate_blocked().is_some());
    let asked = |h: &Harness<'static, SongloomApp<ScriptedEngine>>| {
        h.state().engine().sent.borrow().iter().filter(|r| matches!(r, Request::ModelInfo { .. })).count()
    };
    let before = asked(&h);
    h.state().engine().queue.borrow_mut().push_back(EngineEvent::Models { folder: "/models".into(), models: vec![] });
    h.run_steps(3);
    assert!(asked(&h) > before, "the model was not asked about again");
}

/// The LoRA adapters: one added by its path (scale 1), one removed, and the list travels with the
/// song's recipe; a remote engine's adapters are the server's, so there is no list there.
#[test]
fn lora_adapters_are_listed_with_a_scale_each_and_go_with_the_song() {
    let mut h = sized_harness(egui::vec2(1280.0, 1600.0));
    h.state_mut().draft.description = "warm lo-fi piano".into();
    h.state_mut().draft.lyrics = "[verse]\nla".into();
    h.run();
    h.get_by_label("LoRA adapters").click();
    h.run();
    for path in ["/loras/vinyl", "/loras/tape/pytorch_lora_weights.safetensors"] {
        h.get_by_label("Adapter").focus();
        h.run();
        h.get_by_label("Adapter").type_text(path);
        h.run();
        h.get_by_label("Add").click();
        h.run();
    }
    let adapters = &h.state().draft.adapters;
    assert_eq!(
        adapters.iter().map(|a| (a.name.as_str(), a.scale)).collect::<Vec<_>>(),
        [("vinyl", 1.0), ("pytorch_lora_weights.safetensors", 1.0)]
    );
    assert!(h.query_by_label("LoRA adapters (2)").is_some());
    assert_eq!(h.query_all_by_label("Scale").count(), 2);
    h.get_all_by_label("Remove").next().unwrap().click();
    h.run();
    assert_eq!(h.state().draft.adapters.len(), 1);
    h.state_mut().draft.adapters[0].scale = 0.5;
    h.run();

    h.get_by_label("Generate").click();
    h.run();
    let sent = h.state().engine().sent.borrow().clone();
    let Some(Request::Generate { recipe, .. }) = sent.into_iter().find(|r| matches!(r, Request::Generate { .. }))
    else {
        panic!("no generate request was sent");
    };
    assert_eq!(recipe.adapters.len(), 1);
    assert_eq!(
        (recipe.adapters[0].path.as_str(), recipe.adapters[0].scale),
        ("/loras/tape/pytorch_lora_weights.safetensors", 0.5)
    );

    let mut remote = harness(ScriptedEngine { remote: true, ..ScriptedEngine::default() });
    remote.run();
    assert!(remote.query_by_label_contains("LoRA adapters").is_none());
}
