//! The operations a backend runs, by name, so that what a backend supports is data
//! ([`Backend::supports`](super::Backend::supports), after ggml's `supports_op`) and an operation a
//! backend cannot run is a typed error naming the op, the dtype and the backend.

/// One operation of [`Backend`](super::Backend), named as its method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Upload,
    ToHost,
    Cast,
    ProductWeight,
    Linear,
    LinearAdd,
    LinearSwiglu,
    LinearGlu,
    Linear3,
    Embedding,
    RmsNorm,
    LayerNorm,
    Rope,
    Attention,
    AttentionInputs,
    WriteRows,
    WriteKv,
    Candidates,
    SiluMul,
    Silu,
    Tanh,
    Add,
    Scale,
    Transpose,
    SliceCols,
    SliceRows,
    CatRows,
    Conv1d,
    ConvTranspose1d,
    Snake,
    FillUniform,
    ResampleNearest,
    CountNonFinite,
}

impl Op {
    pub const ALL: [Op; 33] = [
        Op::Upload,
        Op::ToHost,
        Op::Cast,
        Op::ProductWeight,
        Op::Linear,
        Op::LinearAdd,
        Op::LinearSwiglu,
        Op::LinearGlu,
        Op::Linear3,
        Op::Embedding,
        Op::RmsNorm,
        Op::LayerNorm,
        Op::Rope,
        Op::Attention,
        Op::AttentionInputs,
        Op::WriteRows,
        Op::WriteKv,
        Op::Candidates,
        Op::SiluMul,
        Op::Silu,
        Op::Tanh,
        Op::Add,
        Op::Scale,
        Op::Transpose,
        Op::SliceCols,
        Op::SliceRows,
        Op::CatRows,
        Op::Conv1d,
        Op::ConvTranspose1d,
        Op::Snake,
        Op::FillUniform,
        Op::ResampleNearest,
        Op::CountNonFinite,
    ];

    /// The name of the [`Backend`](super::Backend) method.
    pub fn name(self) -> &'static str {
        match self {
            Op::Upload => "upload",
            Op::ToHost => "to_host",
            Op::Cast => "cast",
            Op::ProductWeight => "product_weight",
            Op::Linear => "linear",
            Op::LinearAdd => "linear_add",
            Op::LinearSwiglu => "linear_swiglu",
            Op::LinearGlu => "linear_glu",
            Op::Linear3 => "linear3",
            Op::Embedding => "embedding",
            Op::RmsNorm => "rms_norm",
            Op::LayerNorm => "layer_norm",
            Op::Rope => "rope",
            Op::Attention => "attention",
            Op::AttentionInputs => "attention_inputs",
            Op::WriteRows => "write_rows",
            Op::WriteKv => "write_kv",
            Op::Candidates => "candidates",
            Op::SiluMul => "silu_mul",
            Op::Silu => "silu",
            Op::Tanh => "tanh",
            Op::Add => "add",
            Op::Scale => "scale",
            Op::Transpose => "transpose",
            Op::SliceCols => "slice_cols",
            Op::SliceRows => "slice_rows",
            Op::CatRows => "cat_rows",
            Op::Conv1d => "conv1d",
            Op::ConvTranspose1d => "conv_transpose1d",
            Op::Snake => "snake",
            Op::FillUniform => "fill_uniform",
            Op::ResampleNearest => "resample_nearest",
            Op::CountNonFinite => "count_non_finite",
        }
    }

    /// Which operand's dtype [`Backend::supports`](super::Backend::supports) is asked about.
    pub fn operand(self) -> Operand {
        match self {
            Op::Upload => Operand::HostTensor,
            Op::ToHost | Op::Candidates => Operand::ReadBack,
            Op::Cast | Op::FillUniform => Operand::Result,
            Op::ProductWeight
            | Op::Linear
            | Op::LinearAdd
            | Op::LinearSwiglu
            | Op::LinearGlu
            | Op::Linear3
            | Op::Embedding => Operand::Matrix,
            Op::Conv1d | Op::ConvTranspose1d | Op::RmsNorm | Op::LayerNorm | Op::Snake => Operand::Parameter,
            Op::Attention | Op::AttentionInputs | Op::WriteRows | Op::WriteKv => Operand::Cache,
            Op::Rope
            | Op::SiluMul
            | Op::Silu
            | Op::Tanh
            | Op::Add
            | Op::Scale
            | Op::Transpose
            | Op::SliceCols
            | Op::SliceRows
            | Op::CatRows
            | Op::ResampleNearest
            | Op::CountNonFinite => Operand::Activation,
        }
    }
}

/// The operand of an op whose dtype decides whether a backend runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// The host tensor moved to the device.
    HostTensor,
    /// A device tensor read back to the host (directly, or as sampling candidates).
    ReadBack,
    /// The tensor the op makes.
    Result,
    /// A product's weight or an embedding table: the checkpoint's form, or a quantized one.
    Matrix,
    /// A convolution's weight, a norm weight or a Snake alpha.
    Parameter,
    /// The activations, which every backend keeps in f32.
    Activation,
    /// The keys and values of a KV cache (or of attention without one): f32, or bf16 as the
    /// reference keeps them ([`KV_DTYPE`](crate::models::kv_cache::KV_DTYPE)). The queries and the
    /// rows written into a cache are f32 activations.
    Cache,
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_is_listed_once_under_its_own_name() {
        let names: std::collections::HashSet<&str> = Op::ALL.iter().map(|o| o.name()).collect();
        assert_eq!(names.len(), Op::ALL.len());
    }
}
