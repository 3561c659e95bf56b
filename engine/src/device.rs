//! `Device` is the enum the rest of the program sees; each backend implements [`Backend`].
//! Activations are f32 tensors laid out row-major; matrices are `[rows, cols]` and 1-D signals are
//! `[channels, time]`. Weights keep their stored dtype.

use crate::cpu::CpuBackend;
use crate::cuda::CudaBackend;
use crate::error::Result;
use std::ops::Range;

use crate::tensor::{DType, Tensor};

/// The shape of one attention call. Queries are `[batch * q_len, heads * head_dim]`; keys and
/// values are `[batch * kv_capacity, kv_heads * head_dim]`, of which the first `kv_len` rows of
/// each batch entry are valid. With `causal`, query `i` sits at position `kv_len - q_len + i`.
#[derive(Debug, Clone, Copy)]
pub struct AttentionShape {
    pub batch: usize,
    pub q_len: usize,
    pub kv_len: usize,
    pub kv_capacity: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub causal: bool,
}

/// Rotary position embedding applied with the rotate-half convention to the leading `rotary_dim`
/// dims of each head. `positions` are the token positions of the rows (one per row and batch).
#[derive(Debug, Clone, Copy)]
pub struct Rotary {
    pub heads: usize,
    pub head_dim: usize,
    pub rotary_dim: usize,
    pub theta: f32,
    /// Position of the first row; rows are consecutive positions, repeating every `seq_len` rows.
    pub first_position: usize,
    pub seq_len: usize,
}

/// An RMSNorm a fused product applies to its input first: `x / sqrt(mean(x^2) + eps) * weight`.
#[derive(Clone, Copy)]
pub struct RmsNorm<'a> {
    pub weight: &'a Tensor,
    pub eps: f32,
}

/// One decoder layer's attention inputs, Qwen3 style: the query and key projections are
/// RMS-normalised per head (`q_norm`, `k_norm`, `[head_dim]`) and rotated by `rotary` (whose
/// `heads` is not used: each projection's width gives its own).
pub struct AttentionInputs<'a> {
    pub q: Tensor,
    pub k: Tensor,
    pub v: &'a Tensor,
    pub q_norm: &'a Tensor,
    pub k_norm: &'a Tensor,
    pub eps: f32,
    pub rotary: Rotary,
}

/// Where a layer's new keys and values go: rows `[row, row + n)` of each of `batch` entries of
/// the cache tensors (see [`Backend::write_rows`]).
pub struct KvSlot<'a> {
    pub keys: &'a mut Tensor,
    pub values: &'a mut Tensor,
    pub batch: usize,
    pub row: usize,
}

/// Which entries of a pair of logit rows (conditional, unconditional) a guided top-k draw can give
/// a probability, so that a backend needs to send back only those (`pipeline::sampling` says why
/// each rule loses nothing).
#[derive(Debug, Clone, PartialEq)]
pub enum Shortlist {
    /// Entries whose conditional value, masked to `-inf` outside `sampleable` and `extra`, is at
    /// or above the `k`-th largest such value (the semantic draw's CFG top-k).
    Conditional { k: usize, sampleable: Range<usize>, extra: Option<usize> },
    /// Entries whose guided value `u + (c - u) * scale`, non-finite values taken as ±1e9, is at
    /// or above the `k`-th largest (a residual codebook's draw).
    Guided { k: usize, scale: f32 },
}

/// Entries of a pair of logit rows `width` wide: ascending indices with their conditional and
/// unconditional values.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidates {
    pub width: usize,
    pub index: Vec<u32>,
    pub cond: Vec<f32>,
    pub uncond: Vec<f32>,
}

impl Candidates {
    /// Every entry of the two rows.
    pub fn every(cond: Vec<f32>, uncond: Vec<f32>) -> Self {
        Candidates { width: cond.len(), index: (0..cond.len() as u32).collect(), cond, uncond }
    }

    /// Every entry of a `[2, width]` pair of rows read back from the device.
    pub fn of_rows(rows: Vec<f32>) -> Self {
        let mut cond = rows;
        let uncond = cond.split_off(cond.len() / 2);
        Self::every(cond, uncond)
    }
}

/// One compute backend. Every op returns a new tensor on the same backend.
pub trait Backend: Send + Sync {
    fn name(&self) -> &'static str;

    /// Moves a host tensor onto this backend (a no-op for the CPU).
    fn upload(&self, t: Tensor) -> Result<Tensor>;
    /// Reads a tensor back as host f32 values.
    fn to_host(&self, t: &Tensor) -> Result<Vec<f32>>;
    /// Converts a weight to the dtype it is kept in on this backend.
    fn cast(&self, t: &Tensor, dtype: DType) -> Result<Tensor>;

    /// A DiT matrix in the form its products run in under this backend's precision policy: as it
    /// is for exact f32 and TF32, bf16 for the bf16 policy.
    fn product_weight(&self, w: Tensor) -> Result<Tensor> {
        Ok(w)
    }

    /// `x [m, k] @ w[n, k]^T (+ bias[n])` with f32 accumulation; `w` may be f32, bf16 or f16.
    fn linear(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor>;
    /// Rows of `table [vocab, dim]` picked by `ids`, as f32.
    fn embedding(&self, table: &Tensor, ids: &[u32]) -> Result<Tensor>;
    /// RMSNorm over the last dim: `x / sqrt(mean(x^2) + eps) * w`.
    fn rms_norm(&self, x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor>;
    /// LayerNorm over the last dim with affine weight and bias.
    fn layer_norm(&self, x: &Tensor, w: &Tensor, b: &Tensor, eps: f32) -> Result<Tensor>;
    /// Rotary embedding on `x [rows, heads * head_dim]`.
    fn rope(&self, x: &Tensor, rotary: Rotary) -> Result<Tensor>;
    /// Scaled dot-product attention with grouped KV heads; output `[batch * q_len, heads * head_dim]`.
    fn attention(&self, q: &Tensor, k: &Tensor, v: &Tensor, shape: AttentionShape) -> Result<Tensor>;
    /// Writes `src [batch * n, cols]` into rows `[row, row + n)` of each batch entry of
    /// `dst [batch * capacity, cols]` (a KV cache append).
    fn write_rows(&self, dst: &mut Tensor, src: &Tensor, batch: usize, row: usize) -> Result<()>;
    /// [`write_rows`](Self::write_rows) of the keys and of the values of one cache layer; backends
    /// may do both at once.
    fn write_kv(
        &self,
        keys: &mut Tensor,
        k: &Tensor,
        values: &mut Tensor,
        v: &Tensor,
        batch: usize,
        row: usize,
    ) -> Result<()> {
        self.write_rows(keys, k, batch, row)?;
        self.write_rows(values, v, batch, row)
    }

    /// `residual + x @ w^T`: a projection back into the residual stream. Backends may fuse it.
    fn linear_add(&self, x: &Tensor, w: &Tensor, residual: &Tensor) -> Result<Tensor> {
        composed::linear_add(self, x, w, residual)
    }
    /// `silu(h @ gate^T) * (h @ up^T)` with `h` the input after `norm` (or the input itself), the
    /// first half of a SwiGLU feed-forward. Backends may fuse it.
    fn linear_swiglu(&self, x: &Tensor, norm: Option<RmsNorm>, gate: &Tensor, up: &Tensor) -> Result<Tensor> {
        composed::linear_swiglu(self, x, norm, gate, up)
    }
    /// The DiT's gated feed-forward input: `h = x @ w^T + bias` over `2f` columns, then
    /// `silu(h[:, f..]) * h[:, ..f]` (the value half first, the gate second), `[rows, f]`.
    /// Backends may fuse the bias and the gate into one pass.
    fn linear_glu(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        composed::linear_glu(self, x, w, bias)
    }
    /// `h @ w^T` for each of three weights of the same input width (attention's q, k and v), with
    /// `h` the input after `norm` (or the input itself). Backends may fuse it.
    fn linear3(&self, x: &Tensor, norm: Option<RmsNorm>, w: [&Tensor; 3]) -> Result<[Tensor; 3]> {
        composed::linear3(self, x, norm, w)
    }

    /// The queries of one layer after their norm and rotary; the keys (normed and rotated) and the
    /// values appended to the cache. Backends may do it in one pass.
    fn attention_inputs(&self, inputs: AttentionInputs, slot: KvSlot) -> Result<Tensor> {
        composed::attention_inputs(self, inputs, slot)
    }

    /// The entries of `logits [2, width]` (conditional, unconditional) that `shortlist` keeps, or
    /// every entry; the default reads back every entry.
    fn candidates(&self, logits: &Tensor, _shortlist: &Shortlist) -> Result<Candidates> {
        Ok(Candidates::of_rows(self.to_host(logits)?))
    }

    /// `silu(a) * b`.
    fn silu_mul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor>;
    fn silu(&self, x: &Tensor) -> Result<Tensor>;
    fn tanh(&self, x: &Tensor) -> Result<Tensor>;
    fn add(&self, a: &Tensor, b: &Tensor) -> Result<Tensor>;
    fn mul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor>;
    fn scale(&self, x: &Tensor, factor: f32) -> Result<Tensor>;
    /// Softmax over the last dim of a matrix.
    fn softmax_rows(&self, x: &Tensor) -> Result<Tensor>;
    /// Rounds every value to what `dtype` can hold (the tensor stays f32).
    fn round_to(&self, x: &Tensor, dtype: DType) -> Result<Tensor>;

    fn transpose(&self, x: &Tensor) -> Result<Tensor>;
    /// Columns `[start, end)` of a matrix.
    fn slice_cols(&self, x: &Tensor, start: usize, end: usize) -> Result<Tensor>;
    /// Rows `[start, end)` of a matrix.
    fn slice_rows(&self, x: &Tensor, start: usize, end: usize) -> Result<Tensor>;
    /// Matrices with equal column counts stacked by rows.
    fn cat_rows(&self, parts: &[&Tensor]) -> Result<Tensor>;

    /// `x [c_in, t]` convolved with `w [c_out, c_in, k]` (stride 1), `+ bias`.
    fn conv1d(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>, padding: usize, dilation: usize) -> Result<Tensor>;
    /// `x [c_in, t]` through a transposed convolution with `w [c_in, c_out, k]`.
    fn conv_transpose1d(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        stride: usize,
        padding: usize,
    ) -> Result<Tensor>;
    /// `x + sin(alpha * x)^2 / (alpha + 1e-9)` with one alpha per channel of `x [c, t]`.
    fn snake(&self, x: &Tensor, alpha: &Tensor) -> Result<Tensor>;
    /// A tensor of `center + half_width * u`, `u` uniform in [-1, 1) from a hash of `seed` and the
    /// index, made where it lives (synthetic weights for benchmarks).
    fn fill_uniform(&self, shape: &[usize], dtype: DType, seed: u64, center: f32, half_width: f32) -> Result<Tensor>;
    /// Nearest-neighbour resampling of `x [c, t]` to `[c, out_len]` (torch's `mode="nearest"`).
    fn resample_nearest(&self, x: &Tensor, out_len: usize) -> Result<Tensor>;
}

/// The device a model runs on, picked at run time.
pub enum Device {
    Cpu(CpuBackend),
    Cuda(Box<CudaBackend>),
}

/// How the acoustic half's f32 products run on a GPU.
pub use crate::cuda::F32Math;

impl Device {
    pub fn cpu() -> Self {
        Device::Cpu(CpuBackend::new())
    }

    /// The first CUDA GPU, or why there is none.
    pub fn cuda(math: F32Math) -> Result<Self> {
        Ok(Device::Cuda(Box::new(CudaBackend::new(0, math)?)))
    }

    /// Parses a `--device` name: `auto` takes CUDA where it works, else the CPU. A named GPU
    /// backend that cannot run here is an error that says why.
    pub fn from_name(name: &str) -> Result<Self> {
        Self::from_name_with(name, F32Math::Exact)
    }

    pub fn from_name_with(name: &str, math: F32Math) -> Result<Self> {
        match name {
            "cpu" => Ok(Self::cpu()),
            "auto" => Ok(Self::cuda(math).unwrap_or_else(|_| Self::cpu())),
            "cuda" => {
                Self::cuda(math).map_err(|e| crate::Error::Invalid(format!("device `cuda` is not available: {e}")))
            }
            "wgpu" => {
                Err(crate::Error::Invalid("device `wgpu` is not available: this build has no wgpu backend yet".into()))
            }
            other => Err(crate::Error::Invalid(format!("unknown device `{other}` (expected auto, cpu, cuda or wgpu)"))),
        }
    }

    /// Each backend and whether it can run here, with the reason when it cannot.
    pub fn probe_all() -> Vec<(&'static str, std::result::Result<String, String>)> {
        let threads = rayon::current_num_threads();
        let cuda = CudaBackend::new(0, F32Math::Exact).map(|b| b.description().to_string()).map_err(|e| e.to_string());
        vec![
            ("cpu", Ok(format!("{threads} threads"))),
            ("cuda", cuda),
            ("wgpu", Err("not built into this version yet".to_string())),
        ]
    }

    /// Waits until the device has finished all queued work (for timing).
    /// Starts or stops what an external GPU profiler records; nothing on the CPU.
    pub fn profiler(&self, on: bool) -> Result<()> {
        match self {
            Device::Cpu(_) => Ok(()),
            Device::Cuda(b) => b.profiler(on),
        }
    }

    pub fn synchronize(&self) -> Result<()> {
        match self {
            Device::Cpu(_) => Ok(()),
            Device::Cuda(b) => b.synchronize(),
        }
    }
}

impl std::ops::Deref for Device {
    type Target = dyn Backend;

    fn deref(&self) -> &Self::Target {
        match self {
            Device::Cpu(b) => b,
            Device::Cuda(b) => b.as_ref(),
        }
    }
}

/// The fused operations of [`Backend`] written with its basic ones: the default every backend
/// starts from, and the fallback of a backend's fused kernels for shapes they do not cover.
pub mod composed {
    use super::{AttentionInputs, Backend, KvSlot, RmsNorm, Rotary};
    use crate::error::Result;
    use crate::tensor::Tensor;

    pub fn linear_add<B: Backend + ?Sized>(b: &B, x: &Tensor, w: &Tensor, residual: &Tensor) -> Result<Tensor> {
        b.add(residual, &b.linear(x, w, None)?)
    }

    pub fn linear_glu<B: Backend + ?Sized>(b: &B, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let both = b.linear(x, w, bias)?;
        let f = both.shape().get(1).copied().unwrap_or(0) / 2;
        b.silu_mul(&b.slice_cols(&both, f, 2 * f)?, &b.slice_cols(&both, 0, f)?)
    }

    /// `x` after `norm`, or `x` itself.
    fn normed<B: Backend + ?Sized>(b: &B, x: &Tensor, norm: Option<RmsNorm>) -> Result<Option<Tensor>> {
        norm.map(|n| b.rms_norm(x, n.weight, n.eps)).transpose()
    }

    pub fn linear_swiglu<B: Backend + ?Sized>(
        b: &B,
        x: &Tensor,
        norm: Option<RmsNorm>,
        gate: &Tensor,
        up: &Tensor,
    ) -> Result<Tensor> {
        let normed = normed(b, x, norm)?;
        let h = normed.as_ref().unwrap_or(x);
        b.silu_mul(&b.linear(h, gate, None)?, &b.linear(h, up, None)?)
    }

    pub fn linear3<B: Backend + ?Sized>(
        b: &B,
        x: &Tensor,
        norm: Option<RmsNorm>,
        w: [&Tensor; 3],
    ) -> Result<[Tensor; 3]> {
        let normed = normed(b, x, norm)?;
        let h = normed.as_ref().unwrap_or(x);
        Ok([b.linear(h, w[0], None)?, b.linear(h, w[1], None)?, b.linear(h, w[2], None)?])
    }

    pub fn attention_inputs<B: Backend + ?Sized>(b: &B, inputs: AttentionInputs, slot: KvSlot) -> Result<Tensor> {
        let AttentionInputs { q, k, v, q_norm, k_norm, eps, rotary } = inputs;
        let heads = |t: &Tensor| t.shape().get(1).copied().unwrap_or(0) / rotary.head_dim.max(1);
        let (q_heads, k_heads) = (heads(&q), heads(&k));
        let q = head_norm_rope(b, q, q_norm, eps, Rotary { heads: q_heads, ..rotary })?;
        let k = head_norm_rope(b, k, k_norm, eps, Rotary { heads: k_heads, ..rotary })?;
        b.write_kv(slot.keys, &k, slot.values, v, slot.batch, slot.row)?;
        Ok(q)
    }

    /// Per-head RMSNorm of `x [rows, heads * head_dim]` with `w [head_dim]`, then the rotary
    /// embedding (Qwen3's query and key path); backends fuse it in
    /// [`attention_inputs`](super::Backend::attention_inputs).
    pub fn head_norm_rope<B: Backend + ?Sized>(
        b: &B,
        x: Tensor,
        w: &Tensor,
        eps: f32,
        rotary: Rotary,
    ) -> Result<Tensor> {
        let rows = x.shape()[0];
        let d = rotary.head_dim;
        let normed = b.rms_norm(&x.reshape(&[rows * rotary.heads, d])?, w, eps)?;
        b.rope(&normed.reshape(&[rows, rotary.heads * d])?, rotary)
    }
}
