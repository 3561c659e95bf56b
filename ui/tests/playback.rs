//! Playback while a song is made: it starts once the rest can play through at the rate the song
//! is made (and says when that will be), says so when it has caught up with the making and waits
//! for the next part, and the window redraws at a bounded rate meanwhile.

#[allow(dead_code)]
mod common;

use common::{ScriptedEngine, harness};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use songloom_ui::app::{MAKING_REDRAW, PLAYING_REDRAW, SongloomApp};
use songloom_ui::contract::{EngineEvent, PlaybackState, Request, Stage, Timings};

type Window = Harness<'static, SongloomApp<ScriptedEngine>>;

const RATE: u32 = 100;

/// A 30 s song started at 0 s; nothing arrives but what the test sends.
fn making() -> Window {
    let mut h = harness(ScriptedEngine::default());
    h.state().engine().paused.set(true);
    h.state_mut().draft.description = "slow waltz".into();
    h.state_mut().draft.duration_s = 30.0;
    h.state_mut().generate(0.0);
    h.state().engine().queue.borrow_mut().clear();
    h.state().engine().paused.set(false);
    h
}

/// `events` arrive at `at_s` on the window's clock, which draws a frame then.
fn arrive(h: &mut Window, at_s: f64, events: Vec<EngineEvent>) {
    h.state().engine().queue.borrow_mut().extend(events);
    h.input_mut().time = Some(at_s);
    h.step();
    h.input_mut().time = Some(at_s);
    h.step();
}

/// The song from second `from_s` to `to_s`.
fn audio(from_s: usize, to_s: usize) -> EngineEvent {
    let first_sample = from_s * RATE as usize;
    let samples = vec![0.1; 2 * (to_s - from_s) * RATE as usize];
    EngineEvent::Audio { job: 1, first_sample, samples, sample_rate: RATE }
}

fn plays_asked(h: &Window) -> usize {
    h.state().engine().sent.borrow().iter().filter(|r| matches!(r, Request::Play)).count()
}

#[test]
fn a_song_made_slower_than_it_plays_starts_once_the_rest_can_play_through() {
    let mut h = making();
    arrive(
        &mut h,
        5.0,
        vec![EngineEvent::Stage { job: 1, stage: Stage::ArFrames, done: 100, total: 750 }, audio(0, 4)],
    );
    h.get_by_label_contains("Starts playing once enough is made to play through");
    // 0.5 s of song a second: the other 24 s take 48 s to make, playing from the start a part
    // (2 s) behind what is made reaches the end in 28 s, so 20 s to wait, counted down.
    arrive(&mut h, 9.0, vec![audio(4, 6)]);
    h.get_by_label("Starts playing in about 20 s, when the rest can play through");
    arrive(&mut h, 14.0, vec![]);
    h.get_by_label("Starts playing in about 15 s, when the rest can play through");
    assert_eq!(plays_asked(&h), 0, "held: it would stop for the next part");
    // 0.8 s of song a second from here: it can play through.
    arrive(&mut h, 20.0, vec![audio(6, 16)]);
    assert_eq!(plays_asked(&h), 1);
    assert!(h.query_by_label_contains("Starts playing").is_none());
    // Asked once only.
    h.state().engine().playback.replace(PlaybackState {
        playing: true,
        position: 100,
        frames: 1600,
        sample_rate: RATE,
        ..PlaybackState::default()
    });
    arrive(&mut h, 21.0, vec![audio(16, 17)]);
    assert_eq!(plays_asked(&h), 1);
}

#[test]
fn playback_that_caught_up_with_the_making_says_it_waits_for_the_next_part() {
    let mut h = making();
    arrive(&mut h, 2.0, vec![audio(0, 4)]);
    arrive(&mut h, 3.0, vec![audio(4, 8)]);
    assert_eq!(plays_asked(&h), 1, "faster than playback: at once");
    let frames = 8 * RATE as usize;
    h.state().engine().playback.replace(PlaybackState {
        playing: true,
        position: frames,
        frames,
        sample_rate: RATE,
        ..PlaybackState::default()
    });
    arrive(&mut h, 11.0, vec![]);
    h.get_by_label("Waiting for the next part…");
    h.get_by_label("Pause");
    // The next part comes: playing again, no word.
    arrive(&mut h, 11.5, vec![audio(8, 12)]);
    assert!(h.query_by_label("Waiting for the next part…").is_none());
}

#[test]
fn play_pressed_while_held_plays_now_and_a_finished_song_starts_by_itself() {
    let mut h = making();
    arrive(&mut h, 5.0, vec![audio(0, 2)]);
    h.get_by_label("Play").click();
    arrive(&mut h, 5.5, vec![]);
    assert!(h.state().engine().sent.borrow().iter().any(|r| matches!(r, Request::TogglePlayback)));
    assert!(h.query_by_label_contains("Starts playing").is_none(), "the user took over");
    arrive(&mut h, 9.0, vec![audio(2, 3), audio(3, 30)]);
    assert_eq!(plays_asked(&h), 0, "never started again behind the user's back");

    // Another song, held until it is finished: then it plays.
    let mut h = making();
    arrive(&mut h, 5.0, vec![audio(0, 2)]);
    arrive(&mut h, 9.0, vec![audio(2, 3)]);
    assert_eq!(plays_asked(&h), 0);
    let finished = EngineEvent::Finished { job: 1, timings: Timings { total_s: 40.0, ..Timings::default() } };
    arrive(&mut h, 40.0, vec![audio(3, 30), finished]);
    assert_eq!(plays_asked(&h), 1);
}

#[test]
fn the_window_redraws_a_few_times_a_second_while_a_song_is_made_or_plays() {
    let mut h = making();
    arrive(&mut h, 1.0, vec![EngineEvent::Stage { job: 1, stage: Stage::ArFrames, done: 10, total: 750 }]);
    let delay = |h: &Window| h.output().viewport_output[&egui::ViewportId::ROOT].repaint_delay;
    // A frame after one that drew new widgets (egui draws those once more to style them).
    h.step();
    assert_eq!(delay(&h), MAKING_REDRAW, "while made, nothing playing");
    h.state().engine().playback.replace(PlaybackState {
        playing: true,
        position: 10,
        frames: 400,
        sample_rate: RATE,
        level: 0.5,
        ..PlaybackState::default()
    });
    arrive(&mut h, 2.0, vec![audio(0, 4)]);
    h.step();
    assert_eq!(delay(&h), PLAYING_REDRAW, "while playing");
    // Done and silent: no redraw until something happens.
    h.state().engine().playback.replace(PlaybackState::default());
    let finished = EngineEvent::Finished { job: 1, timings: Timings::default() };
    arrive(&mut h, 3.0, vec![finished]);
    h.step();
    assert!(delay(&h) > std::time::Duration::from_secs(60), "{:?}", delay(&h));
}

#[test]
fn the_volume_kept_from_the_last_session_is_set_at_start() {
    let mut app = SongloomApp::new(ScriptedEngine::default(), Default::default());
    app.settings.volume = 0.3;
    app.track = Some(songloom_ui::state::Track {
        title: "a song".into(),
        audio: vec![0.1; 800],
        sample_rate: RATE,
        ..Default::default()
    });
    let mut h = Harness::new_ui_state(|ui, app: &mut SongloomApp<ScriptedEngine>| app.ui(ui), app);
    h.run();
    assert!(
        h.state().engine().sent.borrow().iter().any(|r| matches!(r, Request::SetVolume { volume } if *volume == 0.3))
    );
    h.get_by_label("Volume");
}

#[test]
fn a_song_started_while_another_plays_is_still_held_and_started() {
    let mut h = harness(ScriptedEngine::default());
    // A library song plays when Generate is pressed.
    h.state().engine().playback.replace(PlaybackState {
        playing: true,
        position: 10,
        frames: 400,
        sample_rate: RATE,
        ..PlaybackState::default()
    });
    h.state().engine().paused.set(true);
    h.state_mut().generate(0.0);
    h.state().engine().queue.borrow_mut().clear();
    h.state().engine().paused.set(false);
    arrive(&mut h, 1.0, vec![]);
    // The engine holds the new song (the old one stops).
    h.state().engine().playback.replace(PlaybackState { sample_rate: RATE, ..PlaybackState::default() });
    arrive(&mut h, 2.0, vec![audio(0, 2)]);
    arrive(&mut h, 3.0, vec![audio(2, 8)]);
    assert_eq!(plays_asked(&h), 1, "started once it could play through");
}
