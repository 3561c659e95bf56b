//! Data movement: copies where the data is contiguous (rows, a cache append), layout.wgsl where it
//! is not (a transpose, a column range, resampling), and the embedding gather.

use std::sync::Arc;

use super::shaders::Program;
use super::{WgpuBackend, bits, tensor_bindings, word};
use crate::device::{DeviceKind, LayoutOps, Op};
use crate::error::{Error, Result};
use crate::shapes;
use crate::tensor::{CpuStorage, DType, Storage, Tensor};

const TRANSPOSE: u32 = 0;
const COLUMNS: u32 = 1;
const RESAMPLE: u32 = 2;

impl WgpuBackend {
    /// One layout.wgsl pass: `rows x out_cols` outputs from a `[.., cols]` input.
    fn layout_pass(
        &self,
        op: Op,
        x: &Tensor,
        rows: usize,
        out_cols: usize,
        params: [u32; 4],
    ) -> Result<super::WgpuStorage> {
        let src = self.f32s(x, op)?;
        let (_, cols) = x.dims2(op.name())?;
        let n = rows * out_cols;
        let out = self.alloc(op, n)?;
        let [code, first, scale, mode] = params;
        let params = [code, word(op, rows)?, word(op, cols)?, first, word(op, out_cols)?, scale, mode];
        self.run(Program::Layout, &[], &params, &[(1, src.buffer()), (2, out.buffer())], word(op, n.div_ceil(256))?)?;
        Ok(out)
    }
}

impl LayoutOps for WgpuBackend {
    fn upload(&self, t: Tensor) -> Result<Tensor> {
        let shape = t.shape().to_vec();
        let cpu = match t.into_storage() {
            Storage::Cpu(c) => c,
            Storage::Wgpu(s) => return Ok(self.wrap(&shape, s)),
            other => CpuStorage::F32(Tensor::new_unchecked(&shape, other).to_host()?),
        };
        Ok(self.wrap(&shape, self.upload_shaped(&shape, &cpu)?))
    }

    fn to_host(&self, t: &Tensor) -> Result<Vec<f32>> {
        t.to_host()
    }

    fn transpose(&self, x: &Tensor) -> Result<Tensor> {
        let (r, c) = x.dims2("transpose")?;
        let out = self.layout_pass(Op::Transpose, x, c, r, [TRANSPOSE, 0, 0, 0])?;
        Ok(self.wrap(&[c, r], out))
    }

    fn slice_cols(&self, x: &Tensor, start: usize, end: usize) -> Result<Tensor> {
        let (r, c) = x.dims2("slice_cols")?;
        shapes::range("slice_cols", start, end, c)?;
        let out = self.layout_pass(Op::SliceCols, x, r, end - start, [COLUMNS, word(Op::SliceCols, start)?, 0, 0])?;
        Ok(self.wrap(&[r, end - start], out))
    }

    fn resample_nearest(&self, x: &Tensor, out_len: usize) -> Result<Tensor> {
        let (c, t) = x.dims2("resample_nearest")?;
        // The rule of the CPU: the same index, half of it, or torch's f32 step.
        let mode = if out_len == t {
            1
        } else if out_len == 2 * t {
            2
        } else {
            0
        };
        let scale = bits(t as f32 / out_len as f32);
        let out = self.layout_pass(Op::ResampleNearest, x, c, out_len, [RESAMPLE, 0, scale, mode])?;
        Ok(self.wrap(&[c, out_len], out))
    }

    fn slice_rows(&self, x: &Tensor, start: usize, end: usize) -> Result<Tensor> {
        let (r, c) = x.dims2("slice_rows")?;
        shapes::range("slice_rows", start, end, r)?;
        let src = self.f32s(x, Op::SliceRows)?;
        let out = self.alloc(Op::SliceRows, (end - start) * c)?;
        self.shared.queue.copy(src.buffer(), (start * c * 4) as u64, out.buffer(), 0, ((end - start) * c * 4) as u64);
        Ok(self.wrap(&[end - start, c], out))
    }

    fn cat_rows(&self, parts: &[&Tensor]) -> Result<Tensor> {
        let (rows, cols) = shapes::cat_rows(parts)?;
        let out = self.alloc(Op::CatRows, rows * cols)?;
        let mut at = 0u64;
        for p in parts {
            let src = self.f32s(p, Op::CatRows)?;
            let bytes = (p.elem_count() * 4) as u64;
            self.shared.queue.copy(src.buffer(), 0, out.buffer(), at, bytes);
            at += bytes;
        }
        Ok(self.wrap(&[rows, cols], out))
    }

    fn write_rows(&self, dst: &mut Tensor, src: &Tensor, batch: usize, row: usize) -> Result<()> {
        let op = Op::WriteRows;
        let (capacity, n, cols) = shapes::write_rows(dst, src, batch, row)?;
        let from = self.f32s(src, op)?.clone();
        let dtype = dst.dtype();
        let crate::tensor::Storage::Wgpu(to) = dst.storage_mut() else {
            return Err(Error::WrongDevice { op, backend: DeviceKind::Wgpu, found: dst.storage().kind() });
        };
        if !matches!(dtype, DType::F32 | DType::BF16) {
            return Err(Error::unsupported(op, dtype, DeviceKind::Wgpu));
        }
        if dtype == DType::BF16 && !cols.is_multiple_of(2) {
            return Err(Error::BackendLimit {
                op,
                backend: DeviceKind::Wgpu,
                detail: format!("a bf16 cache {cols} wide: its rows must be whole words"),
            });
        }
        // A cache shared with a clone is copied first, so the clone keeps what it held.
        if Arc::strong_count(&to.buffers[0]) > 1 {
            let copy = self.alloc_as(op, dtype, to.len)?;
            let held = super::storage::byte_sizes(dtype, to.len)[0].next_multiple_of(4);
            self.shared.queue.copy(to.buffer(), 0, copy.buffer(), 0, held);
            *to = copy;
        }
        if dtype == DType::BF16 {
            let words = batch * n * cols / 2;
            let params = [word(op, words)?, word(op, n)?, word(op, cols / 2)?, word(op, capacity)?, word(op, row)?];
            let buffers = [(1, from.buffer()), (2, to.buffer())];
            return self.run(Program::WriteRowsBf16, &[], &params, &buffers, word(op, words.div_ceil(256))?);
        }
        let bytes = (n * cols * 4) as u64;
        for b in 0..batch {
            let at = ((b * capacity + row) * cols * 4) as u64;
            self.shared.queue.copy(from.buffer(), b as u64 * bytes, to.buffer(), at, bytes);
        }
        Ok(())
    }

    fn embedding(&self, table: &Tensor, ids: &[u32]) -> Result<Tensor> {
        let op = Op::Embedding;
        let (vocab, dim) = table.dims2("embedding")?;
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= vocab) {
            return Err(Error::Invalid(format!("token id {id} is outside the embedding table of {vocab} rows")));
        }
        let t = self.matrix(table, op)?;
        let out = self.alloc(op, ids.len() * dim)?;
        if ids.is_empty() {
            return Ok(self.wrap(&[0, dim], out));
        }
        // A table kept in pieces: each piece writes the rows it holds (the others' ids are
        // `NOT_HERE` to it).
        for (first_row, piece) in t.pieces() {
            let rows = piece.len.checked_div(dim).unwrap_or(vocab);
            let local: Vec<u32> = ids
                .iter()
                .map(|&id| {
                    let id = id as usize;
                    if (first_row..first_row + rows).contains(&id) { (id - first_row) as u32 } else { NOT_HERE }
                })
                .collect();
            if local.iter().all(|&id| id == NOT_HERE) {
                continue;
            }
            let id_buffer = self.shared.pool.upload(bytemuck::cast_slice(&local))?;
            let mut buffers = vec![(1, id_buffer.raw()), (2, out.buffer())];
            buffers.extend(tensor_bindings(3, piece));
            let n = ids.len() * dim;
            let params = [word(op, ids.len())?, word(op, dim)?];
            self.run(Program::Gather, &[piece.dtype], &params, &buffers, word(op, n.div_ceil(256))?)?;
        }
        Ok(self.wrap(&[ids.len(), dim], out))
    }
}

/// The id a piece of a table skips: a row another piece holds.
const NOT_HERE: u32 = u32::MAX;
