//! An instrumental song from one checkbox, and the model's name in view as its licence asks, in
//! the window and (remote) the page.

#[allow(dead_code)]
mod common;

use common::{ScriptedEngine, harness};
use egui_kittest::kittest::Queryable;
use songloom_ui::contract::Request;

#[test]
fn instrumental_makes_a_song_without_lyrics_and_gives_the_words_back() {
    let mut h = harness(ScriptedEngine::default());
    h.get_by_label("Description").focus();
    h.run();
    h.get_by_label("Description").type_text("calm ambient pads");
    h.get_by_label("Lyrics editor").focus();
    h.run();
    h.get_by_label("Lyrics editor").type_text("[verse]\nmy words");
    h.run();
    h.get_by_label("Instrumental (no singing)").click();
    h.run();
    assert_eq!(h.state().draft.lyrics, "[instrumental]");

    h.get_by_label("Generate").click();
    h.run();
    h.run();
    let sent = h.state().engine().sent.borrow().clone();
    let recipe = sent.iter().find_map(|r| match r {
        Request::Generate { recipe, .. } => Some(recipe.clone()),
        _ => None,
    });
    assert_eq!(recipe.expect("a song was asked for").lyrics, "[instrumental]");

    // Unticked, what was written comes back.
    h.get_by_label("Instrumental (no singing)").click();
    h.run();
    assert_eq!(h.state().draft.lyrics, "[verse]\nmy words");
}

#[test]
fn lyrics_of_only_the_tag_show_as_instrumental() {
    let mut h = harness(ScriptedEngine::default());
    h.state_mut().draft.lyrics = "[instrumental]".into();
    h.run();
    h.get_by_label("Instrumental (no singing)").click();
    h.run();
    assert_eq!(h.state().draft.lyrics, "", "unticked with nothing written before");
}

#[test]
fn the_window_names_the_model_in_use() {
    let mut h = harness(ScriptedEngine::default());
    h.run();
    assert!(h.query_by_label("Model: Songloom Mini").is_some(), "the built-in model is not named");
    h.state_mut().draft.model = "/models/MiniMax-Music3".into();
    h.run();
    assert!(h.query_by_label("Model: MiniMax-Music3").is_some(), "the real model is not named");
}

#[test]
fn the_page_names_the_servers_model() {
    let mut h = harness(ScriptedEngine { remote: true, ..ScriptedEngine::default() });
    h.run();
    h.run();
    assert!(h.query_by_label("Model: Songloom Mini").is_some(), "the server's model is not named");
}
