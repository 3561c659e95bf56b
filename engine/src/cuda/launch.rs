//! Launch geometry, and kernel launches that may begin while the previous kernel on their stream
//! finishes (programmatic dependent launch, sm_90 and later). A decode step is a chain of short kernels each
//! reading the one before; overlapped, a product's blocks start and fetch their weights while the
//! kernel before it drains, instead of after. The kernels launched this way call `pdl_wait()`
//! (kernels/common.cuh) before they read or write anything an earlier kernel touches, and read only
//! weights before it. cudarc's launch builder takes no launch attributes, hence this one.

use std::ffi::c_void;

use cudarc::driver::sys;
use cudarc::driver::{CudaFunction, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig};

use super::context::gpu;
use crate::error::Result;

/// Threads of a block for the element-wise and row kernels.
pub(super) const BLOCK: u32 = 256;

/// One thread per element, in blocks of [`BLOCK`] (at most 65535 * 8 blocks: the kernels loop).
pub(super) fn grid_1d(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(BLOCK as usize).clamp(1, 65535 * 8) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 }
}

/// One block of [`BLOCK`] threads per row.
pub(super) fn rows_config(rows: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 }
}

/// The arguments of one launch, each in an 8-byte slot (the driver reads as many bytes as the
/// kernel's parameter has, from the slot's start: little-endian hosts only, as every CUDA host is).
pub struct Overlapped<'a> {
    stream: &'a CudaStream,
    function: &'a CudaFunction,
    slots: Vec<u64>,
}

impl<'a> Overlapped<'a> {
    pub fn new(stream: &'a CudaStream, function: &'a CudaFunction) -> Self {
        Overlapped { stream, function, slots: Vec::with_capacity(16) }
    }

    /// A buffer the kernel reads.
    pub fn input<T>(&mut self, buffer: &impl DevicePtr<T>) -> &mut Self {
        self.input_from(buffer, 0)
    }

    /// A buffer the kernel writes.
    pub fn output<T>(&mut self, buffer: &mut impl DevicePtrMut<T>) -> &mut Self {
        self.output_from(buffer, 0)
    }

    /// A buffer the kernel reads, from its element `offset` on.
    pub fn input_from<T>(&mut self, buffer: &impl DevicePtr<T>, offset: usize) -> &mut Self {
        let (ptr, _sync) = buffer.device_ptr(self.stream);
        self.slots.push(ptr + (offset * size_of::<T>()) as u64);
        self
    }

    /// A buffer the kernel writes, from its element `offset` on.
    pub fn output_from<T>(&mut self, buffer: &mut impl DevicePtrMut<T>, offset: usize) -> &mut Self {
        let (ptr, _sync) = buffer.device_ptr_mut(self.stream);
        self.slots.push(ptr + (offset * size_of::<T>()) as u64);
        self
    }

    /// A buffer the kernel may go without: a null pointer for `None`.
    pub fn optional<T>(&mut self, buffer: Option<&impl DevicePtr<T>>) -> &mut Self {
        match buffer {
            Some(b) => self.input(b),
            None => {
                self.slots.push(0);
                self
            }
        }
    }

    /// A raw device address (0 for a null pointer).
    pub fn address(&mut self, address: u64) -> &mut Self {
        self.slots.push(address);
        self
    }

    pub fn int(&mut self, value: i32) -> &mut Self {
        self.slots.push(value as u32 as u64);
        self
    }

    pub fn float(&mut self, value: f32) -> &mut Self {
        self.slots.push(value.to_bits() as u64);
        self
    }

    /// Launches on the stream; with `overlap`, the kernel may start before the previous one ends.
    ///
    /// # Safety
    /// The arguments match the kernel's parameters in number, order and size, every buffer is as
    /// large as the kernel reads or writes for `cfg`, and with `overlap` the kernel waits
    /// (`pdl_wait`) before it touches memory an earlier kernel reads or writes, other than weights.
    pub unsafe fn launch(&mut self, cfg: LaunchConfig, overlap: bool) -> Result<()> {
        let mut params: Vec<*mut c_void> = self.slots.iter_mut().map(|s| s as *mut u64 as *mut c_void).collect();
        let mut attribute = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            value: sys::CUlaunchAttributeValue { programmaticStreamSerializationAllowed: 1 },
        };
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: self.stream.cu_stream(),
            attrs: &mut attribute,
            numAttrs: overlap as u32,
        };
        // SAFETY: the caller's contract; `params` and `attribute` outlive the call.
        unsafe {
            self.stream.context().bind_to_thread().map_err(gpu)?;
            sys::cuLaunchKernelEx(&config, self.function.cu_function(), params.as_mut_ptr(), std::ptr::null_mut())
                .result()
                .map_err(gpu)
        }
    }
}
