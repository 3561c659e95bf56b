//! The flags that say which engine to open and how much of the device it may use, shared by
//! `generate` and `serve`.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use songloom_engine::pipeline::MemoryRequest;
use songloom_engine::{Device, DeviceChoice, DeviceOptions, Precision};

#[derive(Args)]
pub struct EngineArgs {
    /// auto, cpu, cuda or wgpu (auto: CUDA where it works, else the CPU).
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// The DiT and vocoder products on a GPU: `reference` (exact f32, as diffusers), `tf32` or
    /// `bf16` (tensor cores, faster; distances to the reference in docs/BENCHMARKS.md).
    #[arg(long, default_value = "reference")]
    pub precision: String,
    /// The language model's and depth decoder's weights: bf16, 8bit, 4bit (a 4-bit LM, the depth
    /// decoder 8-bit where it fits), 4bit-all or auto (the most exact that fits the budget).
    #[arg(long, default_value = "auto")]
    pub weights: String,
    /// The GPU memory the engine may use, in GB (default: what the device has free). The plan
    /// picks the weights and whether both halves fit at once; on the CPU nothing enforces it.
    #[arg(long)]
    pub max_memory: Option<f64>,
    /// streamed (both halves resident), phased (the AR half, then the acoustic half: less memory,
    /// first audio later) or auto (streamed where it fits).
    #[arg(long, default_value = "auto")]
    pub mode: String,
    /// A MiniMax-Music3 model directory in the diffusers layout; the embedded model (Songloom Mini) without it.
    #[arg(long)]
    pub model: Option<PathBuf>,
}

impl EngineArgs {
    /// The device choice, the precision and the memory request, each checked with a message that
    /// says what is expected.
    pub fn parse(&self) -> Result<(DeviceChoice, Precision, MemoryRequest)> {
        let (choice, precision) = (DeviceChoice::parse(&self.device)?, Precision::parse(&self.precision)?);
        Ok((choice, precision, crate::generate::memory_request(&self.weights, self.max_memory, &self.mode)?))
    }

    pub fn open_device(choice: DeviceChoice, precision: Precision) -> Result<Device> {
        Ok(Device::open(choice, DeviceOptions { precision, ..DeviceOptions::default() })?)
    }

    /// The model directory: the one named, or the embedded default unpacked.
    pub fn model_dir(&self) -> Result<PathBuf> {
        match &self.model {
            Some(dir) => Ok(dir.clone()),
            None => crate::default_model::path(),
        }
    }

    /// The model as a recipe names it: its directory, or empty for the embedded one.
    pub fn recipe_model(&self) -> String {
        self.model.as_ref().map(|m| m.display().to_string()).unwrap_or_default()
    }
}
