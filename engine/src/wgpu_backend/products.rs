//! Matrix products `x [m, k] @ w [n, k]^T (+ bias)`: up to 8 rows the decode GEMV (gemv.wgsl),
//! which reads each weight once for every row, beyond that the tiled GEMM (linear.wgsl), and from
//! 256 rows (k a multiple of 4) the GEMM of larger tiles and 16-byte loads (linear_wide.wgsl). Against
//! a quantized weight the GEMV takes its input rounded as the integer decode products do
//! (quantize_rows.wgsl), the arithmetic the CPU and CUDA share; the GEMM dequantizes as it reads.

use super::shaders::Program;
use super::{WgpuBackend, bits, weight_and_bias_bindings, word};
use crate::device::Op;
use crate::error::Result;
use crate::quant::GROUP;
use crate::shapes;
use crate::tensor::Tensor;

/// Up to this many rows a product is a GEMV.
const GEMV_MAX_ROWS: usize = 8;
/// Weight rows a GEMV workgroup computes.
const GEMV_ROWS: usize = 8;
/// Output tile of the GEMM, each way; from [`WIDE_MIN_ROWS`] rows on, the wide GEMM's.
const TILE: usize = 64;
const WIDE_TILE: usize = 128;
/// From this many rows on, the 128-row tiles are mostly full.
const WIDE_MIN_ROWS: usize = 256;

impl WgpuBackend {
    pub(super) fn linear(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let op = Op::Linear;
        let (m, k, n) = shapes::linear(x, w, bias)?;
        let src = self.f32s(x, op)?;
        let weight = self.matrix(w, op)?;
        let out = self.alloc(op, m * n)?;
        // The GEMV reads four weights at a time.
        let gemv = m <= GEMV_MAX_ROWS && k.is_multiple_of(4);
        let groups = k / GROUP;
        // Against a quantized weight the GEMV's rows go in rounded, with what rounding lost.
        let rounded = if gemv && weight.dtype.is_quantized() && k.is_multiple_of(GROUP) && m > 0 {
            let rounded = self.alloc(op, m * k)?;
            let lost = self.alloc(op, m * groups)?;
            let buffers = [(1, src.buffer()), (2, rounded.buffer()), (3, lost.buffer())];
            let total = m * groups;
            let params = [word(op, total)?, bits(f32::NAN)];
            self.run(Program::QuantizeRows, &[], &params, &buffers, word(op, total.div_ceil(256))?)?;
            Some((rounded, lost))
        } else {
            None
        };
        // A weight kept in pieces: each piece's product fills its columns of the output.
        for (first_row, piece) in weight.pieces() {
            let rows = piece.len.checked_div(k).unwrap_or(n);
            let readers = self.with_bias(op, piece, bias)?;
            let formats = [piece.dtype, readers.1.dtype];
            let mut params = vec![
                word(op, m)?,
                word(op, rows)?,
                word(op, k)?,
                bias.is_some() as u32,
                word(op, n)?,
                word(op, first_row)?,
            ];
            if gemv {
                let (input, lost) = match &rounded {
                    Some((r, l)) => (r.buffer(), l.buffer()),
                    None => (src.buffer(), self.unused.raw()),
                };
                params.push(word(op, groups)?);
                let mut buffers = vec![(1, input), (2, out.buffer()), (9, lost)];
                buffers.extend(weight_and_bias_bindings(readers));
                self.run(Program::Gemv, &formats, &params, &buffers, word(op, rows.div_ceil(GEMV_ROWS))?)?;
            } else {
                let mut buffers = vec![(1, src.buffer()), (2, out.buffer())];
                buffers.extend(weight_and_bias_bindings(readers));
                // The wide GEMM reads x four values at a time.
                let (program, tile) = if m >= WIDE_MIN_ROWS && k.is_multiple_of(4) {
                    (Program::LinearWide, WIDE_TILE)
                } else {
                    (Program::Linear, TILE)
                };
                let grid = (word(op, rows.div_ceil(tile))?, word(op, m.div_ceil(tile))?);
                self.run_grid(program, &formats, &params, &buffers, grid)?;
            }
        }
        Ok(self.wrap(&[m, n], out))
    }
}
