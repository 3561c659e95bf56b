//! Property tests of the parsers that take outside input: a checkpoint's safetensors header and
//! shard index on mutated files (a named error or a correct load, never a panic), and prompt
//! assembly and tokenization on random Unicode (never a panic; the token limit kept). The case
//! counts are bounded so the whole file runs in seconds.

use std::path::Path;

use proptest::prelude::*;
use songloom_engine::model_dir::ModelDir;
use songloom_engine::prompt::{PromptEncoder, assemble};
use songloom_engine::weights::{Checkpoint, save_f32};
use songloom_tests::tiny_model_dir;

/// A small valid checkpoint file of three tensors.
fn valid_file(dir: &Path) -> Vec<u8> {
    let tensors = vec![
        ("a.weight".to_string(), vec![3, 4], (0..12).map(|i| i as f32 * 0.5).collect()),
        ("b.bias".to_string(), vec![5], vec![1.0; 5]),
        ("c".to_string(), vec![2, 1, 2], vec![-1.0, 0.0, 1.0, 2.0]),
    ];
    let path = dir.join("valid.safetensors");
    save_f32(&path, &tensors).unwrap();
    std::fs::read(path).unwrap()
}

/// Opens `bytes` as a checkpoint and reads every tensor; an error must name the file.
fn load(dir: &Path, bytes: &[u8]) -> Result<(), String> {
    let path = dir.join("mutated.safetensors");
    std::fs::write(&path, bytes).unwrap();
    let named = |e: songloom_engine::Error| {
        let text = e.to_string();
        if text.contains(&path.display().to_string()) { text } else { panic!("an error that names no file: {text}") }
    };
    let ckpt = Checkpoint::open_file(&path).map_err(named)?;
    let names: Vec<String> = ckpt.tensor_names().map(str::to_string).collect();
    for name in names {
        let t = ckpt.read(&name).map_err(named)?;
        assert_eq!(t.elem_count(), t.shape().iter().product::<usize>());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Bytes changed anywhere (the header's length, its JSON, the data) or the file cut short.
    #[test]
    fn a_mutated_safetensors_file_loads_or_is_a_named_error(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = valid_file(dir.path());
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len()));
        }
        let _ = load(dir.path(), &bytes);
    }

    /// The header's length field and JSON written by hand, for what no flip would reach.
    #[test]
    fn a_hand_written_header_loads_or_is_a_named_error(header in "\\{(\"[a-z]{1,3}\":\\{\"dtype\":\"(F32|BF16|F16|I64|U8)\",\"shape\":\\[[0-9]{0,2}(,[0-9]{1,6}){0,2}\\],\"data_offsets\":\\[[0-9]{1,3},[0-9]{1,7}\\]\\})?\\}", extra in 0usize..64) {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend(header.as_bytes());
        bytes.extend(vec![0u8; extra]);
        let _ = load(dir.path(), &bytes);
    }

    /// A component whose shard index is mutated JSON: a named error or a load, never a panic.
    #[test]
    fn a_mutated_shard_index_loads_or_is_a_named_error(text in "\\PC{0,80}") {
        let dir = tempfile::tempdir().unwrap();
        valid_file(dir.path());
        let index = dir.path().join("model.safetensors.index.json");
        let json = format!("{{\"weight_map\": {{\"a.weight\": \"valid.safetensors\", \"x\": {text:?}}}}}");
        std::fs::write(&index, if text.len() % 3 == 0 { text.clone() } else { json }).unwrap();
        if let Err(e) = Checkpoint::open(dir.path()) {
            let message = e.to_string();
            prop_assert!(message.contains(&dir.path().display().to_string()), "{}", message);
        }
    }
}

fn encoder() -> (PromptEncoder, usize) {
    let model = ModelDir::open(&tiny_model_dir()).unwrap();
    let max = model.constants.max_prompt_tokens;
    (PromptEncoder::new(&tiny_model_dir().join("tokenizer"), &model.constants).unwrap(), max)
}

/// Text that mixes what the prompt rules act on (tags, markdown, separators, line breaks) with
/// any Unicode.
fn prompt_text() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        Just("[verse]".to_string()),
        Just("[Chorus] la".to_string()),
        Just("<|tempo fast|>".to_string()),
        Just("**bold**".to_string()),
        Just(" ^ ".to_string()),
        Just("\n".to_string()),
        Just("\r\n".to_string()),
        Just("# ".to_string()),
        Just("- ".to_string()),
        Just("---".to_string()),
        Just("\u{2028}".to_string()),
        "\\PC{0,12}",
    ];
    prop::collection::vec(pieces, 0..12).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn any_description_and_lyrics_assemble_and_tokenize_or_are_refused(caption in prompt_text(), lyrics in prompt_text()) {
        let (encoder, max) = encoder();
        let text = assemble(&caption, &lyrics);
        prop_assert!(text.starts_with("<|im_start|><|caption_start|>") && text.ends_with("<|audio_start|>"));
        match encoder.encode(&caption, &lyrics) {
            Ok(ids) => {
                prop_assert!(ids.cond.len() <= max && ids.cond.len() >= 3);
                prop_assert_eq!(ids.cond.len(), ids.uncond.len());
                prop_assert_eq!(ids.text, text);
            }
            Err(e) => {
                let message = e.to_string();
                prop_assert!(message.contains("empty") || message.contains("tokens"), "{}", message);
            }
        }
    }

    /// Past the token limit the prompt is refused, not cut.
    #[test]
    fn a_prompt_over_the_limit_is_refused(words in 1usize..4, repeat in 1700usize..2500) {
        let (encoder, max) = encoder();
        let lyrics = format!("[verse]\n{}", "long lyrics line ".repeat(words * repeat));
        match encoder.encode("piano", &lyrics) {
            Ok(ids) => prop_assert!(ids.cond.len() <= max),
            Err(e) => prop_assert!(e.to_string().contains(&format!("at most {max}")), "{}", e),
        }
    }
}
