//! The messages between the interface and an engine. The interface sends [`Request`]s and
//! receives [`EngineEvent`]s; one job runs at a time and is cancelled by its id.

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
    /// `auto`, `cpu`, `cuda` or `wgpu`.
    pub device: String,
    /// `reference` or `tf32`.
    pub precision: String,
    /// The model directory; empty for the embedded test model.
    pub model: String,
}

impl Default for Recipe {
    fn default() -> Self {
        Recipe {
            description: String::new(),
            lyrics: String::new(),
            duration_s: 30.0,
            seed: 0,
            steps: 30,
            device: "auto".into(),
            precision: "reference".into(),
            model: String::new(),
        }
    }
}

pub type JobId = u64;

#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Generate { job: JobId, recipe: Recipe },
    Cancel { job: JobId },
}

/// The stages a job reports, in the order they start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Stage {
    Tokenize,
    ArFrames,
    Denoise { window: usize, windows: usize },
    Vocoder { window: usize, windows: usize },
}

/// Timings of a finished job, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    pub total_s: f64,
    pub time_to_first_audio_s: Option<f64>,
    pub ar_s: f64,
    pub acoustic_s: f64,
    pub frames: usize,
    pub windows: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EngineEvent {
    Stage {
        job: JobId,
        stage: Stage,
        done: usize,
        total: usize,
    },
    /// Interleaved stereo samples from stereo frame `first_sample` on; in order, never revised.
    Audio {
        job: JobId,
        first_sample: usize,
        samples: Vec<f32>,
        sample_rate: u32,
    },
    Finished {
        job: JobId,
        timings: Timings,
    },
    Failed {
        job: JobId,
        message: String,
    },
    Cancelled {
        job: JobId,
    },
}

impl EngineEvent {
    pub fn job(&self) -> JobId {
        match self {
            EngineEvent::Stage { job, .. }
            | EngineEvent::Audio { job, .. }
            | EngineEvent::Finished { job, .. }
            | EngineEvent::Failed { job, .. }
            | EngineEvent::Cancelled { job } => *job,
        }
    }
}

/// An engine the interface can drive: in process on the desktop, remote in a browser.
pub trait Engine {
    fn send(&self, request: Request);
    /// Events that arrived since the last call, oldest first; never blocks.
    fn poll(&self) -> Vec<EngineEvent>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recipe_survives_json_and_missing_fields_take_defaults() {
        let recipe = Recipe { description: "lo-fi".into(), lyrics: "[verse]\nla".into(), seed: 9, ..Recipe::default() };
        let text = serde_json::to_string(&recipe).unwrap();
        assert_eq!(serde_json::from_str::<Recipe>(&text).unwrap(), recipe);
        let partial: Recipe = serde_json::from_str(r#"{"description": "x"}"#).unwrap();
        assert_eq!(partial.steps, 30);
        assert_eq!(partial.device, "auto");
    }
}
