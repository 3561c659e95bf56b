//! Prompt assembly and tokenization against the reference on 31 tricky captions and lyrics
//! (markdown, special tags, leading tags with text, `^` separators, CRLF, Unicode, long input).

use songloom_engine::model_dir::ModelDir;
use songloom_engine::prompt::{PromptEncoder, assemble};
use songloom_tests::{fixtures, tiny_model_dir};

#[derive(serde::Deserialize)]
struct Case {
    prompt: String,
    lyrics: String,
    text: String,
    ids: Vec<u32>,
    uncond_ids: Vec<u32>,
}

fn cases() -> Vec<Case> {
    let path = fixtures().join("goldens/prompts.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn encoder() -> PromptEncoder {
    let model = ModelDir::open(&tiny_model_dir()).unwrap();
    PromptEncoder::new(&tiny_model_dir().join("tokenizer"), &model.constants).unwrap()
}

#[test]
fn assembled_text_is_byte_exact() {
    let cases = cases();
    assert!(cases.len() >= 30);
    for (i, case) in cases.iter().enumerate() {
        assert_eq!(assemble(&case.prompt, &case.lyrics), case.text, "case {i}: {:?} / {:?}", case.prompt, case.lyrics);
    }
}

#[test]
fn ids_and_unconditional_ids_match() {
    let encoder = encoder();
    for (i, case) in cases().iter().enumerate() {
        let ids = encoder.encode(&case.prompt, &case.lyrics).unwrap();
        assert_eq!(ids.cond, case.ids, "case {i}");
        assert_eq!(ids.uncond, case.uncond_ids, "case {i}");
    }
}

#[test]
fn a_changed_byte_is_caught() {
    // Negative control: one extra space in the caption changes the text the model sees.
    let case = &cases()[0];
    assert_ne!(assemble(&format!("{} ", case.prompt).replacen(' ', "  ", 1), &case.lyrics), case.text);
}

#[test]
fn empty_inputs_and_over_long_prompts_are_errors() {
    let encoder = encoder();
    let err = encoder.encode("  \n\t", "[verse]\nla").unwrap_err().to_string();
    assert!(err.contains("description"), "{err}");
    let err = encoder.encode("piano", " \n ").unwrap_err().to_string();
    assert!(err.contains("lyrics"), "{err}");
    let long = "many different words of lyrics ".repeat(2000);
    let err = encoder.encode("piano", &long).unwrap_err().to_string();
    assert!(err.contains("tokens") && err.contains("5000"), "{err}");
}
