//! The edits of a song already made (`songloom edit`, `POST /api/songs/ID/edits`, the window's
//! edit buttons), and the record a version keeps of the edit that made it.

use serde::{Deserialize, Serialize};

/// One edit; times are seconds from the song's start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Edit {
    /// The song goes on for `seconds` more, or (without them) until the model ends it.
    Extend {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seconds: Option<f64>,
    },
    /// Back to `at_s` and another path from there: the codes before it are kept (from the window
    /// boundary at or before it), the rest drawn again, with a new description if given.
    From {
        at_s: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// The lyrics from line `line` (counting from 0, every line of the lyrics text) replaced by
    /// `lyrics`, and the song sung again from where that line starts: `at_s`, or an estimate from
    /// the line's place in the lyrics.
    Resing {
        line: usize,
        lyrics: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_s: Option<f64>,
    },
    /// The same codes rendered again with a new seed between `from_s` and `to_s`; the audio
    /// outside stays as it was.
    Rerender { from_s: f64, to_s: f64 },
}

impl Edit {
    /// The edit's name as the CLI and the API spell it.
    pub fn name(&self) -> &'static str {
        match self {
            Edit::Extend { .. } => "extend",
            Edit::From { .. } => "from",
            Edit::Resing { .. } => "resing",
            Edit::Rerender { .. } => "rerender",
        }
    }

    /// Whether the edit keeps the song's seed by default (an extension continues the song as one
    /// run would have; every other edit is there to draw something new).
    pub fn keeps_seed(&self) -> bool {
        matches!(self, Edit::Extend { .. })
    }
}

/// `POST /api/songs/ID/edits`: an edit and, optionally, its seed (the song's own for an
/// extension, a new one for the others, when left out).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EditRequest {
    #[serde(flatten)]
    pub edit: Edit,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// What a version of a song records of how it was made from another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EditOf {
    /// The library id of the song it was made from.
    pub parent: i64,
    pub edit: Edit,
    /// Where the new audio begins and ends, in seconds: outside it the audio is the parent's.
    pub changed_from_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_to_s: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_read_as_the_api_spells_them() {
        let body: EditRequest = serde_json::from_str(r#"{"kind": "extend", "seconds": 4, "seed": 9}"#).unwrap();
        assert_eq!(body, EditRequest { edit: Edit::Extend { seconds: Some(4.0) }, seed: Some(9) });
        let body: EditRequest = serde_json::from_str(r#"{"kind": "rerender", "from_s": 1.5, "to_s": 3}"#).unwrap();
        assert_eq!(body.edit, Edit::Rerender { from_s: 1.5, to_s: 3.0 });
        let err = serde_json::from_str::<EditRequest>(r#"{"kind": "remix"}"#).unwrap_err().to_string();
        assert!(err.contains("remix"), "{err}");
    }
}
