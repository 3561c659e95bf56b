//! The pre-norm SwiGLU feed-forward with its residual, shared by the language model and the depth
//! decoder: `x + down(silu(gate(rms(x))) * up(rms(x)))`.

use crate::device::{Device, RmsNorm};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::weights::VarBuilder;

pub struct SwiGlu {
    norm: Tensor,
    gate: Tensor,
    up: Tensor,
    down: Tensor,
}

impl SwiGlu {
    /// `norm` names the RMSNorm weight; `prefix` the projections (`gate_proj`, `up_proj`,
    /// `down_proj` below it).
    pub fn new(vb: &VarBuilder, norm: &str, prefix: &str, hidden: usize, intermediate: usize) -> Result<Self> {
        let p = |name: &str| if prefix.is_empty() { name.to_string() } else { format!("{prefix}.{name}") };
        Ok(SwiGlu {
            norm: vb.get(&[hidden], norm)?,
            gate: vb.matrix(&[intermediate, hidden], &p("gate_proj.weight"))?,
            up: vb.matrix(&[intermediate, hidden], &p("up_proj.weight"))?,
            down: vb.matrix(&[hidden, intermediate], &p("down_proj.weight"))?,
        })
    }

    pub fn forward_residual(&self, device: &Device, x: &Tensor, eps: f32) -> Result<Tensor> {
        let act = device.linear_swiglu(x, Some(RmsNorm { weight: &self.norm, eps }), &self.gate, &self.up)?;
        device.linear_add(&act, &self.down, x)
    }
}
