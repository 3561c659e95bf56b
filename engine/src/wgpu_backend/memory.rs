//! Device buffers: a pool that keeps freed buffers by size class for reuse, and the account of
//! what is held against the memory budget. The budget counts the live buffers (what the work
//! needs); the pool's idle buffers are dropped before the device would hold more than it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::queue::BindGroups;
use crate::error::{Error, Result};

/// The usages every pooled buffer has: bound to shaders, copied to and from.
pub const USAGES: wgpu::BufferUsages =
    wgpu::BufferUsages::STORAGE.union(wgpu::BufferUsages::COPY_SRC).union(wgpu::BufferUsages::COPY_DST);

/// The size a request is rounded up to: a multiple of an eighth of its power of two (at most
/// 12.5 % more), so that buffers of nearly the same size are reused for each other.
pub fn size_class(bytes: u64) -> u64 {
    let bytes = bytes.max(16);
    let floor_power = 1u64 << (63 - bytes.leading_zeros());
    let step = (floor_power / 8).max(16);
    bytes.div_ceil(step) * step
}

#[derive(Default)]
struct Account {
    /// Bytes in live buffers.
    live: u64,
    /// Bytes in the pool's idle buffers.
    pooled: u64,
    /// The most `live` has been since the budget was last set.
    peak: u64,
    budget: Option<u64>,
    free: HashMap<u64, Vec<wgpu::Buffer>>,
}

impl Account {
    fn drop_pool(&mut self) {
        self.pooled = 0;
        self.free.clear();
    }
}

/// What the pool holds, in bytes.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub live: u64,
    pub peak: u64,
    /// Live and idle together: what the device holds for this process.
    pub held: u64,
}

/// The pool and the account, shared by every buffer of one device.
#[derive(Clone)]
pub struct Pool {
    device: wgpu::Device,
    account: Arc<Mutex<Account>>,
    /// The queue's bind groups, which hold their buffers alive: cleared as the pool frees buffers.
    bind_groups: Arc<BindGroups>,
}

/// A buffer of the pool: handed back to it when dropped.
pub struct GpuBuffer {
    buffer: Option<wgpu::Buffer>,
    size: u64,
    pool: Pool,
}

impl GpuBuffer {
    pub fn raw(&self) -> &wgpu::Buffer {
        self.buffer.as_ref().expect("a live buffer")
    }

    pub fn size(&self) -> u64 {
        self.size
    }
}

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            let mut account = self.pool.account.lock().unwrap_or_else(|e| e.into_inner());
            account.live -= self.size;
            account.pooled += self.size;
            account.free.entry(self.size).or_default().push(buffer);
        }
    }
}

impl Pool {
    pub fn new(device: wgpu::Device, bind_groups: Arc<BindGroups>) -> Self {
        Pool { device, account: Arc::default(), bind_groups }
    }

    /// Frees the idle buffers, and the bind groups that would keep them.
    fn drop_pool(&self, account: &mut Account) {
        self.bind_groups.clear();
        account.drop_pool();
    }

    fn account(&self) -> std::sync::MutexGuard<'_, Account> {
        self.account.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A buffer of at least `bytes`, from the pool where one of its class is free. Its contents are
    /// whatever it last held: the caller writes it before reading.
    pub fn take(&self, bytes: u64) -> Result<GpuBuffer> {
        let size = size_class(bytes);
        let pooled = {
            let mut account = self.account();
            Self::admit(&mut account, size)?;
            let found = account.free.get_mut(&size).and_then(Vec::pop);
            if found.is_some() {
                account.pooled -= size;
                Self::count(&mut account, size);
            }
            found
        };
        let buffer = match pooled {
            Some(buffer) => buffer,
            None => {
                self.reserve(size)?;
                self.create(size, false).inspect_err(|_| self.account().live -= size)?
            }
        };
        Ok(GpuBuffer { buffer: Some(buffer), size, pool: self.clone() })
    }

    /// A fresh buffer holding `bytes` (padded to a multiple of 4), never one from the pool: a
    /// pooled buffer may still be read by work recorded but not yet submitted, and a queued
    /// write would land before it.
    pub fn upload(&self, bytes: &[u8]) -> Result<GpuBuffer> {
        let size = size_class(bytes.len() as u64);
        self.reserve(size)?;
        let buffer = self.create(size, true).inspect_err(|_| self.account().live -= size)?;
        buffer
            .slice(..)
            .get_mapped_range_mut()
            .expect("mapped at creation")
            .slice(..bytes.len())
            .copy_from_slice(bytes);
        buffer.unmap();
        Ok(GpuBuffer { buffer: Some(buffer), size, pool: self.clone() })
    }

    /// Refuses `size` more live bytes over the budget.
    fn admit(account: &mut Account, size: u64) -> Result<()> {
        match account.budget {
            Some(budget) if account.live + size > budget => {
                Err(Error::OverBudget { wanted: size, in_use: account.live, budget })
            }
            _ => Ok(()),
        }
    }

    fn count(account: &mut Account, size: u64) {
        account.live += size;
        account.peak = account.peak.max(account.live);
    }

    /// Counts a new buffer of `size`, or refuses it over the budget; drops the pool's idle
    /// buffers first where the device would otherwise hold more than the budget.
    fn reserve(&self, size: u64) -> Result<()> {
        let mut account = self.account();
        Self::admit(&mut account, size)?;
        if let Some(budget) = account.budget
            && account.live + account.pooled + size > budget
        {
            self.drop_pool(&mut account);
        }
        Self::count(&mut account, size);
        Ok(())
    }

    fn create(&self, size: u64, mapped: bool) -> Result<wgpu::Buffer> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage: USAGES,
            mapped_at_creation: mapped,
        });
        match pollster::block_on(scope.pop()) {
            None => Ok(buffer),
            Some(e) => Err(Error::Gpu(format!("out of device memory for {} MB: {e}", size / 1_000_000))),
        }
    }

    pub fn usage(&self) -> Usage {
        let account = self.account();
        Usage { live: account.live, peak: account.peak, held: account.live + account.pooled }
    }

    pub fn set_budget(&self, budget: Option<u64>) {
        let mut account = self.account();
        account.budget = budget;
        account.peak = account.live;
    }

    /// Frees the pool's idle buffers.
    pub fn release(&self) {
        self.drop_pool(&mut self.account());
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_round_up_by_at_most_an_eighth() {
        for bytes in [1u64, 16, 17, 1000, 4096, 4097, 1 << 20, (1 << 20) + 1, 123_456_789] {
            let class = size_class(bytes);
            assert!(class >= bytes && class.is_multiple_of(4), "{bytes} -> {class}");
            assert!(class as f64 <= (bytes.max(16) as f64) * 1.125 + 16.0, "{bytes} -> {class}");
        }
        assert_eq!(size_class(4097), size_class(4100), "near sizes share a class");
    }
}
