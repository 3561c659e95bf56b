//! The CUDA backend's convolutions and Snake activation (the vocoder and the condition
//! encoder): Conv1d as im2col then a product, ConvTranspose1d as a product then col2im.

use cudarc::cublas::sys as blas_sys;
use cudarc::driver::{DevicePtr, DevicePtrMut, PushKernelArg};

use super::CudaBackend;
use super::context::gpu;
use super::launch::grid_1d;
use super::storage::Float;
use crate::device::{Conv1dParams, ConvOps, ConvTranspose1dParams, LayoutOps, Op};
use crate::error::Result;
use crate::shapes;
use crate::tensor::{DType, Tensor};

/// Output time steps of a convolution's im2col matrix made at once.
const CONV_TIME_CHUNK: usize = 1 << 16;

impl ConvOps for CudaBackend {
    fn conv1d(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>, params: &Conv1dParams) -> Result<Tensor> {
        params.check(x, w, bias)?;
        let Conv1dParams { c_in, t_in: t, c_out, kernel: k, padding, dilation } = *params;
        let t_out = params.t_out();
        let lane = self.lane()?;
        let weight = self.float(w, Op::Conv1d).map(|_| self.storage(w, Op::Conv1d))??;
        let xs = self.f32s(x, Op::Conv1d)?;
        // The im2col matrix of a whole vocoder window is a GB; made a time span at a time it
        // stays under a few hundred MB, and each span's product lands in its rows of y.
        let mut y: Option<cudarc::driver::CudaSlice<f32>> = None;
        for t0 in (0..t_out).step_by(CONV_TIME_CHUNK) {
            let width = CONV_TIME_CHUNK.min(t_out - t0);
            let mut cols = self.alloc(&lane, width * c_in * k)?;
            let (c32, t32, k32, d32, p32, t0_32, w32) =
                (c_in as i32, t as i32, k as i32, dilation as i32, padding as i32, t0 as i32, width as i32);
            let mut b = lane.stream.launch_builder(self.kernels.get("im2col_t_f32")?);
            b.arg(xs).arg(&mut cols).arg(&c32).arg(&t32).arg(&k32).arg(&d32).arg(&p32).arg(&t0_32).arg(&w32);
            // SAFETY: cols holds width * c_in * k floats; reads guarded by t.
            unsafe { b.launch(grid_1d(width * c_in * k)) }.map_err(gpu)?;
            let part = self.matmul_nt(&lane, &cols, width, c_in * k, weight, c_out)?;
            y = Some(match y {
                None if width == t_out => part,
                None => {
                    let mut whole = self.alloc(&lane, t_out * c_out)?;
                    lane.stream.memcpy_dtod(&part, &mut whole.slice_mut(0..width * c_out)).map_err(gpu)?;
                    whole
                }
                Some(mut whole) => {
                    let rows = t0 * c_out..(t0 + width) * c_out;
                    lane.stream.memcpy_dtod(&part, &mut whole.slice_mut(rows)).map_err(gpu)?;
                    whole
                }
            });
        }
        let mut y = match y {
            Some(y) => y,
            None => self.alloc(&lane, 0)?,
        };
        if let Some(bias) = bias {
            self.add_bias(&lane, &mut y, t_out, self.float(bias, Op::Conv1d)?)?;
        }
        self.transpose(&self.wrap(&[t_out, c_out], y)?)
    }

    fn conv_transpose1d(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        params: &ConvTranspose1dParams,
    ) -> Result<Tensor> {
        params.check(x, w, bias)?;
        let ConvTranspose1dParams { c_in, t_in: t, c_out, kernel: k, stride, padding } = *params;
        let t_out = params.t_out();
        let lane = self.lane()?;
        let rows = c_out * k;
        let mut cols = self.alloc(&lane, rows * t)?;
        {
            let xs = self.f32s(x, Op::ConvTranspose1d)?;
            let (cp, _cs) = cols.device_ptr_mut(&lane.stream);
            // cols[rows, t] = w[c_in, rows]^T . x[c_in, t], in column-major terms
            // cols^T[t, rows] = x^T[t, c_in] . w[c_in, rows].
            let ops = (blas_sys::cublasOperation_t::CUBLAS_OP_N, blas_sys::cublasOperation_t::CUBLAS_OP_T);
            let dims = (t, rows, c_in);
            match self.float(w, Op::ConvTranspose1d)? {
                Float::F32(wf) => {
                    let (xp, _xs) = xs.device_ptr(&lane.stream);
                    let (wp, _ws) = wf.device_ptr(&lane.stream);
                    self.gemm(&lane, ops, dims, (xp, t), (wp, rows), (cp, t), false)?;
                }
                Float::BF16(wb) => {
                    let x16 = self.to_bf16(&lane, xs, c_in * t)?;
                    let (xp, _xs) = x16.device_ptr(&lane.stream);
                    let (wp, _ws) = wb.device_ptr(&lane.stream);
                    self.gemm(&lane, ops, dims, (xp, t), (wp, rows), (cp, t), true)?;
                }
            }
        }
        let mut out = self.alloc(&lane, c_out * t_out)?;
        let zeros;
        let bias_storage = match bias {
            Some(b) => self.float(b, Op::ConvTranspose1d)?,
            None => {
                zeros = lane.stream.alloc_zeros::<f32>(c_out).map_err(gpu)?;
                Float::F32(&zeros)
            }
        };
        let kernel = if bias_storage.dtype() == DType::F32 { "col2im_f32" } else { "col2im_bf16" };
        let (co32, k32, t32, s32, p32, to32) =
            (c_out as i32, k as i32, t as i32, stride as i32, padding as i32, t_out as i32);
        let mut b = lane.stream.launch_builder(self.kernels.get(kernel)?);
        b.arg(&cols);
        match bias_storage {
            Float::F32(s) => b.arg(s),
            Float::BF16(s) => b.arg(s),
        };
        b.arg(&mut out).arg(&co32).arg(&k32).arg(&t32).arg(&s32).arg(&p32).arg(&to32);
        // SAFETY: out holds c_out * t_out floats; cols reads are bounded by t.
        unsafe { b.launch(grid_1d(c_out * t_out)) }.map_err(gpu)?;
        self.wrap(&[c_out, t_out], out)
    }

    fn snake(&self, x: &Tensor, alpha: &Tensor) -> Result<Tensor> {
        let (c, t) = shapes::snake(x, alpha)?;
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, c * t)?;
        let a = self.float(alpha, Op::Snake)?;
        let kernel = if a.dtype() == DType::F32 { "snake_f32" } else { "snake_bf16" };
        let (c32, t64) = (c as i32, t as i64);
        let mut b = lane.stream.launch_builder(self.kernels.get(kernel)?);
        b.arg(self.f32s(x, Op::Snake)?);
        match a {
            Float::F32(s) => b.arg(s),
            Float::BF16(s) => b.arg(s),
        };
        b.arg(&mut out).arg(&c32).arg(&t64);
        // SAFETY: c * t floats each side, c alphas.
        unsafe { b.launch(grid_1d(c * t)) }.map_err(gpu)?;
        self.wrap(x.shape(), out)
    }
}
