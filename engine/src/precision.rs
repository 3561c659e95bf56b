//! The precision policy of the acoustic half's products (DiT and vocoder), one concept under one
//! name everywhere: the CLI's `--precision`, this type, the window's choice and the recipe all say
//! `reference`, `tf32`, `bf16` or `fp8`. A backend reads the policy; none owns it.

use crate::dtype::DType;
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// Exact f32 products, as the reference (diffusers 0.42.1) runs the DiT and vocoder.
    #[default]
    Reference,
    /// TF32 tensor cores: inputs rounded to a 10-bit mantissa, f32 accumulation.
    Tf32,
    /// bf16 tensor cores for the DiT (its matrices kept in bf16, activations rounded to bf16, f32
    /// accumulation); TF32 for the vocoder, whose bf16 convolutions measured slower on the H200
    /// (69.0 against 57.0 ms a window: every layer's im2col matrix would be converted). On wgpu
    /// with cooperative matrices, whose fragments take f16 and not bf16, the DiT's matrices and
    /// activations are f16 there instead (the same bytes, a finer mantissa, a narrower range).
    Bf16,
    /// FP8 tensor cores for the DiT's block matrices (e4m3 with a scale per output channel, the
    /// activations e4m3 with a scale per token, f32 accumulation), bf16 for its other matrices,
    /// TF32 for the vocoder. CUDA GPUs with FP8 tensor cores only (compute capability 8.9 on:
    /// Ada, Hopper, Blackwell and Jetson Thor).
    Fp8,
}

impl Precision {
    pub const ALL: [Precision; 4] = [Precision::Reference, Precision::Tf32, Precision::Bf16, Precision::Fp8];

    pub fn name(self) -> &'static str {
        match self {
            Precision::Reference => "reference",
            Precision::Tf32 => "tf32",
            Precision::Bf16 => "bf16",
            Precision::Fp8 => "fp8",
        }
    }

    /// What the policy means, for help texts.
    pub fn meaning(self) -> &'static str {
        match self {
            Precision::Reference => "exact f32, as diffusers",
            Precision::Tf32 => "TF32 tensor cores, faster",
            Precision::Bf16 => "bf16 tensor cores, faster still",
            Precision::Fp8 => "FP8 tensor cores for the DiT, fastest, least exact (CUDA, compute 8.9 or later)",
        }
    }

    pub fn parse(name: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name).ok_or_else(|| {
            Error::Invalid(format!("unknown precision `{name}` (expected {})", names(&Self::ALL.map(Precision::name))))
        })
    }

    /// Whether products may round their inputs (every policy but the reference).
    pub fn is_fast(self) -> bool {
        self != Precision::Reference
    }

    /// The form the DiT's block matrices take under this policy when the plan leaves them
    /// unquantized.
    pub fn dit_matrices(self) -> DType {
        match self {
            Precision::Reference | Precision::Tf32 => DType::F32,
            Precision::Bf16 => DType::BF16,
            Precision::Fp8 => DType::F8E4M3,
        }
    }

    /// Why this policy cannot run on a backend without FP8 tensor cores (`on`: what it is), if so.
    pub fn refused_without_fp8(self, on: &str) -> Result<()> {
        if self != Precision::Fp8 {
            return Ok(());
        }
        Err(Error::Invalid(format!(
            "--precision fp8 needs FP8 tensor cores, which {on} does not have: only CUDA GPUs of compute \
             capability 8.9 or later do (Ada, Hopper, Blackwell, Jetson Thor); use --precision bf16 here"
        )))
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Precision {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// `a, b or c`: a list of choices in an error or a help text.
pub fn names(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_parses_its_own_name_and_nothing_else() {
        for p in Precision::ALL {
            assert_eq!(Precision::parse(p.name()).unwrap(), p);
        }
        let err = Precision::parse("fp4").unwrap_err().to_string();
        assert!(err.contains("fp4") && err.contains("reference, tf32, bf16 or fp8"), "{err}");
    }
}
