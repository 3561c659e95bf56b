//! Attention: attention.wgsl for few queries, attention_tiled.wgsl for many, attention_coop.wgsl for
//! the DiT's on the matrix units, attention_split.wgsl and attention_merge.wgsl for one query over a
//! long cache.

use super::shaders::Program;
use super::{WgpuBackend, bits, queue, word};
use crate::device::{AttentionOps, AttentionShape, Backend, DeviceKind, Op};
use crate::error::{Error, Result};
use crate::shapes;
use crate::tensor::Tensor;

/// From this many queries on, attention runs in blocks of 16 (attention_tiled.wgsl).
const TILED_MIN_QUERIES: usize = 16;
/// Keys a workgroup of the split decode attention takes (attention_split.wgsl's `CHUNK`), and
/// query heads a KV head may serve there (its `GROUP`).
const SPLIT_CHUNK: usize = 64;
const SPLIT_MAX_GROUP: usize = 8;

impl AttentionOps for WgpuBackend {
    fn attention(&self, q: &Tensor, k: &Tensor, v: &Tensor, s: AttentionShape) -> Result<Tensor> {
        let op = Op::Attention;
        shapes::attention(q, k, v, &s)?;
        if s.head_dim > 256 {
            return Err(Error::BackendLimit {
                op,
                backend: DeviceKind::Wgpu,
                detail: format!("head_dim {} is over the 256 the shader holds", s.head_dim),
            });
        }
        let (sq, sk, sv) = (self.f32s(q, op)?, self.storage(k, op)?, self.storage(v, op)?);
        if !self.supports(op, sk.dtype) {
            return Err(Error::unsupported(op, sk.dtype, DeviceKind::Wgpu));
        }
        let out = self.alloc(op, s.batch * s.q_len * s.heads * s.head_dim)?;
        // A single query over more than one chunk of keys: the keys split over workgroups.
        let group = s.heads / s.kv_heads;
        if s.q_len == 1 && s.kv_len > SPLIT_CHUNK && s.head_dim.is_multiple_of(4) && group <= SPLIT_MAX_GROUP {
            let chunks = s.kv_len.div_ceil(SPLIT_CHUNK);
            let slots = s.batch * s.heads * chunks;
            let (stats, partial) = (self.alloc(op, 2 * slots)?, self.alloc(op, slots * s.head_dim)?);
            let tasks = s.batch * s.kv_heads * chunks;
            let params = [
                word(op, tasks)?,
                word(op, s.heads)?,
                word(op, s.kv_heads)?,
                word(op, s.head_dim)?,
                word(op, s.kv_len)?,
                word(op, s.kv_capacity)?,
                word(op, chunks)?,
                bits((s.head_dim as f32).powf(-0.5)),
            ];
            let buffers =
                [(1, sq.buffer()), (2, stats.buffer()), (3, sk.buffer()), (6, sv.buffer()), (9, partial.buffer())];
            self.run(Program::AttentionSplit, &[sk.dtype, sv.dtype], &params, &buffers, word(op, tasks)?)?;
            let tasks = s.batch * s.heads;
            let params = [word(op, tasks)?, word(op, s.head_dim)?, word(op, chunks)?];
            let buffers = [(1, stats.buffer()), (2, out.buffer()), (3, partial.buffer())];
            self.run(Program::AttentionMerge, &[], &params, &buffers, word(op, tasks)?)?;
            return Ok(self.wrap(&[s.batch, s.heads * s.head_dim], out));
        }
        // Many queries (head dim at most 128) go in blocks, each key and value read once a block;
        // the DiT's (head dim 64, no mask) under a fast policy on the matrix units, where the
        // adapter has them, in f16 as CUDA runs it in TF32.
        let tiled = s.q_len >= TILED_MIN_QUERIES && s.head_dim <= 128;
        let on_matrix_units = tiled && self.cooperative && self.precision.is_fast() && s.head_dim == 64 && !s.causal;
        let (program, queries_a_task) = if on_matrix_units {
            (Program::AttentionCoop, 64)
        } else if tiled {
            (Program::AttentionTiled, 16)
        } else {
            (Program::Attention, 1)
        };
        let tasks = s.batch * s.heads * s.q_len.div_ceil(queries_a_task);
        let params = [
            word(op, tasks)?,
            word(op, s.q_len)?,
            word(op, s.kv_len)?,
            word(op, s.kv_capacity)?,
            word(op, s.heads)?,
            word(op, s.kv_heads)?,
            word(op, s.head_dim)?,
            s.causal as u32,
            bits((s.head_dim as f32).powf(-0.5)),
        ];
        let buffers = [(1, sq.buffer()), (2, out.buffer()), (3, sk.buffer()), (6, sv.buffer())];
        let grid = queue::fold(word(op, tasks)?)?;
        self.dispatch(program, &[sk.dtype, sv.dtype], &[], &params, &buffers, grid)?;
        Ok(self.wrap(&[s.batch * s.q_len, s.heads * s.head_dim], out))
    }
}
