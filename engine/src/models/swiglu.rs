//! The pre-norm SwiGLU feed-forward with its residual, shared by the language model and the depth
//! decoder: `x + down(silu(gate(rms(x))) * up(rms(x)))`.

use super::linear::Linear;
use crate::device::{Device, RmsNorm};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::weights::VarBuilder;

pub struct SwiGlu {
    norm: Tensor,
    gate: Linear,
    up: Linear,
    down: Linear,
}

impl SwiGlu {
    /// `norm` names the RMSNorm weight; `prefix` the projections (`gate_proj`, `up_proj`,
    /// `down_proj` below it).
    pub fn new(vb: &VarBuilder, norm: &str, prefix: &str, hidden: usize, intermediate: usize) -> Result<Self> {
        let p = |name: &str| if prefix.is_empty() { name.to_string() } else { format!("{prefix}.{name}") };
        Ok(SwiGlu {
            norm: vb.get(&[hidden], norm)?,
            gate: Linear::new(vb, &[intermediate, hidden], &p("gate_proj.weight"))?,
            up: Linear::new(vb, &[intermediate, hidden], &p("up_proj.weight"))?,
            down: Linear::new(vb, &[hidden, intermediate], &p("down_proj.weight"))?,
        })
    }

    pub fn forward_residual(&self, device: &Device, x: &Tensor, eps: f32) -> Result<Tensor> {
        let act = if self.gate.side.is_none() && self.up.side.is_none() {
            device.linear_swiglu(x, Some(RmsNorm { weight: &self.norm, eps }), &self.gate.w, &self.up.w)?
        } else {
            // LoRA side products: the normed input goes through each projection and its side.
            let h = device.rms_norm(x, &self.norm, eps)?;
            device.silu_mul(&self.gate.forward(device, &h)?, &self.up.forward(device, &h)?)?
        };
        self.down.forward_add(device, &act, x)
    }
}
