//! The precision policy of the acoustic half's products (DiT and vocoder), one concept under one
//! name everywhere: the CLI's `--precision`, this type, the window's choice and the recipe all say
//! `reference`, `tf32` or `bf16`. A backend reads the policy; none owns it.

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
}

impl Precision {
    pub const ALL: [Precision; 3] = [Precision::Reference, Precision::Tf32, Precision::Bf16];

    pub fn name(self) -> &'static str {
        match self {
            Precision::Reference => "reference",
            Precision::Tf32 => "tf32",
            Precision::Bf16 => "bf16",
        }
    }

    /// What the policy means, for help texts.
    pub fn meaning(self) -> &'static str {
        match self {
            Precision::Reference => "exact f32, as diffusers",
            Precision::Tf32 => "TF32 tensor cores, faster",
            Precision::Bf16 => "bf16 tensor cores, faster still",
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
        let err = Precision::parse("fp8").unwrap_err().to_string();
        assert!(err.contains("fp8") && err.contains("reference, tf32 or bf16"), "{err}");
    }
}
