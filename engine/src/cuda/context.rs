//! What the CUDA backend stands on: the libraries probed before the first call, the driver's
//! errors in words, the stream-ordered memory pool, and one stream (with its cuBLAS handle) per
//! thread, so the AR loop and the acoustic windows overlap on the GPU.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtrMut};

use super::CudaBackend;
use super::attention::DecodeScratch;
use crate::device::ThreadPriority;
use crate::error::{Error, Result};

/// A driver, compiler or cuBLAS error in words; out-of-memory says what to do about it.
pub(super) fn gpu(e: impl std::fmt::Display) -> Error {
    let text = e.to_string();
    if text.contains("OUT_OF_MEMORY") || text.contains("ALLOC_FAILED") {
        Error::Gpu(format!("the GPU is out of memory ({text}); try a shorter song or a smaller model"))
    } else {
        Error::Gpu(format!("CUDA: {text}"))
    }
}

/// Whether the CUDA libraries can be loaded, without touching them otherwise (cudarc's first call
/// panics when a library is absent).
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

/// Whether NVRTC alone can be loaded (enough to compile the kernels, no GPU needed).
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen the library by name.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// The stream-ordered allocator gives freed memory back to the driver at every synchronization
/// unless its release threshold says to keep it. The AR loop synchronizes several times a frame
/// to sample, so with the default (keep nothing) every frame would map its working memory anew.
pub(super) fn keep_freed_memory(ctx: &CudaContext) -> Result<()> {
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
pub(super) fn release_freed_memory(ctx: &CudaContext) -> Result<()> {
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

/// One thread's stream, its cuBLAS handle and its single-query attention scratch.
pub(super) struct Lane {
    pub stream: Arc<CudaStream>,
    pub blas: CudaBlas,
    pub decode: Mutex<DecodeScratch>,
    /// cuBLASLt's handle, workspace and plans for the FP8 products, made at the first.
    pub fp8: Mutex<Option<super::fp8::Fp8Lane>>,
    pub(super) priority: ThreadPriority,
    /// The SMs this thread's cuBLAS and cuBLASLt products are planned for; `None`: all.
    pub(super) product_sms: Option<u32>,
    /// Whether the stream is recording a step ([`super::graph`]).
    pub(super) recording: AtomicBool,
    /// While a step whose positions move from replay to replay is recorded: the device address of
    /// the `i32` the replay sets to how far they moved, which the position-taking kernels add to
    /// theirs; 0 otherwise.
    pub(super) shift: AtomicU64,
    /// How deep this lane's thread is in ops ([`CudaBackend::lane`]); 0 between them.
    ops: AtomicUsize,
    /// The partition's stream `stream` wraps, given back when the lane ends; `None` where the
    /// stream is the whole context's.
    _partition_stream: Option<PartitionStream>,
}

/// A stream of the acoustic half's partition, lent to one lane.
struct PartitionStream {
    partition: Arc<super::green::Partition>,
    raw: cudarc::driver::sys::CUstream,
}

// SAFETY: a CUDA stream handle may be used from any thread.
unsafe impl Send for PartitionStream {}
unsafe impl Sync for PartitionStream {}

impl Drop for PartitionStream {
    fn drop(&mut self) {
        self.partition.give_back(self.raw);
    }
}

/// A lane held for one op ([`CudaBackend::lane`]).
pub(super) struct LaneOp(Arc<Lane>);

impl std::ops::Deref for LaneOp {
    type Target = Lane;
    fn deref(&self) -> &Lane {
        &self.0
    }
}

impl Drop for LaneOp {
    fn drop(&mut self) {
        self.0.ops.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Other threads' ops held off until this drops ([`CudaBackend::other_lanes_quiet`]).
pub(super) struct QuietLanes<'a>(&'a AtomicBool);

impl Drop for QuietLanes<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl Lane {
    pub(super) fn recording(&self) -> bool {
        self.recording.load(Ordering::Relaxed)
    }

    /// The position shift's device address for a kernel argument (0, a null pointer, when none).
    pub(super) fn shift(&self) -> u64 {
        self.shift.load(Ordering::Relaxed)
    }
}

impl CudaBackend {
    /// Runs `then` after every stream this backend made is idle. A thread that is itself recording
    /// gets an error: its stream cannot wait.
    pub(super) fn synchronized<T>(&self, then: impl FnOnce() -> Result<T>) -> Result<T> {
        let lane = self.lane()?;
        if lane.recording() {
            return Err(Error::Gpu("a step being recorded cannot wait for the device".into()));
        }
        self.ctx.synchronize().map_err(gpu)?;
        then()
    }

    /// This thread's stream and cuBLAS handle (made on the thread's first op), held for one op.
    ///
    /// While another thread records a step, an op waits to begin, and a recording waits for the
    /// ops in progress: a CUDA call on another thread (a context-wide wait, a kernel's first load)
    /// can end a recording, and the frees of a failed recording leave their errors where any
    /// thread's next call finds them.
    pub(super) fn lane(&self) -> Result<LaneOp> {
        let lane = self.thread_lane()?;
        if lane.ops.load(Ordering::Relaxed) > 0 {
            // Within an op of this thread's (the recording thread's own ops are).
            lane.ops.fetch_add(1, Ordering::Relaxed);
        } else {
            loop {
                while self.recording_step.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                lane.ops.store(1, Ordering::SeqCst);
                if !self.recording_step.load(Ordering::SeqCst) {
                    break;
                }
                lane.ops.store(0, Ordering::SeqCst);
            }
        }
        Ok(LaneOp(lane))
    }

    fn thread_lane(&self) -> Result<Arc<Lane>> {
        let id = std::thread::current().id();
        let mut lanes = self.lanes.lock().map_err(|_| poisoned())?;
        if let Some(lane) = lanes.get(&id) {
            return Ok(lane.clone());
        }
        let lane = self.new_lane(ThreadPriority::Normal)?;
        lanes.insert(id, lane.clone());
        Ok(lane)
    }

    /// Waits until no thread but this one is in an op; meanwhile and until the returned guard
    /// drops, other threads' ops wait to begin. One thread at a time (`capture_gate`).
    pub(super) fn other_lanes_quiet(&self) -> Result<QuietLanes<'_>> {
        self.recording_step.store(true, Ordering::SeqCst);
        let quiet = QuietLanes(&self.recording_step);
        let own = std::thread::current().id();
        let others: Vec<Arc<Lane>> = self
            .lanes
            .lock()
            .map_err(|_| poisoned())?
            .iter()
            .filter(|(id, _)| **id != own)
            .map(|(_, lane)| lane.clone())
            .collect();
        for lane in others {
            while lane.ops.load(Ordering::SeqCst) != 0 {
                std::thread::yield_now();
            }
        }
        Ok(quiet)
    }

    pub(super) fn new_lane(&self, priority: ThreadPriority) -> Result<Arc<Lane>> {
        // A critical thread's stream gets the highest priority (CUDA's numerically lowest; -5
        // covers every GPU since Volta), so its short kernels run between the DiT's long ones
        // instead of queueing behind them.
        let (stream, partition_stream) = match (priority, &self.partition) {
            (ThreadPriority::Critical, _) => (self.ctx.new_stream_with_priority(-5).map_err(gpu)?, None),
            (ThreadPriority::Normal, _) | (ThreadPriority::Yielding, None) => {
                (self.ctx.new_stream().map_err(gpu)?, None)
            }
            (ThreadPriority::Yielding, Some(partition)) => {
                let raw = partition.stream()?;
                // SAFETY: the partition's streams are never destroyed, and the green context they
                // belong to shares the primary context's memory.
                let stream = unsafe { self.ctx.wrap_borrowed_stream(raw) };
                (stream, Some(PartitionStream { partition: partition.clone(), raw }))
            }
        };
        let blas = CudaBlas::new(stream.clone()).map_err(gpu)?;
        // Products planned for all SMs but run on a partition's fewer take a third longer (the
        // DiT pair on 112 of 132 SMs: 24.6 ms against 20.2 planned for 112), so a partition's
        // products are planned for its own SMs, or fewer where `SONGLOOM_CUDA_ACOUSTIC_SMS` asks.
        let product_sms = match priority {
            ThreadPriority::Normal => self.product_sms,
            ThreadPriority::Yielding => match &self.partition {
                Some(p) => Some(self.product_sms.map_or(p.granted, |n| n.min(p.granted))),
                None => self.product_sms,
            },
            ThreadPriority::Critical => None,
        };
        if let Some(sms) = product_sms {
            // SAFETY: the handle was just made, and only this lane's thread uses it.
            unsafe { cudarc::cublas::sys::cublasSetSmCountTarget(*blas.handle(), sms as i32) }.result().map_err(gpu)?;
        }
        Ok(Arc::new(Lane {
            stream,
            blas,
            decode: Mutex::new(DecodeScratch::default()),
            fp8: Mutex::new(None),
            priority,
            product_sms,
            recording: AtomicBool::new(false),
            shift: AtomicU64::new(0),
            ops: AtomicUsize::new(0),
            _partition_stream: partition_stream,
        }))
    }

    pub(super) fn alloc(&self, lane: &Lane, n: usize) -> Result<CudaSlice<f32>> {
        self.alloc_as::<f32>(lane, n)
    }

    /// Device memory for `n` values (at least one), filled with the sentinel when the backend was
    /// opened with one. When the pool is out of memory, the memory it keeps for reuse is given back
    /// to the driver once and the allocation tried again.
    pub(super) fn alloc_as<T: cudarc::driver::DeviceRepr>(&self, lane: &Lane, n: usize) -> Result<CudaSlice<T>> {
        // While a step records, its memory comes from the graph's own pool rather than the one the
        // budget counts, and reading a pool's counters while capturing invalidates the capture.
        if !lane.recording() {
            self.check_budget((n.max(1) * size_of::<T>()) as u64)?;
        }
        // SAFETY: every kernel and copy that produces an output writes all of it (the conformance
        // suite checks this with the sentinel fill).
        let mut slice = match unsafe { lane.stream.alloc::<T>(n.max(1)) } {
            Ok(s) => s,
            Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY && !lane.recording() => {
                self.synchronized(|| release_freed_memory(&self.ctx))?;
                // SAFETY: as above.
                unsafe { lane.stream.alloc::<T>(n.max(1)) }.map_err(gpu)?
            }
            Err(e) => return Err(gpu(e)),
        };
        if self.sentinel_fill {
            let bytes = slice.num_bytes();
            let (ptr, _sync) = slice.device_ptr_mut(&lane.stream);
            // SAFETY: the buffer was just allocated on this stream and is `bytes` long; all-ones
            // bytes are a NaN in f32 and in bf16, and any bit pattern is a valid u32.
            unsafe { cudarc::driver::result::memset_d8_async(ptr, 0xff, bytes, lane.stream.cu_stream()) }
                .map_err(gpu)?;
        }
        Ok(slice)
    }
}

pub(super) fn poisoned() -> Error {
    Error::Gpu("a thread failed while holding the CUDA backend's stream table".into())
}
