//! The memory account: the stream-ordered pool's own counters (what is allocated now, and the
//! peak), the budget a plan sets, and handing unused memory back after a model half is freed.

use std::sync::atomic::{AtomicU64, Ordering};

use cudarc::driver::sys::CUmemPool_attribute;

use super::CudaBackend;
use super::context::gpu;
use crate::device::MemoryUse;
use crate::error::{Error, Result};

/// Allocations below this are not checked against the budget: a decode step makes hundreds of
/// small activations a frame, and reading the pool's counter for each would cost more than they
/// can add up to.
const CHECKED_FROM: u64 = 1 << 20;

/// The budget, in bytes (0: none).
#[derive(Default)]
pub(super) struct Budget(AtomicU64);

impl CudaBackend {
    fn pool_attribute(&self, attribute: CUmemPool_attribute) -> Result<u64> {
        let mut value = 0u64;
        // SAFETY: the device comes from a live context; these attributes are u64s.
        unsafe {
            let pool = cudarc::driver::result::device::get_default_mem_pool(self.ctx.cu_device()).map_err(gpu)?;
            cudarc::driver::result::mem_pool::get_attribute(
                pool,
                attribute,
                (&mut value) as *mut u64 as *mut std::ffi::c_void,
            )
        }
        .map_err(gpu)?;
        Ok(value)
    }

    fn reset_peak(&self) -> Result<()> {
        let mut zero = 0u64;
        // SAFETY: as above; the high-water mark may only be set to zero.
        unsafe {
            let pool = cudarc::driver::result::device::get_default_mem_pool(self.ctx.cu_device()).map_err(gpu)?;
            cudarc::driver::result::mem_pool::set_attribute(
                pool,
                CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
                (&mut zero) as *mut u64 as *mut std::ffi::c_void,
            )
        }
        .map_err(gpu)
    }

    pub(super) fn memory(&self) -> Option<MemoryUse> {
        let in_use = self.pool_attribute(CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT).ok()?;
        let peak = self.pool_attribute(CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH).ok()?;
        let (free, total) = self.ctx.mem_get_info().ok()?;
        Some(MemoryUse { in_use, peak, free: free as u64, total: total as u64 })
    }

    pub(super) fn set_memory_limit(&self, bytes: Option<u64>) -> Result<()> {
        self.budget.0.store(bytes.unwrap_or(0), Ordering::Relaxed);
        self.reset_peak()
    }

    /// Refuses an allocation of `bytes` that would pass the budget.
    pub(super) fn check_budget(&self, bytes: u64) -> Result<()> {
        let budget = self.budget.0.load(Ordering::Relaxed);
        if budget == 0 || bytes < CHECKED_FROM {
            return Ok(());
        }
        let in_use = self.pool_attribute(CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?;
        if in_use + bytes > budget {
            return Err(Error::OverBudget { wanted: bytes, in_use, budget });
        }
        Ok(())
    }

    pub(super) fn release_unused_memory(&self) -> Result<()> {
        self.synchronize()?;
        super::context::release_freed_memory(&self.ctx)
    }
}
