//! The window's layout and the library's rows, as a newcomer meets them: everything a first song
//! needs in view from 800x600, the lyrics taking a tall screen's height, times that read right,
//! library rows that say when a song was made, a Rename that takes the keyboard, and a Delete
//! with an Undo that moves nothing.

#[allow(dead_code)]
mod common;

use common::{ScriptedEngine, library_song, sized_harness};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use songloom_ui::app::SongloomApp;
use songloom_ui::contract::{EngineEvent, Recipe, Request, SongEntry};
use songloom_ui::panels::library::UNDO_S;
use songloom_ui::state::Track;

type Window = Harness<'static, SongloomApp<ScriptedEngine>>;

/// Made at 2026-12-04 12:23 UTC.
const MADE_UNIX: i64 = 1_796_386_980;

fn two_songs() -> Vec<SongEntry> {
    let first = SongEntry {
        id: 1,
        title: "slow harbour ballad".into(),
        created_unix: MADE_UNIX,
        seconds: 7.98,
        ..library_song()
    };
    let second = SongEntry { id: 2, title: "Night train".into(), created_unix: MADE_UNIX - 86_400, ..library_song() };
    vec![first, second]
}

fn with_songs(size: egui::Vec2) -> Window {
    let mut h = sized_harness(size);
    h.state_mut().library.songs = two_songs();
    h.run();
    h
}

fn deletes_sent(h: &Window) -> Vec<i64> {
    h.state()
        .engine()
        .sent
        .borrow()
        .iter()
        .filter_map(|r| match r {
            Request::DeleteSong { id } => Some(*id),
            _ => None,
        })
        .collect()
}

#[test]
fn everything_a_first_song_needs_is_in_view_at_800x600_and_a_tall_screen_gives_the_lyrics_room() {
    let mut lyrics_heights = Vec::new();
    for (w, h) in [(800.0, 600.0), (1280.0, 800.0), (1600.0, 1000.0)] {
        let mut harness = sized_harness(egui::vec2(w, h));
        harness.run();
        let screen = egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(w, h));
        for label in ["Description", "Lyrics editor", "Generate", "Duration", "Seed", "Play", "Volume", "Listen"] {
            let rect = harness.get_by_label(label).rect();
            assert!(screen.contains_rect(rect), "{label} at {rect:?} is outside {w}x{h}");
        }
        lyrics_heights.push(harness.get_by_label("Lyrics editor").rect().height());
    }
    assert!(lyrics_heights[2] >= 300.0, "the lyrics on a 1000-point screen: {lyrics_heights:?}");
    assert!(lyrics_heights.windows(2).all(|w| w[1] > w[0]), "taller with the screen: {lyrics_heights:?}");
}

#[test]
fn library_rows_say_when_and_how_long_without_repeating_the_title() {
    let h = with_songs(egui::vec2(1280.0, 800.0));
    h.get_by_label("0:08 · 4 Dec 2026, 12:23 · seed 42");
    // A renamed song still says what it was made from.
    h.get_by_label("0:30 · 3 Dec 2026, 12:23 · seed 42 · slow harbour ballad");
}

#[test]
fn times_read_to_the_nearest_second() {
    let mut h = sized_harness(egui::vec2(1280.0, 800.0));
    h.state_mut().track =
        Some(Track { title: "short".into(), audio: vec![0.1; 2 * 798], sample_rate: 100, ..Track::default() });
    h.run();
    h.get_by_label("0:00 / 0:08");
}

#[test]
fn rename_takes_the_keyboard() {
    let mut h = with_songs(egui::vec2(1280.0, 800.0));
    h.get_all_by_label("Rename").next().unwrap().click();
    h.run();
    h.event(egui::Event::Key {
        key: egui::Key::A,
        physical_key: None,
        pressed: true,
        repeat: false,
        modifiers: egui::Modifiers::COMMAND,
    });
    h.event(egui::Event::Text("Harbour at dawn".into()));
    h.run();
    h.key_press(egui::Key::Enter);
    h.run();
    let renamed = h
        .state()
        .engine()
        .sent
        .borrow()
        .iter()
        .any(|r| matches!(r, Request::RenameSong { id: 1, title } if title == "Harbour at dawn"));
    assert!(renamed, "typed straight into the title field: {:?}", h.state().engine().sent.borrow());
}

#[test]
fn delete_leaves_an_undo_in_the_rows_place_and_deletes_once_it_is_over() {
    let mut h = with_songs(egui::vec2(1280.0, 800.0));
    let second_row = || h_rect(&h, 1);
    let before = second_row();
    h.get_all_by_label("Delete").next().unwrap().click();
    h.run();
    h.get_by_label("\u{201c}slow harbour ballad\u{201d} is deleted.");
    assert_eq!(h_rect(&h, 0), before, "the next row stays under the pointer");
    assert!(deletes_sent(&h).is_empty(), "not yet: Undo can still bring it back");
    h.get_by_label("Undo").click();
    h.run();
    assert!(h.query_by_label("Undo").is_none());
    assert_eq!(h_rect(&h, 1), before);
    assert!(deletes_sent(&h).is_empty());
    // Deleted again and left: gone once its Undo is over.
    h.get_all_by_label("Delete").next().unwrap().click();
    h.run();
    let now = h.ctx.input(|i| i.time);
    h.input_mut().time = Some(now + UNDO_S + 0.5);
    h.run();
    assert_eq!(deletes_sent(&h), vec![1]);
    assert!(h.query_by_label("Undo").is_none());
}

/// The `i`th Listen button's place.
fn h_rect(h: &Window, i: usize) -> egui::Rect {
    h.get_all_by_label("Listen").nth(i).unwrap().rect()
}

#[test]
fn a_delete_waiting_for_its_undo_is_done_when_the_window_closes() {
    let mut h = with_songs(egui::vec2(1280.0, 800.0));
    h.get_all_by_label("Delete").nth(1).unwrap().click();
    h.run();
    h.input_mut().viewports.entry(egui::ViewportId::ROOT).or_default().events.push(egui::ViewportEvent::Close);
    h.step();
    assert_eq!(deletes_sent(&h), vec![2]);
}

#[test]
fn the_recipe_question_comes_over_the_list_without_moving_it() {
    let mut h = with_songs(egui::vec2(1280.0, 800.0));
    h.state_mut().draft = Recipe { description: "my own draft".into(), ..Recipe::default() };
    h.run();
    let before = h_rect(&h, 0);
    h.get_all_by_label("Use recipe").next().unwrap().click();
    h.run();
    h.get_by_label("Keep my draft");
    assert_eq!(h_rect(&h, 0), before);
}

#[test]
fn a_song_made_in_parts_is_marked_where_each_part_starts() {
    let mut h = sized_harness(egui::vec2(1280.0, 800.0));
    h.state().engine().paused.set(true);
    h.state_mut().generate(0.0);
    h.state().engine().queue.borrow_mut().clear();
    let part =
        |first: usize| EngineEvent::Audio { job: 1, first_sample: first, samples: vec![0.1; 400], sample_rate: 100 };
    h.state().engine().queue.borrow_mut().extend([part(0), part(200), part(400)]);
    h.state().engine().paused.set(false);
    h.run();
    assert_eq!(h.state().track.as_ref().unwrap().sections, vec![200, 400]);
}
