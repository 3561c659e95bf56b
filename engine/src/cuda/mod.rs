//! The CUDA backend: cudarc with the driver, NVRTC and cuBLAS loaded at run time, so one binary
//! runs with or without CUDA. Activations are f32; weights stay bf16 or f32 on the device. Each
//! thread that uses the backend gets its own stream (and cuBLAS handle), so the AR loop and the
//! acoustic windows overlap on the GPU.
//!
//! A file per op family: `products` (GEMMs and the decode GEMVs), `attention`, `norms` (and the
//! attention inputs), `conv`, `elementwise`, `layout` (data movement), `sampling` (the shortlist);
//! `context` holds probing, streams and the memory pool, `storage` the device buffers. Each family
//! implements its ops as methods of [`CudaBackend`]; the [`Backend`] impl below forwards to them.

mod attention;
mod context;
mod conv;
pub mod decode_shapes;
mod elementwise;
pub mod kernels;
mod launch;
mod layout;
mod memory;
mod norms;
mod products;
mod quant;
mod sampling;
mod storage;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use cudarc::driver::CudaContext;

use self::context::{Lane, gpu, keep_freed_memory};
pub use self::context::{libraries_present, nvrtc_present};
use self::kernels::Kernels;
pub use self::storage::CudaStorage;
use crate::device::{
    AttentionInputs, AttentionShape, Backend, Candidates, DeviceKind, DeviceOptions, KvSlot, MemoryUse, Op, Operand,
    RmsNorm, Rotary, Shortlist, ThreadPriority,
};
use crate::error::{Error, Result};
use crate::precision::Precision;
use crate::tensor::{DType, Tensor};

pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    kernels: Kernels,
    lanes: Mutex<HashMap<ThreadId, Arc<Lane>>>,
    description: String,
    precision: Precision,
    /// Whether fresh buffers are filled with the NaN sentinel ([`DeviceOptions::sentinel_fill`]).
    sentinel_fill: bool,
    /// Whether the decode-step kernels launch overlapped (programmatic dependent launch, sm_90+).
    overlap: bool,
    /// Whether the GPU has TF32 tensor cores (sm_80+), which the fast policies' attention uses.
    tf32_mma: bool,
    budget: memory::Budget,
}

impl CudaBackend {
    /// Opens GPU `ordinal` and compiles the kernels for its architecture.
    pub fn new(ordinal: usize, options: DeviceOptions) -> Result<Self> {
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
        let gib = |bytes: usize| bytes as f64 / (1u64 << 30) as f64;
        let description = format!("{name}, {arch}, {:.1} of {:.1} GiB free", gib(free), gib(total));
        Ok(CudaBackend {
            ctx,
            kernels,
            lanes: Mutex::new(HashMap::new()),
            description,
            precision: options.precision,
            sentinel_fill: options.sentinel_fill,
            overlap: major >= 9,
            tf32_mma: major >= 8,
            budget: memory::Budget::default(),
        })
    }
}

impl Backend for CudaBackend {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Cuda
    }

    fn description(&self) -> String {
        format!("{}, {} precision", self.description, self.precision)
    }

    fn synchronize(&self) -> Result<()> {
        CudaBackend::synchronize(self)
    }

    fn profiler(&self, on: bool) -> Result<()> {
        CudaBackend::profiler(self, on)
    }

    fn set_thread_priority(&self, priority: ThreadPriority) -> Result<()> {
        CudaBackend::set_thread_priority(self, priority)
    }

    fn precision(&self) -> Precision {
        self.precision
    }

    fn memory(&self) -> Option<MemoryUse> {
        CudaBackend::memory(self)
    }

    fn set_memory_limit(&self, bytes: Option<u64>) -> Result<()> {
        CudaBackend::set_memory_limit(self, bytes)
    }

    fn release_unused_memory(&self) -> Result<()> {
        CudaBackend::release_unused_memory(self)
    }

    /// f32, bf16 and the quantized formats for products' weights and tables, f32 and bf16 for other
    /// parameters; f32 activations; no f16 anywhere (a checkpoint's f16 weights are converted before
    /// they come up); anything on the device can be read back.
    fn supports(&self, op: Op, dtype: DType) -> bool {
        let float = matches!(dtype, DType::F32 | DType::BF16);
        match op.operand() {
            Operand::ReadBack => true,
            Operand::Activation => dtype == DType::F32,
            Operand::Parameter | Operand::Cache => float,
            Operand::Result if op == Op::FillUniform => float,
            Operand::Matrix | Operand::HostTensor | Operand::Result => float || dtype.is_quantized(),
        }
    }

    fn upload(&self, t: Tensor) -> Result<Tensor> {
        CudaBackend::upload(self, t)
    }

    fn to_host(&self, t: &Tensor) -> Result<Vec<f32>> {
        CudaBackend::to_host(self, t)
    }

    fn cast(&self, t: &Tensor, dtype: DType) -> Result<Tensor> {
        CudaBackend::cast(self, t, dtype)
    }

    fn product_weight(&self, w: Tensor) -> Result<Tensor> {
        CudaBackend::product_weight(self, w)
    }

    fn linear(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        CudaBackend::linear(self, x, w, bias)
    }

    fn embedding(&self, table: &Tensor, ids: &[u32]) -> Result<Tensor> {
        CudaBackend::embedding(self, table, ids)
    }

    fn rms_norm(&self, x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
        CudaBackend::rms_norm(self, x, w, eps)
    }

    fn layer_norm(&self, x: &Tensor, w: &Tensor, b: &Tensor, eps: f32) -> Result<Tensor> {
        CudaBackend::layer_norm(self, x, w, b, eps)
    }

    fn rope(&self, x: &Tensor, rotary: Rotary) -> Result<Tensor> {
        CudaBackend::rope(self, x, rotary)
    }

    fn attention(&self, q: &Tensor, k: &Tensor, v: &Tensor, shape: AttentionShape) -> Result<Tensor> {
        CudaBackend::attention(self, q, k, v, shape)
    }

    fn write_rows(&self, dst: &mut Tensor, src: &Tensor, batch: usize, row: usize) -> Result<()> {
        CudaBackend::write_rows(self, dst, src, batch, row)
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
        CudaBackend::write_kv(self, keys, k, values, v, batch, row)
    }

    fn linear_add(&self, x: &Tensor, w: &Tensor, residual: &Tensor) -> Result<Tensor> {
        CudaBackend::linear_add(self, x, w, residual)
    }

    fn linear_swiglu(&self, x: &Tensor, norm: Option<RmsNorm>, gate: &Tensor, up: &Tensor) -> Result<Tensor> {
        CudaBackend::linear_swiglu(self, x, norm, gate, up)
    }

    fn linear_glu(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        CudaBackend::linear_glu(self, x, w, bias)
    }

    fn linear3(&self, x: &Tensor, norm: Option<RmsNorm>, w: [&Tensor; 3]) -> Result<[Tensor; 3]> {
        CudaBackend::linear3(self, x, norm, w)
    }

    fn attention_inputs(&self, inputs: AttentionInputs, slot: KvSlot) -> Result<Tensor> {
        CudaBackend::attention_inputs(self, inputs, slot)
    }

    fn candidates(&self, logits: &Tensor, shortlist: &Shortlist) -> Result<Candidates> {
        CudaBackend::candidates(self, logits, shortlist)
    }

    fn silu_mul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        CudaBackend::silu_mul(self, a, b)
    }

    fn silu(&self, x: &Tensor) -> Result<Tensor> {
        CudaBackend::silu(self, x)
    }

    fn tanh(&self, x: &Tensor) -> Result<Tensor> {
        CudaBackend::tanh(self, x)
    }

    fn add(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        CudaBackend::add(self, a, b)
    }

    fn scale(&self, x: &Tensor, factor: f32) -> Result<Tensor> {
        CudaBackend::scale(self, x, factor)
    }

    fn transpose(&self, x: &Tensor) -> Result<Tensor> {
        CudaBackend::transpose(self, x)
    }

    fn slice_cols(&self, x: &Tensor, start: usize, end: usize) -> Result<Tensor> {
        CudaBackend::slice_cols(self, x, start, end)
    }

    fn slice_rows(&self, x: &Tensor, start: usize, end: usize) -> Result<Tensor> {
        CudaBackend::slice_rows(self, x, start, end)
    }

    fn cat_rows(&self, parts: &[&Tensor]) -> Result<Tensor> {
        CudaBackend::cat_rows(self, parts)
    }

    fn conv1d(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>, padding: usize, dilation: usize) -> Result<Tensor> {
        CudaBackend::conv1d(self, x, w, bias, padding, dilation)
    }

    fn conv_transpose1d(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        stride: usize,
        padding: usize,
    ) -> Result<Tensor> {
        CudaBackend::conv_transpose1d(self, x, w, bias, stride, padding)
    }

    fn snake(&self, x: &Tensor, alpha: &Tensor) -> Result<Tensor> {
        CudaBackend::snake(self, x, alpha)
    }

    fn fill_uniform(&self, shape: &[usize], dtype: DType, seed: u64, center: f32, half_width: f32) -> Result<Tensor> {
        CudaBackend::fill_uniform(self, shape, dtype, seed, center, half_width)
    }

    fn resample_nearest(&self, x: &Tensor, out_len: usize) -> Result<Tensor> {
        CudaBackend::resample_nearest(self, x, out_len)
    }

    fn count_non_finite(&self, x: &Tensor) -> Result<usize> {
        CudaBackend::count_non_finite(self, x)
    }
}
