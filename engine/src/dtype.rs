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
    /// FP8 e4m3 with an f32 scale per row (`fp8`): the DiT's block matrices under
    /// `--precision fp8`, on CUDA GPUs with FP8 tensor cores only.
    F8E4M3,
}

impl DType {
    /// Whether this is one of the grouped formats of `quant`.
    pub fn is_quantized(self) -> bool {
        matches!(self, DType::Q8 | DType::Q4)
    }

    /// Whether a matrix in this format is packed from a float one when it loads (a grouped format,
    /// or FP8), rather than read as stored.
    pub fn is_packed(self) -> bool {
        self.is_quantized() || self == DType::F8E4M3
    }

    /// Rounds an f32 to the nearest value this dtype can hold (round to nearest even, as torch's
    /// `.to(dtype)` does). The quantized formats round a whole group at once
    /// ([`quant::round_trip`](crate::quant::round_trip)); a value alone passes unchanged.
    pub fn round(self, x: f32) -> f32 {
        match self {
            DType::F32 | DType::Q8 | DType::Q4 => x,
            // One value alone is its row, which its scale maps onto 448 exactly.
            DType::F8E4M3 => x,
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
            DType::F8E4M3 => "fp8",
        })
    }
}
