//! The DiT's block products under `--precision fp8`: each matrix in e4m3 with a scale per output
//! channel, each product's activations encoded the same way with a scale per token
//! (kernels/fp8.cu), and the product on the FP8 tensor cores through cuBLASLt with f32
//! accumulation. cuBLASLt applies both scales itself where it takes vectors of them (outer-vector
//! scaling: CUDA 12.9 and later, on Hopper and Blackwell); elsewhere a finishing kernel does.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::OnceLock;

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublaslt::{result as lt_result, sys as lt};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use super::CudaBackend;
use super::context::{Lane, gpu};
use super::storage::Float;
use crate::error::{Error, Result};

/// FP8 matrices' rows and columns are padded with zeros to multiples of this: cuBLASLt's FP8
/// products take only such sizes (the tiny test model's are not).
pub const FP8_ALIGN: usize = 16;

/// The workspace cuBLASLt may use a product (NVIDIA's advice for Hopper).
const WORKSPACE_BYTES: usize = 32 << 20;

/// How this process's FP8 products apply their scales, once the first has run (for the benches).
static SCALING: OnceLock<String> = OnceLock::new();

pub fn scaling() -> Option<&'static str> {
    SCALING.get().map(String::as_str)
}

/// Whether cuBLASLt can be loaded (only the fp8 policy uses it).
pub(super) fn library_present() -> Result<()> {
    // SAFETY: only tries to dlopen the library by name.
    if unsafe { lt::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::Gpu("--precision fp8 needs cuBLASLt (libcublasLt), which is not installed".into()))
    }
}

/// An FP8 matrix `[rows, cols]` on the device: codes `[padded rows, padded cols]` and a scale per
/// padded row (the padding holds zeros).
#[derive(Debug, Clone)]
pub struct CudaFp8 {
    pub codes: CudaSlice<u8>,
    pub scales: CudaSlice<f32>,
    pub rows: usize,
    pub cols: usize,
}

impl CudaFp8 {
    pub fn padded_rows(&self) -> usize {
        self.rows.next_multiple_of(FP8_ALIGN)
    }

    pub fn padded_cols(&self) -> usize {
        self.cols.next_multiple_of(FP8_ALIGN)
    }

    pub fn try_clone(&self) -> Result<Self> {
        Ok(CudaFp8 {
            codes: self.codes.try_clone().map_err(gpu)?,
            scales: self.scales.try_clone().map_err(gpu)?,
            ..*self
        })
    }

    /// The values the codes and scales stand for, copied back to the host.
    pub fn to_host(&self) -> Result<Vec<f32>> {
        let stream = self.codes.stream();
        let codes = stream.clone_dtoh(&self.codes).map_err(gpu)?;
        let scales = stream.clone_dtoh(&self.scales).map_err(gpu)?;
        let padded = self.padded_cols();
        Ok(crate::fp8::dequantize_rows(&codes[..self.rows * padded], &scales[..self.rows], self.cols, padded))
    }
}

/// A product's activations encoded for the FP8 tensor cores: `[m, padded k]` codes and a scale a row.
pub(super) struct Fp8Input {
    codes: CudaSlice<u8>,
    scales: CudaSlice<f32>,
    m: usize,
    k: usize,
}

/// One product shape's cuBLASLt plan: descriptors, layouts and the algorithm its heuristic chose.
struct Plan {
    desc: lt::cublasLtMatmulDesc_t,
    layouts: [lt::cublasLtMatrixLayout_t; 3],
    algo: lt::cublasLtMatmulAlgo_t,
    /// Whether cuBLASLt applies the two scale vectors itself.
    scales_inside: bool,
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: made by this plan and destroyed once, here.
        unsafe {
            let _ = lt_result::destroy_matmul_desc(self.desc);
            for layout in self.layouts {
                let _ = lt_result::destroy_matrix_layout(layout);
            }
        }
    }
}

/// One lane's cuBLASLt handle, workspace and plans by `(m, padded n, padded k)`.
pub(super) struct Fp8Lane {
    handle: lt::cublasLtHandle_t,
    workspace: CudaSlice<u8>,
    plans: HashMap<(usize, usize, usize), Plan>,
    /// The SMs the plans target (the lane's [`Lane::product_sms`]); `None`: all.
    product_sms: Option<u32>,
}

// SAFETY: the handle and descriptors are plain host objects cuBLASLt lets any thread use; a lane
// holds them behind a mutex, so one thread at a time does.
unsafe impl Send for Fp8Lane {}

impl Drop for Fp8Lane {
    fn drop(&mut self) {
        self.plans.clear();
        // SAFETY: made by `new` and destroyed once, here, after the plans made with it.
        let _ = unsafe { lt_result::destroy_handle(self.handle) };
    }
}

/// Sets descriptor attribute `attr` to `value`.
fn set_attr<T>(desc: lt::cublasLtMatmulDesc_t, attr: lt::cublasLtMatmulDescAttributes_t, value: &T) -> Result<()> {
    // SAFETY: `value` is the attribute's type and size, read during the call.
    unsafe { lt_result::set_matmul_desc_attribute(desc, attr, value as *const T as *const c_void, size_of::<T>()) }
        .map_err(gpu)
}

impl Fp8Lane {
    fn new(lane: &Lane) -> Result<Self> {
        let handle = lt_result::create_handle().map_err(gpu)?;
        let workspace = match lane.stream.alloc_zeros::<u8>(WORKSPACE_BYTES) {
            // Outside the budget's count, like cuBLAS's own workspace; the plan counts it with the
            // DiT's workspace.
            Ok(w) => w,
            Err(e) => {
                // SAFETY: just made, used by nothing.
                let _ = unsafe { lt_result::destroy_handle(handle) };
                return Err(gpu(e));
            }
        };
        Ok(Fp8Lane { handle, workspace, plans: HashMap::new(), product_sms: lane.product_sms })
    }

    /// Runs `out = w^T x` for codes `w` (`[n, k]`), `x` (`[m, k]`), `out` `[m, n]` f32, all device
    /// addresses; the scales (`n` and `m` of them) applied too where the plan can. Returns whether
    /// they were.
    fn run(
        &mut self,
        lane: &Lane,
        (m, n, k): (usize, usize, usize),
        [w, x, out]: [u64; 3],
        [w_scales, x_scales]: [u64; 2],
    ) -> Result<bool> {
        use lt::cublasLtMatmulDescAttributes_t as A;
        if !self.plans.contains_key(&(m, n, k)) {
            let plan = match self.make_plan(m, n, k, true) {
                Ok(plan) => {
                    let _ = SCALING.set("cuBLASLt applies the scale vectors".into());
                    plan
                }
                // Without outer-vector scaling (before CUDA 12.9, or on Ada) the finishing kernel scales.
                Err(e) => {
                    let _ = SCALING.set(format!("a finishing kernel applies the scales (cuBLASLt: {e})"));
                    self.make_plan(m, n, k, false)?
                }
            };
            self.plans.insert((m, n, k), plan);
        }
        let plan = &self.plans[&(m, n, k)];
        if plan.scales_inside {
            set_attr(plan.desc, A::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales)?;
            set_attr(plan.desc, A::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales)?;
        }
        let (alpha, beta) = (1.0f32, 0.0f32);
        let [a_layout, b_layout, d_layout] = plan.layouts;
        let (workspace, _ws) = self.workspace.device_ptr(&lane.stream);
        // SAFETY: the addresses are of live device buffers of the layouts' sizes, the workspace is
        // WORKSPACE_BYTES long, and the stream is this lane's.
        unsafe {
            lt_result::matmul(
                self.handle,
                plan.desc,
                (&alpha) as *const f32 as *const c_void,
                (&beta) as *const f32 as *const c_void,
                w as *const c_void,
                a_layout,
                x as *const c_void,
                b_layout,
                out as *const c_void,
                d_layout,
                out as *mut c_void,
                d_layout,
                &plan.algo,
                workspace as *mut c_void,
                WORKSPACE_BYTES,
                lane.stream.cu_stream() as lt::cudaStream_t,
            )
        }
        .map_err(gpu)?;
        Ok(plan.scales_inside)
    }

    /// The plan of `d [m, n] = x [m, k] . w [n, k]^T` in cuBLASLt's column-major terms: `w` as
    /// `A` (`k x n`, transposed), `x` as `B` (`k x m`), `d` as `n x m`.
    fn make_plan(&self, m: usize, n: usize, k: usize, scales_inside: bool) -> Result<Plan> {
        use lt::cublasLtMatmulDescAttributes_t as A;
        let fp8 = lt::cudaDataType::CUDA_R_8F_E4M3;
        let desc =
            lt_result::create_matmul_desc(lt::cublasComputeType_t::CUBLAS_COMPUTE_32F, lt::cudaDataType::CUDA_R_32F)
                .map_err(gpu)?;
        // SAFETY: the algorithm is plain data, filled in below before any use.
        let algo = unsafe { std::mem::zeroed() };
        let mut plan = Plan { desc, layouts: [std::ptr::null_mut(); 3], algo, scales_inside };
        set_attr(desc, A::CUBLASLT_MATMUL_DESC_TRANSA, &(cublasOperation_t::CUBLAS_OP_T as i32))?;
        set_attr(desc, A::CUBLASLT_MATMUL_DESC_TRANSB, &(cublasOperation_t::CUBLAS_OP_N as i32))?;
        if let Some(sms) = self.product_sms {
            set_attr(desc, A::CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &(sms as i32))?;
        }
        if scales_inside {
            let outer = lt::cublasLtMatmulMatrixScale_t::CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F as i32;
            set_attr(desc, A::CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &outer)?;
            set_attr(desc, A::CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &outer)?;
        }
        let shapes = [(fp8, k, n), (fp8, k, m), (lt::cudaDataType::CUDA_R_32F, n, m)];
        for (slot, (dtype, rows, cols)) in plan.layouts.iter_mut().zip(shapes) {
            *slot = lt_result::create_matrix_layout(dtype, rows as u64, cols as u64, rows as i64).map_err(gpu)?;
        }
        let pref = lt_result::create_matmul_pref().map_err(gpu)?;
        let [a, b, d] = plan.layouts;
        // SAFETY: every descriptor was just made; the preference is destroyed once, below.
        let heuristic = unsafe {
            let found = lt_result::set_matmul_pref_attribute(
                pref,
                lt::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&WORKSPACE_BYTES) as *const usize as *const c_void,
                size_of::<usize>(),
            )
            .and_then(|()| lt_result::get_matmul_algo_heuristic(self.handle, desc, a, b, d, d, pref));
            let _ = lt_result::destroy_matmul_pref(pref);
            found
        }
        .map_err(|e| Error::Gpu(format!("cuBLASLt has no FP8 product of {m}x{k} by {n}x{k}: {e}")))?;
        plan.algo = heuristic.algo;
        Ok(plan)
    }
}

impl CudaBackend {
    /// `x [rows, cols]` (f32 or bf16) as an FP8 matrix.
    pub(super) fn quantize_fp8(&self, lane: &Lane, x: Float, rows: usize, cols: usize) -> Result<CudaFp8> {
        let (padded_rows, padded_cols) = (rows.next_multiple_of(FP8_ALIGN), cols.next_multiple_of(FP8_ALIGN));
        // Through the budget's allocator; zeros in the padding rows.
        let mut codes = self.alloc_as::<u8>(lane, padded_rows * padded_cols)?;
        let mut scales = self.alloc_as::<f32>(lane, padded_rows)?;
        lane.stream.memset_zeros(&mut codes).map_err(gpu)?;
        lane.stream.memset_zeros(&mut scales).map_err(gpu)?;
        self.quantize_rows(lane, x, rows, cols, &mut codes, &mut scales)?;
        Ok(CudaFp8 { codes, scales, rows, cols })
    }

    /// The activations `x [m, k]` of FP8 products, encoded once for all of them.
    pub(super) fn fp8_input(&self, lane: &Lane, x: &CudaSlice<f32>, m: usize, k: usize) -> Result<Fp8Input> {
        let mut codes = self.alloc_as::<u8>(lane, m * k.next_multiple_of(FP8_ALIGN))?;
        let mut scales = self.alloc(lane, m)?;
        self.quantize_rows(lane, Float::F32(x), m, k, &mut codes, &mut scales)?;
        Ok(Fp8Input { codes, scales, m, k })
    }

    fn quantize_rows(
        &self,
        lane: &Lane,
        x: Float,
        rows: usize,
        cols: usize,
        codes: &mut CudaSlice<u8>,
        scales: &mut CudaSlice<f32>,
    ) -> Result<()> {
        if rows == 0 {
            return Ok(());
        }
        let (cols_i, padded_i) = (cols as i32, cols.next_multiple_of(FP8_ALIGN) as i32);
        let cfg = LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        let kernel = match x {
            Float::F32(_) => "quantize_rows_e4m3_f32",
            Float::BF16(_) => "quantize_rows_e4m3_bf16",
        };
        let mut b = lane.stream.launch_builder(self.kernels.get(kernel)?);
        match x {
            Float::F32(s) => b.arg(s),
            Float::BF16(s) => b.arg(s),
        };
        b.arg(codes).arg(scales).arg(&cols_i).arg(&padded_i);
        // SAFETY: x holds rows * cols values; codes at least rows * padded cols, scales rows.
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        Ok(())
    }

    /// `y [m, n] = x . w^T (+ bias)` for FP8 `w [n, k]` and encoded activations `x [m, k]`: the
    /// product, then where needed one pass that scales (where cuBLASLt did not), adds the bias and
    /// drops the padded rows' columns.
    pub(super) fn matmul_fp8(
        &self,
        lane: &Lane,
        x: &Fp8Input,
        w: &CudaFp8,
        bias: Option<&CudaSlice<f32>>,
    ) -> Result<CudaSlice<f32>> {
        let (m, n, padded_n) = (x.m, w.rows, w.padded_rows());
        let (product, scales_inside) = self.fp8_product(lane, x, w)?;
        if (scales_inside && bias.is_none() && padded_n == n) || m == 0 {
            return Ok(product);
        }
        let (mut y, padded) = if padded_n == n { (product, None) } else { (self.alloc(lane, m * n)?, Some(product)) };
        let (rows, cols, ld, apply) = (m as i32, n as i32, padded_n as i32, i32::from(!scales_inside));
        let null = 0u64;
        let mut b = lane.stream.launch_builder(self.kernels.get("fp8_finish")?);
        match &padded {
            Some(p) => b.arg(p),
            None => b.arg(&null),
        };
        b.arg(&mut y).arg(&x.scales).arg(&w.scales);
        match bias {
            Some(bias) => b.arg(bias),
            None => b.arg(&null),
        };
        b.arg(&rows).arg(&cols).arg(&ld).arg(&apply);
        let cfg = LaunchConfig {
            grid_dim: (m as u32, n.div_ceil(1024) as u32, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the product is [m, ld] (y itself, the null address, when ld == n), y [m, n], the
        // scales m and at least n, the bias (or the null address) n; a block a row and 1024 columns.
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        Ok(y)
    }

    /// The GLU of `x . w^T + bias` for FP8 `w [2f, k]` (rows a multiple of 16, so unpadded): the
    /// product, then one pass that scales (where cuBLASLt did not), adds the bias and takes the GLU
    /// (kernels/elementwise.cu's `bias_glu_f32`), `[m, f]`.
    pub(super) fn linear_glu_fp8(
        &self,
        lane: &Lane,
        x: &Fp8Input,
        w: &CudaFp8,
        bias: &CudaSlice<f32>,
    ) -> Result<CudaSlice<f32>> {
        let (m, f) = (x.m, w.rows / 2);
        if w.rows != w.padded_rows() || !f.is_multiple_of(4) || bias.len() < w.rows {
            return Err(Error::shape("fp8 GLU", format!("{} rows with a bias of {}", w.rows, bias.len())));
        }
        let (product, scales_inside) = self.fp8_product(lane, x, w)?;
        let mut out = self.alloc(lane, m * f)?;
        if m == 0 {
            return Ok(out);
        }
        let (half, apply) = (f as i32, i32::from(!scales_inside));
        let mut b = lane.stream.launch_builder(self.kernels.get("fp8_bias_glu")?);
        b.arg(&product).arg(bias).arg(&mut out).arg(&x.scales).arg(&w.scales).arg(&half).arg(&apply);
        let cfg = LaunchConfig {
            grid_dim: (f.div_ceil(1024) as u32, m as u32, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the product is [m, 2f] with f a multiple of 4, the bias and column scales 2f, the
        // row scales m, out [m, f].
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        Ok(out)
    }

    /// The product `x . w^T` into `[m, padded n]`, and whether cuBLASLt applied the scales.
    fn fp8_product(&self, lane: &Lane, x: &Fp8Input, w: &CudaFp8) -> Result<(CudaSlice<f32>, bool)> {
        if x.k != w.cols {
            return Err(Error::shape("fp8 product", format!("[{}, {}] by [{}, {}]^T", x.m, x.k, w.rows, w.cols)));
        }
        let (m, padded_n, padded_k) = (x.m, w.padded_rows(), w.padded_cols());
        let mut product = self.alloc(lane, m * padded_n)?;
        if m == 0 {
            return Ok((product, true));
        }
        let inside = {
            let mut state = lane.fp8.lock().map_err(|_| Error::Gpu("the FP8 product state was poisoned".into()))?;
            let state = match &mut *state {
                Some(state) => state,
                empty => empty.insert(Fp8Lane::new(lane)?),
            };
            let stream = &lane.stream;
            let (w_codes, _w) = w.codes.device_ptr(stream);
            let (x_codes, _x) = x.codes.device_ptr(stream);
            let (w_scales, _ws) = w.scales.device_ptr(stream);
            let (x_scales, _xs) = x.scales.device_ptr(stream);
            let (out, _out) = product.device_ptr_mut(stream);
            state.run(lane, (m, padded_n, padded_k), [w_codes, x_codes, out], [w_scales, x_scales])?
        };
        Ok((product, inside))
    }
}
