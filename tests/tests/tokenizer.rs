//! Our byte-level BPE against Hugging Face's `tokenizers` (what the reference's `Qwen2Tokenizer`
//! runs) on the shipped tokenizers and on one trained here with a few thousand merges, over text
//! nobody chose: generated Unicode mixed with special tokens, line breaks and contractions.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use songloom_engine::tokenizer::Tokenizer;
use songloom_tests::fixtures;
use tokenizers::models::bpe::{BPE, BpeTrainer};
use tokenizers::normalizers::unicode::NFC;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{
    AddedToken, DecoderWrapper, ModelWrapper, NormalizerWrapper, PostProcessorWrapper, PreTokenizerWrapper,
    SplitDelimiterBehavior, TokenizerBuilder, TokenizerImpl,
};

const QWEN_SPLIT: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

const SPECIALS: [&str; 9] = [
    "<|im_start|>",
    "<|im_end|>",
    "<|caption_start|>",
    "<|caption_end|>",
    "<|lyrics_start|>",
    "<|lyrics_end|>",
    "<|audio_start|>",
    "<|audio_end|>",
    "<|audio_cfg|>",
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Lines written by people in several scripts, for training and as inputs.
fn corpus() -> Vec<String> {
    let mut lines = Vec::new();
    for file in ["README.md", "docs/BENCHMARKS.md", "tests/fixtures/heldout-captions.json"] {
        let text = std::fs::read_to_string(workspace_root().join(file)).unwrap();
        lines.extend(text.lines().map(str::to_string));
    }
    lines.extend(
        [
            "深夜的城市，霓虹灯下我独自走着",
            "君の声が聞こえる　夜明けまで歌おう",
            "사랑해 오늘 밤도 너를 생각해",
            "Café déjà vu, naïve façade — über straße",
            "Ça va? C'est l'été! I'm sure you'll SAY it's 'TRUE' we've won",
            "Привет, мир! Как дела?",
            "مرحبا بالعالم 123 ٤٥٦",
            "🎸🎹🥁 emoji 👩‍🎤 with ZWJ and e\u{301} combining",
            "tabs\tand  double  spaces\r\nand CRLF\n\n\nblank lines   ",
        ]
        .map(str::to_string),
    );
    lines
}

/// A Qwen-shaped tokenizer trained on `corpus()`, written to `dir/tokenizer.json`; merges as
/// `["a", "b"]` pairs, or as `"a b"` strings as older files have them.
fn trained(dir: &Path, joined_merges: bool) -> PathBuf {
    let split = Split::new(SplitPattern::Regex(QWEN_SPLIT.into()), SplitDelimiterBehavior::Isolated, false).unwrap();
    let pre = Sequence::new(vec![split.into(), ByteLevel::new(false, true, false).into()]);
    let mut tokenizer: TokenizerImpl<
        ModelWrapper,
        NormalizerWrapper,
        PreTokenizerWrapper,
        PostProcessorWrapper,
        DecoderWrapper,
    > = TokenizerBuilder::new()
        .with_model(BPE::default().into())
        .with_normalizer(Some(NFC.into()))
        .with_pre_tokenizer(Some(pre.into()))
        .with_decoder(Some(ByteLevel::default().into()))
        .build()
        .unwrap();
    let trainer = BpeTrainer::builder()
        .vocab_size(3000)
        .show_progress(false)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .special_tokens(SPECIALS.iter().map(|s| AddedToken::from(*s, true)).collect())
        .build();
    let mut trainer = tokenizers::models::TrainerWrapper::from(trainer);
    tokenizer.train(&mut trainer, corpus().into_iter()).unwrap();
    // A non-special added token, as Qwen's `<think>`.
    tokenizer.add_tokens(&[AddedToken::from("<think>", false)]);
    let mut json: serde_json::Value = serde_json::from_str(&tokenizer.to_string(false).unwrap()).unwrap();
    let merges = json["model"]["merges"].as_array().unwrap().len();
    assert!(merges > 1500, "only {merges} merges were learned");
    if joined_merges {
        let joined: Vec<String> = json["model"]["merges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|pair| format!("{} {}", pair[0].as_str().unwrap(), pair[1].as_str().unwrap()))
            .collect();
        json["model"]["merges"] = serde_json::json!(joined);
    }
    let path = dir.join(if joined_merges { "joined.json" } else { "pairs.json" });
    std::fs::write(&path, json.to_string()).unwrap();
    path
}

fn tokenizer_files(dir: &Path) -> Vec<PathBuf> {
    vec![
        fixtures().join("tiny-music3/tokenizer/tokenizer.json"),
        workspace_root().join("models/songloom-mini/tokenizer/tokenizer.json"),
        trained(dir, false),
        trained(dir, true),
    ]
}

fn reference_ids(reference: &tokenizers::Tokenizer, text: &str) -> Vec<u32> {
    reference.encode(text, true).unwrap().get_ids().to_vec()
}

#[test]
fn written_text_tokenizes_as_the_reference_does() {
    let dir = tempfile::tempdir().unwrap();
    for file in tokenizer_files(dir.path()) {
        let ours = Tokenizer::from_file(&file).unwrap();
        let reference = tokenizers::Tokenizer::from_file(&file).unwrap();
        let lines = corpus();
        for line in &lines {
            assert_eq!(ours.encode(line).unwrap(), reference_ids(&reference, line), "{}: {line:?}", file.display());
        }
        let whole = format!("{}{}{}", SPECIALS[0], lines.join("\n"), SPECIALS[8]);
        assert_eq!(ours.encode(&whole).unwrap(), reference_ids(&reference, &whole), "{}", file.display());
    }
}

#[test]
fn a_changed_merge_rank_is_caught() {
    // Negative control: swapping two merges' ranks in the trained file changes some ids, so the
    // comparison above can see a wrong merge order.
    let dir = tempfile::tempdir().unwrap();
    let path = trained(dir.path(), false);
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let reference = tokenizers::Tokenizer::from_file(&path).unwrap();
    let merges = json["model"]["merges"].as_array_mut().unwrap();
    let last = merges.len() - 1;
    merges.swap(0, last);
    let swapped = dir.path().join("swapped.json");
    std::fs::write(&swapped, json.to_string()).unwrap();
    let ours = Tokenizer::from_file(&swapped).unwrap();
    let differs = corpus().iter().any(|line| ours.encode(line).unwrap() != reference_ids(&reference, line));
    assert!(differs);
}

/// A change that makes a tokenizer file one we cannot follow.
type Edit = fn(&mut serde_json::Value);

#[test]
fn files_it_cannot_follow_are_refused_by_name() {
    let base: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("tiny-music3/tokenizer/tokenizer.json")).unwrap(),
    )
    .unwrap();
    let cases: [(&str, Edit, &str); 5] = [
        ("normalizer", |j| j["normalizer"] = serde_json::json!({"type": "Lowercase"}), "Lowercase"),
        ("merge", |j| j["model"]["merges"][0] = serde_json::json!(["Ġ", "zzzz"]), "zzzz"),
        ("byte", |j| drop(j["model"]["vocab"].as_object_mut().unwrap().remove("Ġ")), "byte 0x20"),
        ("model", |j| j["model"]["type"] = serde_json::json!("WordPiece"), "WordPiece"),
        ("lstrip", |j| j["added_tokens"][0]["lstrip"] = serde_json::json!(true), "<|im_start|>"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, change, expected) in cases {
        let mut json = base.clone();
        change(&mut json);
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, json.to_string()).unwrap();
        let message = match Tokenizer::from_file(&path) {
            Ok(_) => panic!("{name}: loaded"),
            Err(e) => e.to_string(),
        };
        assert!(message.contains(expected) && message.contains(&path.display().to_string()), "{name}: {message}");
    }
}

/// Text from pieces the tokenizer treats specially, and any Unicode.
fn any_text() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        prop::sample::select(SPECIALS.to_vec()).prop_map(str::to_string),
        Just("<think>".to_string()),
        Just("<|im_".to_string()),
        Just("'S".to_string()),
        Just("'ll".to_string()),
        Just(" \r\n".to_string()),
        Just("  ".to_string()),
        Just("\u{a0}\u{2028}\t".to_string()),
        Just("e\u{301}".to_string()),
        Just("123".to_string()),
        "\\PC{0,10}",
        "\\PC{0,10}",
        "[ a-zA-Z']{0,16}",
        any::<String>(),
    ];
    prop::collection::vec(pieces, 0..10).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn any_text_tokenizes_as_the_reference_does(text in any_text()) {
        static FILES: std::sync::LazyLock<(tempfile::TempDir, Vec<(Tokenizer, tokenizers::Tokenizer)>)> =
            std::sync::LazyLock::new(|| {
                let dir = tempfile::tempdir().unwrap();
                let pairs = tokenizer_files(dir.path())
                    .iter()
                    .map(|f| (Tokenizer::from_file(f).unwrap(), tokenizers::Tokenizer::from_file(f).unwrap()))
                    .collect();
                (dir, pairs)
            });
        for (ours, reference) in &FILES.1 {
            prop_assert_eq!(ours.encode(&text).unwrap(), reference_ids(reference, &text));
        }
    }
}
