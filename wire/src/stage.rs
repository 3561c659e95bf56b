//! The stages a song goes through, as the engine reports them, the window shows them and the wire
//! writes them (`{"name": "dit", "window": 0, "windows": 3}`).

use serde::{Deserialize, Serialize};

/// A stage of making a song, in the order they start; each is reported with `done` of `total`.
/// The name on the wire is the variant's in snake case (`load`, `tokenize`, `ar_frames`, `dit`,
/// `vocoder`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum Stage {
    /// Loading a half of the model: `done` of `total` components.
    Load {
        half: Half,
    },
    Tokenize,
    /// The language model and the depth decoder making frames of codes.
    ArFrames,
    /// The DiT denoising one window of latents: `done` of `total` flow-matching steps.
    Dit {
        window: usize,
        windows: usize,
    },
    /// The vocoder turning one window into sound.
    Vocoder {
        window: usize,
        windows: usize,
    },
}

/// The model's halves, as the plan loads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Half {
    /// The language model and the depth decoder.
    Ar,
    /// The condition encoder, the DiT and the vocoder.
    Acoustic,
}

impl Half {
    /// The half in words, for a person.
    pub fn name(self) -> &'static str {
        match self {
            Half::Ar => "the AR half",
            Half::Acoustic => "the acoustic half",
        }
    }
}
