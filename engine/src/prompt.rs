//! Prompt assembly, byte for byte as the reference builds it (diffusers 0.42.1
//! `modular_pipelines/minimax_music3/encoders.py`: `_clean_caption`, `_normalize_lyrics`, the
//! special-token template), then tokenization with the checkpoint's `tokenizer/tokenizer.json`.
//!
//! The reference uses Python's `re` on `str`: `\s` there is `str.isspace()`, which also holds
//! U+001C..U+001F, and `splitlines()` breaks on more than `\n`. Both are spelled out below.

use std::path::Path;
use std::sync::LazyLock;

use fancy_regex::{Captures, Regex};

use crate::config::PipelineConstants;
use crate::error::{Error, Result};
use crate::tokenizer::Tokenizer;

/// Python's `\s` for `str` patterns.
const PY_SPACE: &str = r"[\s\x1c-\x1f]";

fn re(pattern: &str) -> Regex {
    Regex::new(&pattern.replace("\\s", PY_SPACE)).expect("valid pattern")
}

static SPECIAL_TAG: LazyLock<Regex> = LazyLock::new(|| re(r"<\|([^|]*)\|>"));
static HEADING: LazyLock<Regex> = LazyLock::new(|| re(r"^\s{0,3}#{1,6}\s+"));
static BULLET: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*[*+-]\s+"));
static STAR_BULLET: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*\*\s+"));
static BOLD: LazyLock<Regex> = LazyLock::new(|| re(r"\*\*([^*]+)\*\*"));
static ITALIC: LazyLock<Regex> = LazyLock::new(|| re(r"(?<!\*)\*([^*\n]+)\*(?!\*)"));
static RULE: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s*[-*_]{3,}\s*$"));
static BLANK_LINES: LazyLock<Regex> = LazyLock::new(|| re(r"\n{2,}"));
static LEADING_TAGS: LazyLock<Regex> = LazyLock::new(|| re(r"^[ \t]*((?:\[[^\]]+\][ \t]*)+)"));
static TAG: LazyLock<Regex> = LazyLock::new(|| re(r"\[([^\]]+)\]"));

fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.splitlines()` (without keepends).
fn py_splitlines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let breaks = matches!(
            c,
            '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}'
        );
        if breaks {
            lines.push(&text[start..i]);
            let mut end = i + c.len_utf8();
            if c == '\r' && chars.peek().is_some_and(|&(_, n)| n == '\n') {
                chars.next();
                end += 1;
            }
            start = end;
        }
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

fn replace_all(regex: &Regex, text: &str, rep: impl Fn(&Captures) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for caps in regex.captures_iter(text) {
        let caps = caps.expect("regex matching does not fail on these patterns");
        let m = caps.get(0).expect("group 0");
        out.push_str(&text[last..m.start()]);
        out.push_str(&rep(&caps));
        last = m.end();
    }
    out.push_str(&text[last..]);
    out
}

fn group1(caps: &Captures) -> String {
    caps.get(1).map_or(String::new(), |g| g.as_str().to_string())
}

/// The reference's `_clean_caption`.
pub fn clean_caption(caption: &str) -> String {
    let text = replace_all(&SPECIAL_TAG, caption, |caps| {
        let inner = group1(caps);
        let inner = inner.trim_matches(is_py_space);
        // `split(None, 1)`: the first word, then the rest with its leading whitespace removed.
        match inner.find(is_py_space) {
            Some(at) => {
                let rest = inner[at..].trim_start_matches(is_py_space);
                if rest.is_empty() { inner[..at].to_string() } else { format!("{} is {rest}", &inner[..at]) }
            }
            None => inner.to_string(),
        }
    });
    let lines: Vec<String> = py_splitlines(&text)
        .into_iter()
        .map(|line| {
            let mut line = replace_all(&HEADING, line, |_| String::new());
            line = replace_all(&BULLET, &line, |_| String::new());
            line = replace_all(&STAR_BULLET, &line, |_| String::new());
            while line.contains("**") {
                let updated = replace_all(&BOLD, &line, group1);
                if updated == line {
                    break;
                }
                line = updated;
            }
            line = replace_all(&ITALIC, &line, group1);
            line.trim_end_matches(is_py_space).to_string()
        })
        .collect();
    let text = replace_all(&RULE, &lines.join("\n"), |_| String::new());
    let text = text.replace("• ", "").replace("    ", "");
    replace_all(&BLANK_LINES, &text, |_| "\n".to_string())
}

/// The reference's `_normalize_lyrics`. Tags are lower-cased like Python's `str.lower()`, which
/// applies Unicode's final-sigma rule as Rust's `to_lowercase` does.
pub fn normalize_lyrics(lyrics: &str) -> String {
    let lines: Vec<String> = lyrics
        .split('\n')
        .map(|line| match LEADING_TAGS.captures(line).ok().flatten() {
            Some(caps) => group1(&caps).trim_matches(is_py_space).to_string(),
            None => line.to_string(),
        })
        .collect();
    let text = lines.join("\n").replace("] ", "]\n").replace(" [", "\n[").replace(" ^ ", "\n");
    let text = replace_all(&TAG, &text, |caps| format!("[{}]", group1(caps).to_lowercase()));
    format!("[start]\n{text}")
}

/// The full prompt text the tokenizer sees: the description in the reference's caption slot, then
/// the lyrics.
pub fn assemble(description: &str, lyrics: &str) -> String {
    format!(
        "<|im_start|><|caption_start|>{}<|caption_end|><|lyrics_start|>{}<|lyrics_end|><|im_end|><|audio_start|>",
        clean_caption(description),
        normalize_lyrics(lyrics)
    )
}

/// The tokenized CFG pair: the prompt and its unconditional twin, equal in length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptIds {
    pub text: String,
    pub cond: Vec<u32>,
    pub uncond: Vec<u32>,
}

impl PromptIds {
    /// Both rows, conditional first: `[2, len]` flattened.
    pub fn pair(&self) -> Vec<u32> {
        self.cond.iter().chain(&self.uncond).copied().collect()
    }
}

pub struct PromptEncoder {
    tokenizer: Tokenizer,
    constants: PipelineConstants,
}

impl PromptEncoder {
    /// Loads `tokenizer.json` from a model's `tokenizer/` directory.
    pub fn new(tokenizer_dir: &Path, constants: &PipelineConstants) -> Result<Self> {
        let path = tokenizer_dir.join("tokenizer.json");
        if !path.is_file() {
            return Err(Error::io(&path, std::io::Error::new(std::io::ErrorKind::NotFound, "tokenizer file missing")));
        }
        let tokenizer = Tokenizer::from_file(&path)?;
        Ok(PromptEncoder { tokenizer, constants: constants.clone() })
    }

    /// Checks the inputs as the reference does, assembles and tokenizes them.
    pub fn encode(&self, description: &str, lyrics: &str) -> Result<PromptIds> {
        if description.trim_matches(is_py_space).is_empty() {
            return Err(Error::Invalid("the music description is empty".into()));
        }
        if lyrics.trim_matches(is_py_space).is_empty() {
            return Err(Error::Invalid("the lyrics are empty".into()));
        }
        let text = assemble(description, lyrics);
        let cond =
            self.tokenizer.encode(&text).map_err(|e| Error::Invalid(format!("tokenizing the prompt failed: {e}")))?;
        let max = self.constants.max_prompt_tokens;
        if cond.len() > max {
            return Err(Error::Invalid(format!(
                "the prompt is {} tokens long; the model takes at most {max} (shorten the description or lyrics)",
                cond.len()
            )));
        }
        if cond.len() < 3 {
            return Err(Error::Invalid("the tokenized prompt is too short".into()));
        }
        let mut uncond = cond.clone();
        let n = uncond.len();
        uncond[1..n - 2].fill(self.constants.audio_cfg_id);
        Ok(PromptIds { text, cond, uncond })
    }
}
