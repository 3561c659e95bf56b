//! Help for writing lyrics the model reads as intended: the structure tags, inserting one on its
//! own line, and a warning for text after a leading tag, which the model's input contract drops
//! (diffusers `_normalize_lyrics` keeps only the tags of such a line).

use songloom_wire::notice::INSTRUMENTAL_LYRICS;

/// The structure tags the compose panel offers.
pub const TAGS: [&str; 7] =
    ["[intro]", "[verse]", "[pre-chorus]", "[chorus]", "[bridge]", "[outro]", INSTRUMENTAL_LYRICS];

/// A line whose text after its leading tags will be dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedText {
    /// 1-based line number.
    pub line: usize,
    pub tags: String,
    pub dropped: String,
}

impl DroppedText {
    /// The warning, as the window and the CLI say it.
    pub fn message(&self) -> String {
        format!(
            "Line {}: \"{}\" after {} is dropped by the model; put it on its own line.",
            self.line, self.dropped, self.tags
        )
    }
}

/// The leading `[tag]`s of a line (after spaces and tabs) and the byte index where they end, or
/// `None` when the line does not start with a tag. Mirrors `^[ \t]*((?:\[[^\]]+\][ \t]*)+)`.
fn leading_tags(line: &str) -> Option<usize> {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() && (bytes[i] == b' ' || bytes[i] == b'\t') {
        i += 1;
    }
    let mut end = None;
    while i < bytes.len() && bytes[i] == b'[' {
        // An unclosed `[` or `[]` is no tag: the tags (if any) end before it.
        let Some(close) = line[i + 1..].find(']').filter(|&close| close > 0) else { break };
        i += close + 2;
        while i < bytes.len() && (bytes[i] == b' ' || bytes[i] == b'\t') {
            i += 1;
        }
        end = Some(i);
    }
    end
}

/// Every line with text after its leading tags.
pub fn dropped_text(lyrics: &str) -> Vec<DroppedText> {
    lyrics
        .split('\n')
        .enumerate()
        .filter_map(|(n, line)| {
            let end = leading_tags(line)?;
            let rest = line[end..].trim();
            (!rest.is_empty()).then(|| DroppedText {
                line: n + 1,
                tags: line[..end].trim().to_string(),
                dropped: rest.to_string(),
            })
        })
        .collect()
}

/// Inserts `tag` on a line of its own at byte offset `cursor` (clamped to a char boundary) and
/// returns the new text and the cursor after the inserted line.
pub fn insert_tag(lyrics: &str, cursor: usize, tag: &str) -> (String, usize) {
    let mut at = cursor.min(lyrics.len());
    while !lyrics.is_char_boundary(at) {
        at -= 1;
    }
    let (before, after) = lyrics.split_at(at);
    let lead = if before.is_empty() || before.ends_with('\n') { "" } else { "\n" };
    let tail = if after.starts_with('\n') { "" } else { "\n" };
    let text = format!("{before}{lead}{tag}{tail}{after}");
    let cursor = (before.len() + lead.len() + tag.len() + 1).min(text.len());
    (text, cursor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_after_a_leading_tag_is_flagged() {
        let found = dropped_text("[verse]\nla la\n[Chorus] sing this\n  [a][b]  x y\nline [mid] tag\n[]not a tag");
        assert_eq!(
            found,
            vec![
                DroppedText { line: 3, tags: "[Chorus]".into(), dropped: "sing this".into() },
                DroppedText { line: 4, tags: "[a][b]".into(), dropped: "x y".into() },
            ]
        );
        assert!(dropped_text("[verse]\n[chorus]  \nla").is_empty());
        // Text after the tags that is not a tag itself is dropped, an unclosed bracket included.
        assert_eq!(dropped_text("[verse][")[0].dropped, "[");
    }

    #[test]
    fn tags_go_on_their_own_line() {
        assert_eq!(insert_tag("", 0, "[verse]"), ("[verse]\n".to_string(), 8));
        let (text, cursor) = insert_tag("la la", 5, "[chorus]");
        assert_eq!(text, "la la\n[chorus]\n");
        assert_eq!(&text[cursor..], "");
        let (text, _) = insert_tag("one\ntwo", 4, "[bridge]");
        assert_eq!(text, "one\n[bridge]\ntwo");
    }
}
