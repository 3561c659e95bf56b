//! The memory account: the stream-ordered pool's own counters (what is allocated now, and the
//! peak), the budget a plan sets, and handing unused memory back after a model half is freed.

use std::sync::atomic::{AtomicU64, Ordering};

use cudarc::driver::sys::CUmemPool_attribute;

use super::CudaBackend;
use super::context::gpu;
use crate::error::{Error, Result};

/// Allocations below this are not checked against the budget: a decode step makes hundreds of
/// small activations a frame, and reading the pool's counter for each would cost more than they
/// can add up to.
const CHECKED_FROM: u64 = 1 << 20;

/// The budget, in bytes (0: none).
#[derive(Default)]
pub(super) struct Budget(AtomicU64);

impl Budget {
    pub(super) fn set(&self, bytes: Option<u64>) {
        self.0.store(bytes.unwrap_or(0), Ordering::Relaxed);
    }
}

impl CudaBackend {
    pub(super) fn pool_attribute(&self, attribute: CUmemPool_attribute) -> Result<u64> {
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

    pub(super) fn reset_peak(&self) -> Result<()> {
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
}
