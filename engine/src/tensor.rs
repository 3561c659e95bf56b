//! Tensors: a shape and a storage that lives on one backend. Activations are f32; weights may be
//! f32, bf16 or f16 and keep their dtype on the device.

use half::{bf16, f16};

pub use crate::device::storage::Storage;
pub use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::quant::QuantData;

/// Host memory in one of the supported dtypes.
#[derive(Debug, Clone)]
pub enum CpuStorage {
    F32(Vec<f32>),
    BF16(Vec<bf16>),
    F16(Vec<f16>),
    /// `q8` or `q4` weights.
    Quant(QuantData),
}

impl CpuStorage {
    pub fn dtype(&self) -> DType {
        match self {
            CpuStorage::F32(_) => DType::F32,
            CpuStorage::BF16(_) => DType::BF16,
            CpuStorage::F16(_) => DType::F16,
            CpuStorage::Quant(q) => q.dtype,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            CpuStorage::F32(v) => v.len(),
            CpuStorage::BF16(v) => v.len(),
            CpuStorage::F16(v) => v.len(),
            CpuStorage::Quant(q) => q.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn to_f32_vec(&self) -> Vec<f32> {
        match self {
            CpuStorage::F32(v) => v.clone(),
            CpuStorage::BF16(v) => v.iter().map(|x| x.to_f32()).collect(),
            CpuStorage::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
            CpuStorage::Quant(q) => crate::quant::dequantize(q),
        }
    }

    /// Converts to `dtype`, rounding to nearest even where it narrows; to a quantized format the
    /// length must be whole groups.
    pub fn to_dtype(&self, dtype: DType) -> Result<CpuStorage> {
        if self.dtype() == dtype {
            return Ok(self.clone());
        }
        // Narrow floats go to a quantized format a block at a time, never whole in f32.
        match (self, dtype) {
            (CpuStorage::BF16(v), DType::Q8 | DType::Q4) => {
                return Ok(CpuStorage::Quant(crate::quant::quantize_widened(v, dtype, |x| x.to_f32())?));
            }
            (CpuStorage::F16(v), DType::Q8 | DType::Q4) => {
                return Ok(CpuStorage::Quant(crate::quant::quantize_widened(v, dtype, |x| x.to_f32())?));
            }
            _ => {}
        }
        let values = self.to_f32_vec();
        Ok(match dtype {
            DType::F32 => CpuStorage::F32(values),
            DType::BF16 => CpuStorage::BF16(values.into_iter().map(bf16::from_f32).collect()),
            DType::F16 => CpuStorage::F16(values.into_iter().map(f16::from_f32).collect()),
            DType::Q8 | DType::Q4 => CpuStorage::Quant(crate::quant::quantize(&values, dtype)?),
            DType::F8E4M3 => {
                return Err(crate::Error::Invalid(
                    "fp8 matrices are made and multiplied on a CUDA GPU with FP8 tensor cores only".into(),
                ));
            }
        })
    }
}

#[derive(Debug, Clone)]
pub struct Tensor {
    shape: Vec<usize>,
    storage: Storage,
}

impl Tensor {
    pub fn new(shape: &[usize], storage: Storage) -> Result<Self> {
        let len = storage.len();
        let expected: usize = shape.iter().product();
        if len != expected {
            return Err(Error::shape(
                "tensor",
                format!("shape {shape:?} holds {expected} elements, storage has {len}"),
            ));
        }
        Ok(Tensor { shape: shape.to_vec(), storage })
    }

    /// A tensor whose storage a backend sized itself (device buffers may be padded).
    pub(crate) fn new_unchecked(shape: &[usize], storage: Storage) -> Self {
        Tensor { shape: shape.to_vec(), storage }
    }

    pub fn into_storage(self) -> Storage {
        self.storage
    }

    /// An f32 tensor in host memory.
    pub fn from_f32(shape: &[usize], data: Vec<f32>) -> Result<Self> {
        Self::new(shape, Storage::Cpu(CpuStorage::F32(data)))
    }

    pub fn zeros(shape: &[usize]) -> Self {
        let n = shape.iter().product();
        Tensor { shape: shape.to_vec(), storage: Storage::Cpu(CpuStorage::F32(vec![0.0; n])) }
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn elem_count(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn dtype(&self) -> DType {
        self.storage.dtype()
    }

    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    pub fn storage_mut(&mut self) -> &mut Storage {
        &mut self.storage
    }

    /// The same data under another shape with the same element count.
    pub fn reshape(mut self, shape: &[usize]) -> Result<Self> {
        let n: usize = shape.iter().product();
        if n != self.elem_count() {
            return Err(Error::shape("reshape", format!("{:?} cannot become {shape:?}", self.shape)));
        }
        self.shape = shape.to_vec();
        Ok(self)
    }

    /// The two dimensions of a matrix, or an error naming the op.
    pub fn dims2(&self, op: &'static str) -> Result<(usize, usize)> {
        match self.shape.as_slice() {
            [a, b] => Ok((*a, *b)),
            s => Err(Error::shape(op, format!("expected a matrix, got shape {s:?}"))),
        }
    }

    /// A copy of the values as f32 in host memory, wherever they live.
    pub fn to_host(&self) -> Result<Vec<f32>> {
        let mut values = self.storage.to_host()?;
        values.truncate(self.elem_count());
        Ok(values)
    }

    /// [`to_host`](Self::to_host) for host tensors and tests, where a failed copy back from a
    /// device is a bug: engine code reads device tensors through `Backend::to_host`.
    pub fn to_f32_vec(&self) -> Vec<f32> {
        self.to_host().expect("reading a tensor back to the host")
    }
}
