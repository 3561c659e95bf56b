//! The traits every compute backend implements, one per op family (burn's `FloatTensorOps` /
//! `ModuleOps` shape): each backend implements a family in the file of that name, so there is no
//! forwarding layer, and [`Backend`] keeps only what concerns the device as a whole. A new backend
//! that lacks a family is a compile error naming the trait.
//!
//! Activations are f32 tensors laid out row-major; matrices are `[rows, cols]` and 1-D signals are
//! `[channels, time]`. Weights keep their stored dtype. The fused ops have defaults composed of the
//! basic ones ([`composed`]), which a backend overrides where it has a faster kernel.

use super::composed;
use super::{
    AttentionInputs, AttentionShape, Candidates, Conv1dParams, ConvTranspose1dParams, DeviceKind, KvSlot, MemoryUse,
    Op, RmsNorm, Rotary, Shortlist, StepRecording, ThreadPriority,
};
use crate::error::Result;
use crate::precision::Precision;
use crate::tensor::{DType, Tensor};

/// One compute backend: the device-level methods, and every op family. Every op returns a new
/// tensor on the same backend.
pub trait Backend:
    ProductOps + AttentionOps + NormOps + ConvOps + ElementwiseOps + LayoutOps + SamplingOps + Send + Sync
{
    fn kind(&self) -> DeviceKind;

    /// What runs here, in words ("NVIDIA H200, sm_90, 139.1 of 139.8 GiB free").
    fn description(&self) -> String;

    /// Whether this backend runs `op` with `dtype` (the dtype of [`Op::operand`]); an op it does not
    /// run returns [`Error::Unsupported`](crate::Error::Unsupported).
    fn supports(&self, op: Op, dtype: DType) -> bool;

    /// Waits until the device has finished all queued work (before timing, and after loading
    /// weights that other threads will read).
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    /// Starts (`true`) or stops what an external GPU profiler records; nothing where there is none.
    fn profiler(&self, _on: bool) -> Result<()> {
        Ok(())
    }

    /// Says how urgent the calling thread's work is from now on: a GPU backend may queue a
    /// critical thread's work ahead of the rest, and run a yielding thread's on fewer SMs.
    fn set_thread_priority(&self, _priority: ThreadPriority) -> Result<()> {
        Ok(())
    }

    /// Says the calling thread makes no more ops (a song's thread, at its end): a GPU backend
    /// waits for the thread's queued work and frees its stream, which would otherwise stay with a
    /// thread that is gone (a server makes a thread a song).
    fn end_thread(&self) -> Result<()> {
        Ok(())
    }

    /// The precision policy this backend was opened with (the CPU runs the reference's).
    fn precision(&self) -> Precision {
        Precision::Reference
    }

    /// What the device's allocator holds for this process, its peak and what the device has
    /// free; `None` where the backend keeps no such account (the CPU).
    fn memory(&self) -> Option<MemoryUse> {
        None
    }

    /// Caps the memory this backend allocates at `bytes` (none with `None`): an allocation that
    /// would pass the cap is [`Error::OverBudget`](crate::Error::OverBudget). The peak is counted
    /// afresh from here. A backend that keeps no account (the CPU) takes the cap and enforces
    /// nothing.
    fn set_memory_limit(&self, _bytes: Option<u64>) -> Result<()> {
        Ok(())
    }

    /// Hands memory the allocator keeps for reuse back to the device, after a model half is freed.
    fn release_unused_memory(&self) -> Result<()> {
        Ok(())
    }

    /// Records the ops `step` queues on the calling thread instead of running them, to be run by
    /// [`replay_step`](Self::replay_step); `None` where this backend records nothing (the default).
    /// With `position` (the first cache row the step writes), replays may run the step at other
    /// positions: the cache appends, rotary positions and attention lengths move with it (with
    /// several caches, each by as much as the first). A step that reads or writes the host, or
    /// frees a buffer made before it, cannot be recorded. [`RecordedStep`](super::RecordedStep)
    /// manages both calls.
    fn record_step(
        &self,
        _position: Option<usize>,
        _step: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Option<StepRecording>> {
        Ok(None)
    }

    /// Queues a recorded step at `position` (as recorded, `None`, for a step whose positions do
    /// not move).
    fn replay_step(&self, _recording: &StepRecording, _position: Option<usize>) -> Result<()> {
        Err(crate::Error::Invalid(format!("the {} backend replays no recorded steps", self.kind())))
    }
}

/// Moving tensors on, off and within the device: uploads, read-backs, tables, slices and the KV
/// cache's appends.
pub trait LayoutOps {
    /// Moves a host tensor onto this backend (a no-op for the CPU).
    fn upload(&self, t: Tensor) -> Result<Tensor>;
    /// Reads a tensor back as host f32 values.
    fn to_host(&self, t: &Tensor) -> Result<Vec<f32>>;
    /// Rows of `table [vocab, dim]` picked by `ids`, as f32.
    fn embedding(&self, table: &Tensor, ids: &[u32]) -> Result<Tensor>;
    fn transpose(&self, x: &Tensor) -> Result<Tensor>;
    /// Columns `[start, end)` of a matrix.
    fn slice_cols(&self, x: &Tensor, start: usize, end: usize) -> Result<Tensor>;
    /// Rows `[start, end)` of a matrix.
    fn slice_rows(&self, x: &Tensor, start: usize, end: usize) -> Result<Tensor>;
    /// Matrices with equal column counts stacked by rows.
    fn cat_rows(&self, parts: &[&Tensor]) -> Result<Tensor>;
    /// Nearest-neighbour resampling of `x [c, t]` to `[c, out_len]` (torch's `mode="nearest"`).
    fn resample_nearest(&self, x: &Tensor, out_len: usize) -> Result<Tensor>;
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
}

/// Element by element: conversions, activations, arithmetic, fills and checks.
pub trait ElementwiseOps {
    /// Converts a weight to the dtype it is kept in on this backend.
    fn cast(&self, t: &Tensor, dtype: DType) -> Result<Tensor>;
    /// `silu(a) * b`.
    fn silu_mul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor>;
    fn silu(&self, x: &Tensor) -> Result<Tensor>;
    fn tanh(&self, x: &Tensor) -> Result<Tensor>;
    fn add(&self, a: &Tensor, b: &Tensor) -> Result<Tensor>;
    fn scale(&self, x: &Tensor, factor: f32) -> Result<Tensor>;
    /// A tensor of `center + half_width * u`, `u` uniform in [-1, 1) from a hash of `seed` and the
    /// index, made where it lives (synthetic weights for benchmarks).
    fn fill_uniform(&self, shape: &[usize], dtype: DType, seed: u64, center: f32, half_width: f32) -> Result<Tensor>;
    /// How many values of `x` are NaN or infinite (a stage's output, checked where it lives).
    fn count_non_finite(&self, x: &Tensor) -> Result<usize>;
}

/// Norms and the rotary embedding, and the attention inputs that fuse them with the cache append.
pub trait NormOps: LayoutOps {
    /// RMSNorm over the last dim: `x / sqrt(mean(x^2) + eps) * w`.
    fn rms_norm(&self, x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor>;
    /// LayerNorm over the last dim with affine weight and bias.
    fn layer_norm(&self, x: &Tensor, w: &Tensor, b: &Tensor, eps: f32) -> Result<Tensor>;
    /// Rotary embedding on `x [rows, heads * head_dim]`.
    fn rope(&self, x: &Tensor, rotary: Rotary) -> Result<Tensor>;
    /// The queries of one layer after their norm and rotary; the keys (normed and rotated) and the
    /// values appended to the cache. Backends may do it in one pass.
    fn attention_inputs(&self, inputs: AttentionInputs, slot: KvSlot) -> Result<Tensor> {
        composed::attention_inputs(self, inputs, slot)
    }
}

/// Matrix products, plain and with their fused inputs and epilogues.
pub trait ProductOps: NormOps + ElementwiseOps + LayoutOps {
    /// A DiT matrix in the form its products run in under this backend's precision policy: as it
    /// is for exact f32 and TF32, bf16 for the bf16 policy.
    fn product_weight(&self, w: Tensor) -> Result<Tensor> {
        Ok(w)
    }
    /// `x [m, k] @ w[n, k]^T (+ bias[n])` with f32 accumulation; `w` may be f32, bf16 or f16.
    fn linear(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor>;
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
}

/// Scaled dot-product attention.
pub trait AttentionOps: NormOps {
    /// Scaled dot-product attention with grouped KV heads; output `[batch * q_len, heads * head_dim]`.
    fn attention(&self, q: &Tensor, k: &Tensor, v: &Tensor, shape: AttentionShape) -> Result<Tensor>;
    /// [`attention`](Self::attention) of `q` and `k` rotated by `rotary` first, each row at its
    /// position in its batch entry (`rotary.first_position` on; `rotary.heads` and `seq_len` are
    /// the shape's). Backends may rotate as they load.
    fn attention_rotated(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        shape: AttentionShape,
        rotary: Rotary,
    ) -> Result<Tensor> {
        composed::attention_rotated(self, q, k, v, shape, rotary)
    }
}

/// The vocoder's and the condition encoder's signal ops.
pub trait ConvOps {
    /// `x [c_in, t]` convolved with `w [c_out, c_in, k]` (stride 1), `+ bias`.
    fn conv1d(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>, params: &Conv1dParams) -> Result<Tensor>;
    /// `x [c_in, t]` through a transposed convolution with `w [c_in, c_out, k]`, `+ bias`.
    fn conv_transpose1d(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        params: &ConvTranspose1dParams,
    ) -> Result<Tensor>;
    /// `x + sin(alpha * x)^2 / (alpha + 1e-9)` with one alpha per channel of `x [c, t]`.
    fn snake(&self, x: &Tensor, alpha: &Tensor) -> Result<Tensor>;
}

/// What the sampler reads of the logits.
pub trait SamplingOps: LayoutOps {
    /// The entries of `logits [2, width]` (conditional, unconditional) that `shortlist` keeps, or
    /// every entry: the one pair's of [`candidates_each`](Self::candidates_each).
    fn candidates(&self, logits: &Tensor, shortlist: &Shortlist) -> Result<Candidates> {
        let [2, _] = logits.shape() else { return Ok(Candidates::of_rows(self.to_host(logits)?)) };
        self.candidates_each(logits, shortlist)?
            .into_iter()
            .next()
            .ok_or_else(|| crate::Error::Gpu("no sampling list came back for a pair of rows".into()))
    }

    /// [`candidates`](Self::candidates) of each pair of rows of `logits [2 * pairs, width]` (a
    /// batch's songs), read back together; the default reads back every entry.
    fn candidates_each(&self, logits: &Tensor, _shortlist: &Shortlist) -> Result<Vec<Candidates>> {
        Candidates::of_pairs(self.to_host(logits)?, logits.shape().first().copied().unwrap_or(0))
    }

    /// Each pair of rows of `logits [2 * pairs, width]` drawn from under a [`Shortlist::Guided`]
    /// rule: the index that [`Rng::categorical`](crate::pipeline::rng::Rng::categorical) with the
    /// pair's uniform in `uniforms` picks from its guided top-k probabilities, as codes `[pairs, 1]`
    /// (exact integers in f32), `-1` where the draw needs every entry of the pair on the host. The
    /// codes stay where the backend keeps them, so a GPU's draws need no read-back until the frame
    /// ends; the default draws on the host from [`candidates_each`](Self::candidates_each).
    fn draw_each(&self, logits: &Tensor, rule: &Shortlist, uniforms: &[f64]) -> Result<Tensor> {
        composed::draw_each(self, logits, rule, uniforms)
    }

    /// Rows of `table [vocab, dim]` picked by `codes [n, 1]` from [`draw_each`](Self::draw_each),
    /// each code plus `offset` and each row `repeat` times: `[n * repeat, dim]`. A code of `-1`
    /// picks row `offset` (that frame is drawn again on the host).
    fn embedding_drawn(&self, table: &Tensor, codes: &Tensor, offset: u32, repeat: usize) -> Result<Tensor> {
        composed::embedding_drawn(self, table, codes, offset, repeat)
    }
}
