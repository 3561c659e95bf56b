//! Takes in the window, with a scripted engine: the Takes control beside Generate asks for several
//! songs of the draft at once, a job each with seeds the draft's, + 1, ...; each take has its own
//! row (its progress, then Play, Keep and Discard), and a take cancelled alone leaves the others.

#[allow(dead_code)]
mod common;

use common::{ScriptedEngine, harness};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use songloom_ui::app::SongloomApp;
use songloom_ui::contract::{JobId, Request};

type H = Harness<'static, SongloomApp<ScriptedEngine>>;

/// The window with a draft of seed 7, kept, and `takes` in the Takes field, typed there.
fn with_takes(engine: ScriptedEngine, takes: &str) -> H {
    let mut h = harness(engine);
    h.state_mut().draft.description = "three ways".into();
    h.state_mut().draft.seed = 7;
    h.state_mut().settings.keep_seed = true;
    h.run();
    h.get_by_label("Takes").focus();
    h.run();
    h.key_press(egui::Key::Backspace);
    h.get_by_label("Takes").type_text(takes);
    h.run();
    h.key_press(egui::Key::Enter);
    h.run();
    h
}

fn sent(h: &H) -> Vec<Request> {
    h.state().engine().sent.borrow().clone()
}

/// The jobs of the one Takes request sent, and the seed it asked for.
fn takes_sent(h: &H) -> (Vec<JobId>, u64) {
    let takes: Vec<(Vec<JobId>, u64)> = sent(h)
        .into_iter()
        .filter_map(|r| match r {
            Request::Takes { jobs, recipe } => Some((jobs, recipe.seed)),
            _ => None,
        })
        .collect();
    assert_eq!(takes.len(), 1, "one Takes request: {:?}", sent(h));
    takes.into_iter().next().unwrap()
}

#[test]
fn three_takes_each_have_a_row_a_seed_and_keep_or_discard() {
    let mut h = with_takes(ScriptedEngine::default(), "3");
    assert_eq!(h.state().settings.takes, 3, "typed into the Takes field");
    h.get_by_label("Generate").click();
    h.run();
    h.run();
    let (jobs, seed) = takes_sent(&h);
    assert_eq!((jobs.len(), seed), (3, 7));
    assert!(!sent(&h).iter().any(|r| matches!(r, Request::Generate { .. })), "no single song asked for");
    let distinct: std::collections::HashSet<_> = jobs.iter().collect();
    assert_eq!(distinct.len(), 3, "a job each: {jobs:?}");

    // Each take finished in its row, with its own seed and library song; the first is the job.
    let app = h.state();
    let rows: Vec<(JobId, u64, bool)> =
        app.takes.iter().map(|t| (t.job, t.seed, t.progress.finished.is_some())).collect();
    assert_eq!(rows, [(jobs[0], 7, true), (jobs[1], 8, true), (jobs[2], 9, true)]);
    let songs: Vec<(i64, u64)> =
        app.takes.iter().map(|t| t.song.as_ref().map(|s| (s.id, s.recipe.seed)).unwrap()).collect();
    assert_eq!(songs.iter().map(|s| s.1).collect::<Vec<_>>(), [7, 8, 9]);
    assert_eq!(app.job.as_ref().map(|j| j.id), Some(jobs[0]), "the first take is the one in the player");
    assert_eq!(app.track.as_ref().unwrap().audio.len(), 4, "the first take's audio alone in the player");
    assert!(!app.is_running());
    assert!(h.query_by_label("Take 2 · seed 8").is_some());

    // Play the second from its row: its library song.
    h.get_by_label("Play take 2").click();
    h.run();
    assert_eq!(sent(&h).last(), Some(&Request::PlaySong { id: songs[1].0 }));

    // Keep the first: its row goes, nothing is deleted.
    h.get_by_label("Keep take 1").click();
    h.run();
    assert_eq!(h.state().takes.iter().map(|t| t.number).collect::<Vec<_>>(), [2, 3]);
    assert!(h.query_by_label("Keep take 1").is_none());

    // Discard the third: its row goes, and its song is deleted once the library's Undo is over.
    h.state_mut().library.songs = h.state().takes.iter().filter_map(|t| t.song.clone()).collect();
    h.get_by_label("Discard take 3").click();
    h.run();
    assert_eq!(h.state().takes.iter().map(|t| t.number).collect::<Vec<_>>(), [2]);
    assert!(h.query_by_label_contains("is deleted").is_some(), "the library offers its Undo");
    let deleted =
        |h: &H| sent(h).iter().filter(|r| matches!(r, Request::DeleteSong { .. })).cloned().collect::<Vec<_>>();
    assert!(deleted(&h).is_empty(), "not before its Undo is over");
    h.input_mut().time = Some(h.ctx.input(|i| i.time) + songloom_ui::panels::library::UNDO_S + 1.0);
    h.run();
    assert_eq!(deleted(&h), [Request::DeleteSong { id: songs[2].0 }]);
}

#[test]
fn a_take_cancelled_alone_leaves_the_others() {
    let mut h = with_takes(ScriptedEngine::default(), "3");
    h.state().engine().paused.set(true);
    h.get_by_label("Generate").click();
    h.run();
    let (jobs, _) = takes_sent(&h);
    assert_eq!(h.state().takes.len(), 3, "a row each as soon as they start");
    assert!(h.state().is_running());
    h.get_by_label("Cancel take 2").click();
    h.run();
    let cancels: Vec<Request> = sent(&h).into_iter().filter(|r| matches!(r, Request::Cancel { .. })).collect();
    assert_eq!(cancels, [Request::Cancel { job: jobs[1] }], "that take alone");
    h.state().engine().paused.set(false);
    h.run();
    h.run();
    let ends: Vec<(Option<&str>, bool)> =
        h.state().takes.iter().map(|t| (t.progress.error.as_deref(), t.progress.finished.is_some())).collect();
    assert_eq!(ends, [(None, true), (Some("cancelled"), false), (None, true)]);
    assert!(h.query_by_label("Cancelled: nothing was kept.").is_some(), "the row says why");
    assert!(h.query_by_label("Discard take 2").is_none() && h.query_by_label("Play take 2").is_none());
    h.get_by_label("Dismiss take 2").click();
    h.run();
    assert_eq!(h.state().takes.iter().map(|t| t.number).collect::<Vec<_>>(), [1, 3]);
}

#[test]
fn cancel_stops_every_take_and_one_take_is_a_song_as_before() {
    let mut h = with_takes(ScriptedEngine::default(), "2");
    h.state().engine().paused.set(true);
    h.get_by_label("Generate").click();
    h.run();
    let (jobs, _) = takes_sent(&h);
    h.get_by_label("Cancel").click();
    h.run();
    let cancels: Vec<Request> = sent(&h).into_iter().filter(|r| matches!(r, Request::Cancel { .. })).collect();
    assert_eq!(cancels, jobs.iter().map(|&job| Request::Cancel { job }).collect::<Vec<_>>());
    h.state().engine().paused.set(false);
    h.run();
    assert!(!h.state().is_running());

    // One take: a Generate, and no rows.
    let mut h = with_takes(ScriptedEngine::default(), "1");
    assert_eq!(h.state().settings.takes, 1);
    h.get_by_label("Generate").click();
    h.run();
    assert_eq!(sent(&h).iter().filter(|r| matches!(r, Request::Generate { .. })).count(), 1, "{:?}", sent(&h));
    assert!(!sent(&h).iter().any(|r| matches!(r, Request::Takes { .. })));
    assert!(h.state().takes.is_empty() && h.query_by_label("Takes").is_some());
    assert!(h.state().job.as_ref().unwrap().progress.finished.is_some());
}

#[test]
fn takes_asked_for_while_a_song_is_made_wait_and_leave_the_queue_together() {
    let mut h = harness(ScriptedEngine::default());
    h.state().engine().paused.set(true);
    h.get_by_label("Generate").click();
    h.run();
    h.state_mut().settings.takes = 3;
    h.get_by_label("Generate").click();
    h.run();
    let (jobs, _) = takes_sent(&h);
    assert_eq!(h.state().queue.len(), 1, "one place in the queue for the three");
    assert!(h.state().takes.is_empty(), "no rows before they start");
    h.get_by_label_contains("from the queue").click();
    h.run();
    let cancels: Vec<Request> = sent(&h).into_iter().filter(|r| matches!(r, Request::Cancel { .. })).collect();
    assert_eq!(cancels, jobs.iter().map(|&job| Request::Cancel { job }).collect::<Vec<_>>());
    assert!(h.state().queue.is_empty());
}

/// A Takes value from outside the field's range (a settings file edited by hand) is taken as the
/// nearest that can be made.
#[test]
fn takes_out_of_range_are_clamped() {
    for (asked, made) in [(0, 1), (100, songloom_ui::contract::MAX_TAKES)] {
        let mut h = harness(ScriptedEngine::default());
        h.state_mut().settings.takes = asked;
        h.state_mut().generate(0.0);
        h.run();
        let jobs = sent(&h)
            .into_iter()
            .find_map(|r| match r {
                Request::Takes { jobs, .. } => Some(jobs.len()),
                Request::Generate { .. } => Some(1),
                _ => None,
            })
            .unwrap();
        assert_eq!(jobs, made, "{asked} takes asked for");
    }
}
