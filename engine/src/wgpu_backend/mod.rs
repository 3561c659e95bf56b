//! The wgpu backend: WGSL compute shaders (`shaders/`) on any Vulkan, Metal or DX12 adapter.
//! Activations are f32; weights keep their format on the device (f32, bf16, f16, q8, q4) and are
//! unpacked in the shaders as they are read, with f32 arithmetic throughout, except on the matrix
//! units where the adapter offers wgpu's cooperative matrices (f16 weights' products beyond 8 rows,
//! the DiT's attention under a fast precision: f16 inputs, f32 sums).
//!
//! A file per op family: `products` (the tiled GEMM and the decode GEMV), `attention` (and the
//! rotary embedding), `norms`, `conv` (and Snake), `elementwise`, `layout` (data movement),
//! `sampling` (the shortlist); `context` opens the adapter, `queue` records and submits the work,
//! `memory` pools the buffers, `shaders` composes the programs, `storage` holds the tensors. Each family's file implements
//! that family's trait for [`WgpuBackend`]; the [`Backend`] impl below holds the device-level methods.

mod attention;
mod context;
mod conv;
mod elementwise;
mod layout;
mod memory;
mod norms;
mod products;
mod queue;
mod sampling;
pub mod shaders;
mod storage;

use std::sync::Arc;

use self::memory::{GpuBuffer, Pool};
use self::queue::{BindGroups, Queue};
use self::shaders::Program;
pub use self::storage::WgpuStorage;
use crate::device::{Backend, DeviceKind, DeviceOptions, MemoryUse, Op, Operand};
use crate::error::{Error, Result};
use crate::precision::Precision;
use crate::tensor::{CpuStorage, DType, Storage, Tensor};

/// What every tensor of one device shares: the queue its work goes to and the buffer pool.
pub struct Shared {
    queue: Queue,
    pool: Pool,
}

pub struct WgpuBackend {
    shared: Arc<Shared>,
    description: String,
    /// The adapter is a GPU, not a CPU implementation such as lavapipe.
    real_gpu: bool,
    /// f16, q8 and q4 products and, under a fast precision, the DiT's attention run on the matrix
    /// units (linear_coop.wgsl, attention_coop.wgsl; `context::runs_cooperative_programs`).
    cooperative: bool,
    precision: Precision,
    memory: Option<u64>,
    limits: wgpu::Limits,
    sentinel_fill: bool,
    /// A small buffer bound where a program declares a binding an op does not use.
    unused: GpuBuffer,
    angles: norms::AngleTables,
}

impl WgpuBackend {
    /// Opens the preferred wgpu adapter ([`context::open`]).
    pub fn new(options: DeviceOptions) -> Result<Self> {
        Self::open(options, false)
    }

    /// Opens the preferred adapter only where it is a real GPU (what `auto` may pick).
    pub fn new_on_gpu(options: DeviceOptions) -> Result<Self> {
        Self::open(options, true)
    }

    fn open(options: DeviceOptions, real_gpu_only: bool) -> Result<Self> {
        let opened = context::open(real_gpu_only)?;
        let description = context::describe(&opened);
        let bind_groups = Arc::new(BindGroups::default());
        let pool = Pool::new(opened.device.clone(), bind_groups.clone());
        let unused = pool.upload(&[0; 16])?;
        let shared = Arc::new(Shared { queue: Queue::new(opened.device, opened.queue, bind_groups), pool });
        Ok(WgpuBackend {
            shared,
            description,
            real_gpu: context::is_real_gpu(opened.info.device_type),
            cooperative: opened.cooperative,
            precision: options.precision,
            memory: opened.memory,
            limits: opened.limits,
            sentinel_fill: options.sentinel_fill,
            unused,
            angles: norms::AngleTables::default(),
        })
    }

    /// Whether the adapter is a GPU, which `auto` may take.
    pub fn is_real_gpu(&self) -> bool {
        self.real_gpu
    }

    /// A tensor on this device, whole (a matrix kept in pieces goes only where [`matrix`](Self::matrix)
    /// takes it).
    fn storage<'a>(&self, t: &'a Tensor, op: Op) -> Result<&'a WgpuStorage> {
        let s = self.matrix(t, op)?;
        if !s.pieces.is_empty() {
            return Err(Error::BackendLimit {
                op,
                backend: DeviceKind::Wgpu,
                detail: format!(
                    "a {:?} tensor larger than one binding of this adapter ({} MB) goes only into products and lookups",
                    t.shape(),
                    self.limits.max_storage_buffer_binding_size / 1_000_000
                ),
            });
        }
        Ok(s)
    }

    /// A tensor on this device, whole or, for a product's weight or a lookup's table, in pieces.
    fn matrix<'a>(&self, t: &'a Tensor, op: Op) -> Result<&'a WgpuStorage> {
        match t.storage() {
            Storage::Wgpu(s) => Ok(s),
            other => Err(Error::WrongDevice { op, backend: DeviceKind::Wgpu, found: other.kind() }),
        }
    }

    /// An activation: f32 on this device.
    fn f32s<'a>(&self, t: &'a Tensor, op: Op) -> Result<&'a WgpuStorage> {
        let s = self.storage(t, op)?;
        if s.dtype != DType::F32 {
            return Err(Error::unsupported(op, s.dtype, DeviceKind::Wgpu));
        }
        Ok(s)
    }

    /// A buffer that fits within one binding of this device.
    fn check_binding(&self, op: Op, bytes: u64) -> Result<()> {
        let limit = self.limits.max_storage_buffer_binding_size;
        if bytes > limit {
            return Err(Error::BackendLimit {
                op,
                backend: DeviceKind::Wgpu,
                detail: format!(
                    "a tensor of {} MB is more than one binding of this adapter holds ({} MB)",
                    bytes / 1_000_000,
                    limit / 1_000_000
                ),
            });
        }
        Ok(())
    }

    /// A fresh f32 result of `n` values, holding the sentinel where the options ask for it.
    fn alloc(&self, op: Op, n: usize) -> Result<WgpuStorage> {
        self.alloc_as(op, DType::F32, n)
    }

    fn alloc_as(&self, op: Op, dtype: DType, n: usize) -> Result<WgpuStorage> {
        let mut buffers = Vec::new();
        for bytes in storage::byte_sizes(dtype, n) {
            self.check_binding(op, bytes)?;
            let buffer = self.shared.pool.take(bytes)?;
            if self.sentinel_fill {
                let words = (buffer.size() / 4) as u32;
                self.run(
                    Program::Fill,
                    &[],
                    &[words, crate::device::SENTINEL_BITS[0]],
                    &[(1, buffer.raw())],
                    words.div_ceil(256),
                )?;
            }
            buffers.push(Arc::new(buffer));
        }
        Ok(WgpuStorage { dtype, len: n, buffers, pieces: Vec::new(), shared: self.shared.clone() })
    }

    fn wrap(&self, shape: &[usize], storage: WgpuStorage) -> Tensor {
        Tensor::new_unchecked(shape, Storage::Wgpu(storage))
    }

    /// Records `workgroups` of `program` (readers in `formats`), folded as dispatches need.
    fn run(
        &self,
        program: Program,
        formats: &[DType],
        params: &[u32],
        buffers: &[(u32, &wgpu::Buffer)],
        workgroups: u32,
    ) -> Result<()> {
        self.dispatch(program, formats, &[], params, buffers, queue::fold(workgroups)?)
    }

    /// [`run`](Self::run) with a two-dimensional grid of workgroups.
    fn run_grid(
        &self,
        program: Program,
        formats: &[DType],
        params: &[u32],
        buffers: &[(u32, &wgpu::Buffer)],
        grid: (u32, u32),
    ) -> Result<()> {
        self.dispatch(program, formats, &[], params, buffers, grid)
    }

    /// Records `grid` workgroups of `program` with its override constants at `overrides` (in the
    /// order of [`Program::overrides`]).
    fn dispatch(
        &self,
        program: Program,
        formats: &[DType],
        overrides: &[u32],
        params: &[u32],
        buffers: &[(u32, &wgpu::Buffer)],
        grid: (u32, u32),
    ) -> Result<()> {
        if grid.0 == 0 || grid.1 == 0 {
            return Ok(());
        }
        if grid.0 > queue::MAX_WORKGROUPS || grid.1 > queue::MAX_WORKGROUPS {
            return Err(Error::Gpu(format!("a grid of {grid:?} workgroups is more than one dispatch holds")));
        }
        let pipeline = self.shared.queue.pipeline(program, formats, overrides)?;
        self.shared.queue.dispatch(&pipeline, params, buffers, grid)
    }

    /// The storages a program's `w`/`weight` reader (bindings 3-5) and `bias` reader (6-8) read:
    /// without a bias, the weight stands in for it (the program is told not to read it).
    fn weight_and_bias<'a>(
        &self,
        op: Op,
        weight: &'a Tensor,
        bias: Option<&'a Tensor>,
    ) -> Result<(&'a WgpuStorage, &'a WgpuStorage)> {
        let weight = self.storage(weight, op)?;
        self.with_bias(op, weight, bias)
    }

    /// A weight's storage (or one piece of it) with the bias's, or the weight standing in for it.
    fn with_bias<'a>(
        &self,
        op: Op,
        weight: &'a WgpuStorage,
        bias: Option<&'a Tensor>,
    ) -> Result<(&'a WgpuStorage, &'a WgpuStorage)> {
        let bias = match bias {
            Some(b) => self.storage(b, op)?,
            None => weight,
        };
        Ok((weight, bias))
    }

    fn upload_storage(&self, cpu: &CpuStorage) -> Result<WgpuStorage> {
        let mut buffers = Vec::new();
        for bytes in storage::to_bytes(cpu) {
            self.check_binding(Op::Upload, bytes.len() as u64)?;
            buffers.push(Arc::new(self.shared.pool.upload(&bytes)?));
        }
        Ok(WgpuStorage { dtype: cpu.dtype(), len: cpu.len(), buffers, pieces: Vec::new(), shared: self.shared.clone() })
    }

    /// A host tensor on this device: whole where one binding holds it, else a matrix in pieces of
    /// as many whole rows as a binding holds.
    fn upload_shaped(&self, shape: &[usize], cpu: &CpuStorage) -> Result<WgpuStorage> {
        let largest = storage::byte_sizes(cpu.dtype(), cpu.len()).into_iter().max().unwrap_or(0);
        match self.rows_per_piece(shape, largest) {
            Some(rows_each) => self.upload_pieces(cpu, shape[1], rows_each),
            None => self.upload_storage(cpu),
        }
    }

    /// The rows a piece holds of a `[rows, cols]` matrix whose largest buffer, `bytes`, is more
    /// than one binding of this adapter holds; `None` where it fits whole (or is no matrix).
    fn rows_per_piece(&self, shape: &[usize], bytes: u64) -> Option<usize> {
        let limit = self.limits.max_storage_buffer_binding_size;
        match shape {
            [rows, _] if bytes > limit && *rows > 1 => {
                Some((limit / bytes.div_ceil(*rows as u64).max(1)).max(1) as usize)
            }
            _ => None,
        }
    }

    /// A tensor kept in `pieces`, each its first row and its data.
    fn in_pieces(&self, dtype: DType, len: usize, pieces: Vec<(usize, WgpuStorage)>) -> WgpuStorage {
        WgpuStorage { dtype, len, buffers: Vec::new(), pieces, shared: self.shared.clone() }
    }

    /// A host matrix `cols` wide in pieces of `rows_each` rows.
    fn upload_pieces(&self, cpu: &CpuStorage, cols: usize, rows_each: usize) -> Result<WgpuStorage> {
        let rows = cpu.len() / cols.max(1);
        if cpu.dtype().is_quantized() && !cols.is_multiple_of(crate::quant::GROUP) {
            return Err(Error::BackendLimit {
                op: Op::Upload,
                backend: DeviceKind::Wgpu,
                detail: format!("a {} matrix {cols} wide in pieces: its rows must be whole groups", cpu.dtype()),
            });
        }
        let pieces = (0..rows)
            .step_by(rows_each.max(1))
            .map(|r0| {
                let r1 = (r0 + rows_each).min(rows);
                Ok((r0, self.upload_storage(&storage::host_rows(cpu, cols, r0, r1))?))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(self.in_pieces(cpu.dtype(), cpu.len(), pieces))
    }

    /// A host matrix on this device in pieces of `rows_each` rows, as [`Backend::upload`] keeps one
    /// larger than a binding: tests split small matrices with it on any adapter.
    pub fn upload_in_pieces(&self, t: Tensor, rows_each: usize) -> Result<Tensor> {
        let (_, cols) = t.dims2("upload_in_pieces")?;
        let shape = t.shape().to_vec();
        let Storage::Cpu(cpu) = t.into_storage() else {
            return Err(Error::Invalid("upload_in_pieces takes a host tensor".into()));
        };
        Ok(self.wrap(&shape, self.upload_pieces(&cpu, cols, rows_each)?))
    }
}

/// `binding`, `binding + 1`, ... holding the buffers of `t` (a reader's bindings).
fn tensor_bindings(binding: u32, t: &WgpuStorage) -> impl Iterator<Item = (u32, &wgpu::Buffer)> {
    t.buffers.iter().enumerate().map(move |(i, b)| (binding + i as u32, b.raw()))
}

/// The bindings of a weight's reader (from 3) and a bias's (from 6), as [`WgpuBackend::weight_and_bias`]
/// gives them.
fn weight_and_bias_bindings<'a>(
    (weight, bias): (&'a WgpuStorage, &'a WgpuStorage),
) -> impl Iterator<Item = (u32, &'a wgpu::Buffer)> {
    tensor_bindings(3, weight).chain(tensor_bindings(6, bias))
}

/// An f32 as the bits a parameter word holds.
fn bits(v: f32) -> u32 {
    v.to_bits()
}

/// A count as a parameter word, or an error where it does not fit 32 bits.
fn word(op: Op, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::BackendLimit {
        op,
        backend: DeviceKind::Wgpu,
        detail: format!("{n} is more than a 32-bit index holds"),
    })
}

impl Backend for WgpuBackend {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Wgpu
    }

    fn description(&self) -> String {
        self.description.clone()
    }

    fn synchronize(&self) -> Result<()> {
        self.shared.queue.wait()
    }

    fn precision(&self) -> Precision {
        self.precision
    }

    fn memory(&self) -> Option<MemoryUse> {
        let usage = self.shared.pool.usage();
        let total = self.memory.unwrap_or(self.limits.max_buffer_size).max(usage.held);
        Some(MemoryUse { in_use: usage.live, peak: usage.peak, free: total - usage.held, total })
    }

    fn set_memory_limit(&self, bytes: Option<u64>) -> Result<()> {
        self.shared.pool.set_budget(bytes);
        Ok(())
    }

    fn release_unused_memory(&self) -> Result<()> {
        self.shared.queue.wait()?;
        self.shared.pool.release();
        Ok(())
    }

    /// Every weight format for products' weights, tables and parameters (the shaders' readers take
    /// them all), f32 activations, f32 and bf16 synthetic fills; anything can be read back.
    fn supports(&self, op: Op, dtype: DType) -> bool {
        match op.operand() {
            Operand::Activation => dtype == DType::F32,
            Operand::Cache => matches!(dtype, DType::F32 | DType::BF16),
            Operand::Result if op == Op::FillUniform => matches!(dtype, DType::F32 | DType::BF16),
            _ => dtype != DType::F8E4M3,
        }
    }
}
