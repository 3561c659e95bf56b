//! Closing the window while songs are being made: the close is held and the user asked; each
//! answer is carried out, and the window closes itself only once nothing would be lost.

#[allow(dead_code)]
mod common;

use common::{ScriptedEngine, harness};
use egui::{ViewportCommand, ViewportEvent, ViewportId};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use songloom_ui::app::SongloomApp;
use songloom_ui::closing::Closing;
use songloom_ui::contract::Request;

type Window = Harness<'static, SongloomApp<ScriptedEngine>>;

/// The window manager's close button: one close request, one frame.
fn press_close(h: &mut Window) -> Vec<ViewportCommand> {
    h.input_mut().viewports.entry(ViewportId::ROOT).or_default().events.push(ViewportEvent::Close);
    h.step();
    commands(h)
}

/// What the last frame asked of the window.
fn commands(h: &Window) -> Vec<ViewportCommand> {
    h.output().viewport_output.get(&ViewportId::ROOT).map(|o| o.commands.clone()).unwrap_or_default()
}

/// A song being made (it does not progress until the engine is unpaused) and one waiting.
fn two_songs(h: &mut Window) {
    h.state().engine().paused.set(true);
    h.state_mut().draft.description = "slow waltz".into();
    h.state_mut().generate(0.0);
    h.state_mut().generate(0.1);
    h.run();
    assert!(h.state().is_running() && h.state().queue.len() == 1);
}

#[test]
fn an_idle_window_closes_at_once() {
    let mut h = harness(ScriptedEngine::default());
    h.run();
    let asked = press_close(&mut h);
    assert!(!asked.contains(&ViewportCommand::CancelClose), "{asked:?}");
    assert_eq!(h.state().closing, Some(Closing::Ready));
}

#[test]
fn closing_mid_song_asks_and_keep_working_keeps_everything() {
    let mut h = harness(ScriptedEngine::default());
    two_songs(&mut h);
    let asked = press_close(&mut h);
    assert!(asked.contains(&ViewportCommand::CancelClose), "the close is held: {asked:?}");
    h.run();
    h.get_by_label_contains("slow waltz\u{201d} is being made; 1 more song waits its turn");
    h.get_by_label("Keep working").click();
    h.run();
    assert_eq!(h.state().closing, None);
    assert!(h.query_by_label("Keep working").is_none(), "the question is gone");
    assert!(h.state().is_running() && h.state().queue.len() == 1, "nothing was cancelled");
    assert!(!h.state().engine().sent.borrow().iter().any(|r| matches!(r, Request::Cancel { .. })));
}

#[test]
fn quit_when_done_closes_once_every_song_is_made() {
    let mut h = harness(ScriptedEngine::default());
    two_songs(&mut h);
    press_close(&mut h);
    h.run();
    h.get_by_label("Quit when done").click();
    h.run();
    h.get_by_label("The window closes when the songs are done.");
    assert!(!commands(&h).contains(&ViewportCommand::Close));
    // The songs are made; the window closes by itself.
    h.state().engine().paused.set(false);
    let mut closed = false;
    for _ in 0..20 {
        h.step();
        closed |= commands(&h).contains(&ViewportCommand::Close);
    }
    assert!(closed, "the window closes once the songs are done");
    assert!(h.state().queue.is_empty() && !h.state().is_running());
    assert!(!h.state().engine().sent.borrow().iter().any(|r| matches!(r, Request::Cancel { .. })));
    // The close it asked for goes through.
    let asked = press_close(&mut h);
    assert!(!asked.contains(&ViewportCommand::CancelClose));
}

#[test]
fn discard_and_quit_cancels_every_song_and_closes_once_the_engine_confirms() {
    let mut h = harness(ScriptedEngine::default());
    two_songs(&mut h);
    press_close(&mut h);
    h.run();
    h.get_by_label("Discard and quit").click();
    h.step();
    let cancelled: Vec<_> = h
        .state()
        .engine()
        .sent
        .borrow()
        .iter()
        .filter_map(|r| match r {
            Request::Cancel { job } => Some(*job),
            _ => None,
        })
        .collect();
    assert_eq!(cancelled.len(), 2, "the song being made and the one waiting: {cancelled:?}");
    assert!(h.state().queue.is_empty());
    // The engine has not confirmed the cancel yet (its temporary file is still being removed).
    assert!(matches!(h.state().closing, Some(Closing::Discarding { .. })));
    assert!(!commands(&h).contains(&ViewportCommand::Close));
    h.state().engine().paused.set(false);
    let mut closed = false;
    for _ in 0..5 {
        h.step();
        closed |= commands(&h).contains(&ViewportCommand::Close);
    }
    assert!(closed, "closed once the cancel was confirmed");
}

#[test]
fn a_close_while_asking_or_discarding_is_held_again() {
    let mut h = harness(ScriptedEngine::default());
    two_songs(&mut h);
    press_close(&mut h);
    h.run();
    let again = press_close(&mut h);
    assert!(again.contains(&ViewportCommand::CancelClose), "{again:?}");
    h.run();
    h.get_by_label("Discard and quit").click();
    h.step();
    let again = press_close(&mut h);
    assert!(again.contains(&ViewportCommand::CancelClose), "still waiting for the cancel: {again:?}");
    assert!(matches!(h.state().closing, Some(Closing::Discarding { .. })));
}
