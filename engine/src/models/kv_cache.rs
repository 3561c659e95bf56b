//! A key/value cache for causal attention over a fixed capacity, batch-major:
//! each layer's keys are `[batch * capacity, kv_heads * head_dim]`.

use crate::device::{Device, KvSlot, RecordedStep};
use crate::error::{Error, Result};
use crate::tensor::{CpuStorage, DType, Storage, Tensor};

/// The dtype the caches keep keys and values in: bf16, as the reference's bf16 language model and
/// depth decoder keep them (their projections' outputs), at half the memory and half the bytes a
/// decode step's attention reads of f32.
pub const KV_DTYPE: DType = DType::BF16;

pub struct KvCache {
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    batch: usize,
    capacity: usize,
    len: usize,
    /// The one-position step of the model that made the cache, recorded against its buffers.
    pub(super) step: RecordedStep,
}

impl KvCache {
    /// A cache of zeros in `dtype` (f32 or bf16; [`KV_DTYPE`] unless a test asks otherwise).
    pub fn new(
        device: &Device,
        layers: usize,
        batch: usize,
        capacity: usize,
        width: usize,
        dtype: DType,
    ) -> Result<Self> {
        let zeros = CpuStorage::F32(vec![0.0; batch * capacity * width]).to_dtype(dtype)?;
        let zeros = || device.upload(Tensor::new(&[batch * capacity, width], Storage::Cpu(zeros.clone()))?);
        let keys = (0..layers).map(|_| zeros()).collect::<Result<_>>()?;
        let values = (0..layers).map(|_| zeros()).collect::<Result<_>>()?;
        Ok(KvCache { keys, values, batch, capacity, len: 0, step: RecordedStep::Untried })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Appends `new_len` positions of layer `layer` at the current length.
    pub fn write(&mut self, device: &Device, layer: usize, k: &Tensor, v: &Tensor, new_len: usize) -> Result<()> {
        let slot = self.slot(layer, new_len)?;
        device.write_kv(slot.keys, k, slot.values, v, slot.batch, slot.row)
    }

    /// Where `new_len` positions of layer `layer` go, at the current length.
    pub fn slot(&mut self, layer: usize, new_len: usize) -> Result<KvSlot<'_>> {
        self.check_room(new_len)?;
        Ok(KvSlot { keys: &mut self.keys[layer], values: &mut self.values[layer], batch: self.batch, row: self.len })
    }

    /// Whether `new_len` more positions fit.
    pub fn check_room(&self, new_len: usize) -> Result<()> {
        if self.len + new_len > self.capacity {
            return Err(Error::Invalid(format!(
                "the KV cache holds {} positions; {} more do not fit",
                self.capacity, new_len
            )));
        }
        Ok(())
    }

    /// Empties the cache for a new sequence (the rows stay, to be overwritten).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// The cache with its one-position step run op by op, never recorded (a baseline).
    pub fn op_by_op(mut self) -> Self {
        self.step = RecordedStep::op_by_op();
        self
    }

    /// How the cache's one-position step runs, in words.
    pub fn step_mode(&self) -> String {
        self.step.describe()
    }

    pub fn layer(&self, layer: usize) -> (&Tensor, &Tensor) {
        (&self.keys[layer], &self.values[layer])
    }

    /// Marks `n` positions written by every layer as valid.
    pub fn advance(&mut self, n: usize) {
        self.len += n;
    }
}
