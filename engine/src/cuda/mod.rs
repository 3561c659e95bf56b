//! The CUDA backend: cudarc with the driver, NVRTC and cuBLAS loaded at run time, so one binary
//! runs with or without CUDA. Activations are f32; weights stay bf16 or f32 on the device. Each
//! thread that uses the backend gets its own stream (and cuBLAS handle), so the AR loop and the
//! acoustic windows overlap on the GPU.
//!
//! A file per op family: `products` (GEMMs and the decode GEMVs), `attention`, `norms` (and the
//! attention inputs), `conv`, `elementwise`, `layout` (data movement), `sampling` (the shortlist);
//! `context` holds probing, streams and the memory pool, `storage` the device buffers. Each family's
//! file implements that family's trait for [`CudaBackend`]; the [`Backend`] impl below holds the
//! device-level methods.

mod attention;
mod context;
mod conv;
pub mod decode_shapes;
mod elementwise;
pub mod fp8;
mod graph;
mod green;
pub mod kernel_cache;
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
use cudarc::driver::sys::CUmemPool_attribute;

use self::context::{Lane, gpu, keep_freed_memory, poisoned};
pub use self::context::{libraries_present, nvrtc_present};
pub use self::graph::StepGraph;
use self::kernels::Kernels;
pub use self::storage::CudaStorage;
use crate::device::{Backend, DeviceKind, DeviceOptions, MemoryUse, Op, Operand, StepRecording, ThreadPriority};
use crate::error::{Error, Result};
use crate::precision::Precision;
use crate::tensor::DType;

pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    kernels: Kernels,
    lanes: Mutex<HashMap<ThreadId, Arc<Lane>>>,
    /// Lanes a thread left for one of another priority, kept for its switch back (dropping one
    /// destroys its cuBLAS handle, which waits for the whole device).
    parked: Mutex<HashMap<(ThreadId, ThreadPriority), Arc<Lane>>>,
    description: String,
    precision: Precision,
    /// Whether fresh buffers are filled with the NaN sentinel ([`DeviceOptions::sentinel_fill`]).
    sentinel_fill: bool,
    /// Whether the decode-step kernels launch overlapped (programmatic dependent launch, sm_90+).
    overlap: bool,
    /// Whether the GPU has TF32 tensor cores (sm_80+), which the fast policies' attention uses.
    tf32_mma: bool,
    /// The SMs the products of normal-priority and yielding threads are planned for
    /// ([`green::ACOUSTIC_SMS_VAR`]); `None`: all of them (a yielding thread's: its partition's).
    product_sms: Option<u32>,
    /// The SMs the streams of yielding threads run on ([`green::ACOUSTIC_PARTITION_VAR`]);
    /// `None`: all of them.
    partition: Option<Arc<green::Partition>>,
    budget: memory::Budget,
    /// Held while a thread records a step ([`graph`]): one recording at a time.
    capture_gate: Mutex<()>,
    /// Whether a thread is recording a step, holding off other threads' ops ([`Self::lane`]).
    recording_step: std::sync::atomic::AtomicBool,
    /// Whether steps are recorded as CUDA graphs (`SONGLOOM_CUDA_GRAPHS=0` runs them op by op: to
    /// time the graphs against, or to rule them out on a driver that misbehaves).
    records_steps: bool,
}

impl CudaBackend {
    /// Opens GPU `ordinal` and compiles the kernels for its architecture.
    pub fn new(ordinal: usize, options: DeviceOptions) -> Result<Self> {
        libraries_present().map_err(Error::Gpu)?;
        let count = CudaContext::device_count().map_err(gpu)?;
        if ordinal as i32 >= count {
            return Err(Error::Gpu(format!("no CUDA device {ordinal} ({count} found)")));
        }
        let (ctx, sms, granted) = match green::sms_asked()? {
            None => (CudaContext::new(ordinal).map_err(gpu)?, String::new(), None),
            Some(asked) => {
                let (ctx, granted, total) = green::context_on_sms(ordinal, asked)?;
                (ctx, format!(", on {granted} of its {total} SMs ({})", green::SMS_VAR), Some(granted))
            }
        };
        // cudarc's per-tensor events cost several driver calls per launch (a decode step launches
        // about 800 kernels). Songloom's threads share only weights, which are complete before any
        // other stream reads them (`Device::synchronize` after loading), and every other tensor
        // lives and dies on the stream of the thread that made it.
        // SAFETY: that discipline is the synchronization cudarc would otherwise add.
        unsafe { ctx.disable_event_tracking() };
        keep_freed_memory(&ctx)?;
        let (major, minor) = ctx.compute_capability().map_err(gpu)?;
        let arch = format!("sm_{major}{minor}");
        if (major, minor) < (8, 9) {
            options.precision.refused_without_fp8(&format!("this GPU ({arch})"))?;
        }
        if options.precision == Precision::Fp8 {
            fp8::library_present()?;
        }
        let kernels = Kernels::load(&ctx, &arch)?;
        let name = ctx.name().map_err(gpu)?;
        let (free, total) = ctx.mem_get_info().map_err(gpu)?;
        let gib = |bytes: usize| bytes as f64 / (1u64 << 30) as f64;
        let context_sms = match granted {
            Some(granted) => granted,
            None => ctx
                .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_err(gpu)?
                .max(0) as u32,
        };
        let partition = match green::partition_asked(context_sms)? {
            Some(_) if granted.is_some() => {
                return Err(Error::Invalid(format!(
                    "{} and {} cannot both be set: one SM partition a process",
                    green::SMS_VAR,
                    green::ACOUSTIC_PARTITION_VAR
                )));
            }
            Some(asked) => Some(green::Partition::shared(&ctx, asked)?),
            None => None,
        };
        let product_sms = green::product_sms_asked(context_sms)?;
        let products = product_sms
            .map(|n| format!(", normal-priority products planned for {n} SMs ({})", green::ACOUSTIC_SMS_VAR))
            .unwrap_or_default();
        let partitioned = partition
            .as_ref()
            .map(|p| {
                format!(
                    ", a streamed song's acoustic half on {} of its {context_sms} SMs ({})",
                    p.granted,
                    green::ACOUSTIC_PARTITION_VAR
                )
            })
            .unwrap_or_default();
        let description =
            format!("{name}, {arch}, {:.1} of {:.1} GiB free{sms}{products}{partitioned}", gib(free), gib(total));
        Ok(CudaBackend {
            ctx,
            kernels,
            lanes: Mutex::new(HashMap::new()),
            parked: Mutex::new(HashMap::new()),
            description,
            precision: options.precision,
            sentinel_fill: options.sentinel_fill,
            overlap: major >= 9,
            tf32_mma: major >= 8,
            product_sms,
            partition,
            budget: memory::Budget::default(),
            capture_gate: Mutex::new(()),
            recording_step: std::sync::atomic::AtomicBool::new(false),
            records_steps: std::env::var("SONGLOOM_CUDA_GRAPHS").map_or(true, |v| v != "0"),
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
            Operand::Matrix | Operand::Result => float || dtype.is_packed(),
            Operand::HostTensor => float || dtype.is_quantized(),
        }
    }

    /// Waits for every stream this backend made, after any step being recorded.
    fn synchronize(&self) -> Result<()> {
        self.synchronized(|| Ok(()))
    }

    /// Starts or stops what an external profiler records (`ncu --profile-from-start off`).
    fn profiler(&self, on: bool) -> Result<()> {
        self.ctx.bind_to_thread().map_err(gpu)?;
        // SAFETY: plain driver calls on the bound context.
        unsafe { if on { cudarc::driver::sys::cuProfilerStart() } else { cudarc::driver::sys::cuProfilerStop() } }
            .result()
            .map_err(gpu)
    }

    fn end_thread(&self) -> Result<()> {
        // SONGLOOM_KEEP_THREAD_STREAMS keeps them, as before, to measure against.
        if std::env::var_os("SONGLOOM_KEEP_THREAD_STREAMS").is_some() {
            return Ok(());
        }
        let id = std::thread::current().id();
        let mut ended: Vec<Arc<Lane>> = self.lanes.lock().map_err(|_| poisoned())?.remove(&id).into_iter().collect();
        self.parked.lock().map_err(|_| poisoned())?.retain(|(thread, _), lane| {
            let keep = *thread != id;
            if !keep {
                ended.push(lane.clone());
            }
            keep
        });
        ended.iter().try_for_each(|lane| lane.stream.synchronize().map_err(gpu))
    }

    /// Gives the calling thread a stream of `priority`. A thread that already has a stream of
    /// another priority gets the other once its queued work is done (its tensors were made on the
    /// old stream, and nothing else orders the two); the old one is kept for a switch back.
    fn set_thread_priority(&self, priority: ThreadPriority) -> Result<()> {
        // Without a partition a yielding thread's stream is a normal one: no new stream for it.
        let priority = match (priority, &self.partition) {
            (ThreadPriority::Yielding, None) => ThreadPriority::Normal,
            _ => priority,
        };
        let id = std::thread::current().id();
        let current = self.lanes.lock().map_err(|_| poisoned())?.get(&id).cloned();
        if current.as_ref().is_some_and(|lane| lane.priority == priority) {
            return Ok(());
        }
        // Between recordings: making a stream or a cuBLAS handle, or waiting for a stream, on this
        // thread can end another thread's recording.
        let _between = self.capture_gate.lock().map_err(|_| Error::Gpu("the recording gate was poisoned".into()))?;
        if let Some(old) = &current {
            old.stream.synchronize().map_err(gpu)?;
        }
        let parked = self.parked.lock().map_err(|_| poisoned())?.remove(&(id, priority));
        let lane = match parked {
            Some(lane) => lane,
            None => self.new_lane(priority)?,
        };
        if let Some(old) = self.lanes.lock().map_err(|_| poisoned())?.insert(id, lane) {
            self.parked.lock().map_err(|_| poisoned())?.insert((id, old.priority), old);
        }
        Ok(())
    }

    fn precision(&self) -> Precision {
        self.precision
    }

    fn memory(&self) -> Option<MemoryUse> {
        let in_use = self.pool_attribute(CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT).ok()?;
        let peak = self.pool_attribute(CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH).ok()?;
        let (free, total) = self.ctx.mem_get_info().ok()?;
        Some(MemoryUse { in_use, peak, free: free as u64, total: total as u64 })
    }

    fn set_memory_limit(&self, bytes: Option<u64>) -> Result<()> {
        self.budget.set(bytes);
        self.reset_peak()
    }

    fn release_unused_memory(&self) -> Result<()> {
        self.synchronized(|| context::release_freed_memory(&self.ctx))
    }

    fn record_step(
        &self,
        position: Option<usize>,
        step: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Option<StepRecording>> {
        if !self.records_steps {
            return Ok(None);
        }
        self.record(position, step)
    }

    fn replay_step(&self, recording: &StepRecording, position: Option<usize>) -> Result<()> {
        let StepRecording::Cuda(graph) = recording;
        self.replay(graph, position)
    }
}
