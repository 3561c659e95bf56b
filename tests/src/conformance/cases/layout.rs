//! Data movement: uploads and read-backs in every dtype, transposes, slices and concatenations,
//! nearest resampling (f32 activations; any other input dtype is to be refused), embedding rows
//! from tables in every dtype, and KV cache appends into a cache whose other rows hold the
//! sentinel, which they must keep.

use songloom_engine::device::SENTINEL_BITS;
use songloom_engine::{DType, Op};

use crate::conformance::{Case, FLOAT_DTYPES, Input, Seeds, WEIGHT_DTYPES};

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for dtype in WEIGHT_DTYPES {
        cases.push(upload(dtype));
        cases.push(to_host(dtype));
        cases.push(embedding(dtype));
    }
    for dtype in FLOAT_DTYPES {
        for (rows, cols) in [(5, 7), (1, 9), (0, 4), (33, 65)] {
            cases.push(transpose(rows, cols, dtype));
        }
        cases.push(slice_cols(dtype));
        cases.push(slice_rows(dtype));
        cases.push(cat_rows(dtype));
        for (len, out) in [(5, 17), (5, 2), (5, 10), (200, 689)] {
            cases.push(resample_nearest(len, out, dtype));
        }
        cases.push(write_rows(Op::WriteRows, dtype));
        cases.push(write_rows(Op::WriteKv, dtype));
    }
    cases
}

/// Values with NaN and both infinities among them (a quantized format takes plain values: a
/// non-finite value would make its whole group NaN).
fn with_non_finite(s: &mut Seeds, shape: &[usize], dtype: DType) -> Input {
    let x = s.random(shape, dtype);
    let n = x.values.len();
    if n < 3 || dtype.is_quantized() {
        x
    } else {
        x.with(f32::NAN, &[0]).with(f32::INFINITY, &[n / 2]).with(f32::NEG_INFINITY, &[n - 1])
    }
}

/// A host tensor moved to the device and read back, unchanged.
fn upload(dtype: DType) -> Case {
    Case::new(
        Op::Upload,
        dtype,
        "4x32, non-finite",
        |s| vec![with_non_finite(s, &[4, 32], dtype)],
        |d, mut t| Ok(vec![d.upload(t.remove(0))?]),
        |i| vec![i[0].values.clone()],
    )
}

fn to_host(dtype: DType) -> Case {
    Case::new(
        Op::ToHost,
        dtype,
        "3x32, non-finite",
        |s| vec![with_non_finite(s, &[3, 32], dtype)],
        |_, t| Ok(t),
        |i| vec![i[0].values.clone()],
    )
}

fn transpose(rows: usize, cols: usize, dtype: DType) -> Case {
    Case::new(
        Op::Transpose,
        dtype,
        format!("{rows}x{cols}"),
        |s| vec![with_non_finite(s, &[rows, cols], dtype)],
        |d, t| Ok(vec![d.transpose(&t[0])?]),
        move |i| vec![(0..rows * cols).map(|at| i[0].values[(at % rows) * cols + at / rows]).collect()],
    )
}

fn slice_cols(dtype: DType) -> Case {
    Case::new(
        Op::SliceCols,
        dtype,
        "4x10, columns 3..7",
        |s| vec![with_non_finite(s, &[4, 10], dtype)],
        |d, t| Ok(vec![d.slice_cols(&t[0], 3, 7)?]),
        |i| vec![i[0].values.chunks(10).flat_map(|row| row[3..7].to_vec()).collect()],
    )
}

fn slice_rows(dtype: DType) -> Case {
    Case::new(
        Op::SliceRows,
        dtype,
        "6x5, rows 2..5",
        |s| vec![with_non_finite(s, &[6, 5], dtype)],
        |d, t| Ok(vec![d.slice_rows(&t[0], 2, 5)?]),
        |i| vec![i[0].values[10..25].to_vec()],
    )
}

fn cat_rows(dtype: DType) -> Case {
    Case::new(
        Op::CatRows,
        dtype,
        "2x4, 3x4 and 1x4",
        |s| vec![with_non_finite(s, &[2, 4], dtype), s.random(&[3, 4], dtype), s.random(&[1, 4], dtype)],
        |d, t| Ok(vec![d.cat_rows(&[&t[0], &t[1], &t[2]])?]),
        |i| vec![i.iter().flat_map(|p| p.values.clone()).collect()],
    )
}

/// torch's `mode="nearest"`: the source index `floor(i * in / out)` computed in f32.
fn resample_nearest(len: usize, out: usize, dtype: DType) -> Case {
    let channels = 3;
    Case::new(
        Op::ResampleNearest,
        dtype,
        format!("{channels}x{len} to {out}"),
        |s| vec![with_non_finite(s, &[channels, len], dtype)],
        move |d, t| Ok(vec![d.resample_nearest(&t[0], out)?]),
        move |i| {
            let scale = len as f32 / out as f32;
            let index = |j: usize| (((j as f32) * scale).floor() as usize).min(len - 1);
            vec![(0..channels * out).map(|at| i[0].values[(at / out) * len + index(at % out)]).collect()]
        },
    )
}

fn embedding(dtype: DType) -> Case {
    let (vocab, dim) = (50, 32);
    let ids = [0u32, 7, 49, 7, 3];
    Case::new(
        Op::Embedding,
        dtype,
        format!("{vocab}x{dim}, ids {ids:?}"),
        |s| {
            let table = s.random(&[vocab, dim], dtype);
            vec![if dtype.is_quantized() {
                table
            } else {
                table.with(f32::NAN, &[7 * dim + 2]).with(f32::INFINITY, &[3 * dim])
            }]
        },
        move |d, t| Ok(vec![d.embedding(&t[0], &ids)?]),
        move |i| {
            vec![ids.iter().flat_map(|&id| i[0].values[id as usize * dim..(id as usize + 1) * dim].to_vec()).collect()]
        },
    )
}

/// Rows [3, 5) of each of 2 batch entries of a cache of 6 rows in `dtype` (keys and values for
/// `write_kv`), from f32 rows, which a bf16 cache rounds to nearest even.
fn write_rows(op: Op, dtype: DType) -> Case {
    let (batch, n, capacity, row, cols) = (2, 2, 6, 3, 8);
    let caches = if op == Op::WriteKv { 2 } else { 1 };
    let sentinel = f32::from_bits(SENTINEL_BITS[0]);
    Case::new(
        op,
        dtype,
        format!("rows {row}..{} of {capacity}, batch {batch}, {cols} wide", row + n),
        |s| {
            let cache = Input::new(&[batch * capacity, cols], dtype, vec![sentinel; batch * capacity * cols]);
            (0..caches).flat_map(|_| [cache.clone(), with_non_finite(s, &[batch * n, cols], DType::F32)]).collect()
        },
        move |d, mut t| {
            if op == Op::WriteKv {
                let (v, mut values, k, mut keys) = (t.pop(), t.pop(), t.pop(), t.pop());
                let (mut keys_t, mut values_t) = (keys.take().expect("keys"), values.take().expect("values"));
                d.write_kv(&mut keys_t, &k.expect("k"), &mut values_t, &v.expect("v"), batch, row)?;
                Ok(vec![keys_t, values_t])
            } else {
                let (src, dst) = (t.pop().expect("src"), t.pop());
                let mut dst = dst.expect("dst");
                d.write_rows(&mut dst, &src, batch, row)?;
                Ok(vec![dst])
            }
        },
        move |i| {
            i.chunks(2)
                .map(|pair| {
                    let (mut cache, rows) = (pair[0].values.clone(), &pair[1].values);
                    for b in 0..batch {
                        let at = (b * capacity + row) * cols;
                        for (to, from) in cache[at..at + n * cols].iter_mut().zip(&rows[b * n * cols..]) {
                            *to = dtype.round(*from);
                        }
                    }
                    cache
                })
                .collect()
        },
    )
}
