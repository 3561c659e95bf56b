//! Byte-level BPE as a Hugging Face `tokenizer.json` describes it, for the shape Qwen's
//! tokenizers take: added tokens split out first, NFC, a `Split` regex (isolated matches), the
//! GPT-2 byte-to-character map, then BPE merges lowest rank first. Anything else in the file is
//! refused by name rather than tokenized differently from the reference.

use std::collections::HashMap;
use std::path::Path;

use fancy_regex::Regex;
use serde::Deserialize;
use serde_json::Value;
use unicode_normalization_alignments::UnicodeNormalization;

use crate::error::{Error, Result};

/// GPT-2's pre-tokenizer pattern, used when `ByteLevel` splits on its own (`use_regex: true`).
const GPT2_PATTERN: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    added_tokens: Vec<AddedToken>,
    normalizer: Option<Value>,
    pre_tokenizer: Option<Value>,
    post_processor: Option<Value>,
    model: Model,
}

#[derive(Deserialize)]
struct AddedToken {
    id: u32,
    content: String,
    #[serde(default)]
    single_word: bool,
    #[serde(default)]
    lstrip: bool,
    #[serde(default)]
    rstrip: bool,
    #[serde(default)]
    normalized: bool,
}

#[derive(Deserialize)]
struct Model {
    #[serde(rename = "type")]
    kind: Option<String>,
    dropout: Option<f64>,
    continuing_subword_prefix: Option<String>,
    end_of_word_suffix: Option<String>,
    #[serde(default)]
    byte_fallback: bool,
    #[serde(default)]
    ignore_merges: bool,
    vocab: HashMap<String, u32>,
    merges: Vec<Merge>,
}

/// Merges are saved as `"a b"` by older writers and as `["a", "b"]` by newer ones.
#[derive(Deserialize)]
#[serde(untagged)]
enum Merge {
    Joined(String),
    Pair([String; 2]),
}

/// A tokenizer loaded from `tokenizer.json`.
pub struct Tokenizer {
    /// Added tokens matched on the raw text, then those matched after normalizing.
    raw_added: Vec<(String, u32)>,
    normalized_added: Vec<(String, u32)>,
    nfc: bool,
    split: Regex,
    vocab: HashMap<String, u32>,
    /// The id of each byte's character in GPT-2's byte-to-character map.
    byte_ids: [u32; 256],
    /// `(left, right)` -> `(rank, merged id)`.
    merges: HashMap<(u32, u32), (u32, u32)>,
    ignore_merges: bool,
}

impl Tokenizer {
    pub fn from_file(path: &Path) -> Result<Tokenizer> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Tokenizer::from_json(&text).map_err(|reason| Error::BadJson { path: path.to_path_buf(), reason })
    }

    pub fn from_json(text: &str) -> std::result::Result<Tokenizer, String> {
        let file: File = serde_json::from_str(text).map_err(|e| format!("not a tokenizer file: {e}"))?;
        let nfc = parse_normalizer(file.normalizer.as_ref())?;
        let split = parse_pre_tokenizer(file.pre_tokenizer.as_ref())?;
        match file.post_processor.as_ref() {
            None | Some(Value::Null) => {}
            Some(v) if kind(v) == Some("ByteLevel") => {}
            Some(v) => return Err(format!("unsupported post-processor {}", kind(v).unwrap_or("?"))),
        }
        let model = file.model;
        if model.kind.as_deref().is_some_and(|k| k != "BPE") {
            return Err(format!("unsupported model type {}; only BPE is", model.kind.unwrap_or_default()));
        }
        if model.dropout.is_some_and(|p| p > 0.0) {
            return Err("BPE dropout is not supported".into());
        }
        if model.continuing_subword_prefix.is_some() || model.end_of_word_suffix.is_some() || model.byte_fallback {
            return Err("BPE with a subword prefix, word suffix or byte fallback is not supported".into());
        }
        let mut byte_ids = [0u32; 256];
        for (byte, ch) in byte_chars().iter().enumerate() {
            byte_ids[byte] = *model
                .vocab
                .get(ch.to_string().as_str())
                .ok_or_else(|| format!("the vocabulary lacks byte {byte:#04x} ({ch:?})"))?;
        }
        let mut merges = HashMap::with_capacity(model.merges.len());
        for (rank, merge) in model.merges.iter().enumerate() {
            let (left, right) = match merge {
                Merge::Joined(s) => s.split_once(' ').ok_or_else(|| format!("merge {rank} {s:?} is not two tokens"))?,
                Merge::Pair([a, b]) => (a.as_str(), b.as_str()),
            };
            let id = |token: &str| {
                model
                    .vocab
                    .get(token)
                    .copied()
                    .ok_or_else(|| format!("merge {rank} names {token:?}, not in the vocabulary"))
            };
            let merged = format!("{left}{right}");
            merges.entry((id(left)?, id(right)?)).or_insert((rank as u32, id(&merged)?));
        }
        let mut raw_added = Vec::new();
        let mut normalized_added = Vec::new();
        for token in file.added_tokens {
            if token.single_word || token.lstrip || token.rstrip {
                return Err(format!(
                    "added token {:?} uses single_word/lstrip/rstrip, which is not supported",
                    token.content
                ));
            }
            if token.content.is_empty() {
                continue;
            }
            if token.normalized {
                let content = if nfc { nfc_of(&token.content) } else { token.content };
                normalized_added.push((content, token.id));
            } else {
                raw_added.push((token.content, token.id));
            }
        }
        Ok(Tokenizer {
            raw_added,
            normalized_added,
            nfc,
            split,
            vocab: model.vocab,
            byte_ids,
            merges,
            ignore_merges: model.ignore_merges,
        })
    }

    /// The ids of `text`, special tokens written in it included, nothing added around it.
    pub fn encode(&self, text: &str) -> std::result::Result<Vec<u32>, String> {
        let mut ids = Vec::new();
        for raw in split_added(text, &self.raw_added) {
            let piece = match raw {
                Piece::Added(id) => {
                    ids.push(id);
                    continue;
                }
                Piece::Text(piece) => piece,
            };
            let normalized: String = if self.nfc { nfc_of(piece) } else { piece.to_string() };
            for part in split_added(&normalized, &self.normalized_added) {
                match part {
                    Piece::Added(id) => ids.push(id),
                    Piece::Text(part) => self.encode_plain(part, &mut ids)?,
                }
            }
        }
        Ok(ids)
    }

    fn encode_plain(&self, text: &str, ids: &mut Vec<u32>) -> std::result::Result<(), String> {
        let mut start = 0;
        for found in self.split.find_iter(text) {
            let found = found.map_err(|e| format!("splitting the text failed: {e}"))?;
            if found.start() > start {
                self.encode_word(&text[start..found.start()], ids);
            }
            if !found.as_str().is_empty() {
                self.encode_word(found.as_str(), ids);
            }
            start = found.end();
        }
        if start < text.len() {
            self.encode_word(&text[start..], ids);
        }
        Ok(())
    }

    fn encode_word(&self, word: &str, ids: &mut Vec<u32>) {
        if self.ignore_merges {
            let mapped: String = word.bytes().map(|b| byte_chars()[b as usize]).collect();
            if let Some(&id) = self.vocab.get(&mapped) {
                ids.push(id);
                return;
            }
        }
        let mut symbols: Vec<u32> = word.bytes().map(|b| self.byte_ids[b as usize]).collect();
        // The lowest-ranked adjacent pair merges first, the leftmost among equals, one at a time.
        loop {
            let best = symbols
                .windows(2)
                .enumerate()
                .filter_map(|(at, pair)| self.merges.get(&(pair[0], pair[1])).map(|&(rank, id)| (rank, at, id)))
                .min();
            let Some((_, at, id)) = best else { break };
            symbols[at] = id;
            symbols.remove(at + 1);
        }
        ids.extend(symbols);
    }
}

enum Piece<'a> {
    Text(&'a str),
    Added(u32),
}

/// Splits `text` around the added tokens in it, the leftmost match first and the longest there.
fn split_added<'a>(text: &'a str, added: &[(String, u32)]) -> Vec<Piece<'a>> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut at = 0;
    while at < text.len() {
        let rest = &text[at..];
        let longest =
            added.iter().filter(|(content, _)| rest.starts_with(content.as_str())).max_by_key(|(c, _)| c.len());
        match longest {
            Some((content, id)) => {
                if at > start {
                    pieces.push(Piece::Text(&text[start..at]));
                }
                pieces.push(Piece::Added(*id));
                at += content.len();
                start = at;
            }
            None => at += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    if start < text.len() {
        pieces.push(Piece::Text(&text[start..]));
    }
    pieces
}

fn kind(value: &Value) -> Option<&str> {
    value.get("type").and_then(Value::as_str)
}

/// `text` in NFC as Hugging Face's tokenizers makes it: its normalizer's Unicode 9.0 tables, so a
/// character assigned since (with no combining class there) is left where it is, as there.
fn nfc_of(text: &str) -> String {
    text.nfc().map(|(c, _)| c).collect()
}

/// Whether the text is NFC-normalized; other normalizers are refused.
fn parse_normalizer(normalizer: Option<&Value>) -> std::result::Result<bool, String> {
    let Some(normalizer) = normalizer.filter(|v| !v.is_null()) else { return Ok(false) };
    let steps: Vec<&Value> = match kind(normalizer) {
        Some("Sequence") => {
            normalizer.get("normalizers").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default()
        }
        _ => vec![normalizer],
    };
    let mut nfc = false;
    for step in steps {
        match kind(step) {
            Some("NFC") => nfc = true,
            other => return Err(format!("unsupported normalizer {}", other.unwrap_or("?"))),
        }
    }
    Ok(nfc)
}

/// The regex whose matches (and the gaps between them) are the words BPE sees.
fn parse_pre_tokenizer(pre: Option<&Value>) -> std::result::Result<Regex, String> {
    let pre = pre.filter(|v| !v.is_null()).ok_or("a byte-level pre-tokenizer is required")?;
    let steps: Vec<&Value> = match kind(pre) {
        Some("Sequence") => {
            pre.get("pretokenizers").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default()
        }
        _ => vec![pre],
    };
    let mut pattern = None;
    let mut byte_level = false;
    for step in steps {
        match kind(step) {
            Some("Split") if pattern.is_none() && !byte_level => {
                let behavior = step.get("behavior").and_then(Value::as_str);
                let invert = step.get("invert").and_then(Value::as_bool).unwrap_or(false);
                if behavior != Some("Isolated") || invert {
                    return Err(format!("unsupported Split behavior {behavior:?} (invert {invert}); only Isolated is"));
                }
                let p = step.get("pattern").ok_or("Split has no pattern")?;
                pattern =
                    Some(match (p.get("Regex").and_then(Value::as_str), p.get("String").and_then(Value::as_str)) {
                        (Some(regex), _) => regex.to_string(),
                        (None, Some(literal)) => fancy_regex::escape(literal).into_owned(),
                        _ => return Err("Split's pattern is neither Regex nor String".into()),
                    });
            }
            Some("ByteLevel") if !byte_level => {
                if step.get("add_prefix_space").and_then(Value::as_bool).unwrap_or(false) {
                    return Err("ByteLevel with add_prefix_space is not supported".into());
                }
                if step.get("use_regex").and_then(Value::as_bool).unwrap_or(true) {
                    if pattern.is_some() {
                        return Err("a Split followed by a splitting ByteLevel is not supported".into());
                    }
                    pattern = Some(GPT2_PATTERN.to_string());
                }
                byte_level = true;
            }
            other => return Err(format!("unsupported pre-tokenizer step {}", other.unwrap_or("?"))),
        }
    }
    if !byte_level {
        return Err("a byte-level pre-tokenizer is required".into());
    }
    let pattern = pattern.ok_or("the pre-tokenizer does not split the text")?;
    Regex::new(&pattern).map_err(|e| format!("the pre-tokenizer's pattern does not compile: {e}"))
}

/// GPT-2's map from bytes to printable characters: printable Latin-1 maps to itself, the rest
/// to U+0100 onwards in byte order.
fn byte_chars() -> &'static [char; 256] {
    static CHARS: std::sync::LazyLock<[char; 256]> = std::sync::LazyLock::new(|| {
        let mut chars = ['\0'; 256];
        let mut next = 0x100u32;
        for (byte, ch) in chars.iter_mut().enumerate() {
            if matches!(byte, 0x21..=0x7e | 0xa1..=0xac | 0xae..=0xff) {
                *ch = char::from(byte as u8);
            } else {
                *ch = char::from_u32(next).expect("below U+0200");
                next += 1;
            }
        }
        chars
    });
    &CHARS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_is_gpt2s() {
        let chars = byte_chars();
        assert_eq!(chars[b' ' as usize], 'Ġ');
        assert_eq!(chars[b'\n' as usize], 'Ċ');
        assert_eq!(chars[b'A' as usize], 'A');
        assert_eq!(chars[0xad], 'Ń');
        let distinct: std::collections::HashSet<_> = chars.iter().collect();
        assert_eq!(distinct.len(), 256);
    }

    #[test]
    fn added_tokens_split_leftmost_longest() {
        let added = vec![("<a>".to_string(), 1), ("<a><b>".to_string(), 2), ("<b>".to_string(), 3)];
        let ids: Vec<String> = split_added("x<a><b>y<b>", &added)
            .into_iter()
            .map(|p| match p {
                Piece::Text(t) => t.to_string(),
                Piece::Added(id) => format!("#{id}"),
            })
            .collect();
        assert_eq!(ids, ["x", "#2", "y", "#3"]);
    }
}
