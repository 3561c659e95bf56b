//! Songloom's inference engine for MiniMax-Music3: tensors, compute backends, checkpoint loading and
//! the model's stages. No UI and no audio device live here.

pub mod cpu;
pub mod device;
pub mod error;
pub mod weights;
pub mod tensor;

pub use device::{AttentionShape, Backend, Device, Rotary};
pub use error::{Error, Result};
pub use tensor::{CpuStorage, DType, Storage, Tensor};
