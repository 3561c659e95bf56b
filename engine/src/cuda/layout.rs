//! The CUDA backend's data movement: uploads and read-backs, embedding rows, transposes,
//! slices and concatenations, KV cache appends and nearest resampling.

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use super::context::{Lane, gpu};
use super::launch::grid_1d;
use super::storage::Float;
use super::{CudaBackend, CudaStorage};
use crate::device::{DeviceKind, LayoutOps, Op};
use crate::error::{Error, Result};
use crate::shapes;
use crate::tensor::{CpuStorage, DType, Storage, Tensor};

impl CudaBackend {
    /// Copies `n` floats from `src[from..]` to `dst[to..]` on the lane's stream.
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

    /// Rows `ids` (on the device, each below the table's rows) of `table [vocab, dim]`.
    pub(super) fn embedding_ids(
        &self,
        lane: &Lane,
        table: &Tensor,
        ids: &CudaSlice<u32>,
        count: usize,
    ) -> Result<Tensor> {
        let (_, dim) = table.dims2("embedding")?;
        let mut out = self.alloc(lane, count * dim)?;
        let (dim32, n64) = (dim as i32, count as i64);
        let storage = self.storage(table, Op::Embedding)?;
        if let CudaStorage::Quant(q) = storage {
            self.embedding_quant(lane, q, ids, count, dim, &mut out)?;
            return self.wrap(&[count, dim], out);
        }
        if count > 0 {
            let kernel = if storage.dtype() == DType::F32 { "embedding_f32" } else { "embedding_bf16" };
            let mut b = lane.stream.launch_builder(self.kernels.get(kernel)?);
            match self.float(table, Op::Embedding)? {
                Float::F32(s) => b.arg(s),
                Float::BF16(s) => b.arg(s),
            };
            b.arg(ids).arg(&mut out).arg(&dim32).arg(&n64);
            // SAFETY: ids index rows of the table; out holds count * dim floats.
            unsafe { b.launch(grid_1d(count * dim)) }.map_err(gpu)?;
        }
        self.wrap(&[count, dim], out)
    }
}

impl LayoutOps for CudaBackend {
    fn upload(&self, t: Tensor) -> Result<Tensor> {
        let shape = t.shape().to_vec();
        let storage = match t.into_storage() {
            Storage::Cuda(s) => Storage::Cuda(s),
            Storage::Wgpu(w) => return self.upload(Tensor::new_unchecked(&shape, Storage::Cpu(w.to_cpu()?))),
            Storage::Cpu(cpu) => {
                let lane = self.lane()?;
                match cpu {
                    CpuStorage::F32(v) => Storage::Cuda(CudaStorage::F32(lane.stream.clone_htod(&v).map_err(gpu)?)),
                    CpuStorage::BF16(v) => {
                        let bits: &[u16] = bytemuck::cast_slice(&v);
                        Storage::Cuda(CudaStorage::BF16(lane.stream.clone_htod(bits).map_err(gpu)?))
                    }
                    CpuStorage::Quant(q) => Storage::Cuda(CudaStorage::Quant(self.upload_quant(&lane, &q)?)),
                    // No f16 kernels on this backend: weights are converted before they come up.
                    CpuStorage::F16(_) => return Err(Error::unsupported(Op::Upload, DType::F16, DeviceKind::Cuda)),
                }
            }
        };
        Ok(Tensor::new_unchecked(&shape, storage))
    }

    /// Reads a tensor back, wherever it lives (a host tensor is simply copied).
    fn to_host(&self, t: &Tensor) -> Result<Vec<f32>> {
        t.to_host()
    }

    fn embedding(&self, table: &Tensor, ids: &[u32]) -> Result<Tensor> {
        let (vocab, _) = table.dims2("embedding")?;
        if let Some(&bad) = ids.iter().find(|&&id| id as usize >= vocab) {
            return Err(Error::Invalid(format!("token id {bad} is outside the embedding table of {vocab} rows")));
        }
        let lane = self.lane()?;
        let ids_dev = lane.stream.clone_htod(ids).map_err(gpu)?;
        self.embedding_ids(&lane, table, &ids_dev, ids.len())
    }

    fn transpose(&self, x: &Tensor) -> Result<Tensor> {
        let (r, c) = x.dims2("transpose")?;
        // The dtype is checked even when there is nothing to move.
        let src = self.f32s(x, Op::Transpose)?;
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, r * c)?;
        if r > 0 && c > 0 {
            let cfg = LaunchConfig {
                grid_dim: (c.div_ceil(32) as u32, r.div_ceil(32) as u32, 1),
                block_dim: (32, 8, 1),
                shared_mem_bytes: 0,
            };
            let (r32, c32) = (r as i32, c as i32);
            let mut b = lane.stream.launch_builder(self.kernels.get("transpose_f32")?);
            b.arg(src).arg(&mut out).arg(&r32).arg(&c32);
            // SAFETY: r * c floats each side; the tile guards the edges.
            unsafe { b.launch(cfg) }.map_err(gpu)?;
        }
        self.wrap(&[c, r], out)
    }

    fn slice_cols(&self, x: &Tensor, start: usize, end: usize) -> Result<Tensor> {
        let (r, c) = x.dims2("slice_cols")?;
        shapes::range("slice_cols", start, end, c)?;
        let src = self.f32s(x, Op::SliceCols)?;
        let lane = self.lane()?;
        let width = end - start;
        let mut out = self.alloc(&lane, r * width)?;
        if r * width > 0 {
            let (rows64, c32, s32, w32) = (r as i64, c as i32, start as i32, width as i32);
            let mut b = lane.stream.launch_builder(self.kernels.get("slice_cols_f32")?);
            b.arg(src).arg(&mut out).arg(&rows64).arg(&c32).arg(&s32).arg(&w32);
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
        self.copy_rows(&lane, self.f32s(x, Op::SliceRows)?, start * c, &mut out, 0, (end - start) * c)?;
        self.wrap(&[end - start, c], out)
    }

    fn cat_rows(&self, parts: &[&Tensor]) -> Result<Tensor> {
        let (rows, cols) = shapes::cat_rows(parts)?;
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, rows * cols)?;
        let mut at = 0;
        for p in parts {
            let n = p.elem_count();
            self.copy_rows(&lane, self.f32s(p, Op::CatRows)?, 0, &mut out, at, n)?;
            at += n;
        }
        self.wrap(&[rows, cols], out)
    }

    fn write_rows(&self, dst: &mut Tensor, src: &Tensor, batch: usize, row: usize) -> Result<()> {
        let (capacity, n, cols) = shapes::write_rows(dst, src, batch, row)?;
        let lane = self.lane()?;
        let src = self.f32s(src, Op::WriteRows)?;
        let dtype = dst.dtype();
        let total = (batch * n * cols) as i64;
        if total == 0 {
            return Ok(());
        }
        let (n32, cols32, cap32, row32) = (n as i32, cols as i32, capacity as i32, row as i32);
        let mut b = match dst.storage_mut() {
            Storage::Cuda(CudaStorage::F32(d)) => {
                let mut b = lane.stream.launch_builder(self.kernels.get("write_rows_f32")?);
                b.arg(src).arg(d);
                b
            }
            Storage::Cuda(CudaStorage::BF16(d)) => {
                let mut b = lane.stream.launch_builder(self.kernels.get("write_rows_bf16")?);
                b.arg(src).arg(d);
                b
            }
            _ => return Err(Error::unsupported(Op::WriteRows, dtype, DeviceKind::Cuda)),
        };
        b.arg(&total).arg(&n32).arg(&cols32).arg(&cap32).arg(&row32);
        // SAFETY: shapes checked: each batch entry's rows [row, row + n) lie inside dst.
        unsafe { b.launch(grid_1d(total as usize)) }.map_err(gpu)?;
        Ok(())
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
        let same = keys.shape() == values.shape() && keys.dtype() == values.dtype();
        let lane = self.lane()?;
        if shapes::write_rows(values, v, batch, row)? != key_shape || !same {
            if lane.shift() != 0 {
                return Err(Error::Gpu(
                    "keys and values of different shapes cannot be recorded to replay at other positions".into(),
                ));
            }
            self.write_rows(keys, k, batch, row)?;
            return self.write_rows(values, v, batch, row);
        }
        let (capacity, n, cols) = key_shape;
        let (k_src, v_src) = (self.f32s(k, Op::WriteKv)?, self.f32s(v, Op::WriteKv)?);
        let total = (batch * n * cols) as i64;
        if total == 0 {
            return Ok(());
        }
        let dtype = keys.dtype();
        let mut b = match (keys.storage_mut(), values.storage_mut()) {
            (Storage::Cuda(CudaStorage::F32(k_dst)), Storage::Cuda(CudaStorage::F32(v_dst))) => {
                let mut b = lane.stream.launch_builder(self.kernels.get("write_kv_f32")?);
                b.arg(k_src).arg(k_dst).arg(v_src).arg(v_dst);
                b
            }
            (Storage::Cuda(CudaStorage::BF16(k_dst)), Storage::Cuda(CudaStorage::BF16(v_dst))) => {
                let mut b = lane.stream.launch_builder(self.kernels.get("write_kv_bf16")?);
                b.arg(k_src).arg(k_dst).arg(v_src).arg(v_dst);
                b
            }
            _ => return Err(Error::unsupported(Op::WriteKv, dtype, DeviceKind::Cuda)),
        };
        let (n32, cols32, cap32, row32, shift) = (n as i32, cols as i32, capacity as i32, row as i32, lane.shift());
        b.arg(&total).arg(&n32).arg(&cols32).arg(&cap32).arg(&row32).arg(&shift);
        // SAFETY: both caches have the same shape and dtype, and the rows [row, row + n) of each
        // batch entry lie inside them (checked above; a recorded step's replays check their own).
        unsafe { b.launch(grid_1d(total as usize)) }.map_err(gpu)?;
        Ok(())
    }

    fn resample_nearest(&self, x: &Tensor, out_len: usize) -> Result<Tensor> {
        let (c, t) = x.dims2("resample_nearest")?;
        if t == 0 {
            return Err(Error::shape("resample_nearest", "an empty signal"));
        }
        let lane = self.lane()?;
        let mut out = self.alloc(&lane, c * out_len)?;
        let (c32, t32, o32) = (c as i32, t as i32, out_len as i32);
        let mut b = lane.stream.launch_builder(self.kernels.get("resample_nearest_f32")?);
        b.arg(self.f32s(x, Op::ResampleNearest)?).arg(&mut out).arg(&c32).arg(&t32).arg(&o32);
        // SAFETY: out holds c * out_len floats; source indices are clamped to t.
        unsafe { b.launch(grid_1d(c * out_len)) }.map_err(gpu)?;
        self.wrap(&[c, out_len], out)
    }
}
