//! The CUDA backend's element-wise arithmetic (kernels/elementwise.cu): activations, sums,
//! scaling, dtype conversion and synthetic weights made where they live.

use cudarc::driver::PushKernelArg;

use super::context::gpu;
use super::launch::grid_1d;
use super::storage::Float;
use super::{CudaBackend, CudaStorage};
use crate::device::{DeviceKind, ElementwiseOps, Op};
use crate::error::{Error, Result};
use crate::tensor::{DType, Storage, Tensor};

impl CudaBackend {
    fn unary(&self, x: &Tensor, kernel: &str, op: Op) -> Result<Tensor> {
        let lane = self.lane()?;
        let src = self.f32s(x, op)?;
        let n = x.elem_count();
        let mut out = self.alloc(&lane, n)?;
        let n64 = n as i64;
        let mut b = lane.stream.launch_builder(self.kernels.get(kernel)?);
        b.arg(src).arg(&mut out).arg(&n64);
        // SAFETY: the kernel reads n floats of `src` and writes n floats of `out`, both that long.
        unsafe { b.launch(grid_1d(n)) }.map_err(gpu)?;
        self.wrap(x.shape(), out)
    }

    fn binary(&self, a: &Tensor, b: &Tensor, kernel: &str, op: Op) -> Result<Tensor> {
        if a.shape() != b.shape() {
            return Err(Error::shape(op.name(), format!("{:?} vs {:?}", a.shape(), b.shape())));
        }
        let lane = self.lane()?;
        let (x, y) = (self.f32s(a, op)?, self.f32s(b, op)?);
        let n = a.elem_count();
        let mut out = self.alloc(&lane, n)?;
        let n64 = n as i64;
        let mut l = lane.stream.launch_builder(self.kernels.get(kernel)?);
        l.arg(x).arg(y).arg(&mut out).arg(&n64);
        // SAFETY: both inputs and the output hold n floats.
        unsafe { l.launch(grid_1d(n)) }.map_err(gpu)?;
        self.wrap(a.shape(), out)
    }
}

impl ElementwiseOps for CudaBackend {
    fn silu_mul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(a, b, "silu_mul_f32", Op::SiluMul)
    }

    fn silu(&self, x: &Tensor) -> Result<Tensor> {
        self.unary(x, "silu_f32", Op::Silu)
    }

    fn tanh(&self, x: &Tensor) -> Result<Tensor> {
        self.unary(x, "tanh_f32", Op::Tanh)
    }

    fn add(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let n = a.elem_count();
        if a.shape() != b.shape() || !n.is_multiple_of(4) {
            return self.binary(a, b, "add_f32", Op::Add);
        }
        let lane = self.lane()?;
        let (x, y) = (self.f32s(a, Op::Add)?, self.f32s(b, Op::Add)?);
        let mut out = self.alloc(&lane, n)?;
        let quads = (n / 4) as i64;
        let mut l = lane.stream.launch_builder(self.kernels.get("add_f32_x4")?);
        l.arg(x).arg(y).arg(&mut out).arg(&quads);
        // SAFETY: both inputs and the output hold n floats, n / 4 groups of four; fresh allocations
        // are 16-byte aligned.
        unsafe { l.launch(grid_1d(n / 4)) }.map_err(gpu)?;
        self.wrap(a.shape(), out)
    }

    fn scale(&self, x: &Tensor, factor: f32) -> Result<Tensor> {
        let lane = self.lane()?;
        let n = x.elem_count();
        let mut out = self.alloc(&lane, n)?;
        let n64 = n as i64;
        let mut b = lane.stream.launch_builder(self.kernels.get("scale_f32")?);
        b.arg(self.f32s(x, Op::Scale)?).arg(&factor).arg(&mut out).arg(&n64);
        // SAFETY: n floats each side.
        unsafe { b.launch(grid_1d(n)) }.map_err(gpu)?;
        self.wrap(x.shape(), out)
    }

    fn cast(&self, t: &Tensor, dtype: DType) -> Result<Tensor> {
        let lane = self.lane()?;
        let n = t.elem_count();
        let n64 = n as i64;
        let storage = match (self.storage(t, Op::Cast)?, dtype) {
            (s, d) if s.dtype() == d => s.try_clone()?,
            (CudaStorage::F32(src), DType::BF16) => {
                let mut out = self.alloc_as::<u16>(&lane, n)?;
                let mut b = lane.stream.launch_builder(self.kernels.get("f32_to_bf16_kernel")?);
                b.arg(src).arg(&mut out).arg(&n64);
                // SAFETY: n elements each side.
                unsafe { b.launch(grid_1d(n)) }.map_err(gpu)?;
                CudaStorage::BF16(out)
            }
            (CudaStorage::BF16(src), DType::F32) => {
                let mut out = self.alloc(&lane, n)?;
                let mut b = lane.stream.launch_builder(self.kernels.get("bf16_to_f32_kernel")?);
                b.arg(src).arg(&mut out).arg(&n64);
                // SAFETY: n elements each side.
                unsafe { b.launch(grid_1d(n)) }.map_err(gpu)?;
                CudaStorage::F32(out)
            }
            (CudaStorage::F32(src), DType::Q8 | DType::Q4) => {
                CudaStorage::Quant(self.quantize(&lane, Float::F32(src), n, dtype)?)
            }
            (CudaStorage::BF16(src), DType::Q8 | DType::Q4) => {
                CudaStorage::Quant(self.quantize(&lane, Float::BF16(src), n, dtype)?)
            }
            (CudaStorage::F32(src), DType::F8E4M3) => {
                let (rows, cols) = t.dims2("cast to fp8")?;
                CudaStorage::Fp8(self.quantize_fp8(&lane, Float::F32(src), rows, cols)?)
            }
            (CudaStorage::BF16(src), DType::F8E4M3) => {
                let (rows, cols) = t.dims2("cast to fp8")?;
                CudaStorage::Fp8(self.quantize_fp8(&lane, Float::BF16(src), rows, cols)?)
            }
            (CudaStorage::Quant(q), DType::F32) => CudaStorage::F32(self.dequantize_f32(&lane, q)?),
            (CudaStorage::Quant(q), DType::BF16) => CudaStorage::BF16(self.dequantize_bf16(&lane, q)?),
            (CudaStorage::Quant(q), DType::Q8 | DType::Q4) => {
                let values = self.dequantize_f32(&lane, q)?;
                CudaStorage::Quant(self.quantize(&lane, Float::F32(&values), n, dtype)?)
            }
            (_, d) => return Err(Error::unsupported(Op::Cast, d, DeviceKind::Cuda)),
        };
        Ok(Tensor::new_unchecked(t.shape(), Storage::Cuda(storage)))
    }

    fn fill_uniform(&self, shape: &[usize], dtype: DType, seed: u64, center: f32, half_width: f32) -> Result<Tensor> {
        let lane = self.lane()?;
        let n: usize = shape.iter().product();
        let n64 = n as i64;
        let storage = match dtype {
            DType::F32 => {
                let mut out = self.alloc(&lane, n)?;
                let mut b = lane.stream.launch_builder(self.kernels.get("fill_uniform_f32")?);
                b.arg(&mut out).arg(&n64).arg(&seed).arg(&center).arg(&half_width);
                // SAFETY: writes n floats.
                unsafe { b.launch(grid_1d(n)) }.map_err(gpu)?;
                CudaStorage::F32(out)
            }
            DType::BF16 => {
                let mut out = self.alloc_as::<u16>(&lane, n)?;
                let mut b = lane.stream.launch_builder(self.kernels.get("fill_uniform_bf16")?);
                b.arg(&mut out).arg(&n64).arg(&seed).arg(&center).arg(&half_width);
                // SAFETY: writes n values.
                unsafe { b.launch(grid_1d(n)) }.map_err(gpu)?;
                CudaStorage::BF16(out)
            }
            DType::F16 | DType::Q8 | DType::Q4 | DType::F8E4M3 => {
                return Err(Error::unsupported(Op::FillUniform, dtype, DeviceKind::Cuda));
            }
        };
        Ok(Tensor::new_unchecked(shape, Storage::Cuda(storage)))
    }

    /// Counted on the device; only the count comes back.
    fn count_non_finite(&self, x: &Tensor) -> Result<usize> {
        let n = x.elem_count();
        let src = self.f32s(x, Op::CountNonFinite)?;
        if n == 0 {
            return Ok(0);
        }
        let lane = self.lane()?;
        let mut count = lane.stream.alloc_zeros::<u32>(1).map_err(gpu)?;
        let n64 = n as i64;
        let mut b = lane.stream.launch_builder(self.kernels.get("count_non_finite_f32")?);
        b.arg(src).arg(&n64).arg(&mut count);
        // SAFETY: the kernel reads n floats of `src` and adds into the one counter.
        unsafe { b.launch(grid_1d(n)) }.map_err(gpu)?;
        Ok(lane.stream.clone_dtoh(&count).map_err(gpu)?[0] as usize)
    }
}
