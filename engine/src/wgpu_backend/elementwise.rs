//! Elementwise ops, casts, the synthetic fill and the non-finite count.

use super::shaders::Program;
use super::storage::WgpuStorage;
use super::{WgpuBackend, bits, word};
use crate::device::{Backend, ElementwiseOps, Op};
use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};

impl WgpuBackend {
    /// SiLU, tanh or a scale by `factor` (unary.wgsl).
    pub(super) fn unary(&self, x: &Tensor, op: Op, factor: f32) -> Result<Tensor> {
        let src = self.f32s(x, op)?;
        let n = x.elem_count();
        let out = self.alloc(op, n)?;
        let code = match op {
            Op::Silu => 0,
            Op::Tanh => 1,
            _ => 2,
        };
        let params = [word(op, n)?, code, bits(factor)];
        self.run(Program::Unary, &[], &params, &[(1, src.buffer()), (2, out.buffer())], word(op, n.div_ceil(256))?)?;
        Ok(self.wrap(x.shape(), out))
    }

    /// A sum, or SiLU of `a` times `b` (binary.wgsl).
    pub(super) fn binary(&self, a: &Tensor, b: &Tensor, op: Op) -> Result<Tensor> {
        if a.shape() != b.shape() {
            return Err(Error::Shape { op: op.name(), detail: format!("{:?} vs {:?}", a.shape(), b.shape()) });
        }
        let (sa, sb) = (self.f32s(a, op)?, self.f32s(b, op)?);
        let n = a.elem_count();
        let out = self.alloc(op, n)?;
        let params = [word(op, n)?, if op == Op::Add { 0 } else { 1 }];
        let buffers = [(1, sa.buffer()), (2, sb.buffer()), (3, out.buffer())];
        self.run(Program::Binary, &[], &params, &buffers, word(op, n.div_ceil(256))?)?;
        Ok(self.wrap(a.shape(), out))
    }

    /// An f32 or bf16 tensor as f32, bf16 or f16, on the device (cast.wgsl) with the host's
    /// rounding, rather than read back, converted and uploaded again.
    fn cast_floats(&self, shape: &[usize], src: &WgpuStorage, dtype: DType) -> Result<Tensor> {
        let op = Op::Cast;
        let n = src.len;
        let out = self.alloc_as(op, dtype, n)?;
        let to = match dtype {
            DType::F32 => 0,
            DType::BF16 => 1,
            _ => 2,
        };
        let params = [word(op, n)?, u32::from(src.dtype == DType::BF16), to];
        let threads = if dtype == DType::F32 { n } else { n.div_ceil(2) };
        let buffers = [(1, src.buffer()), (2, out.buffer())];
        self.run(Program::Cast, &[], &params, &buffers, word(op, threads.div_ceil(256))?)?;
        Ok(self.wrap(shape, out))
    }
}

impl ElementwiseOps for WgpuBackend {
    /// Through the host, with the CPU's rounding, so every device converts bit for bit alike.
    fn cast(&self, t: &Tensor, dtype: DType) -> Result<Tensor> {
        let s = self.matrix(t, Op::Cast)?;
        if s.dtype == dtype {
            return Ok(t.clone());
        }
        let floats = [DType::F32, DType::BF16, DType::F16];
        if matches!(s.dtype, DType::F32 | DType::BF16) && floats.contains(&dtype) && s.pieces.is_empty() {
            return self.cast_floats(t.shape(), s, dtype);
        }
        let converted = s.to_cpu()?.to_dtype(dtype)?;
        Ok(self.wrap(t.shape(), self.upload_shaped(t.shape(), &converted)?))
    }

    fn silu_mul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(a, b, Op::SiluMul)
    }

    fn silu(&self, x: &Tensor) -> Result<Tensor> {
        self.unary(x, Op::Silu, 1.0)
    }

    fn tanh(&self, x: &Tensor) -> Result<Tensor> {
        self.unary(x, Op::Tanh, 1.0)
    }

    fn add(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(a, b, Op::Add)
    }

    fn scale(&self, x: &Tensor, factor: f32) -> Result<Tensor> {
        self.unary(x, Op::Scale, factor)
    }

    fn fill_uniform(&self, shape: &[usize], dtype: DType, seed: u64, center: f32, half_width: f32) -> Result<Tensor> {
        let op = Op::FillUniform;
        if !self.supports(op, dtype) {
            return Err(Error::unsupported(op, dtype, crate::device::DeviceKind::Wgpu));
        }
        let n: usize = shape.iter().product();
        // A matrix larger than a binding is made in pieces of whole rows, as an upload keeps it.
        let (rows, cols, rows_each) = match self.rows_per_piece(shape, super::storage::byte_sizes(dtype, n)[0]) {
            Some(rows_each) => (shape[0], shape[1], rows_each),
            None => (1, n, 1),
        };
        let bf16 = dtype == DType::BF16;
        let mut pieces = Vec::new();
        for first_row in (0..rows).step_by(rows_each) {
            let len = (rows_each.min(rows - first_row)) * cols;
            let piece = self.alloc_as(op, dtype, len)?;
            let first = word(op, first_row * cols)?;
            let params =
                [word(op, len)?, bf16 as u32, seed as u32, (seed >> 32) as u32, bits(center), bits(half_width), first];
            let threads = if bf16 { len.div_ceil(2) } else { len };
            self.run(Program::FillUniform, &[], &params, &[(1, piece.buffer())], word(op, threads.div_ceil(256))?)?;
            pieces.push((first_row, piece));
        }
        if pieces.len() == 1 {
            return Ok(self.wrap(shape, pieces.pop().expect("one piece").1));
        }
        Ok(self.wrap(shape, self.in_pieces(dtype, n, pieces)))
    }

    fn count_non_finite(&self, x: &Tensor) -> Result<usize> {
        let op = Op::CountNonFinite;
        let src = self.f32s(x, op)?;
        let n = x.elem_count();
        let count = self.shared.pool.upload(&[0; 4])?;
        self.run(
            Program::CountNonFinite,
            &[],
            &[word(op, n)?],
            &[(1, src.buffer()), (2, count.raw())],
            word(op, n.div_ceil(256))?,
        )?;
        let bytes = self.shared.queue.read(count.raw(), 4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize)
    }
}
