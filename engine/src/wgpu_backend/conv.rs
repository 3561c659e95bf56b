//! The vocoder's 1-D convolutions and Snake (conv_tiled.wgsl for convolutions of many output
//! channels, conv.wgsl for the others, snake.wgsl).

use super::shaders::Program;
use super::{WgpuBackend, tensor_bindings, weight_and_bias_bindings, word};
use crate::device::{Conv1dParams, ConvOps, ConvTranspose1dParams, Op};
use crate::error::Result;
use crate::shapes;
use crate::tensor::Tensor;

/// The sizes the conv program takes for either convolution: `step` is the dilation of a
/// convolution and the stride of a transposed one.
struct ConvSizes {
    c_in: usize,
    t: usize,
    c_out: usize,
    k: usize,
    t_out: usize,
    padding: usize,
    step: usize,
}

/// Whether convolutions run as tiled implicit products (`SONGLOOM_WGPU_CONV_TILED=0` runs them a
/// thread an output, to time against).
fn tiled() -> bool {
    std::env::var("SONGLOOM_WGPU_CONV_TILED").map_or(true, |v| v != "0")
}

/// conv_tiled.wgsl's tile: output channels by times.
const CONV_TILE: usize = 64;

impl WgpuBackend {
    /// A convolution: with enough output channels as an implicit product, a 64 x 64 tile a
    /// workgroup (conv_tiled.wgsl; a transposed one's phases each a row of tiles); the others a
    /// thread an output (conv.wgsl).
    fn conv(&self, op: Op, x: &Tensor, w: &Tensor, bias: Option<&Tensor>, sizes: ConvSizes) -> Result<Tensor> {
        let ConvSizes { c_in, t, c_out, k, t_out, padding, step } = sizes;
        let src = self.f32s(x, op)?;
        let readers = self.weight_and_bias(op, w, bias)?;
        let out = self.alloc(op, c_out * t_out)?;
        let mut buffers = vec![(1, src.buffer()), (2, out.buffer())];
        buffers.extend(weight_and_bias_bindings(readers));
        let params = [
            (op == Op::ConvTranspose1d) as u32,
            word(op, c_in)?,
            word(op, t)?,
            word(op, c_out)?,
            word(op, k)?,
            word(op, t_out)?,
            word(op, padding)?,
            word(op, step)?,
            bias.is_some() as u32,
        ];
        let formats = [readers.0.dtype, readers.1.dtype];
        // Columns of the product: times, or a transposed convolution's inputs (`t_out` over its
        // stride, each phase of them a row of tiles).
        let (columns, phases) = match op {
            Op::ConvTranspose1d => ((t_out + padding).div_ceil(step.max(1)), step.max(1)),
            _ => (t_out, 1),
        };
        let grid = (columns.div_ceil(CONV_TILE), phases * c_out.div_ceil(CONV_TILE));
        // A tile of few output channels is mostly idle threads (the vocoder's last convolution has
        // one); a grid dimension holds at most 65535 workgroups (WebGPU's default limit).
        if tiled() && c_out >= CONV_TILE / 2 && grid.0 <= 65_535 && grid.1 <= 65_535 {
            if t_out > 0 {
                self.run_grid(Program::ConvTiled, &formats, &params, &buffers, (word(op, grid.0)?, word(op, grid.1)?))?;
            }
        } else {
            self.run(Program::Conv, &formats, &params, &buffers, word(op, (c_out * t_out).div_ceil(256))?)?;
        }
        Ok(self.wrap(&[c_out, t_out], out))
    }
}

impl ConvOps for WgpuBackend {
    fn conv1d(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>, p: &Conv1dParams) -> Result<Tensor> {
        p.check(x, w, bias)?;
        let sizes = ConvSizes {
            c_in: p.c_in,
            t: p.t_in,
            c_out: p.c_out,
            k: p.kernel,
            t_out: p.t_out(),
            padding: p.padding,
            step: p.dilation,
        };
        self.conv(Op::Conv1d, x, w, bias, sizes)
    }

    fn conv_transpose1d(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        p: &ConvTranspose1dParams,
    ) -> Result<Tensor> {
        p.check(x, w, bias)?;
        let sizes = ConvSizes {
            c_in: p.c_in,
            t: p.t_in,
            c_out: p.c_out,
            k: p.kernel,
            t_out: p.t_out(),
            padding: p.padding,
            step: p.stride,
        };
        self.conv(Op::ConvTranspose1d, x, w, bias, sizes)
    }

    fn snake(&self, x: &Tensor, alpha: &Tensor) -> Result<Tensor> {
        let op = Op::Snake;
        let (c, t) = shapes::snake(x, alpha)?;
        let src = self.f32s(x, op)?;
        let a = self.storage(alpha, op)?;
        let out = self.alloc(op, c * t)?;
        let mut buffers = vec![(1, src.buffer()), (2, out.buffer())];
        buffers.extend(tensor_bindings(3, a));
        let params = [word(op, c * t)?, word(op, t.max(1))?];
        self.run(Program::Snake, &[a.dtype], &params, &buffers, word(op, (c * t).div_ceil(256))?)?;
        Ok(self.wrap(x.shape(), out))
    }
}
