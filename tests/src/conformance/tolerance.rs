//! The one table of how close each (op, dtype) must come, against the naive loops (the CPU) or
//! against the CPU (every other backend, at the reference precision).

use songloom_engine::{DType, Op};

use super::judge::Tolerance;

/// Who says what an output must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judge {
    /// The naive loops of the case (they judge the CPU).
    Naive,
    /// The CPU backend on the same inputs (it judges every other backend).
    Cpu,
}

/// The tolerance of `op` with `dtype` under `judge`. Data movement and the sampling shortlist are
/// exact everywhere; arithmetic is within f32 rounding (orders of summation differ, and a GPU's
/// `expf`, `sinf` and `tanhf` are within 2 ulp) except where a backend rounds on purpose: a GPU's
/// products against bf16 weights with more than 8 rows round the activations to bf16 too (as
/// the reference's bf16 products see them), about 4e-3 relative a term; wgpu's against f16
/// weights with more than 8 rows, where the adapter has matrix units, round them to f16.
pub fn tolerance(op: Op, dtype: DType, judge: Judge) -> Tolerance {
    use Tolerance::{Close, CloseNanOrInf, Exact};
    match (op, dtype, judge) {
        (
            Op::Upload
            | Op::ToHost
            | Op::Cast
            | Op::ProductWeight
            | Op::Transpose
            | Op::SliceCols
            | Op::SliceRows
            | Op::CatRows
            | Op::WriteRows
            | Op::WriteKv
            | Op::Embedding
            | Op::ResampleNearest
            | Op::Candidates
            | Op::CandidatesEach
            | Op::DrawEach
            | Op::EmbeddingDrawn
            | Op::CountNonFinite,
            _,
            _,
        ) => Exact,
        // The CPU computes what its naive loops compute, in the same order.
        (Op::Add | Op::Scale | Op::FillUniform, _, Judge::Naive) => Exact,
        (Op::Add | Op::Scale, _, Judge::Cpu) => Exact,
        // A GPU may fuse `center + half_width * u` into one rounding: an f32 ulp, or a bf16 ulp
        // where that ulp straddles a bf16 rounding boundary.
        (Op::FillUniform, DType::BF16, Judge::Cpu) => Close(8e-3),
        (Op::FillUniform, _, Judge::Cpu) => Close(1e-6),
        (Op::Silu | Op::SiluMul | Op::Tanh, _, _) => Close(1e-6),
        // Measured worst on the H200: linear 1.7e-2, linear3 9.3e-3, linear_add 6.4e-3.
        (Op::Linear | Op::LinearAdd | Op::Linear3, DType::BF16, Judge::Cpu) => Close(3e-2),
        // wgpu's products on the matrix units (cooperative matrices, beyond 8 rows against f16
        // weights) round the activations to f16: 2^-11 relative a term, an eighth of bf16's
        // (measured worst on the H200: linear 3.4e-3, linear3 1.2e-3, linear_add 6.7e-4, the
        // GLU 4.6e-3, SwiGLU 7.9e-4); bf16-rounded activations are refused (tests/tests/conformance.rs).
        (Op::Linear | Op::LinearAdd | Op::Linear3, DType::F16, Judge::Cpu) => Close(1e-2),
        (Op::LinearGlu | Op::LinearSwiglu, DType::F16, Judge::Cpu) => Close(1.5e-2),
        // Quantized weights take a GPU's bf16 products beyond 8 rows, dequantized to bf16: the weight
        // is rounded to bf16 once more, beside the activations (measured worst on the H200
        // 3.07e-2). The CPU's decode products take up to 32 rows (a batch's), with the activations
        // rounded to int8, where a non-finite activation makes its row NaN; a GPU's dequantized sum
        // says inf there from 9 rows on. q4's decode kernels sum q * x and x apart and add the
        // offset's share after, so an infinite activation against a zero code is inf * 0: NaN where
        // the CPU's dequantized sum says inf.
        (Op::Linear | Op::LinearAdd | Op::Linear3, DType::Q8 | DType::Q4, Judge::Cpu) => CloseNanOrInf(5e-2),
        // Products of two such products: each factor's rounding scales with the other (measured
        // worst on the H200 3.7e-2 for the 690-row GLU, 1.2e-2 for SwiGLU; the GLU cases' weights
        // are scaled so the gate stays near 1, cases/products.rs `glu_weights`).
        (Op::LinearGlu | Op::LinearSwiglu, DType::BF16, Judge::Cpu) => Close(1e-1),
        (Op::LinearGlu | Op::LinearSwiglu, DType::Q8 | DType::Q4, Judge::Cpu) => CloseNanOrInf(1e-1),
        (Op::Conv1d | Op::ConvTranspose1d, DType::BF16, Judge::Cpu) => Close(2e-2),
        // The product of two products: each factor's rounding scales with the other (measured
        // worst on the CPU 1.4e-5 against its loops).
        (Op::LinearSwiglu, _, _) => Close(5e-5),
        (Op::Linear | Op::LinearAdd | Op::Linear3 | Op::LinearGlu | Op::Conv1d | Op::ConvTranspose1d, _, _) => {
            Close(1e-5)
        }
        // Keys within f32 rounding of each other on either side of a bf16 rounding boundary land
        // one bf16 ulp apart in a bf16 cache: at most 2^-7 |x| / (1 + |x|).
        (Op::AttentionInputs, DType::BF16, _) => Close(8e-3),
        (
            Op::RmsNorm
            | Op::LayerNorm
            | Op::Rope
            | Op::AttentionInputs
            | Op::Attention
            | Op::AttentionRotated
            | Op::Snake,
            _,
            _,
        ) => Close(1e-5),
    }
}
