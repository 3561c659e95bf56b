//! The engine's one error type. Every failure a user can cause (a bad checkpoint, a bad tensor, an
//! unsupported op) is a variant that names the file, tensor or op involved.

use std::path::PathBuf;

use crate::device::kind::DeviceKind;
use crate::device::op::Op;
use crate::dtype::DType;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cause is part of the message, not a `source`: an error chain printed in full would
    /// otherwise say it twice.
    #[error("{path}: {cause}")]
    Io { path: PathBuf, cause: std::io::Error },
    #[error("model component directory {0} is missing")]
    MissingComponent(PathBuf),
    #[error("{path}: not a valid safetensors file ({reason})")]
    CorruptFile { path: PathBuf, reason: String },
    #[error("{path}: invalid JSON ({reason})")]
    BadJson { path: PathBuf, reason: String },
    #[error("{path}: `{field}` {detail}")]
    BadConfig { path: PathBuf, field: &'static str, detail: String },
    #[error("tensor `{name}` not found in {location}")]
    MissingTensor { name: String, location: String },
    #[error("tensor `{name}` in {location}: expected shape {expected:?}, found {found:?}")]
    WrongShape { name: String, location: String, expected: Vec<usize>, found: Vec<usize> },
    #[error("tensor `{name}` in {location}: expected dtype {expected}, found {found}")]
    WrongDType { name: String, location: String, expected: String, found: String },
    #[error("{op}: {detail}")]
    Shape { op: &'static str, detail: String },
    #[error("{op} is not supported for {dtype} on the {backend} backend")]
    Unsupported { op: Op, dtype: DType, backend: DeviceKind },
    #[error("{op} on the {backend} backend: {detail}")]
    BackendLimit { op: Op, backend: DeviceKind, detail: String },
    #[error("{op}: a tensor on the {found} backend was given to the {backend} backend")]
    WrongDevice { op: Op, backend: DeviceKind, found: DeviceKind },
    /// A LoRA adapter that cannot be read or does not fit the model: its file or folder, and the
    /// key or setting at fault.
    #[error("LoRA adapter {path}: {detail}")]
    Adapter { path: PathBuf, detail: String },
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Gpu(String),
    #[error(
        "the {stage} made {count} NaN or infinite values (of {total}) in window {window}: the model's weights \
         hold such values or the precision overflowed; nothing was written"
    )]
    NonFinite { stage: &'static str, window: usize, count: usize, total: usize },
    #[error(
        "out of memory: {} MB more would pass the {:.1} GB budget with {:.2} GB in use; \
         raise --max-memory, or take smaller weights or a shorter song",
        .wanted / 1_000_000, *.budget as f64 / 1e9, *.in_use as f64 / 1e9
    )]
    OverBudget { wanted: u64, in_use: u64, budget: u64 },
    #[error("cancelled")]
    Cancelled,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn shape(op: &'static str, detail: impl Into<String>) -> Self {
        Error::Shape { op, detail: detail.into() }
    }

    pub(crate) fn unsupported(op: Op, dtype: DType, backend: DeviceKind) -> Self {
        Error::Unsupported { op, dtype, backend }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, cause: std::io::Error) -> Self {
        Error::Io { path: path.into(), cause }
    }
}
