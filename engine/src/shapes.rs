//! The shape rules of the backend ops, checked in one place for every backend: each returns the
//! dimensions the op works with, or an error naming the op and the shapes it was given.

use crate::device::{AttentionShape, Rotary};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// `(m, k, n)` of `x [m, k] @ w[n, k]^T (+ bias[n])`.
pub fn linear(x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<(usize, usize, usize)> {
    let (m, k) = x.dims2("linear")?;
    let (n, wk) = w.dims2("linear")?;
    if k != wk || n == 0 {
        return Err(Error::shape("linear", format!("input {:?} against weight {:?}", x.shape(), w.shape())));
    }
    if let Some(b) = bias
        && b.elem_count() != n
    {
        return Err(Error::shape("linear", format!("bias {:?} for {n} outputs", b.shape())));
    }
    Ok((m, k, n))
}

/// `(rows, dim)` of a row-wise op whose parameters each hold `dim` values.
pub fn rows_with_params(op: &'static str, x: &Tensor, params: &[&Tensor]) -> Result<(usize, usize)> {
    let dim = *x.shape().last().unwrap_or(&0);
    if dim == 0 || params.iter().any(|p| p.elem_count() != dim) {
        let shapes: Vec<&[usize]> = params.iter().map(|p| p.shape()).collect();
        return Err(Error::shape(op, format!("parameters {shapes:?} for rows of {dim}")));
    }
    Ok((x.elem_count() / dim, dim))
}

/// `(rows, width)` of a rotary embedding.
pub fn rope(x: &Tensor, r: &Rotary) -> Result<(usize, usize)> {
    let (rows, width) = x.dims2("rope")?;
    if width == 0
        || width != r.heads * r.head_dim
        || r.rotary_dim > r.head_dim
        || !r.rotary_dim.is_multiple_of(2)
        || r.seq_len == 0
    {
        return Err(Error::shape("rope", format!("{rows}x{width} with {r:?}")));
    }
    Ok((rows, width))
}

pub fn attention(q: &Tensor, k: &Tensor, v: &Tensor, s: &AttentionShape) -> Result<()> {
    let ok = q.shape() == [s.batch * s.q_len, s.heads * s.head_dim]
        && k.shape() == [s.batch * s.kv_capacity, s.kv_heads * s.head_dim]
        && v.shape() == k.shape()
        && v.dtype() == k.dtype()
        && s.kv_len <= s.kv_capacity
        && s.kv_len > 0
        && s.kv_heads > 0
        && s.heads.is_multiple_of(s.kv_heads)
        && (!s.causal || s.q_len <= s.kv_len);
    if !ok {
        return Err(Error::shape(
            "attention",
            format!("q {:?} k {:?} {} v {:?} {} for {s:?}", q.shape(), k.shape(), k.dtype(), v.shape(), v.dtype()),
        ));
    }
    Ok(())
}

/// `(capacity, new_rows, cols)` of a KV-cache append.
pub fn write_rows(dst: &Tensor, src: &Tensor, batch: usize, row: usize) -> Result<(usize, usize, usize)> {
    let (dst_rows, cols) = dst.dims2("write_rows")?;
    let (src_rows, src_cols) = src.dims2("write_rows")?;
    let fits = batch > 0
        && cols == src_cols
        && src_rows.is_multiple_of(batch)
        && dst_rows.is_multiple_of(batch)
        && row + src_rows / batch <= dst_rows / batch;
    if !fits {
        return Err(Error::shape(
            "write_rows",
            format!("{src_rows}x{src_cols} into {dst_rows}x{cols} at row {row} for batch {batch}"),
        ));
    }
    Ok((dst_rows / batch, src_rows / batch, cols))
}

/// `[start, end)` within `len` rows or columns.
pub fn range(op: &'static str, start: usize, end: usize, len: usize) -> Result<()> {
    if start > end || end > len {
        return Err(Error::shape(op, format!("[{start}, {end}) of {len}")));
    }
    Ok(())
}

/// `(rows, cols)` of matrices stacked by rows.
pub fn cat_rows(parts: &[&Tensor]) -> Result<(usize, usize)> {
    let cols = parts.first().map(|p| p.dims2("cat_rows")).transpose()?.map_or(0, |d| d.1);
    let mut rows = 0;
    for p in parts {
        let (r, c) = p.dims2("cat_rows")?;
        if c != cols {
            return Err(Error::shape("cat_rows", format!("{c} columns next to {cols}")));
        }
        rows += r;
    }
    Ok((rows, cols))
}

/// `(channels, t)` of a Snake activation with one alpha per channel.
pub fn snake(x: &Tensor, alpha: &Tensor) -> Result<(usize, usize)> {
    let (c, t) = x.dims2("snake")?;
    if alpha.elem_count() != c {
        return Err(Error::shape("snake", format!("alpha {:?} for {c} channels", alpha.shape())));
    }
    Ok((c, t))
}
