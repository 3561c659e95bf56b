//! The CUDA backend's products: `linear` and its fused forms. cuBLAS GEMMs under the acoustic
//! half's precision policy, bf16 GEMMs with their activations rounded once, and the decode step's
//! GEMV kernels (kernels/gemv.cu, kernels/gemv_quant.cu) for up to 32 rows, 8 a launch.

use cudarc::cublas::sys as blas_sys;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use super::context::{Lane, gpu};
use super::decode_shapes::{DecodeShape, Family};
use super::launch::{BLOCK, Overlapped, grid_1d};
use super::storage::{CudaFp8, CudaQuant, Float};
use super::{CudaBackend, CudaStorage};
use crate::device::{ElementwiseOps, Op, ProductOps, RmsNorm, composed};
use crate::error::{Error, Result};
use crate::precision::Precision;
use crate::quant::GROUP;
use crate::shapes;
use crate::tensor::{DType, Storage, Tensor};

/// The cuBLAS compute type of f32 products under `precision` (the bf16 policy's DiT matrices
/// are bf16 and take the bf16 path; what stays f32 under it, the vocoder, runs in TF32).
fn compute_type(precision: Precision) -> blas_sys::cublasComputeType_t {
    match precision {
        Precision::Reference => blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        Precision::Tf32 | Precision::Bf16 | Precision::Fp8 => {
            blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
        }
    }
}

/// The most activation rows one decode-product (GEMV) kernel takes.
pub(super) const GEMV_KERNEL_ROWS: usize = 8;

/// The most activation rows the decode products take, launched [`GEMV_KERNEL_ROWS`] at a time:
/// several songs' decode steps (two rows a song), each row summed as it is alone
/// (decode_shapes.rs), so a song in a batch is the song alone. The CPU's bound (cpu/gemm.rs).
pub(super) const GEMV_MAX_ROWS: usize = 32;

/// The first row and the row count of each launch of a decode product of `m` rows.
fn row_chunks(m: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..m).step_by(GEMV_KERNEL_ROWS).map(move |first| (first, (m - first).min(GEMV_KERNEL_ROWS)))
}

/// An input of the decode products: f32 for bf16 weights, quantized (kernels/gemv_quant.cu's
/// `quantize_activations`) for quantized ones.
pub(super) enum DecodeInput<'a> {
    F32(&'a CudaSlice<f32>),
    Quant(QuantInput),
}

/// Quantized activations in one allocation: the int8 values, then each group's two sums (8-byte
/// aligned, as the kernels read them), then its scale, all 4-byte words. One allocation and free a
/// product instead of three each took the q4 decode step, which the host issues in about as long
/// as the GPU runs it, from 2.96 to 2.72 ms on the H200 (docs/BENCHMARKS.md).
pub(super) struct QuantInput {
    words: CudaSlice<u32>,
    groups: usize,
}

impl QuantInput {
    fn values_len(&self) -> usize {
        self.groups * GROUP / 4
    }

    fn sums_at(&self) -> usize {
        self.values_len()
    }

    fn scales_at(&self) -> usize {
        self.values_len() + 2 * self.groups
    }
}

impl DecodeInput<'_> {
    /// The input from activation row `first` on, of rows `k` long.
    pub(super) fn push(&self, b: &mut Overlapped, first: usize, k: usize) {
        match self {
            DecodeInput::F32(x) => b.input_from(*x, first * k),
            DecodeInput::Quant(q) => {
                let groups = first * k / GROUP;
                b.input_from(&q.words, first * k / 4)
                    .input_from(&q.words, q.scales_at() + groups)
                    .input_from(&q.words, q.sums_at() + 2 * groups)
            }
        };
    }

    /// The fused norm's arguments, which only the f32 input's kernels take (a quantized input has
    /// the norm applied already).
    pub(super) fn push_norm(&self, b: &mut Overlapped, norm: Option<&CudaSlice<u16>>, eps: f32) {
        if let DecodeInput::F32(_) = self {
            b.optional(norm).float(eps);
        }
    }
}

/// The weight of a decode product, in a form the GEMV kernels read.
#[derive(Clone, Copy)]
pub(super) enum DecodeWeight<'a> {
    /// bf16 bits (kernels/gemv.cu), rows a multiple of 8 long.
    Bf16(&'a CudaSlice<u16>),
    /// q8 or q4 (kernels/gemv_quant.cu), rows whole 16-byte loads long.
    Quant(&'a CudaQuant),
}

/// The kernel, rows a block and threads a block of one decode product.
pub(super) struct DecodeLaunch {
    pub kernel: &'static str,
    pub rows_per_block: usize,
    pub threads: u32,
}

impl DecodeLaunch {
    /// The launch over `rows` weight rows.
    pub(super) fn config(&self, rows: usize) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (rows.div_ceil(self.rows_per_block) as u32, 1, 1),
            block_dim: (self.threads, 1, 1),
            shared_mem_bytes: 0,
        }
    }
}

impl DecodeWeight<'_> {
    /// How `family`'s decode product of `m` activation rows against this weight, rows `k` long, is
    /// launched: the launch-shape table's kernel for it ([`DecodeShape`]).
    pub(super) fn launch(&self, family: Family, m: usize, k: usize) -> Result<DecodeLaunch> {
        let (dtype, row_loads) = match self {
            DecodeWeight::Bf16(_) => (DType::BF16, k / 8),
            DecodeWeight::Quant(q) => (q.dtype, k / q.per_load()),
        };
        let shape = DecodeShape::find(dtype, family, m, row_loads)
            .ok_or_else(|| Error::Gpu(format!("no {dtype:?} decode kernel for {family:?} of {m} rows")))?;
        Ok(DecodeLaunch { kernel: shape.name, rows_per_block: shape.rows_per_block, threads: shape.threads(row_loads) })
    }

    /// The row count, which the quantized kernels take before the row length.
    pub(super) fn rows(&self, b: &mut Overlapped, m: usize) {
        if let DecodeWeight::Quant(_) = self {
            b.int(m as i32);
        }
    }

    /// The weight's arguments: its bits, or its words, scales and offsets.
    pub(super) fn push(&self, b: &mut Overlapped) {
        match self {
            DecodeWeight::Bf16(bits) => b.input(*bits),
            DecodeWeight::Quant(q) => b.input(&q.words).input(&q.scales).input(q.offsets_or_scales()),
        };
    }

    fn same_form(&self, other: &DecodeWeight) -> bool {
        match (self, other) {
            (DecodeWeight::Bf16(_), DecodeWeight::Bf16(_)) => true,
            (DecodeWeight::Quant(a), DecodeWeight::Quant(b)) => a.dtype == b.dtype,
            _ => false,
        }
    }
}

/// A decode product the fused GEMV kernels take: `x [m <= 32, k]` f32 against a bf16 weight with
/// `k` a multiple of 8, or a quantized one with rows of whole loads. Returns `(m, k, n)` and the
/// weight.
pub(super) fn decode_product<'a>(x: &Tensor, w: &'a Tensor) -> Option<(usize, usize, usize, DecodeWeight<'a>)> {
    let (m, k, n) = shapes::linear(x, w, None).ok()?;
    if !(1..=GEMV_MAX_ROWS).contains(&m) || !matches!(x.storage(), Storage::Cuda(CudaStorage::F32(_))) {
        return None;
    }
    match w.storage() {
        Storage::Cuda(CudaStorage::BF16(bits)) if k.is_multiple_of(8) => Some((m, k, n, DecodeWeight::Bf16(bits))),
        Storage::Cuda(CudaStorage::Quant(q)) if k.is_multiple_of(GROUP) => Some((m, k, n, DecodeWeight::Quant(q))),
        _ => None,
    }
}

/// Whether decode products of these weights share one form (the fused kernels take one).
pub(super) fn same_form(weights: &[DecodeWeight]) -> bool {
    weights.windows(2).all(|p| p[0].same_form(&p[1]))
}

/// Whether the fused GEMVs can apply `norm` to `x` themselves: `Some(None)` for no norm,
/// `Some(Some(bits))` for a bf16 weight as long as a row of `x`, `None` when they cannot.
pub(super) fn fused_norm<'a>(norm: Option<RmsNorm<'a>>, x: &Tensor) -> Option<Option<&'a CudaSlice<u16>>> {
    let Some(norm) = norm else { return Some(None) };
    match norm.weight.storage() {
        Storage::Cuda(CudaStorage::BF16(bits)) if Some(&norm.weight.elem_count()) == x.shape().last() => {
            Some(Some(bits))
        }
        _ => None,
    }
}

/// An FP8 matrix on the GPU.
fn fp8_matrix(t: &Tensor) -> Option<&CudaFp8> {
    match t.storage() {
        Storage::Cuda(CudaStorage::Fp8(f)) => Some(f),
        _ => None,
    }
}

/// The bits of a bf16 tensor on the GPU.
fn bf16_bits(t: &Tensor) -> Option<&CudaSlice<u16>> {
    match t.storage() {
        Storage::Cuda(CudaStorage::BF16(bits)) => Some(bits),
        _ => None,
    }
}

impl CudaBackend {
    /// The input of decode products of `weight`: `x` itself for bf16, quantized (and RMS-normalised
    /// by `norm`, the weight's bits and epsilon) for a quantized weight.
    pub(super) fn decode_input<'x>(
        &self,
        lane: &Lane,
        x: &'x CudaSlice<f32>,
        m: usize,
        k: usize,
        weight: &DecodeWeight,
        norm: Option<(&CudaSlice<u16>, f32)>,
    ) -> Result<DecodeInput<'x>> {
        let DecodeWeight::Quant(q) = weight else { return Ok(DecodeInput::F32(x)) };
        let groups = m * k / GROUP;
        let words = self.alloc_as::<u32>(lane, m * k / 4 + 3 * groups)?;
        let mut input = QuantInput { words, groups };
        let (scales_at, sums_at) = (input.scales_at(), input.sums_at());
        let (ki, bits, eps) = (k as i32, if q.dtype == DType::Q8 { 8i32 } else { 4 }, norm.map_or(0.0, |n| n.1));
        let mut b = Overlapped::new(&lane.stream, self.kernels.get("quantize_activations")?);
        b.input(x).optional(norm.map(|n| n.0)).float(eps).output(&mut input.words);
        b.output_from(&mut input.words, scales_at).output_from(&mut input.words, sums_at);
        b.int(ki).int(bits);
        let threads = (k / 4).min(1024);
        let cfg = LaunchConfig {
            grid_dim: (m as u32, (k / 4).div_ceil(threads) as u32, 1),
            block_dim: (threads as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: x is [m, k] with k whole groups of 32 (so whole warps of four values a thread),
        // the norm weight (when given) k bf16 values; the outputs, parts of one allocation, hold
        // m * k bytes, m * k / 32 scales and twice as many sums; the kernel waits before it reads x.
        unsafe { b.launch(cfg, self.overlap) }?;
        Ok(DecodeInput::Quant(input))
    }

    pub(super) fn matmul_nt(
        &self,
        lane: &Lane,
        x: &CudaSlice<f32>,
        m: usize,
        k: usize,
        w: &CudaStorage,
        n: usize,
    ) -> Result<CudaSlice<f32>> {
        if let CudaStorage::Fp8(w) = w {
            let input = self.fp8_input(lane, x, m, k)?;
            return self.matmul_fp8(lane, &input, w, None);
        }
        let mut y = self.alloc(lane, m * n)?;
        let (mi, ni, ki) = (m as i32, n as i32, k as i32);
        match w {
            CudaStorage::Fp8(_) => unreachable!("taken above"),
            CudaStorage::Quant(q) if m <= GEMV_MAX_ROWS && k.is_multiple_of(GROUP) => {
                let weight = DecodeWeight::Quant(q);
                let input = self.decode_input(lane, x, m, k, &weight, None)?;
                for (first, rows) in row_chunks(m) {
                    let launch = weight.launch(Family::Plain, rows, k)?;
                    let mut b = Overlapped::new(&lane.stream, self.kernels.get(launch.kernel)?);
                    weight.push(&mut b);
                    input.push(&mut b, first, k);
                    b.output_from(&mut y, first * n);
                    weight.rows(&mut b, rows);
                    b.int(ki).int(ni);
                    let cfg = launch.config(n);
                    // SAFETY: w holds [n, k] weights with k whole groups, the input [m, k]
                    // quantized, y [m, n], rows [first, first + rows) of each launched; the kernel
                    // waits before it reads the input or writes y.
                    unsafe { b.launch(cfg, self.overlap) }?;
                }
            }
            CudaStorage::Quant(q) => {
                // Beyond the decode shapes (prefill): dequantized to bf16, then the bf16 products.
                let bits = self.dequantize_bf16(lane, q)?;
                return self.matmul_nt(lane, x, m, k, &CudaStorage::BF16(bits), n);
            }
            CudaStorage::BF16(w) if m <= GEMV_MAX_ROWS && k.is_multiple_of(8) => {
                for (first, rows) in row_chunks(m) {
                    let launch = DecodeWeight::Bf16(w).launch(Family::Plain, rows, k)?;
                    let mut b = Overlapped::new(&lane.stream, self.kernels.get(launch.kernel)?);
                    b.input(w).input_from(x, first * k).output_from(&mut y, first * n).int(ki).int(ni);
                    // SAFETY: w is [n, k] with k a multiple of 8 (16-byte rows), x [m, k], y [m, n],
                    // rows [first, first + rows) of each launched; a block per its kernel's weight
                    // rows; the kernel waits before it reads x or writes y.
                    unsafe { b.launch(launch.config(n), self.overlap) }?;
                }
            }
            CudaStorage::BF16(w) if m <= 8 => {
                let warps_per_block = (BLOCK / 32) as usize;
                let cfg = LaunchConfig {
                    grid_dim: (n.div_ceil(warps_per_block) as u32, 1, 1),
                    block_dim: (BLOCK, 1, 1),
                    shared_mem_bytes: 0,
                };
                let mut b = lane.stream.launch_builder(self.kernels.get("gemv_bf16")?);
                b.arg(w).arg(x).arg(&mut y).arg(&mi).arg(&ki).arg(&ni);
                // SAFETY: w is [n, k], x [m, k], y [m, n]; one warp per weight row.
                unsafe { b.launch(cfg) }.map_err(gpu)?;
            }
            CudaStorage::BF16(w) => {
                // Activations go to bf16 too (as the reference's bf16 products see them); f32 out.
                let x16 = self.to_bf16(lane, x, m * k)?;
                self.gemm_bf16(lane, &x16, m, k, w, n, &mut y)?;
            }
            CudaStorage::F32(w) => {
                let (wp, _w_sync) = w.device_ptr(&lane.stream);
                let (xp, _x_sync) = x.device_ptr(&lane.stream);
                let (yp, _y_sync) = y.device_ptr_mut(&lane.stream);
                // As above, in f32.
                let ops = (blas_sys::cublasOperation_t::CUBLAS_OP_T, blas_sys::cublasOperation_t::CUBLAS_OP_N);
                self.gemm(lane, ops, (n, m, k), (wp, k), (xp, k), (yp, n), false)?;
            }
        }
        Ok(y)
    }

    /// `y [m, n] = x16 [m, k] . w [n, k]^T` with both in bf16, on the tensor cores.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn gemm_bf16(
        &self,
        lane: &Lane,
        x16: &CudaSlice<u16>,
        m: usize,
        k: usize,
        w: &CudaSlice<u16>,
        n: usize,
        y: &mut CudaSlice<f32>,
    ) -> Result<()> {
        let (wp, _w_sync) = w.device_ptr(&lane.stream);
        let (xp, _x_sync) = x16.device_ptr(&lane.stream);
        let (yp, _y_sync) = y.device_ptr_mut(&lane.stream);
        // Column-major view of the row-major product: y^T[n, m] = w[n, k] . x^T[k, m].
        let ops = (blas_sys::cublasOperation_t::CUBLAS_OP_T, blas_sys::cublasOperation_t::CUBLAS_OP_N);
        self.gemm(lane, ops, (n, m, k), (wp, k), (xp, k), (yp, n), true)
    }

    /// A product in cuBLAS's column-major terms, `c[m, n] = op(a) . op(b)` with `a` `m x k` after
    /// `op`, f32 out and f32 accumulation. f32 inputs run under this backend's [`Precision`]; bf16
    /// inputs (`bf16_inputs`) on the bf16 tensor cores.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn gemm(
        &self,
        lane: &Lane,
        (transa, transb): (blas_sys::cublasOperation_t, blas_sys::cublasOperation_t),
        (m, n, k): (usize, usize, usize),
        (a, lda): (u64, usize),
        (b, ldb): (u64, usize),
        (c, ldc): (u64, usize),
        bf16_inputs: bool,
    ) -> Result<()> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (input_type, compute) = if bf16_inputs {
            (blas_sys::cudaDataType::CUDA_R_16BF, blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F)
        } else {
            (blas_sys::cudaDataType::CUDA_R_32F, compute_type(self.precision))
        };
        // SAFETY: the caller passes device pointers of matrices of the stated sizes and strides.
        unsafe {
            cudarc::cublas::result::gemm_ex(
                *lane.blas.handle(),
                transa,
                transb,
                m as i32,
                n as i32,
                k as i32,
                (&alpha) as *const f32 as *const _,
                a as *const _,
                input_type,
                lda as i32,
                b as *const _,
                input_type,
                ldb as i32,
                (&beta) as *const f32 as *const _,
                c as *mut _,
                blas_sys::cudaDataType::CUDA_R_32F,
                ldc as i32,
                compute,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
            )
        }
        .map_err(gpu)
    }

    /// `x` rounded to bf16 (as the reference's bf16 products see their activations).
    pub(super) fn to_bf16(&self, lane: &Lane, x: &CudaSlice<f32>, n: usize) -> Result<CudaSlice<u16>> {
        let mut x16 = self.alloc_as::<u16>(lane, n)?;
        // Four values a thread where they come in fours (every activation of the model).
        let (kernel, count) = if n.is_multiple_of(4) { ("f32_to_bf16_x4", n / 4) } else { ("f32_to_bf16_kernel", n) };
        let count64 = count as i64;
        let mut b = lane.stream.launch_builder(self.kernels.get(kernel)?);
        b.arg(x).arg(&mut x16).arg(&count64);
        // SAFETY: n elements each side (n / 4 groups of four for the x4 kernel; fresh allocations
        // are 16-byte aligned).
        unsafe { b.launch(grid_1d(count)) }.map_err(gpu)?;
        Ok(x16)
    }

    pub(super) fn add_bias(&self, lane: &Lane, y: &mut CudaSlice<f32>, rows: usize, bias: Float) -> Result<()> {
        let cols = match bias {
            Float::F32(s) => s.len(),
            Float::BF16(s) => s.len(),
        } as i32;
        let rows64 = rows as i64;
        let kernel = if bias.dtype() == DType::F32 { "add_bias_f32" } else { "add_bias_bf16" };
        let mut b = lane.stream.launch_builder(self.kernels.get(kernel)?);
        b.arg(&mut *y);
        match bias {
            Float::F32(s) => b.arg(s),
            Float::BF16(s) => b.arg(s),
        };
        b.arg(&rows64).arg(&cols);
        // SAFETY: y holds rows * cols floats, bias cols values.
        unsafe { b.launch(grid_1d(rows * cols as usize)) }.map_err(gpu)?;
        Ok(())
    }

    /// `linear3` beyond the decode shapes: with three bf16 weights, the input is rounded to bf16
    /// once for the three products rather than once each.
    pub(super) fn linear3_gemm(&self, x: &Tensor, norm: Option<RmsNorm>, w: [&Tensor; 3]) -> Result<[Tensor; 3]> {
        if let (None, Some(w0), Some(w1), Some(w2)) = (norm, fp8_matrix(w[0]), fp8_matrix(w[1]), fp8_matrix(w[2])) {
            // The input encoded once for the three FP8 products.
            let (m, k, _) = shapes::linear(x, w[0], None)?;
            let lane = self.lane()?;
            let input = self.fp8_input(&lane, self.f32s(x, Op::Linear3)?, m, k)?;
            let product = |weight: &Tensor, fp8: &CudaFp8| -> Result<Tensor> {
                let (_, _, n) = shapes::linear(x, weight, None)?;
                self.wrap(&[m, n], self.matmul_fp8(&lane, &input, fp8, None)?)
            };
            return Ok([product(w[0], w0)?, product(w[1], w1)?, product(w[2], w2)?]);
        }
        let (None, Some(w0), Some(w1), Some(w2)) = (norm, bf16_bits(w[0]), bf16_bits(w[1]), bf16_bits(w[2])) else {
            return composed::linear3(self, x, norm, w);
        };
        let (m, k, _) = shapes::linear(x, w[0], None)?;
        let lane = self.lane()?;
        let x16 = self.to_bf16(&lane, self.f32s(x, Op::Linear3)?, m * k)?;
        let product = |weight: &Tensor, bits: &CudaSlice<u16>| -> Result<Tensor> {
            let (_, _, n) = shapes::linear(x, weight, None)?;
            let mut y = self.alloc(&lane, m * n)?;
            self.gemm_bf16(&lane, &x16, m, k, bits, n, &mut y)?;
            self.wrap(&[m, n], y)
        };
        Ok([product(w[0], w0)?, product(w[1], w1)?, product(w[2], w2)?])
    }
}

impl ProductOps for CudaBackend {
    fn product_weight(&self, w: Tensor) -> Result<Tensor> {
        match (self.precision, w.dtype()) {
            (Precision::Bf16 | Precision::Fp8, DType::F32) => self.cast(&w, DType::BF16),
            _ => Ok(w),
        }
    }

    fn linear(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let (m, k, n) = shapes::linear(x, w, bias)?;
        let lane = self.lane()?;
        if let (Some(fp8), Some(Storage::Cuda(CudaStorage::F32(b)))) = (fp8_matrix(w), bias.map(|b| b.storage())) {
            // The bias added in the pass that scales the product.
            let input = self.fp8_input(&lane, self.f32s(x, Op::Linear)?, m, k)?;
            return self.wrap(&[m, n], self.matmul_fp8(&lane, &input, fp8, Some(b))?);
        }
        let mut y = self.matmul_nt(&lane, self.f32s(x, Op::Linear)?, m, k, self.storage(w, Op::Linear)?, n)?;
        if let Some(b) = bias {
            self.add_bias(&lane, &mut y, m, self.float(b, Op::Linear)?)?;
        }
        self.wrap(&[m, n], y)
    }

    fn linear_glu(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let (m, k, n) = shapes::linear(x, w, bias)?;
        let f = n / 2;
        let bias = match bias.map(|b| b.storage()) {
            Some(Storage::Cuda(CudaStorage::F32(b))) if n.is_multiple_of(8) && m <= 65535 => b,
            _ => return composed::linear_glu(self, x, w, bias),
        };
        let lane = self.lane()?;
        if let Some(fp8) = fp8_matrix(w).filter(|w| w.rows == w.padded_rows()) {
            // The bias and the GLU taken in the pass that scales the product.
            let input = self.fp8_input(&lane, self.f32s(x, Op::LinearGlu)?, m, k)?;
            return self.wrap(&[m, f], self.linear_glu_fp8(&lane, &input, fp8, bias)?);
        }
        let y = self.matmul_nt(&lane, self.f32s(x, Op::LinearGlu)?, m, k, self.storage(w, Op::LinearGlu)?, n)?;
        let mut out = self.alloc(&lane, m * f)?;
        let cfg = LaunchConfig {
            grid_dim: ((f / 4).div_ceil(BLOCK as usize) as u32, m as u32, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let half = f as i32;
        let mut b = lane.stream.launch_builder(self.kernels.get("bias_glu_f32")?);
        b.arg(&y).arg(bias).arg(&mut out).arg(&half);
        // SAFETY: y is [m, 2f] and bias [2f] with f a multiple of 4 (16-byte rows); out is [m, f].
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        self.wrap(&[m, f], out)
    }

    fn linear_add(&self, x: &Tensor, w: &Tensor, residual: &Tensor) -> Result<Tensor> {
        let Some((m, k, n, weight)) = decode_product(x, w) else {
            return composed::linear_add(self, x, w, residual);
        };
        if residual.shape() != [m, n] {
            return Err(Error::shape("linear_add", format!("residual {:?} for {m}x{n}", residual.shape())));
        }
        let lane = self.lane()?;
        let mut y = self.alloc(&lane, m * n)?;
        let (ki, ni) = (k as i32, n as i32);
        let input = self.decode_input(&lane, self.f32s(x, Op::LinearAdd)?, m, k, &weight, None)?;
        let residual = self.f32s(residual, Op::LinearAdd)?;
        for (first, rows) in row_chunks(m) {
            let launch = weight.launch(Family::Add, rows, k)?;
            let mut b = Overlapped::new(&lane.stream, self.kernels.get(launch.kernel)?);
            weight.push(&mut b);
            input.push(&mut b, first, k);
            b.input_from(residual, first * n).output_from(&mut y, first * n);
            weight.rows(&mut b, rows);
            b.int(ki).int(ni);
            let cfg = launch.config(n);
            // SAFETY: as the decode product in `matmul_nt`; the residual is [m, n] like y.
            unsafe { b.launch(cfg, self.overlap) }?;
        }
        self.wrap(&[m, n], y)
    }

    fn linear_swiglu(&self, x: &Tensor, norm: Option<RmsNorm>, gate: &Tensor, up: &Tensor) -> Result<Tensor> {
        let (Some((m, k, n, g)), Some((_, _, up_n, u)), Some(norm_bits)) =
            (decode_product(x, gate), decode_product(x, up), fused_norm(norm, x))
        else {
            return composed::linear_swiglu(self, x, norm, gate, up);
        };
        if !same_form(&[g, u]) {
            return composed::linear_swiglu(self, x, norm, gate, up);
        }
        if up_n != n {
            return Err(Error::shape("linear_swiglu", format!("gate {:?} against up {:?}", gate.shape(), up.shape())));
        }
        let lane = self.lane()?;
        let mut y = self.alloc(&lane, m * n)?;
        let (ki, ni, eps) = (k as i32, n as i32, norm.map_or(0.0, |n| n.eps));
        let norm_eps = norm_bits.map(|bits| (bits, eps));
        let input = self.decode_input(&lane, self.f32s(x, Op::LinearSwiglu)?, m, k, &g, norm_eps)?;
        for (first, rows) in row_chunks(m) {
            let launch = g.launch(Family::Swiglu, rows, k)?;
            let mut b = Overlapped::new(&lane.stream, self.kernels.get(launch.kernel)?);
            g.push(&mut b);
            u.push(&mut b);
            input.push(&mut b, first, k);
            input.push_norm(&mut b, norm_bits, eps);
            b.output_from(&mut y, first * n);
            g.rows(&mut b, rows);
            b.int(ki).int(ni);
            let cfg = launch.config(n);
            // SAFETY: as the decode product in `matmul_nt`, for two weights of the same shape; the
            // norm weight, when given, holds k bf16 values (a null pointer otherwise).
            unsafe { b.launch(cfg, self.overlap) }?;
        }
        self.wrap(&[m, n], y)
    }

    fn linear3(&self, x: &Tensor, norm: Option<RmsNorm>, w: [&Tensor; 3]) -> Result<[Tensor; 3]> {
        let (Some((m, k, n0, w0)), Some((_, _, n1, w1)), Some((_, _, n2, w2)), Some(norm_bits)) =
            (decode_product(x, w[0]), decode_product(x, w[1]), decode_product(x, w[2]), fused_norm(norm, x))
        else {
            return self.linear3_gemm(x, norm, w);
        };
        if !same_form(&[w0, w1, w2]) {
            return composed::linear3(self, x, norm, w);
        }
        let lane = self.lane()?;
        let (mut y0, mut y1, mut y2) =
            (self.alloc(&lane, m * n0)?, self.alloc(&lane, m * n1)?, self.alloc(&lane, m * n2)?);
        let (ki, n0i, n1i, n2i, eps) = (k as i32, n0 as i32, n1 as i32, n2 as i32, norm.map_or(0.0, |n| n.eps));
        let norm_eps = norm_bits.map(|bits| (bits, eps));
        let input = self.decode_input(&lane, self.f32s(x, Op::Linear3)?, m, k, &w0, norm_eps)?;
        for (first, rows) in row_chunks(m) {
            let launch = w0.launch(Family::Group3, rows, k)?;
            let mut b = Overlapped::new(&lane.stream, self.kernels.get(launch.kernel)?);
            for weight in [w0, w1, w2] {
                weight.push(&mut b);
            }
            b.output_from(&mut y0, first * n0).output_from(&mut y1, first * n1).output_from(&mut y2, first * n2);
            input.push(&mut b, first, k);
            input.push_norm(&mut b, norm_bits, eps);
            w0.rows(&mut b, rows);
            b.int(ki).int(n0i).int(n1i).int(n2i);
            let per_block = launch.rows_per_block;
            let blocks = n0.div_ceil(per_block) + n1.div_ceil(per_block) + n2.div_ceil(per_block);
            let cfg = LaunchConfig {
                grid_dim: (blocks as u32, 1, 1),
                block_dim: (launch.threads, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: three decode products of one input, rows [first, first + rows) of each; the
            // grid is their row groups back to back; the norm weight, when given, holds k bf16
            // values (a null pointer otherwise).
            unsafe { b.launch(cfg, self.overlap) }?;
        }
        Ok([self.wrap(&[m, n0], y0)?, self.wrap(&[m, n1], y1)?, self.wrap(&[m, n2], y2)?])
    }
}
