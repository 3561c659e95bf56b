//! Songloom's inference engine for MiniMax-Music3: tensors, compute backends, checkpoint loading and
//! the model's stages. No UI and no audio device live here.

pub mod config;
pub mod cpu;
pub mod cuda;
pub mod device;
pub mod dtype;
pub mod error;
pub mod fp8;
pub mod hash;
pub mod lora;
pub mod model_dir;
pub mod models;
pub mod partial;
pub mod pipeline;
pub mod plan;
pub mod precision;
pub mod prompt;
pub mod quant;
pub mod quantized_copy;
mod shapes;
pub mod stage;
pub mod tensor;
pub mod tokenizer;
pub mod weights;
pub mod wgpu_backend;

pub use device::{AttentionShape, Backend, Device, DeviceChoice, DeviceKind, DeviceOptions, Op, Rotary};
pub use error::{Error, Result};
pub use precision::Precision;
pub use tensor::{CpuStorage, DType, Storage, Tensor};
