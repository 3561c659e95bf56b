//! The operations a backend runs, by name, so that what a backend supports is data
//! ([`Backend::supports`](super::Backend::supports), after ggml's `supports_op`) and an operation a
//! backend cannot run is a typed error naming the op, the dtype and the backend. A leaf: it imports
//! nothing, so the error type can name an op without depending on a backend.

/// Declares [`Op`] from one list: each op's variant, the name of its trait method and the operand
/// whose dtype decides whether a backend runs it.
macro_rules! ops {
    ($($variant:ident => $name:literal, $operand:ident;)*) => {
        /// One operation of the backend traits, named as its method.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Op {
            $($variant,)*
        }

        impl Op {
            pub const ALL: [Op; [$($name),*].len()] = [$(Op::$variant),*];

            /// The name of the trait method.
            pub fn name(self) -> &'static str {
                match self {
                    $(Op::$variant => $name,)*
                }
            }

            /// Which operand's dtype [`Backend::supports`](super::Backend::supports) is asked about.
            pub fn operand(self) -> Operand {
                match self {
                    $(Op::$variant => Operand::$operand,)*
                }
            }
        }
    };
}

ops! {
    Upload => "upload", HostTensor;
    ToHost => "to_host", ReadBack;
    Cast => "cast", Result;
    ProductWeight => "product_weight", Matrix;
    Linear => "linear", Matrix;
    LinearAdd => "linear_add", Matrix;
    LinearSwiglu => "linear_swiglu", Matrix;
    LinearGlu => "linear_glu", Matrix;
    Linear3 => "linear3", Matrix;
    Embedding => "embedding", Matrix;
    RmsNorm => "rms_norm", Parameter;
    LayerNorm => "layer_norm", Parameter;
    Rope => "rope", Activation;
    Attention => "attention", Cache;
    AttentionRotated => "attention_rotated", Cache;
    AttentionInputs => "attention_inputs", Cache;
    WriteRows => "write_rows", Cache;
    WriteKv => "write_kv", Cache;
    Candidates => "candidates", ReadBack;
    CandidatesEach => "candidates_each", ReadBack;
    DrawEach => "draw_each", ReadBack;
    EmbeddingDrawn => "embedding_drawn", Matrix;
    SiluMul => "silu_mul", Activation;
    Silu => "silu", Activation;
    Tanh => "tanh", Activation;
    Add => "add", Activation;
    Scale => "scale", Activation;
    Transpose => "transpose", Activation;
    SliceCols => "slice_cols", Activation;
    SliceRows => "slice_rows", Activation;
    CatRows => "cat_rows", Activation;
    Conv1d => "conv1d", Parameter;
    ConvTranspose1d => "conv_transpose1d", Parameter;
    Snake => "snake", Parameter;
    FillUniform => "fill_uniform", Result;
    ResampleNearest => "resample_nearest", Activation;
    CountNonFinite => "count_non_finite", Activation;
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
