//! The CUDA backend: cudarc with the driver, NVRTC and cuBLAS loaded at run time, so one binary
//! runs with or without CUDA. Activations are f32; weights stay bf16 or f32 on the device. Each
//! thread that uses the backend gets its own stream (and cuBLAS handle), so the AR loop and the
//! acoustic windows overlap on the GPU; cudarc's events order the work on shared tensors.

mod decode;
pub mod kernels;
mod launch;
mod products;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use cudarc::cublas::CudaBlas;
use cudarc::cublas::sys as blas_sys;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use self::decode::DecodeScratch;
use self::kernels::Kernels;
use self::launch::Overlapped;
pub use self::products::F32Math;
use self::products::{GEMV_SWIGLU_THREADS, GEMV_THREADS, decode_product, fused_norm, gemv_config};
use crate::device::{
    AttentionInputs, AttentionShape, Backend, Candidates, KvSlot, RmsNorm, Rotary, Shortlist, composed,
};
use crate::error::{Error, Result};
use crate::shapes;
use crate::tensor::{CpuStorage, DType, Storage, Tensor};

/// Device memory of one tensor.
#[derive(Debug, Clone)]
pub enum CudaStorage {
    F32(CudaSlice<f32>),
    /// bf16 as raw bits.
    BF16(CudaSlice<u16>),
}

impl CudaStorage {
    pub fn dtype(&self) -> DType {
        match self {
            CudaStorage::F32(_) => DType::F32,
            CudaStorage::BF16(_) => DType::BF16,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            CudaStorage::F32(s) => s.len(),
            CudaStorage::BF16(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies back to host memory as f32.
    pub fn to_host(&self) -> Result<Vec<f32>> {
        match self {
            CudaStorage::F32(s) => s.stream().clone_dtoh(s).map_err(gpu),
            CudaStorage::BF16(s) => {
                let bits = s.stream().clone_dtoh(s).map_err(gpu)?;
                Ok(bits.into_iter().map(|b| f32::from_bits((b as u32) << 16)).collect())
            }
        }
    }
}

fn gpu(e: impl std::fmt::Display) -> Error {
    let text = e.to_string();
    if text.contains("OUT_OF_MEMORY") || text.contains("ALLOC_FAILED") {
        Error::Gpu(format!("the GPU is out of memory ({text}); try a shorter song or a smaller model"))
    } else {
        Error::Gpu(format!("CUDA: {text}"))
    }
}

/// Whether the CUDA libraries can be loaded, without touching them otherwise.
pub fn libraries_present() -> std::result::Result<(), String> {
    // SAFETY: these only try to dlopen the libraries by name.
    let (driver, nvrtc, blas) = unsafe {
        (
            cudarc::driver::sys::is_culib_present(),
            cudarc::nvrtc::sys::is_culib_present(),
            cudarc::cublas::sys::is_culib_present(),
        )
    };
    match (driver, nvrtc, blas) {
        (false, _, _) => Err("no NVIDIA driver (libcuda) found".into()),
        (_, false, _) => Err("the CUDA runtime compiler (libnvrtc) is not installed".into()),
        (_, _, false) => Err("cuBLAS (libcublas) is not installed".into()),
        _ => Ok(()),
    }
}

/// The stream-ordered allocator gives freed memory back to the driver at every synchronization
/// unless its release threshold says to keep it. The AR loop synchronizes several times a frame
/// to sample, so with the default (keep nothing) every frame would map its working memory anew.
fn keep_freed_memory(ctx: &CudaContext) -> Result<()> {
    if !ctx.has_async_alloc() {
        return Ok(());
    }
    let mut threshold = u64::MAX;
    // SAFETY: the device comes from a live context; the attribute takes a u64.
    unsafe {
        let pool = cudarc::driver::result::device::get_default_mem_pool(ctx.cu_device()).map_err(gpu)?;
        cudarc::driver::result::mem_pool::set_attribute(
            pool,
            cudarc::driver::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold) as *mut u64 as *mut std::ffi::c_void,
        )
    }
    .map_err(gpu)
}

/// Returns the memory the pool keeps for reuse to the driver (after an out-of-memory error).
fn release_freed_memory(ctx: &CudaContext) -> Result<()> {
    if !ctx.has_async_alloc() {
        return Ok(());
    }
    // SAFETY: as above; called after a synchronization, so no freed block is still in use.
    unsafe {
        let pool = cudarc::driver::result::device::get_default_mem_pool(ctx.cu_device()).map_err(gpu)?;
        cudarc::driver::result::mem_pool::trim_to(pool, 0)
    }
    .map_err(gpu)
}

/// Whether NVRTC alone can be loaded (enough to compile the kernels, no GPU needed).
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen the library by name.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

struct Lane {
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    decode: Mutex<DecodeScratch>,
}

pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    kernels: Kernels,
    lanes: Mutex<HashMap<ThreadId, Arc<Lane>>>,
    description: String,
    math: F32Math,
    /// Whether the decode-step kernels launch overlapped (programmatic dependent launch, sm_90+).
    overlap: bool,
    /// Whether the GPU has TF32 tensor cores (sm_80+), which the fast policies' attention uses.
    tf32_mma: bool,
}

const BLOCK: u32 = 256;

/// Threads whose names start with this get a high-priority stream.
pub const CRITICAL_THREAD_PREFIX: &str = "songloom-ar";

fn grid_1d(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(BLOCK as usize).clamp(1, 65535 * 8) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 }
}

fn rows_config(rows: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 }
}

impl CudaBackend {
    /// Opens GPU `ordinal` and compiles the kernels for its architecture.
    pub fn new(ordinal: usize, math: F32Math) -> Result<Self> {
        libraries_present().map_err(Error::Gpu)?;
        let count = CudaContext::device_count().map_err(gpu)?;
        if ordinal as i32 >= count {
            return Err(Error::Gpu(format!("no CUDA device {ordinal} ({count} found)")));
        }
        let ctx = CudaContext::new(ordinal).map_err(gpu)?;
        // cudarc's per-tensor events cost several driver calls per launch (a decode step launches
        // about 800 kernels). Songloom's threads share only weights, which are complete before any
        // other stream reads them (`Device::synchronize` after loading), and every other tensor
        // lives and dies on the stream of the thread that made it.
        // SAFETY: that discipline is the synchronization cudarc would otherwise add.
        unsafe { ctx.disable_event_tracking() };
        keep_freed_memory(&ctx)?;
        let (major, minor) = ctx.compute_capability().map_err(gpu)?;
        let arch = format!("sm_{major}{minor}");
        let kernels = Kernels::load(&ctx, &arch)?;
        let name = ctx.name().map_err(gpu)?;
        let (free, total) = ctx.mem_get_info().map_err(gpu)?;
        let description =
            format!("{name}, {arch}, {:.1} of {:.1} GiB free", free as f64 / 1e9 * 0.931, total as f64 / 1e9 * 0.931);
        let (overlap, tf32_mma) = (major >= 9, major >= 8);
        Ok(CudaBackend { ctx, kernels, lanes: Mutex::new(HashMap::new()), description, math, overlap, tf32_mma })
    }

    pub fn description(&self) -> &str {
        &self.description
    }

    /// This thread's stream and cuBLAS handle.
    fn lane(&self) -> Result<Arc<Lane>> {
        let id = std::thread::current().id();
        let mut lanes = self.lanes.lock().map_err(|_| Error::Gpu("the stream table was poisoned".into()))?;
        if let Some(lane) = lanes.get(&id) {
            return Ok(lane.clone());
        }
        // The AR loop is the song's critical path: its thread's stream gets the highest priority
        // (CUDA's numerically lowest, -5 covers every GPU since Volta), so its short kernels run
        // between the DiT's long ones instead of queueing behind them.
        let critical = std::thread::current().name().is_some_and(|n| n.starts_with(CRITICAL_THREAD_PREFIX));
        let stream =
            if critical { self.ctx.new_stream_with_priority(-5) } else { self.ctx.new_stream() }.map_err(gpu)?;
        let blas = CudaBlas::new(stream.clone()).map_err(gpu)?;
        let lane = Arc::new(Lane { stream, blas, decode: Mutex::new(DecodeScratch::default()) });
        lanes.insert(id, lane.clone());
        Ok(lane)
    }

    /// Waits for every stream this backend made.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.synchronize().map_err(gpu)
    }

    /// Starts or stops what an external profiler records (`ncu --profile-from-start off`).
    pub fn profiler(&self, on: bool) -> Result<()> {
        self.ctx.bind_to_thread().map_err(gpu)?;
        // SAFETY: plain driver calls on the bound context.
        unsafe { if on { cudarc::driver::sys::cuProfilerStart() } else { cudarc::driver::sys::cuProfilerStop() } }
            .result()
            .map_err(gpu)
    }

    fn alloc(&self, lane: &Lane, n: usize) -> Result<CudaSlice<f32>> {
        self.alloc_as::<f32>(lane, n)
    }

    /// Device memory for `n` values (at least one). When the pool is out of memory, the memory it
    /// keeps for reuse is given back to the driver once and the allocation tried again.
    fn alloc_as<T: cudarc::driver::DeviceRepr>(&self, lane: &Lane, n: usize) -> Result<CudaSlice<T>> {
        // SAFETY: every kernel and copy that produces an output writes all of it.
        match unsafe { lane.stream.alloc::<T>(n.max(1)) } {
            Ok(s) => Ok(s),
            Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                self.synchronize()?;
                release_freed_memory(&self.ctx)?;
                unsafe { lane.stream.alloc::<T>(n.max(1)) }.map_err(gpu)
            }
            Err(e) => Err(gpu(e)),
        }
    }

    fn f32s<'a>(&self, t: &'a Tensor, op: &'static str) -> Result<&'a CudaSlice<f32>> {
        match t.storage() {
            Storage::Cuda(CudaStorage::F32(s)) => Ok(s),
            Storage::Cuda(other) => Err(Error::Unsupported { op, dtype: other.dtype().to_string(), backend: "cuda" }),
            Storage::Cpu(_) => Err(Error::Invalid(format!("{op}: a host tensor was given to the CUDA backend"))),
        }
    }

    fn storage<'a>(&self, t: &'a Tensor, op: &'static str) -> Result<&'a CudaStorage> {
        match t.storage() {
            Storage::Cuda(s) => Ok(s),
            Storage::Cpu(_) => Err(Error::Invalid(format!("{op}: a host tensor was given to the CUDA backend"))),
        }
    }

    /// An f32 result; its buffer may be one element longer than the shape when the shape is empty.
    fn wrap(&self, shape: &[usize], s: CudaSlice<f32>) -> Result<Tensor> {
        Ok(Tensor::new_unchecked(shape, Storage::Cuda(CudaStorage::F32(s))))
    }

    fn unary(&self, x: &Tensor, kernel: &str, op: &'static str) -> Result<Tensor> {
        let lane = self.lane()?;
        let src = self.f32s(x, op)?;
        let n = x.elem_count();
        let mut out = self.alloc(&lane, n)?;
        let n64 = n as i64;
        let mut b = lane.stream.launch_builder(self.kernels.get(kernel));
        b.arg(src).arg(&mut out).arg(&n64);
        // SAFETY: the kernel reads n floats of `src` and writes n floats of `out`, both that long.
        unsafe { b.launch(grid_1d(n)) }.map_err(gpu)?;
        self.wrap(x.shape(), out)
    }

    fn binary(&self, a: &Tensor, b: &Tensor, kernel: &str, op: &'static str) -> Result<Tensor> {
        if a.shape() != b.shape() {
            return Err(Error::shape(op, format!("{:?} vs {:?}", a.shape(), b.shape())));
        }
        let lane = self.lane()?;
        let (x, y) = (self.f32s(a, op)?, self.f32s(b, op)?);
        let n = a.elem_count();
        let mut out = self.alloc(&lane, n)?;
        let n64 = n as i64;
        let mut l = lane.stream.launch_builder(self.kernels.get(kernel));
        l.arg(x).arg(y).arg(&mut out).arg(&n64);
        // SAFETY: both inputs and the output hold n floats.
        unsafe { l.launch(grid_1d(n)) }.map_err(gpu)?;
        self.wrap(a.shape(), out)
    }

    /// `y[m, n] = x[m, k] @ w[n, k]^T` for a weight in either dtype.
    fn copy_rows(
        &self,
        lane: &Lane,
        src: &CudaSlice<f32>,
        from: usize,
        dst: &mut CudaSlice<f32>,
        to: usize,
        n: usize,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        lane.stream.memcpy_dtod(&src.slice(from..from + n), &mut dst.slice_mut(to..to + n)).map_err(gpu)
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn upload(&self, t: Tensor) -> Result<Tensor> {
        let shape = t.shape().to_vec();
        let storage = match t.into_storage() {
            Storage::Cuda(s) => Storage::Cuda(s),
            Storage::Cpu(cpu) => {
                let lane = self.lane()?;
                match cpu {
                    CpuStorage::F32(v) => Storage::Cuda(CudaStorage::F32(lane.stream.clone_htod(&v).map_err(gpu)?)),
                    CpuStorage::BF16(v) => {
                        let bits: &[u16] = bytemuck::cast_slice(&v);
                        Storage::Cuda(CudaStorage::BF16(lane.stream.clone_htod(bits).map_err(gpu)?))
                    }
                    // f16 is widened on the way up: no f16 kernels on this backend.
                    other @ CpuStorage::F16(_) => {
                        Storage::Cuda(CudaStorage::F32(lane.stream.clone_htod(&other.to_f32_vec()).map_err(gpu)?))
                    }
                }
            }
        };
        Ok(Tensor::new_unchecked(&shape, storage))
    }

    fn candidates(&self, logits: &Tensor, shortlist: &Shortlist) -> Result<Candidates> {
        if let ([2, width], Storage::Cuda(CudaStorage::F32(_))) = (logits.shape(), logits.storage())
            && let Some(list) = self.shortlist(logits, *width, shortlist)?
        {
            return Ok(list);
        }
        Ok(Candidates::of_rows(self.to_host(logits)?))
    }

    fn to_host(&self, t: &Tensor) -> Result<Vec<f32>> {
        match t.storage() {
            Storage::Cuda(s) => {
                let mut v = s.to_host()?;
                v.truncate(t.elem_count());
                Ok(v)
            }
            Storage::Cpu(c) => Ok(c.to_f32_vec()),
        }
    }

    fn product_weight(&self, w: Tensor) -> Result<Tensor> {
        match (self.math, w.dtype()) {
            (F32Math::Bf16, DType::F32) => self.cast(&w, DType::BF16),
            _ => Ok(w),
        }
    }

    fn cast(&self, t: &Tensor, dtype: DType) -> Result<Tensor> {
        let lane = self.lane()?;
        let n = t.elem_count();
        let n64 = n as i64;
        let storage = match (self.storage(t, "cast")?, dtype) {
            (s, d) if s.dtype() == d => s.clone(),
            (CudaStorage::F32(src), DType::BF16) => {
                let mut out = self.alloc_as::<u16>(&lane, n)?;
                let mut b = lane.stream.launch_builder(self.kernels.get("f32_to_bf16_kernel"));
                b.arg(src).arg(&mut out).arg(&n64);
                // SAFETY: n elements each side.
                unsafe { b.launch(grid_1d(n)) }.map_err(gpu)?;
                CudaStorage::BF16(out)
            }
            (CudaStorage::BF16(src), DType::F32) => {
                let mut out = self.alloc(&lane, n)?;
                let mut b = lane.stream.launch_builder(self.kernels.get("bf16_to_f32_kernel"));
                b.arg(src).arg(&mut out).arg(&n64);
                // SAFETY: n elements each side.
                unsafe { b.launch(grid_1d(n)) }.map_err(gpu)?;
                CudaStorage::F32(out)
            }
            (s, d) => {
                return Err(Error::Unsupported { op: "cast", dtype: format!("{} to {d}", s.dtype()), backend: "cuda" });
            }
        };
        Ok(Tensor::new_unchecked(t.shape(), Storage::Cuda(storage)))
    }

    fn linear(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let (m, k, n) = shapes::linear(x, w, bias)?;
        let lane = self.lane()?;
        let mut y = self.matmul_nt(&lane, self.f32s(x, "linear")?, m, k, self.storage(w, "linear")?, n)?;
        if let Some(b) = bias {
            self.add_bias(&lane, &mut y, m, self.storage(b, "linear")?)?;
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
        let y = self.matmul_nt(&lane, self.f32s(x, "linear_glu")?, m, k, self.storage(w, "linear_glu")?, n)?;
        let mut out = self.alloc(&lane, m * f)?;
        let cfg = LaunchConfig {
            grid_dim: ((f / 4).div_ceil(BLOCK as usize) as u32, m as u32, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let half = f as i32;
        let mut b = lane.stream.launch_builder(self.kernels.get("bias_glu_f32"));
        b.arg(&y).arg(bias).arg(&mut out).arg(&half);
        // SAFETY: y is [m, 2f] and bias [2f] with f a multiple of 4 (16-byte rows); out is [m, f].
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        self.wrap(&[m, f], out)
    }

    fn embedding(&self, table: &Tensor, ids: &[u32]) -> Result<Tensor> {
        let (vocab, dim) = table.dims2("embedding")?;
        if let Some(&bad) = ids.iter().find(|&&id| id as usize >= vocab) {
            return Err(Error::Invalid(format!("token id {bad} is outside the embedding table of {vocab} rows")));
        }
        let lane = self.lane()?;
        let ids_dev = lane.stream.clone_htod(ids).map_err(gpu)?;
        let mut out = self.alloc(&lane, ids.len() * dim)?;
        let (dim32, n64) = (dim as i32, ids.len() as i64);
        let storage = self.storage(table, "embedding")?;
        let kernel = if storage.dtype() == DType::F32 { "embedding_f32" } else { "embedding_bf16" };
        let mut b = lane.stream.launch_builder(self.kernels.get(kernel));
        match storage {
            CudaStorage::F32(s) => b.arg(s),
            CudaStorage::BF16(s) => b.arg(s),
        };
        b.arg(&ids_dev).arg(&mut out).arg(&dim32).arg(&n64);
        // SAFETY: ids are checked against the table; out holds ids * dim floats.
        unsafe { b.launch(grid_1d(ids.len() * dim)) }.map_err(gpu)?;
        self.wrap(&[ids.len(), dim], out)
    }

    fn rms_norm(&self, x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
        let (rows, dim) = shapes::rows_with_params("rms_norm", x, &[w])?;
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, rows * dim)?;
        let ws = self.storage(w, "rms_norm")?;
        // Rows a multiple of 4 long (all of the model's) take the register-resident kernel with a
        // block sized to the row: at most 4 float4 chunks a thread.
        let vectorized = dim.is_multiple_of(4) && dim <= 4 * 4 * 1024;
        let kernel = match (vectorized, ws.dtype() == DType::F32) {
            (true, true) => "rms_norm_vec_f32",
            (true, false) => "rms_norm_vec_bf16",
            (false, true) => "rms_norm_f32",
            (false, false) => "rms_norm_bf16",
        };
        let threads = if vectorized { (dim / 4).next_multiple_of(32).min(1024) as u32 } else { BLOCK };
        let mut b = Overlapped::new(&lane.stream, self.kernels.get(kernel));
        b.input(self.f32s(x, "rms_norm")?);
        match ws {
            CudaStorage::F32(s) => b.input(s),
            CudaStorage::BF16(s) => b.input(s),
        };
        b.output(&mut out).int(dim as i32).float(eps);
        let cfg = LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: one block per row of `dim` floats (16-byte aligned rows when vectorized); the
        // vectorized kernels wait before they read x or write out.
        unsafe { b.launch(cfg, self.overlap && vectorized) }?;
        self.wrap(x.shape(), out)
    }

    fn layer_norm(&self, x: &Tensor, w: &Tensor, bias: &Tensor, eps: f32) -> Result<Tensor> {
        let (rows, dim) = shapes::rows_with_params("layer_norm", x, &[w, bias])?;
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, rows * dim)?;
        let (ws, bs) = (self.storage(w, "layer_norm")?, self.storage(bias, "layer_norm")?);
        let dim32 = dim as i32;
        let mut b = match (ws, bs) {
            (CudaStorage::F32(w), CudaStorage::F32(bb)) => {
                let mut l = lane.stream.launch_builder(self.kernels.get("layer_norm_f32"));
                l.arg(self.f32s(x, "layer_norm")?).arg(w).arg(bb);
                l
            }
            (CudaStorage::BF16(w), CudaStorage::BF16(bb)) => {
                let mut l = lane.stream.launch_builder(self.kernels.get("layer_norm_bf16"));
                l.arg(self.f32s(x, "layer_norm")?).arg(w).arg(bb);
                l
            }
            _ => return Err(Error::Unsupported { op: "layer_norm", dtype: "mixed".into(), backend: "cuda" }),
        };
        b.arg(&mut out).arg(&dim32).arg(&eps);
        // SAFETY: one block per row.
        unsafe { b.launch(rows_config(rows)) }.map_err(gpu)?;
        self.wrap(x.shape(), out)
    }

    fn rope(&self, x: &Tensor, r: Rotary) -> Result<Tensor> {
        let (rows, width) = shapes::rope(x, &r)?;
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, rows * width)?;
        let (rows64, heads, hd, rd, first, seq) = (
            rows as i64,
            r.heads as i32,
            r.head_dim as i32,
            r.rotary_dim as i32,
            r.first_position as i32,
            r.seq_len as i32,
        );
        let mut b = lane.stream.launch_builder(self.kernels.get("rope_f32"));
        b.arg(self.f32s(x, "rope")?)
            .arg(&mut out)
            .arg(&rows64)
            .arg(&heads)
            .arg(&hd)
            .arg(&rd)
            .arg(&r.theta)
            .arg(&first)
            .arg(&seq);
        // SAFETY: rows * width floats each side.
        unsafe { b.launch(grid_1d(rows * width)) }.map_err(gpu)?;
        self.wrap(x.shape(), out)
    }

    fn attention(&self, q: &Tensor, k: &Tensor, v: &Tensor, s: AttentionShape) -> Result<Tensor> {
        shapes::attention(q, k, v, &s)?;
        if s.head_dim > 256 {
            return Err(Error::Unsupported {
                op: "attention with head dim over 256",
                dtype: "f32".into(),
                backend: "cuda",
            });
        }
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, s.batch * s.q_len * s.heads * s.head_dim)?;
        let scale = (s.head_dim as f32).powf(-0.5);
        let (q_len, kv_len, cap, heads, kv_heads, hd, causal) = (
            s.q_len as i32,
            s.kv_len as i32,
            s.kv_capacity as i32,
            s.heads as i32,
            s.kv_heads as i32,
            s.head_dim as i32,
            s.causal as i32,
        );
        if s.head_dim == 64 && s.q_len >= 64 {
            // Long sequences at head dim 64 (the DiT): the tiled kernel.
            let cfg = LaunchConfig {
                grid_dim: (s.q_len.div_ceil(64) as u32, s.heads as u32, s.batch as u32),
                block_dim: (128, 1, 1),
                shared_mem_bytes: 0,
            };
            // The fast policies take the scores and weighted values on the tensor cores (TF32).
            let kernel =
                if self.math != F32Math::Exact && self.tf32_mma { "attention_mma_d64" } else { "attention_tiled_d64" };
            let mut b = lane.stream.launch_builder(self.kernels.get(kernel));
            b.arg(self.f32s(q, "attention")?)
                .arg(self.f32s(k, "attention")?)
                .arg(self.f32s(v, "attention")?)
                .arg(&mut out);
            b.arg(&q_len).arg(&kv_len).arg(&cap).arg(&heads).arg(&kv_heads).arg(&causal).arg(&scale);
            // SAFETY: shapes checked above; every query row of the grid is written once.
            unsafe { b.launch(cfg) }.map_err(gpu)?;
            return self.wrap(&[s.batch * s.q_len, s.heads * s.head_dim], out);
        }
        let group = s.heads / s.kv_heads;
        if s.q_len == 1 && s.head_dim <= 128 && s.head_dim.is_multiple_of(4) && [1, 2, 4, 8].contains(&group) {
            self.attention_decode(&lane, q, k, v, &s, scale, &mut out)?;
            return self.wrap(&[s.batch, s.heads * s.head_dim], out);
        }
        let tile: i32 = if s.head_dim <= 128 { 32 } else { 16 };
        let warps = 4u32;
        let cfg = LaunchConfig {
            grid_dim: (s.q_len.div_ceil(warps as usize) as u32, s.heads as u32, s.batch as u32),
            block_dim: (32 * warps, 1, 1),
            shared_mem_bytes: (2 * tile as usize * s.head_dim * 4) as u32,
        };
        let mut b = lane.stream.launch_builder(self.kernels.get("attention_f32"));
        b.arg(self.f32s(q, "attention")?).arg(self.f32s(k, "attention")?).arg(self.f32s(v, "attention")?).arg(&mut out);
        b.arg(&q_len).arg(&kv_len).arg(&cap).arg(&heads).arg(&kv_heads).arg(&hd).arg(&causal).arg(&scale).arg(&tile);
        // SAFETY: shapes checked above; shared memory sized for two tiles of keys and values.
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        self.wrap(&[s.batch * s.q_len, s.heads * s.head_dim], out)
    }

    fn write_rows(&self, dst: &mut Tensor, src: &Tensor, batch: usize, row: usize) -> Result<()> {
        let (capacity, n, cols) = shapes::write_rows(dst, src, batch, row)?;
        let lane = self.lane()?;
        let src = self.f32s(src, "write_rows")?;
        let Storage::Cuda(CudaStorage::F32(d)) = dst.storage_mut() else {
            return Err(Error::Unsupported { op: "write_rows", dtype: "non-f32".into(), backend: "cuda" });
        };
        let total = (batch * n * cols) as i64;
        if total == 0 {
            return Ok(());
        }
        let (n32, cols32, cap32, row32) = (n as i32, cols as i32, capacity as i32, row as i32);
        let mut b = lane.stream.launch_builder(self.kernels.get("write_rows_f32"));
        b.arg(src).arg(d).arg(&total).arg(&n32).arg(&cols32).arg(&cap32).arg(&row32);
        // SAFETY: shapes checked: each batch entry's rows [row, row + n) lie inside dst.
        unsafe { b.launch(grid_1d(total as usize)) }.map_err(gpu)?;
        Ok(())
    }

    fn linear_add(&self, x: &Tensor, w: &Tensor, residual: &Tensor) -> Result<Tensor> {
        let Some((m, k, n, bits)) = decode_product(x, w) else {
            return composed::linear_add(self, x, w, residual);
        };
        if residual.shape() != [m, n] {
            return Err(Error::shape("linear_add", format!("residual {:?} for {m}x{n}", residual.shape())));
        }
        let lane = self.lane()?;
        let mut y = self.alloc(&lane, m * n)?;
        let (ki, ni) = (k as i32, n as i32);
        let mut b = Overlapped::new(&lane.stream, self.kernels.get(&format!("gemv_add_bf16_k8_m{m}")));
        b.input(bits).input(self.f32s(x, "linear_add")?).input(self.f32s(residual, "linear_add")?).output(&mut y);
        b.int(ki).int(ni);
        // SAFETY: as the decode product in `matmul_nt`; the residual is [m, n] like y.
        unsafe { b.launch(gemv_config(n, GEMV_THREADS), self.overlap) }?;
        self.wrap(&[m, n], y)
    }

    fn linear_swiglu(&self, x: &Tensor, norm: Option<RmsNorm>, gate: &Tensor, up: &Tensor) -> Result<Tensor> {
        let (Some((m, k, n, g)), Some((_, _, up_n, u)), Some(norm_bits)) =
            (decode_product(x, gate), decode_product(x, up), fused_norm(norm, x))
        else {
            return composed::linear_swiglu(self, x, norm, gate, up);
        };
        if up_n != n {
            return Err(Error::shape("linear_swiglu", format!("gate {:?} against up {:?}", gate.shape(), up.shape())));
        }
        let lane = self.lane()?;
        let mut y = self.alloc(&lane, m * n)?;
        let (ki, ni, eps) = (k as i32, n as i32, norm.map_or(0.0, |n| n.eps));
        let mut b = Overlapped::new(&lane.stream, self.kernels.get(&format!("gemv_swiglu_bf16_k8_m{m}")));
        b.input(g).input(u).input(self.f32s(x, "linear_swiglu")?).optional(norm_bits);
        b.float(eps).output(&mut y).int(ki).int(ni);
        // SAFETY: as the decode product in `matmul_nt`, for two weights of the same shape; the norm
        // weight, when given, holds k bf16 values (a null pointer otherwise).
        unsafe { b.launch(gemv_config(n, GEMV_SWIGLU_THREADS), self.overlap) }?;
        self.wrap(&[m, n], y)
    }

    fn linear3(&self, x: &Tensor, norm: Option<RmsNorm>, w: [&Tensor; 3]) -> Result<[Tensor; 3]> {
        let (Some((m, k, n0, w0)), Some((_, _, n1, w1)), Some((_, _, n2, w2)), Some(norm_bits)) =
            (decode_product(x, w[0]), decode_product(x, w[1]), decode_product(x, w[2]), fused_norm(norm, x))
        else {
            return self.linear3_gemm(x, norm, w);
        };
        let lane = self.lane()?;
        let (mut y0, mut y1, mut y2) =
            (self.alloc(&lane, m * n0)?, self.alloc(&lane, m * n1)?, self.alloc(&lane, m * n2)?);
        let (ki, n0i, n1i, n2i, eps) = (k as i32, n0 as i32, n1 as i32, n2 as i32, norm.map_or(0.0, |n| n.eps));
        let mut b = Overlapped::new(&lane.stream, self.kernels.get(&format!("gemv_group3_bf16_k8_m{m}")));
        b.input(w0).input(w1).input(w2).output(&mut y0).output(&mut y1).output(&mut y2);
        b.input(self.f32s(x, "linear3")?).optional(norm_bits).float(eps).int(ki).int(n0i).int(n1i).int(n2i);
        let blocks = n0.div_ceil(4) + n1.div_ceil(4) + n2.div_ceil(4);
        let cfg =
            LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (GEMV_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: three decode products of one input; the grid is their row groups back to back; the
        // norm weight, when given, holds k bf16 values (a null pointer otherwise).
        unsafe { b.launch(cfg, self.overlap) }?;
        Ok([self.wrap(&[m, n0], y0)?, self.wrap(&[m, n1], y1)?, self.wrap(&[m, n2], y2)?])
    }

    fn write_kv(
        &self,
        keys: &mut Tensor,
        k: &Tensor,
        values: &mut Tensor,
        v: &Tensor,
        batch: usize,
        row: usize,
    ) -> Result<()> {
        let key_shape = shapes::write_rows(keys, k, batch, row)?;
        if shapes::write_rows(values, v, batch, row)? != key_shape || keys.shape() != values.shape() {
            self.write_rows(keys, k, batch, row)?;
            return self.write_rows(values, v, batch, row);
        }
        let (capacity, n, cols) = key_shape;
        let total = (batch * n * cols) as i64;
        if total == 0 {
            return Ok(());
        }
        let lane = self.lane()?;
        let (k_src, v_src) = (self.f32s(k, "write_kv")?, self.f32s(v, "write_kv")?);
        let (Storage::Cuda(CudaStorage::F32(k_dst)), Storage::Cuda(CudaStorage::F32(v_dst))) =
            (keys.storage_mut(), values.storage_mut())
        else {
            return Err(Error::Unsupported { op: "write_kv", dtype: "non-f32".into(), backend: "cuda" });
        };
        let (n32, cols32, cap32, row32) = (n as i32, cols as i32, capacity as i32, row as i32);
        let mut b = lane.stream.launch_builder(self.kernels.get("write_kv_f32"));
        b.arg(k_src).arg(k_dst).arg(v_src).arg(v_dst).arg(&total).arg(&n32).arg(&cols32).arg(&cap32).arg(&row32);
        // SAFETY: both caches have the same shape and the rows [row, row + n) of each batch entry lie
        // inside them (checked above).
        unsafe { b.launch(grid_1d(total as usize)) }.map_err(gpu)?;
        Ok(())
    }

    fn attention_inputs(&self, inputs: AttentionInputs, slot: KvSlot) -> Result<Tensor> {
        let r = inputs.rotary;
        let (q_rows, q_width) = inputs.q.dims2("attention_inputs")?;
        let (k_rows, k_width) = inputs.k.dims2("attention_inputs")?;
        let n = k_rows.checked_div(slot.batch).unwrap_or(0);
        let norms = (inputs.q_norm.storage(), inputs.k_norm.storage());
        let same_norm_dtype = matches!(
            norms,
            (Storage::Cuda(CudaStorage::F32(_)), Storage::Cuda(CudaStorage::F32(_)))
                | (Storage::Cuda(CudaStorage::BF16(_)), Storage::Cuda(CudaStorage::BF16(_)))
        );
        let fused = r.head_dim == 128
            && r.rotary_dim == 128
            && q_rows == k_rows
            && q_width.is_multiple_of(128)
            && k_width.is_multiple_of(128)
            && inputs.v.shape() == inputs.k.shape()
            && inputs.q_norm.elem_count() == 128
            && inputs.k_norm.elem_count() == 128
            && same_norm_dtype
            && r.seq_len == n
            && slot.keys.shape() == slot.values.shape();
        let placement = shapes::write_rows(slot.keys, &inputs.k, slot.batch, slot.row).ok();
        let Some((capacity, _, _)) = placement.filter(|_| fused) else {
            return composed::attention_inputs(self, inputs, slot);
        };
        let lane = self.lane()?;
        let mut q_out = self.alloc(&lane, inputs.q.elem_count())?;
        let (q, k, v) = (
            self.f32s(&inputs.q, "attention_inputs")?,
            self.f32s(&inputs.k, "attention_inputs")?,
            self.f32s(inputs.v, "attention_inputs")?,
        );
        let (Storage::Cuda(CudaStorage::F32(keys)), Storage::Cuda(CudaStorage::F32(values))) =
            (slot.keys.storage_mut(), slot.values.storage_mut())
        else {
            return Err(Error::Unsupported { op: "attention_inputs", dtype: "non-f32 cache".into(), backend: "cuda" });
        };
        let (heads, kv_heads) = (q_width / 128, k_width / 128);
        let kernel = if matches!(norms.0, Storage::Cuda(CudaStorage::F32(_))) {
            "qk_norm_rope_append128_f32"
        } else {
            "qk_norm_rope_append128_bf16"
        };
        let mut b = Overlapped::new(&lane.stream, self.kernels.get(kernel));
        b.input(q).input(k).input(v);
        for norm in [norms.0, norms.1] {
            match norm {
                Storage::Cuda(CudaStorage::F32(s)) => b.input(s),
                Storage::Cuda(CudaStorage::BF16(s)) => b.input(s),
                Storage::Cpu(_) => unreachable!("checked above"),
            };
        }
        b.output(&mut q_out).output(keys).output(values).int(q_rows as i32).int(heads as i32).int(kv_heads as i32);
        b.float(inputs.eps).float(r.theta).int(r.first_position as i32).int(n as i32).int(capacity as i32);
        b.int(slot.row as i32);
        let warps = q_rows * (heads + kv_heads);
        let cfg =
            LaunchConfig { grid_dim: (warps.div_ceil(8) as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: one warp per (row, head) of 128 floats in q, k and v; the cache rows written lie
        // inside both caches (checked above), and q_out holds as many floats as q; the kernel waits
        // before it touches any of them.
        unsafe { b.launch(cfg, self.overlap) }?;
        self.wrap(inputs.q.shape(), q_out)
    }

    fn silu_mul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(a, b, "silu_mul_f32", "silu_mul")
    }

    fn silu(&self, x: &Tensor) -> Result<Tensor> {
        self.unary(x, "silu_f32", "silu")
    }

    fn tanh(&self, x: &Tensor) -> Result<Tensor> {
        self.unary(x, "tanh_f32", "tanh")
    }

    fn add(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(a, b, "add_f32", "add")
    }

    fn mul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(a, b, "mul_f32", "mul")
    }

    fn scale(&self, x: &Tensor, factor: f32) -> Result<Tensor> {
        let lane = self.lane()?;
        let n = x.elem_count();
        let mut out = self.alloc(&lane, n)?;
        let n64 = n as i64;
        let mut b = lane.stream.launch_builder(self.kernels.get("scale_f32"));
        b.arg(self.f32s(x, "scale")?).arg(&factor).arg(&mut out).arg(&n64);
        // SAFETY: n floats each side.
        unsafe { b.launch(grid_1d(n)) }.map_err(gpu)?;
        self.wrap(x.shape(), out)
    }

    fn softmax_rows(&self, x: &Tensor) -> Result<Tensor> {
        let (rows, cols) = x.dims2("softmax_rows")?;
        if cols == 0 {
            return Err(Error::shape("softmax_rows", "rows of zero columns"));
        }
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, rows * cols)?;
        let cols32 = cols as i32;
        let mut b = lane.stream.launch_builder(self.kernels.get("softmax_rows_f32"));
        b.arg(self.f32s(x, "softmax_rows")?).arg(&mut out).arg(&cols32);
        // SAFETY: one block per row.
        unsafe { b.launch(rows_config(rows)) }.map_err(gpu)?;
        self.wrap(x.shape(), out)
    }

    fn round_to(&self, x: &Tensor, dtype: DType) -> Result<Tensor> {
        match dtype {
            DType::F32 => self.scale(x, 1.0),
            DType::BF16 => self.unary(x, "round_bf16_f32", "round_to"),
            DType::F16 => Err(Error::Unsupported { op: "round_to", dtype: "f16".into(), backend: "cuda" }),
        }
    }

    fn transpose(&self, x: &Tensor) -> Result<Tensor> {
        let (r, c) = x.dims2("transpose")?;
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, r * c)?;
        if r > 0 && c > 0 {
            let cfg = LaunchConfig {
                grid_dim: (c.div_ceil(32) as u32, r.div_ceil(32) as u32, 1),
                block_dim: (32, 8, 1),
                shared_mem_bytes: 0,
            };
            let (r32, c32) = (r as i32, c as i32);
            let mut b = lane.stream.launch_builder(self.kernels.get("transpose_f32"));
            b.arg(self.f32s(x, "transpose")?).arg(&mut out).arg(&r32).arg(&c32);
            // SAFETY: r * c floats each side; the tile guards the edges.
            unsafe { b.launch(cfg) }.map_err(gpu)?;
        }
        self.wrap(&[c, r], out)
    }

    fn slice_cols(&self, x: &Tensor, start: usize, end: usize) -> Result<Tensor> {
        let (r, c) = x.dims2("slice_cols")?;
        shapes::range("slice_cols", start, end, c)?;
        let lane = self.lane()?;
        let width = end - start;
        let mut out = self.alloc(&lane, r * width)?;
        if r * width > 0 {
            let (rows64, c32, s32, w32) = (r as i64, c as i32, start as i32, width as i32);
            let mut b = lane.stream.launch_builder(self.kernels.get("slice_cols_f32"));
            b.arg(self.f32s(x, "slice_cols")?).arg(&mut out).arg(&rows64).arg(&c32).arg(&s32).arg(&w32);
            // SAFETY: bounds checked above.
            unsafe { b.launch(grid_1d(r * width)) }.map_err(gpu)?;
        }
        self.wrap(&[r, width], out)
    }

    fn slice_rows(&self, x: &Tensor, start: usize, end: usize) -> Result<Tensor> {
        let (r, c) = x.dims2("slice_rows")?;
        shapes::range("slice_rows", start, end, r)?;
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, (end - start) * c)?;
        self.copy_rows(&lane, self.f32s(x, "slice_rows")?, start * c, &mut out, 0, (end - start) * c)?;
        self.wrap(&[end - start, c], out)
    }

    fn cat_rows(&self, parts: &[&Tensor]) -> Result<Tensor> {
        let (rows, cols) = shapes::cat_rows(parts)?;
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, rows * cols)?;
        let mut at = 0;
        for p in parts {
            let n = p.elem_count();
            self.copy_rows(&lane, self.f32s(p, "cat_rows")?, 0, &mut out, at, n)?;
            at += n;
        }
        self.wrap(&[rows, cols], out)
    }

    fn conv1d(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>, padding: usize, dilation: usize) -> Result<Tensor> {
        let shapes::Conv { c_in, t, c_out, k, t_out } = shapes::conv1d(x, w, padding, dilation)?;
        let lane = self.lane()?;
        let mut cols = self.alloc(&lane, t_out * c_in * k)?;
        let (c32, t32, k32, d32, p32, zero, w32) =
            (c_in as i32, t as i32, k as i32, dilation as i32, padding as i32, 0i32, t_out as i32);
        let mut b = lane.stream.launch_builder(self.kernels.get("im2col_t_f32"));
        b.arg(self.f32s(x, "conv1d")?)
            .arg(&mut cols)
            .arg(&c32)
            .arg(&t32)
            .arg(&k32)
            .arg(&d32)
            .arg(&p32)
            .arg(&zero)
            .arg(&w32);
        // SAFETY: cols holds t_out * c_in * k floats; reads guarded by t.
        unsafe { b.launch(grid_1d(t_out * c_in * k)) }.map_err(gpu)?;
        let mut y = self.matmul_nt(&lane, &cols, t_out, c_in * k, self.storage(w, "conv1d")?, c_out)?;
        if let Some(bias) = bias {
            self.add_bias(&lane, &mut y, t_out, self.storage(bias, "conv1d")?)?;
        }
        self.transpose(&self.wrap(&[t_out, c_out], y)?)
    }

    fn conv_transpose1d(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        stride: usize,
        padding: usize,
    ) -> Result<Tensor> {
        let shapes::Conv { c_in, t, c_out, k, t_out } = shapes::conv_transpose1d(x, w, stride, padding)?;
        let lane = self.lane()?;
        let rows = c_out * k;
        let mut cols = self.alloc(&lane, rows * t)?;
        {
            let xs = self.f32s(x, "conv_transpose1d")?;
            let (cp, _cs) = cols.device_ptr_mut(&lane.stream);
            // cols[rows, t] = w[c_in, rows]^T . x[c_in, t], in column-major terms
            // cols^T[t, rows] = x^T[t, c_in] . w[c_in, rows].
            let ops = (blas_sys::cublasOperation_t::CUBLAS_OP_N, blas_sys::cublasOperation_t::CUBLAS_OP_T);
            let dims = (t, rows, c_in);
            match self.storage(w, "conv_transpose1d")? {
                CudaStorage::F32(wf) => {
                    let (xp, _xs) = xs.device_ptr(&lane.stream);
                    let (wp, _ws) = wf.device_ptr(&lane.stream);
                    self.gemm(&lane, ops, dims, (xp, t), (wp, rows), (cp, t), false)?;
                }
                CudaStorage::BF16(wb) => {
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
            Some(b) => self.storage(b, "conv_transpose1d")?,
            None => {
                zeros = CudaStorage::F32(lane.stream.alloc_zeros::<f32>(c_out).map_err(gpu)?);
                &zeros
            }
        };
        let kernel = if bias_storage.dtype() == DType::F32 { "col2im_f32" } else { "col2im_bf16" };
        let (co32, k32, t32, s32, p32, to32) =
            (c_out as i32, k as i32, t as i32, stride as i32, padding as i32, t_out as i32);
        let mut b = lane.stream.launch_builder(self.kernels.get(kernel));
        b.arg(&cols);
        match bias_storage {
            CudaStorage::F32(s) => b.arg(s),
            CudaStorage::BF16(s) => b.arg(s),
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
        let a = self.storage(alpha, "snake")?;
        let kernel = if a.dtype() == DType::F32 { "snake_f32" } else { "snake_bf16" };
        let (c32, t64) = (c as i32, t as i64);
        let mut b = lane.stream.launch_builder(self.kernels.get(kernel));
        b.arg(self.f32s(x, "snake")?);
        match a {
            CudaStorage::F32(s) => b.arg(s),
            CudaStorage::BF16(s) => b.arg(s),
        };
        b.arg(&mut out).arg(&c32).arg(&t64);
        // SAFETY: c * t floats each side, c alphas.
        unsafe { b.launch(grid_1d(c * t)) }.map_err(gpu)?;
        self.wrap(x.shape(), out)
    }

    fn fill_uniform(&self, shape: &[usize], dtype: DType, seed: u64, center: f32, half_width: f32) -> Result<Tensor> {
        let lane = self.lane()?;
        let n: usize = shape.iter().product();
        let n64 = n as i64;
        let storage = match dtype {
            DType::F32 => {
                let mut out = self.alloc(&lane, n)?;
                let mut b = lane.stream.launch_builder(self.kernels.get("fill_uniform_f32"));
                b.arg(&mut out).arg(&n64).arg(&seed).arg(&center).arg(&half_width);
                // SAFETY: writes n floats.
                unsafe { b.launch(grid_1d(n)) }.map_err(gpu)?;
                CudaStorage::F32(out)
            }
            DType::BF16 => {
                let mut out = self.alloc_as::<u16>(&lane, n)?;
                let mut b = lane.stream.launch_builder(self.kernels.get("fill_uniform_bf16"));
                b.arg(&mut out).arg(&n64).arg(&seed).arg(&center).arg(&half_width);
                // SAFETY: writes n values.
                unsafe { b.launch(grid_1d(n)) }.map_err(gpu)?;
                CudaStorage::BF16(out)
            }
            DType::F16 => return Err(Error::Unsupported { op: "fill_uniform", dtype: "f16".into(), backend: "cuda" }),
        };
        Ok(Tensor::new_unchecked(shape, Storage::Cuda(storage)))
    }

    fn resample_nearest(&self, x: &Tensor, out_len: usize) -> Result<Tensor> {
        let (c, t) = x.dims2("resample_nearest")?;
        if t == 0 {
            return Err(Error::shape("resample_nearest", "an empty signal"));
        }
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, c * out_len)?;
        let (c32, t32, o32) = (c as i32, t as i32, out_len as i32);
        let mut b = lane.stream.launch_builder(self.kernels.get("resample_nearest_f32"));
        b.arg(self.f32s(x, "resample_nearest")?).arg(&mut out).arg(&c32).arg(&t32).arg(&o32);
        // SAFETY: out holds c * out_len floats; source indices are clamped to t.
        unsafe { b.launch(grid_1d(c * out_len)) }.map_err(gpu)?;
        self.wrap(&[c, out_len], out)
    }
}
