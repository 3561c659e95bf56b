//! The parameter types of the backend ops: attention shapes, rotary embeddings, fused norms, one
//! layer's attention inputs and cache slot, and the sampling shortlist with its candidates.

use std::ops::Range;

use super::Op;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

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

/// A shortlist as the GPU kernels take it (kernels/sampling.cu, shaders/shortlist.wgsl), for rows
/// `width` wide: `mode` 0 ranks the conditional value inside `[lo, hi)` and at `extra`, mode 1 the
/// guided value; at most `cap` entries come back, packed as [`Candidates::unpack`] reads them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceShortlist {
    pub mode: u32,
    pub k: usize,
    pub scale: f32,
    pub lo: usize,
    pub hi: usize,
    pub extra: Option<usize>,
    pub cap: usize,
}

impl Shortlist {
    /// The `k` and `scale` of a [`Shortlist::Guided`] rule, the one a draw on the device takes.
    pub fn guided(&self) -> crate::error::Result<(usize, f32)> {
        match *self {
            Shortlist::Guided { k, scale } => Ok((k, scale)),
            Shortlist::Conditional { .. } => {
                Err(crate::error::Error::Invalid("a draw on the device takes a guided shortlist".into()))
            }
        }
    }

    /// The kernels' form for rows `width` wide, or `None` where a list would save nothing (room
    /// for ties makes it as long as the rows) or the indices would not survive an f32.
    pub fn on_device(&self, width: usize) -> Option<DeviceShortlist> {
        let clip = |i: usize| i.min(width);
        let (mode, k, scale, lo, hi, extra) = match self {
            Shortlist::Conditional { k, sampleable, extra } => {
                (0, *k, 0.0, clip(sampleable.start), clip(sampleable.end), extra.map(clip))
            }
            Shortlist::Guided { k, scale } => (1, *k, *scale, 0, 0, None),
        };
        let k = k.clamp(1, width.max(1));
        let cap = (4 * k).max(256);
        (cap < width && width < 1 << 24).then_some(DeviceShortlist { mode, k, scale, lo, hi, extra, cap })
    }
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

    /// A device shortlist as the GPU backends pack it, `[count, index[cap], cond[cap],
    /// uncond[cap]]` in any order, ascending by index; `None` for a count of -1 (the list could
    /// not stand for the rows).
    pub fn unpack(width: usize, cap: usize, packed: &[f32]) -> Option<Self> {
        if packed[0] < 0.0 {
            return None;
        }
        let count = packed[0] as usize;
        let mut entries: Vec<(u32, f32, f32)> =
            (0..count).map(|j| (packed[1 + j] as u32, packed[1 + cap + j], packed[1 + 2 * cap + j])).collect();
        entries.sort_unstable_by_key(|e| e.0);
        Some(Candidates {
            width,
            index: entries.iter().map(|e| e.0).collect(),
            cond: entries.iter().map(|e| e.1).collect(),
            uncond: entries.iter().map(|e| e.2).collect(),
        })
    }

    /// Every entry of a `[2, width]` pair of rows read back from the device.
    pub fn of_rows(rows: Vec<f32>) -> Self {
        let mut cond = rows;
        let uncond = cond.split_off(cond.len() / 2);
        Self::every(cond, uncond)
    }

    /// Every entry of each pair of `rows` rows read back from the device (`[2 * pairs, width]`;
    /// two rows or fewer are one pair, as [`of_rows`](Self::of_rows) takes them).
    pub fn of_pairs(values: Vec<f32>, rows: usize) -> Result<Vec<Self>> {
        if rows <= 2 {
            return Ok(vec![Self::of_rows(values)]);
        }
        let pair = values.len() / (rows / 2);
        if !rows.is_multiple_of(2) || pair == 0 {
            return Err(Error::Invalid(format!(
                "logits of {rows} rows of {} values are not pairs of rows",
                values.len() / rows
            )));
        }
        Ok(values.chunks(pair).map(|p| Self::of_rows(p.to_vec())).collect())
    }
}

/// How urgent a thread's work is ([`Backend::set_thread_priority`](super::Backend::set_thread_priority)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ThreadPriority {
    #[default]
    Normal,
    /// The song's critical path (the AR loop): its short kernels should not queue behind the
    /// acoustic half's long ones.
    Critical,
    /// Work beside a critical thread that leaves it room (a streamed song's acoustic half): on
    /// CUDA, on the SM partition where one is asked (`SONGLOOM_CUDA_ACOUSTIC_PARTITION`); elsewhere
    /// as normal.
    Yielding,
}

/// A device's memory as its allocator counts it, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryUse {
    /// Held by this process's allocations now.
    pub in_use: u64,
    /// The most held at once since the cap was last set.
    pub peak: u64,
    /// Free on the device (for every process).
    pub free: u64,
    pub total: u64,
}

/// A stride-1 convolution of `x [c_in, t_in]` with `w [c_out, c_in, kernel]` (torch's Conv1d),
/// its sizes read and checked once from the tensors (candle's `ParamsConv1D`), so that every
/// backend runs the same shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv1dParams {
    pub c_in: usize,
    pub t_in: usize,
    pub c_out: usize,
    pub kernel: usize,
    pub padding: usize,
    pub dilation: usize,
}

impl Conv1dParams {
    pub fn new(x: &Tensor, w: &Tensor, padding: usize, dilation: usize) -> Result<Self> {
        let (c_in, t_in) = x.dims2("conv1d")?;
        let [c_out, w_in, kernel] = *w.shape() else {
            return Err(Error::shape("conv1d", format!("weight {:?} is not [out, in, k]", w.shape())));
        };
        if w_in != c_in || kernel == 0 || t_in + 2 * padding < dilation * (kernel - 1) + 1 {
            return Err(Error::shape("conv1d", format!("input {:?} against weight {:?}", x.shape(), w.shape())));
        }
        Ok(Conv1dParams { c_in, t_in, c_out, kernel, padding, dilation })
    }

    pub fn t_out(&self) -> usize {
        self.t_in + 2 * self.padding - self.dilation * (self.kernel - 1)
    }

    /// That `x`, `w` and `bias` are the tensors these sizes were read from.
    pub fn check(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<()> {
        check_conv(Op::Conv1d, [self.c_in, self.t_in], [self.c_out, self.c_in, self.kernel], self.c_out, x, w, bias)
    }
}

/// A transposed convolution of `x [c_in, t_in]` with `w [c_in, c_out, kernel]` (torch's
/// ConvTranspose1d layout), its sizes read and checked once from the tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvTranspose1dParams {
    pub c_in: usize,
    pub t_in: usize,
    pub c_out: usize,
    pub kernel: usize,
    pub stride: usize,
    pub padding: usize,
}

impl ConvTranspose1dParams {
    pub fn new(x: &Tensor, w: &Tensor, stride: usize, padding: usize) -> Result<Self> {
        let (c_in, t_in) = x.dims2("conv_transpose1d")?;
        let [w_in, c_out, kernel] = *w.shape() else {
            return Err(Error::shape("conv_transpose1d", format!("weight {:?} is not [in, out, k]", w.shape())));
        };
        if w_in != c_in || t_in == 0 || (t_in - 1) * stride + kernel <= 2 * padding {
            return Err(Error::shape(
                "conv_transpose1d",
                format!("input {:?} against weight {:?}", x.shape(), w.shape()),
            ));
        }
        Ok(ConvTranspose1dParams { c_in, t_in, c_out, kernel, stride, padding })
    }

    pub fn t_out(&self) -> usize {
        (self.t_in - 1) * self.stride + self.kernel - 2 * self.padding
    }

    /// That `x`, `w` and `bias` are the tensors these sizes were read from.
    pub fn check(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<()> {
        let (x_shape, w_shape) = ([self.c_in, self.t_in], [self.c_in, self.c_out, self.kernel]);
        check_conv(Op::ConvTranspose1d, x_shape, w_shape, self.c_out, x, w, bias)
    }
}

fn check_conv(
    op: Op,
    x_shape: [usize; 2],
    w_shape: [usize; 3],
    c_out: usize,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
) -> Result<()> {
    let bias_fits = bias.is_none_or(|b| b.elem_count() == c_out);
    if x.shape() != x_shape || w.shape() != w_shape || !bias_fits {
        let bias = bias.map(|b| b.shape().to_vec());
        let detail = format!(
            "parameters for input {x_shape:?} and weight {w_shape:?} given input {:?}, weight {:?}, bias {bias:?}",
            x.shape(),
            w.shape()
        );
        return Err(Error::shape(op.name(), detail));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_of_rows_are_split_and_odd_rows_refused() {
        let each = Candidates::of_pairs((0..12).map(|v| v as f32).collect(), 6).unwrap();
        assert_eq!(each.len(), 3);
        assert_eq!((each[1].cond.clone(), each[1].uncond.clone()), (vec![4.0, 5.0], vec![6.0, 7.0]));
        assert_eq!(Candidates::of_pairs(vec![1.0, 2.0], 2).unwrap().len(), 1);
        assert!(Candidates::of_pairs((0..6).map(|v| v as f32).collect(), 3).is_err());
        assert!(Candidates::of_pairs(Vec::new(), 4).is_err());
    }
}
