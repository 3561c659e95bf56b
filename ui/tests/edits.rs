//! The edits of a song already made, by label: a range selected by dragging on the waveform,
//! Extend, Take another path from here, Re-render selection and Re-sing from this line each
//! asking the engine for the version they name; edits held while a song is made and for a song
//! without a score, with the reason; the versions of a song together in the library; and an
//! edit's version playing from where it changes.

#[allow(dead_code)]
mod common;

use common::{ScriptedEngine, harness, library_song};
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use songloom_ui::app::SongloomApp;
use songloom_ui::contract::{
    Edit, EditOf, EditRequest, EngineEvent, JobId, PlaybackState, Request, SongEntry, SongId, Timings,
};

type Window = Harness<'static, SongloomApp<ScriptedEngine>>;

/// Stereo frames a second of the scripted songs.
const RATE: u32 = 100;

/// A 30 s song with a few lines to sing.
fn song() -> SongEntry {
    let mut song = library_song();
    song.recipe.lyrics = "[verse]\nlanterns on the water\nsalt in the air\n\n[chorus]\nharbour lights".into();
    song
}

/// A window tall enough for the player, its edits and the library, with `song` listened to.
fn listening_to(song: SongEntry) -> Window {
    let app = SongloomApp::new(ScriptedEngine::default(), Default::default());
    let mut h = Harness::builder()
        .with_size(egui::vec2(1280.0, 1400.0))
        .build_ui_state(|ui, app: &mut SongloomApp<ScriptedEngine>| app.ui(ui), app);
    let samples = vec![0.2; 2 * (song.seconds as usize) * RATE as usize];
    h.state().engine().queue.borrow_mut().push_back(EngineEvent::Loaded { song, samples, sample_rate: RATE });
    h.run();
    h
}

/// The edits asked for so far: the job, the song and the edit.
fn edits_sent(h: &Window) -> Vec<(JobId, SongId, EditRequest)> {
    h.state()
        .engine()
        .sent
        .borrow()
        .iter()
        .filter_map(|r| match r {
            Request::Edit { job, song, edit } => Some((*job, *song, edit.clone())),
            _ => None,
        })
        .collect()
}

fn last_edit(h: &Window) -> EditRequest {
    let sent = edits_sent(h);
    let (_, song, edit) = sent.last().cloned().expect("an edit was asked for");
    assert_eq!(song, 7, "the edit is of the song in the player");
    edit
}

/// Drags on the waveform from `from` to `to`, shares of its width. (The song is drawn a whole
/// number of frames to a pixel column, so it may end a little short of the width: a share of the
/// width is a time to within a few percent.)
fn drag_on_waveform(h: &mut Window, from: f32, to: f32) {
    let rect = h.get_by_label("Waveform").rect();
    let at = |share: f32| egui::pos2(rect.left() + share * rect.width(), rect.center().y);
    h.hover_at(at(from));
    h.run();
    h.drag_at(at(from));
    h.run();
    for step in 1..=4 {
        h.hover_at(at(from + (to - from) * step as f32 / 4.0));
        h.run();
    }
    h.drop_at(at(to));
    h.run();
}

/// Replaces the text of the field labelled `label` with `text`, as a person selecting all and
/// typing would.
fn type_into(h: &mut Window, label: &str, text: &str) {
    h.get_by_label(label).focus();
    h.run();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.run();
    h.event(egui::Event::Text(text.into()));
    h.run();
}

fn close(a: f64, b: f64, within: f64) -> bool {
    (a - b).abs() <= within
}

#[test]
fn a_drag_on_the_waveform_selects_a_range_and_a_click_clears_it_and_seeks() {
    let mut h = listening_to(song());
    assert!(h.get_by_label("Re-render selection").accesskit_node().is_disabled(), "nothing selected yet");
    h.get_by_label("drag on the waveform to select a part");
    drag_on_waveform(&mut h, 0.2, 0.4);
    // 6 s to 12 s of the 30, to a pixel column's frames.
    h.get_by_label_contains("Selected 0:06–0:1");
    assert!(!h.get_by_label("Re-render selection").accesskit_node().is_disabled());
    assert!(
        !h.state().engine().sent.borrow().iter().any(|r| matches!(r, Request::Seek { .. })),
        "a drag selects, it does not seek"
    );
    // A click: the selection goes and the song plays from there.
    h.get_by_label("Waveform").click();
    h.run();
    h.get_by_label("drag on the waveform to select a part");
    let seeks: Vec<usize> = h
        .state()
        .engine()
        .sent
        .borrow()
        .iter()
        .filter_map(|r| if let Request::Seek { frame } = r { Some(*frame) } else { None })
        .collect();
    assert_eq!(seeks.len(), 1, "{seeks:?}");
    assert!(close(seeks[0] as f64, 1500.0, 80.0), "the middle of the song: {seeks:?}");
    assert!(h.get_by_label("Re-render selection").accesskit_node().is_disabled());
}

#[test]
fn re_render_selection_asks_for_the_range_selected_with_a_new_seed() {
    let mut h = listening_to(song());
    drag_on_waveform(&mut h, 0.4, 0.2);
    h.get_by_label("Re-render selection").click();
    h.run();
    let EditRequest { edit: Edit::Rerender { from_s, to_s }, seed: None } = last_edit(&h) else {
        panic!("not a re-render: {:?}", last_edit(&h));
    };
    assert!(close(from_s, 6.0, 0.4) && close(to_s, 12.0, 0.8), "{from_s}–{to_s}");
    // The version is made as a new song, named by its edit, from where the selection starts.
    let track = h.state().track.as_ref().expect("the version in the player");
    assert!(track.title.starts_with("Harbour lights (re-render 0:06–0:1"), "{}", track.title);
    assert_eq!(track.changed.map(|c| c.from_s), Some(from_s));
}

#[test]
fn extend_asks_for_the_length_typed_with_the_songs_seed_unless_one_is_typed() {
    let mut h = listening_to(song());
    h.get_by_label("Extend").click();
    h.run();
    assert_eq!(last_edit(&h), EditRequest { edit: Edit::Extend { seconds: Some(30.0) }, seed: None });
    let track = h.state().track.as_ref().expect("the version in the player");
    assert_eq!((track.title.as_str(), track.expected_s), ("Harbour lights (extend +30 s)", Some(60.0)));

    let mut h = listening_to(song());
    type_into(&mut h, "Extend by", "45");
    type_into(&mut h, "Edit seed", "9");
    h.get_by_label("Extend").click();
    h.run();
    assert_eq!(last_edit(&h), EditRequest { edit: Edit::Extend { seconds: Some(45.0) }, seed: Some(9) });

    // Past the longest song the model makes, Extend says why it waits.
    let mut h = listening_to(song());
    type_into(&mut h, "Extend by", "6:00");
    assert!(h.get_by_label("Extend").accesskit_node().is_disabled());
    h.get_by_label("Extend").hover();
    h.run();
    h.get_by_label_contains("A song is at most 6:00");
    h.get_by_label("Extend").click();
    h.run();
    assert!(edits_sent(&h).is_empty());
}

#[test]
fn take_another_path_goes_from_the_playhead_or_the_selections_start() {
    let mut h = listening_to(song());
    h.state().engine().playback.replace(PlaybackState {
        position: 12 * RATE as usize,
        frames: 30 * RATE as usize,
        sample_rate: RATE,
        ..PlaybackState::default()
    });
    type_into(&mut h, "New description from here", "turns into a waltz");
    h.get_by_label("Take another path from here").click();
    h.run();
    assert_eq!(
        last_edit(&h),
        EditRequest { edit: Edit::From { at_s: 12.0, description: Some("turns into a waltz".into()) }, seed: None }
    );

    let mut h = listening_to(song());
    drag_on_waveform(&mut h, 0.5, 0.7);
    h.get_by_label("Take another path from here").click();
    h.run();
    let EditRequest { edit: Edit::From { at_s, description: None }, seed: None } = last_edit(&h) else {
        panic!("not another path from the song's description: {:?}", last_edit(&h));
    };
    assert!(close(at_s, 15.0, 0.8), "from the selection's start: {at_s}");
}

#[test]
fn re_sing_from_a_line_picked_in_the_lyrics_sends_the_lyrics_from_there() {
    let mut h = listening_to(song());
    assert!(h.query_by_label("Re-sing from this line").is_none());
    h.get_by_label("Re-sing from a line").click();
    h.run();
    assert!(h.query_by_label("Re-sing from this line").is_none(), "no line picked yet");
    h.get_by_label("3  salt in the air").click();
    h.run();
    // The lyrics from that line on, to change.
    assert_eq!(
        h.get_by_label("New lyrics from line 3").value().as_deref(),
        Some("salt in the air\n\n[chorus]\nharbour lights")
    );
    type_into(&mut h, "New lyrics from line 3", "salt on my lips\n[chorus]\nharbour lights");
    h.get_by_label("Re-sing from this line").click();
    h.run();
    assert_eq!(
        last_edit(&h),
        EditRequest {
            edit: Edit::Resing { line: 2, lyrics: "salt on my lips\n[chorus]\nharbour lights".into(), at_s: None },
            seed: None,
        }
    );
    // Expected from the line's place among the six: half way through.
    let track = h.state().track.as_ref().expect("the version in the player");
    assert_eq!(track.changed.map(|c| c.from_s), Some(10.0));
}

#[test]
fn edits_wait_while_a_song_is_made() {
    let mut h = listening_to(song());
    h.state().engine().paused.set(true);
    h.state_mut().generate(0.0);
    // Listened to while the other is made.
    let samples = vec![0.2; 2 * 30 * RATE as usize];
    h.state().engine().paused.set(false);
    h.state().engine().queue.borrow_mut().retain(|e| e.job().is_none());
    h.state().engine().queue.borrow_mut().push_back(EngineEvent::Loaded { song: song(), samples, sample_rate: RATE });
    h.run();
    assert!(h.state().is_running());
    for label in ["Extend", "Take another path from here", "Re-render selection"] {
        assert!(h.get_by_label(label).accesskit_node().is_disabled(), "{label} is held");
    }
    h.get_by_label("Extend").hover();
    h.run();
    h.get_by_label("Edits wait until the song being made is done.");
    h.get_by_label("Extend").click();
    h.run();
    assert!(edits_sent(&h).is_empty());
}

#[test]
fn a_song_without_a_score_says_why_it_cannot_be_edited() {
    let why = "it was made before songs kept their score";
    let mut h = listening_to(SongEntry { editable: Err(why.into()), ..song() });
    h.get_by_label(&format!("This song cannot be edited: {why}"));
    h.get_by_label("Re-sing from a line").click();
    h.run();
    h.get_by_label("3  salt in the air").click();
    h.run();
    for label in ["Extend", "Take another path from here", "Re-sing from this line"] {
        assert!(h.get_by_label(label).accesskit_node().is_disabled(), "{label} is held");
    }
    h.get_by_label("Take another path from here").hover();
    h.run();
    assert_eq!(h.query_all_by_label(&format!("This song cannot be edited: {why}")).count(), 2, "said on hover too");
    h.get_by_label("Re-sing from this line").click();
    h.run();
    assert!(edits_sent(&h).is_empty());
}

/// `song`'s version `id` made by `edit`, changed from `from_s`.
fn version(id: SongId, of: &SongEntry, edit: Edit, from_s: f64, title: &str) -> SongEntry {
    let mut version = SongEntry { id, title: title.into(), ..of.clone() };
    version.recipe.edit = Some(Box::new(EditOf { parent: of.id, edit, changed_from_s: from_s, changed_to_s: None }));
    version
}

#[test]
fn the_versions_of_a_song_stand_together_under_it_with_their_edits() {
    let mut h = harness(ScriptedEngine::default());
    h.set_size(egui::vec2(1280.0, 1400.0));
    let original = song();
    let other = SongEntry { id: 8, title: "Night train".into(), ..library_song() };
    let extended = version(9, &original, Edit::Extend { seconds: Some(30.0) }, 30.0, "Harbour lights, longer");
    let rerender = Edit::Rerender { from_s: 12.0, to_s: 20.0 };
    let rerendered = version(10, &original, rerender, 12.0, "Harbour lights, new bridge");
    let again = version(11, &extended, Edit::From { at_s: 40.0, description: None }, 40.0, "Harbour lights, other end");
    // Newest first, as the engine lists them.
    h.state()
        .engine()
        .queue
        .borrow_mut()
        .push_back(EngineEvent::Library { songs: vec![again, extended, other, rerendered, original] });
    h.run();
    let title = |h: &Window, title: &str| h.get_by_label(title).rect();
    let rows = ["Harbour lights", "Harbour lights, longer", "Harbour lights, other end", "Harbour lights, new bridge"];
    let rects: Vec<egui::Rect> = rows.iter().map(|t| title(&h, t)).collect();
    assert!(rects.windows(2).all(|w| w[0].top() < w[1].top()), "the family together, newest version first: {rects:?}");
    assert!(title(&h, "Night train").top() > rects[3].top(), "the other song after the family");
    // Each version indented under the one it was made from, its edit named.
    assert!(rects[1].left() > rects[0].left() && rects[2].left() > rects[1].left());
    assert_eq!(rects[3].left(), rects[1].left());
    for name in ["extend +30 s", "another path from 0:40", "re-render 0:12–0:20"] {
        h.get_by_label(name);
    }
}

#[test]
fn an_edits_version_plays_from_where_it_changes() {
    let mut h = listening_to(song());
    h.state().engine().paused.set(true);
    h.get_by_label("Extend").click();
    h.run();
    let (job, ..) = edits_sent(&h)[0].clone();
    h.get_by_label_contains("Starts playing at 0:30, where the edit begins, once enough is made");
    let sent_since = |h: &Window, n: usize| h.state().engine().sent.borrow()[n..].to_vec();
    let before = h.state().engine().sent.borrow().len();
    let audio = |from_s: usize, to_s: usize| EngineEvent::Audio {
        job,
        first_sample: from_s * RATE as usize,
        samples: vec![0.1; 2 * (to_s - from_s) * RATE as usize],
        sample_rate: RATE,
    };
    let arrive = |h: &mut Window, at_s: f64, events: Vec<EngineEvent>| {
        h.state().engine().queue.borrow_mut().extend(events);
        h.state().engine().paused.set(false);
        h.input_mut().time = Some(at_s);
        h.step();
        h.input_mut().time = Some(at_s);
        h.step();
    };
    // The kept song comes at once: the player holds it, at its start yet.
    arrive(&mut h, 11.0, vec![audio(0, 30)]);
    assert!(sent_since(&h, before).is_empty(), "{:?}", sent_since(&h, before));
    // The new part begins: the playhead goes there, held until the rest can play through.
    arrive(&mut h, 14.0, vec![audio(30, 34)]);
    assert_eq!(sent_since(&h, before), [Request::Seek { frame: 3000 }]);
    arrive(&mut h, 15.0, vec![audio(34, 40)]);
    assert_eq!(sent_since(&h, before), [Request::Seek { frame: 3000 }, Request::Play]);

    // The engine began the change a little earlier than asked (at a window's boundary): a version
    // still held waits there instead.
    let mut h = listening_to(song());
    h.state().engine().paused.set(true);
    h.get_by_label("Extend").click();
    h.run();
    let before = h.state().engine().sent.borrow().len();
    let saved = version(12, &song(), Edit::Extend { seconds: Some(30.0) }, 28.0, "Harbour lights, longer");
    arrive(&mut h, 11.0, vec![audio(0, 30), audio(30, 31)]);
    arrive(&mut h, 19.0, vec![audio(31, 60), EngineEvent::Saved { job, song: saved }]);
    arrive(&mut h, 19.5, vec![EngineEvent::Finished { job, timings: Timings::default() }]);
    assert_eq!(
        sent_since(&h, before),
        [Request::Seek { frame: 3000 }, Request::Seek { frame: 2800 }, Request::Play],
        "the engine's record replaces the expectation"
    );
    let track = h.state().track.as_ref().unwrap();
    assert_eq!((track.song.as_ref().map(|s| s.id), track.title.as_str()), (Some(12), "Harbour lights, longer"));
}
