//! RMSNorm and LayerNorm (norms.wgsl), one workgroup a row, and the rotary embedding (rope.wgsl),
//! whose cosines and sines are computed on the host in f32, the reference's arithmetic, and kept
//! per (theta, dims, positions).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::memory::GpuBuffer;
use super::shaders::Program;
use super::{WgpuBackend, bits, weight_and_bias_bindings, word};
use crate::device::{NormOps, Op, Rotary};
use crate::error::Result;
use crate::shapes;
use crate::tensor::Tensor;

/// The angle tables made so far: a decode step's single position and a DiT window's positions
/// come back every layer.
#[derive(Default)]
pub struct AngleTables {
    tables: Mutex<HashMap<AngleKey, Arc<GpuBuffer>>>,
}

/// What an angle table is made from: theta's bits, the rotary dims, the first position and the
/// number of positions.
type AngleKey = (u32, usize, usize, usize);

/// Tables kept before the oldest are dropped (a song's decode steps each add one).
const KEPT_TABLES: usize = 256;

impl WgpuBackend {
    /// `[seq_len][rotary_dim / 2]` pairs of (cos, sin) for positions from `first_position`.
    fn angle_table(&self, r: &Rotary) -> Result<Arc<GpuBuffer>> {
        let key = (r.theta.to_bits(), r.rotary_dim, r.first_position, r.seq_len);
        let mut tables = self.angles.tables.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = tables.get(&key) {
            return Ok(t.clone());
        }
        let half = r.rotary_dim / 2;
        let inv_freq: Vec<f32> = (0..half).map(|i| 1.0 / r.theta.powf((2 * i) as f32 / r.rotary_dim as f32)).collect();
        let mut values = Vec::with_capacity(r.seq_len * half * 2);
        for row in 0..r.seq_len {
            let pos = (r.first_position + row) as f32;
            for f in &inv_freq {
                let angle = pos * f;
                values.extend([angle.cos(), angle.sin()]);
            }
        }
        let table = Arc::new(self.shared.pool.upload(bytemuck::cast_slice(&values))?);
        if tables.len() >= KEPT_TABLES {
            tables.clear();
        }
        tables.insert(key, table.clone());
        Ok(table)
    }

    fn norm(&self, op: Op, x: &Tensor, w: &Tensor, b: Option<&Tensor>, eps: f32) -> Result<Tensor> {
        let (rows, dim) = match b {
            Some(b) => shapes::rows_with_params(op.name(), x, &[w, b])?,
            None => shapes::rows_with_params(op.name(), x, &[w])?,
        };
        let src = self.f32s(x, op)?;
        // RMSNorm's weight stands in for LayerNorm's bias; the shader does not read it.
        let readers = self.weight_and_bias(op, w, b)?;
        let out = self.alloc(op, rows * dim)?;
        let mut buffers = vec![(1, src.buffer()), (2, out.buffer())];
        buffers.extend(weight_and_bias_bindings(readers));
        let params = [word(op, rows)?, word(op, dim)?, bits(eps), b.is_some() as u32];
        self.run(Program::Norms, &[readers.0.dtype, readers.1.dtype], &params, &buffers, word(op, rows)?)?;
        Ok(self.wrap(x.shape(), out))
    }
}

impl NormOps for WgpuBackend {
    fn rms_norm(&self, x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
        self.norm(Op::RmsNorm, x, w, None, eps)
    }

    fn layer_norm(&self, x: &Tensor, w: &Tensor, b: &Tensor, eps: f32) -> Result<Tensor> {
        self.norm(Op::LayerNorm, x, w, Some(b), eps)
    }

    fn rope(&self, x: &Tensor, r: Rotary) -> Result<Tensor> {
        let op = Op::Rope;
        let (rows, width) = shapes::rope(x, &r)?;
        let src = self.f32s(x, op)?;
        let out = self.alloc(op, rows * width)?;
        if rows * width == 0 {
            return Ok(self.wrap(x.shape(), out));
        }
        let table = self.angle_table(&r)?;
        let params = [
            word(op, rows)?,
            word(op, width)?,
            word(op, r.head_dim)?,
            word(op, r.rotary_dim / 2)?,
            word(op, r.seq_len)?,
        ];
        let buffers = [(1, src.buffer()), (2, out.buffer()), (3, table.raw())];
        self.run(Program::Rope, &[], &params, &buffers, word(op, (rows * width).div_ceil(256))?)?;
        Ok(self.wrap(x.shape(), out))
    }
}
