//! A product's matrix with an optional low-rank side product, `y = x @ W^T + (x @ A^T) @ B^T`: how
//! LoRA adapters apply to a quantized copy's matrices, whose packed words cannot take a merge.
//! `A` stacks every adapter's `lora_A` by rank, `B` every adapter's `lora_B` times its
//! `scale · factor`, both in f32 (as PEFT runs the adapter path of a bf16 model). Without a side
//! product the forward is the plain product, call for call.

use crate::device::{Device, RmsNorm};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::weights::VarBuilder;

/// The low-rank pair of one matrix: `a [rank, in]`, `b [out, rank]`, on the device.
pub struct LowRank {
    pub a: Tensor,
    pub b: Tensor,
}

impl LowRank {
    /// `y + (x @ a^T) @ b^T`.
    pub fn add_to(&self, device: &Device, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        device.linear_add(&device.linear(x, &self.a, None)?, &self.b, y)
    }
}

/// A product's matrix in its builder's format, with the side product of the adapters that could
/// not be merged into it.
pub struct Linear {
    pub w: Tensor,
    pub side: Option<LowRank>,
}

impl Linear {
    /// The matrix `name` of `shape` (see [`VarBuilder::matrix`]) and its side product, if any.
    pub fn new(vb: &VarBuilder, shape: &[usize], name: &str) -> Result<Self> {
        Ok(Linear { w: vb.matrix(shape, name)?, side: vb.low_rank(name)? })
    }

    /// `x @ w^T`, plus the side product.
    pub fn forward(&self, device: &Device, x: &Tensor) -> Result<Tensor> {
        self.side_add(device, x, device.linear(x, &self.w, None)?)
    }

    /// `residual + x @ w^T`, plus the side product.
    pub fn forward_add(&self, device: &Device, x: &Tensor, residual: &Tensor) -> Result<Tensor> {
        self.side_add(device, x, device.linear_add(x, &self.w, residual)?)
    }

    /// `y` plus the side product of `x` (`y` itself without one).
    pub fn side_add(&self, device: &Device, x: &Tensor, y: Tensor) -> Result<Tensor> {
        match &self.side {
            Some(side) => side.add_to(device, x, &y),
            None => Ok(y),
        }
    }
}

/// `h @ w^T` for three matrices of one input after `norm` (attention's q, k and v), fused by the
/// backend, each plus its side product of the normed input.
pub fn linear3(device: &Device, x: &Tensor, norm: RmsNorm, w: [&Linear; 3]) -> Result<[Tensor; 3]> {
    let [a, b, c] = device.linear3(x, Some(norm), [&w[0].w, &w[1].w, &w[2].w])?;
    if w.iter().all(|l| l.side.is_none()) {
        return Ok([a, b, c]);
    }
    let h = device.rms_norm(x, norm.weight, norm.eps)?;
    Ok([w[0].side_add(device, &h, a)?, w[1].side_add(device, &h, b)?, w[2].side_add(device, &h, c)?])
}
