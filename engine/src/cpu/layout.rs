//! The CPU backend's data movement: uploads, read-backs, tables, slices and the KV cache's appends.

use super::*;

impl LayoutOps for CpuBackend {
    fn upload(&self, t: Tensor) -> Result<Tensor> {
        match t.storage() {
            Storage::Cpu(_) => Ok(t),
            _ => Tensor::from_f32(t.shape(), t.to_host()?),
        }
    }

    fn to_host(&self, t: &Tensor) -> Result<Vec<f32>> {
        Ok(storage(t, Op::ToHost)?.to_f32_vec())
    }

    fn embedding(&self, table: &Tensor, ids: &[u32]) -> Result<Tensor> {
        let (vocab, dim) = table.dims2("embedding")?;
        let table_values = storage(table, Op::Embedding)?;
        let mut y = vec![self.fresh; ids.len() * dim];
        for (row, &id) in y.chunks_mut(dim).zip(ids) {
            let id = id as usize;
            if id >= vocab {
                return Err(Error::Invalid(format!("token id {id} is outside the embedding table of {vocab} rows")));
            }
            match table_values {
                CpuStorage::F32(v) => row.copy_from_slice(&v[id * dim..(id + 1) * dim]),
                CpuStorage::BF16(v) => {
                    row.iter_mut().zip(&v[id * dim..(id + 1) * dim]).for_each(|(d, s)| *d = s.to_f32())
                }
                CpuStorage::F16(v) => {
                    row.iter_mut().zip(&v[id * dim..(id + 1) * dim]).for_each(|(d, s)| *d = s.to_f32())
                }
                CpuStorage::Quant(q) => crate::quant::dequantize_into(q, id * dim, row),
            }
        }
        out(&[ids.len(), dim], y)
    }

    fn transpose(&self, x: &Tensor) -> Result<Tensor> {
        let (r, c) = x.dims2("transpose")?;
        f32s(x, Op::Transpose)?;
        if r == 0 || c == 0 {
            return out(&[c, r], Vec::new());
        }
        let v = f32s(x, Op::Transpose)?;
        let mut y = vec![self.fresh; r * c];
        y.par_chunks_mut(r).enumerate().for_each(|(j, col)| {
            for (i, d) in col.iter_mut().enumerate() {
                *d = v[i * c + j];
            }
        });
        out(&[c, r], y)
    }

    fn slice_cols(&self, x: &Tensor, start: usize, end: usize) -> Result<Tensor> {
        let (r, c) = x.dims2("slice_cols")?;
        shapes::range("slice_cols", start, end, c)?;
        let v = f32s(x, Op::SliceCols)?;
        let y = v.chunks(c.max(1)).take(r).flat_map(|row| row[start..end].iter().copied()).collect();
        out(&[r, end - start], y)
    }

    fn slice_rows(&self, x: &Tensor, start: usize, end: usize) -> Result<Tensor> {
        let (r, c) = x.dims2("slice_rows")?;
        shapes::range("slice_rows", start, end, r)?;
        out(&[end - start, c], f32s(x, Op::SliceRows)?[start * c..end * c].to_vec())
    }

    fn cat_rows(&self, parts: &[&Tensor]) -> Result<Tensor> {
        let (rows, cols) = shapes::cat_rows(parts)?;
        let mut y = Vec::with_capacity(rows * cols);
        for p in parts {
            y.extend_from_slice(f32s(p, Op::CatRows)?);
        }
        out(&[rows, cols], y)
    }

    fn resample_nearest(&self, x: &Tensor, out_len: usize) -> Result<Tensor> {
        let (c, t) = x.dims2("resample_nearest")?;
        let v = f32s(x, Op::ResampleNearest)?;
        let index = |i: usize| -> usize {
            if out_len == t {
                i
            } else if out_len == 2 * t {
                i >> 1
            } else {
                // torch computes the source index in f32: floor(i * (in / out)).
                let scale = t as f32 / out_len as f32;
                (((i as f32) * scale).floor() as usize).min(t - 1)
            }
        };
        let mut y = vec![self.fresh; c * out_len];
        for ch in 0..c {
            for i in 0..out_len {
                y[ch * out_len + i] = v[ch * t + index(i)];
            }
        }
        out(&[c, out_len], y)
    }

    fn write_rows(&self, dst: &mut Tensor, src: &Tensor, batch: usize, row: usize) -> Result<()> {
        let (capacity, n, cols) = shapes::write_rows(dst, src, batch, row)?;
        let src = f32s(src, Op::WriteRows)?;
        let dtype = dst.dtype();
        let rows = |b: usize| &src[b * n * cols..(b + 1) * n * cols];
        let at = |b: usize| (b * capacity + row) * cols;
        match dst.storage_mut() {
            Storage::Cpu(CpuStorage::F32(d)) => {
                for b in 0..batch {
                    d[at(b)..at(b) + n * cols].copy_from_slice(rows(b));
                }
            }
            Storage::Cpu(CpuStorage::BF16(d)) => {
                for b in 0..batch {
                    for (to, &from) in d[at(b)..at(b) + n * cols].iter_mut().zip(rows(b)) {
                        *to = half::bf16::from_f32(from);
                    }
                }
            }
            _ => return Err(Error::unsupported(Op::WriteRows, dtype, DeviceKind::Cpu)),
        }
        Ok(())
    }
}
