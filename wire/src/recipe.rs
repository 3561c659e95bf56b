//! The recipe of a song: what the window edits, the library keeps, a WAV's comment carries and the
//! API lists.

use serde::{Deserialize, Serialize};

/// Everything that decides a song: with the same recipe, model and engine version the same song
/// comes out again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Recipe {
    pub description: String,
    pub lyrics: String,
    pub duration_s: f64,
    pub seed: u64,
    pub steps: usize,
    /// The DiT's classifier-free guidance scale.
    #[serde(serialize_with = "crate::short_f32")]
    pub guidance: f32,
    /// `auto`, `cpu`, `cuda` or `wgpu` (the engine's device names).
    pub device: String,
    /// `reference`, `tf32`, `bf16` or `fp8` (the engine's precision policies).
    pub precision: String,
    /// The model directory; empty for the embedded model.
    pub model: String,
    /// The AR half's weights: `auto`, `bf16`, `8bit`, `4bit` or `4bit-all`.
    pub weights: String,
    /// The memory budget in GB; `None` for what the device has free.
    pub max_memory_gb: Option<f64>,
    /// The LoRA adapters merged into the weights, in the order given; none by default (and in a
    /// recipe written before adapters existed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub adapters: Vec<AdapterRecipe>,
    /// The edit that made this song from another; none for a song made from scratch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edit: Option<Box<crate::EditOf>>,
}

/// One LoRA adapter of a recipe: where it was, what it was (its checksum) and how strongly it
/// was applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdapterRecipe {
    /// The file or folder as given.
    pub path: String,
    /// Its file or folder name.
    pub name: String,
    /// SHA-256 of the adapter's file (a PEFT folder: `adapter_config.json` then
    /// `adapter_model.safetensors`), in hex.
    pub sha256: String,
    #[serde(serialize_with = "crate::short_f32")]
    pub scale: f32,
}

/// MiniMax-Music3's own DiT guidance scale.
pub const DEFAULT_GUIDANCE: f32 = 1.7;

impl Default for Recipe {
    fn default() -> Self {
        Recipe {
            description: String::new(),
            lyrics: String::new(),
            duration_s: 30.0,
            seed: 0,
            steps: 30,
            guidance: DEFAULT_GUIDANCE,
            device: "auto".into(),
            precision: "reference".into(),
            model: String::new(),
            weights: "auto".into(),
            max_memory_gb: None,
            adapters: Vec::new(),
            edit: None,
        }
    }
}
