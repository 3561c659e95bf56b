//! The element types a tensor can hold. A leaf: it imports nothing of the engine, so the error
//! type and every layer can name a dtype.

use half::{bf16, f16};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    BF16,
    F16,
    /// 8-bit weights in groups with an f16 scale (`quant`).
    Q8,
    /// 4-bit weights in groups with an f16 scale and offset (`quant`).
    Q4,
}

impl DType {
    /// Whether this is one of the grouped formats of `quant`.
    pub fn is_quantized(self) -> bool {
        matches!(self, DType::Q8 | DType::Q4)
    }

    /// Rounds an f32 to the nearest value this dtype can hold (round to nearest even, as torch's
    /// `.to(dtype)` does). The quantized formats round a whole group at once
    /// ([`quant::round_trip`](crate::quant::round_trip)); a value alone passes unchanged.
    pub fn round(self, x: f32) -> f32 {
        match self {
            DType::F32 | DType::Q8 | DType::Q4 => x,
            DType::BF16 => bf16::from_f32(x).to_f32(),
            DType::F16 => f16::from_f32(x).to_f32(),
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DType::F32 => "f32",
            DType::BF16 => "bf16",
            DType::F16 => "f16",
            DType::Q8 => "q8",
            DType::Q4 => "q4",
        })
    }
}
