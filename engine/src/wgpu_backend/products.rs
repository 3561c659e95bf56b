//! Matrix products `x [m, k] @ w [n, k]^T (+ bias)`: up to 8 rows the decode GEMV (gemv.wgsl),
//! which reads each weight once for every row, beyond that the tiled GEMM (linear.wgsl), and from
//! 256 rows (k a multiple of 4) the GEMM of larger tiles and 16-byte loads (linear_wide.wgsl). Against
//! a quantized weight the GEMV is the integer one (gemv_int8.wgsl), its input rounded to int8
//! codes (quantize_rows.wgsl), the arithmetic the CPU and CUDA share; the GEMM dequantizes as it
//! reads.
//! Where the adapter offers cooperative matrices, an f16 weight's product beyond the decode shapes
//! runs on the matrix units (linear_coop.wgsl), its input rounded to f16 (as CUDA's beyond them
//! round theirs to bf16), and there the GLU is the product's epilogue; q8 and q4 weights' too,
//! their values rounded to f16 as they are staged.
//! The decode step's fused products (the residual add, SwiGLU, q/k/v with their norm) are the
//! GEMV with its input norm and epilogues; other shapes take the composed forms.

use std::borrow::Cow;

use super::shaders::Program;
use super::storage::WgpuStorage;
use super::{WgpuBackend, bits, queue, tensor_bindings, weight_and_bias_bindings, word};
use crate::device::{ElementwiseOps, NormOps, Op, ProductOps, RmsNorm, composed};
use crate::error::{Error, Result};
use crate::precision::Precision;
use crate::quant::GROUP;
use crate::shapes;
use crate::tensor::{DType, Tensor};

/// Up to this many rows a product is a GEMV.
const GEMV_MAX_ROWS: usize = 8;
/// Weight rows a GEMV workgroup computes.
const GEMV_ROWS: usize = 8;
/// Groups of 32 a workgroup of quantize_rows.wgsl rounds (eight threads a group).
const QUANTIZE_GROUPS: usize = 32;
/// Output tile of the GEMM, each way; from [`WIDE_MIN_ROWS`] rows on, the wide GEMM's.
const TILE: usize = 64;
const WIDE_TILE: usize = 128;
/// From this many rows on, the 128-row tiles are mostly full.
const WIDE_MIN_ROWS: usize = 256;
/// Output tile of the products on the matrix units (linear_coop.wgsl): rows of x, weight rows.
const COOP_TILE: (usize, usize) = (128, 128);

/// Rows rounded for the integer GEMV (quantize_rows.wgsl): their int8 codes, four to a word, in
/// the order the weight's format takes them; each group's scale, then what rounding took from its
/// sum.
struct Rounded {
    codes: WgpuStorage,
    groups: WgpuStorage,
    /// The weight format the codes are ordered for.
    format: DType,
}

/// What the decode GEMV does with its sums (gemv.wgsl's `EPILOGUE_*`).
#[derive(Clone, Copy)]
enum Epilogue<'a> {
    Plain,
    /// `residual + x w^T`.
    Add(&'a Tensor),
    /// `silu(x w^T) * (x up^T)`, with `up` the second matrix.
    Swiglu(&'a Tensor),
}

impl Epilogue<'_> {
    fn code(self) -> u32 {
        match self {
            Epilogue::Plain => 0,
            Epilogue::Add(_) => 1,
            Epilogue::Swiglu(_) => 2,
        }
    }
}

/// The parameters every product program starts with: `m` rows of `x`, `rows` weight rows `k` long
/// (a piece of a weight, its first row `first_row` of the output's `n` columns), and whether a bias
/// is added.
fn piece_params(op: Op, m: usize, rows: usize, k: usize, bias: bool, n: usize, first_row: usize) -> Result<[u32; 6]> {
    Ok([word(op, m)?, word(op, rows)?, word(op, k)?, bias as u32, word(op, n)?, word(op, first_row)?])
}

/// Whether `x [m, k]` goes through the decode GEMV.
fn is_gemv(m: usize, k: usize) -> bool {
    m <= GEMV_MAX_ROWS && k.is_multiple_of(4)
}

impl WgpuBackend {
    /// Whether the GEMV can apply `norm` to rows `k` wide: a whole weight of `k` values here.
    fn norm_fits(&self, norm: Option<RmsNorm>, k: usize) -> bool {
        norm.is_none_or(|n| n.weight.elem_count() == k && self.storage(n.weight, Op::RmsNorm).is_ok())
    }

    /// The input and norm the GEMV takes: against quantized weights the input normalised here
    /// (the GEMV rounds it from the normalised rows); against float ones `x` and the norm, which
    /// the GEMV applies itself.
    fn gemv_input<'x, 'n>(
        &self,
        x: &'x Tensor,
        norm: Option<RmsNorm<'n>>,
        quantized: bool,
    ) -> Result<(Cow<'x, Tensor>, Option<RmsNorm<'n>>)> {
        match norm {
            Some(n) if quantized => Ok((Cow::Owned(self.rms_norm(x, n.weight, n.eps)?), None)),
            _ => Ok((Cow::Borrowed(x), norm)),
        }
    }

    /// Whether a product against `weight` with rows `k` long runs on the matrix units
    /// (linear_coop.wgsl), which take f16 weights 8 a load, or q8 and q4 ones a group at a time,
    /// their values rounded to f16 (the units' inputs).
    fn on_matrix_units(&self, weight: &WgpuStorage, k: usize) -> bool {
        self.cooperative
            && match weight.dtype {
                DType::F16 => k.is_multiple_of(8),
                DType::Q8 | DType::Q4 => k.is_multiple_of(GROUP),
                _ => false,
            }
    }

    /// `x [m, k] @ w [n, k]^T (+ bias)` beyond the GEMV's rows, or with `glu` (on the matrix
    /// units only) its GLU `[m, n / 2]`.
    fn product(&self, op: Op, x: &Tensor, w: &Tensor, bias: Option<&Tensor>, glu: bool) -> Result<Tensor> {
        let (m, k, n) = shapes::linear(x, w, bias)?;
        let src = self.f32s(x, op)?;
        let weight = self.matrix(w, op)?;
        let width = if glu { n / 2 } else { n };
        let out = self.alloc(op, m * width)?;
        // A weight kept in pieces: each piece's product fills its columns of the output.
        for (first_row, piece) in weight.pieces() {
            let rows = piece.len.checked_div(k).unwrap_or(n);
            let readers = self.with_bias(op, piece, bias)?;
            let formats = [piece.dtype, readers.1.dtype];
            let params = piece_params(op, m, rows, k, bias.is_some(), width, first_row)?;
            let mut buffers = vec![(1, src.buffer()), (2, out.buffer())];
            buffers.extend(weight_and_bias_bindings(readers));
            // The wide GEMM reads x four values at a time. Tiles: (x rows, output columns).
            let (program, tile) = if self.on_matrix_units(piece, k) {
                (Program::LinearCoop, if glu { (COOP_TILE.0, COOP_TILE.1 / 2) } else { COOP_TILE })
            } else if m >= WIDE_MIN_ROWS && k.is_multiple_of(4) {
                (Program::LinearWide, (WIDE_TILE, WIDE_TILE))
            } else {
                (Program::Linear, (TILE, TILE))
            };
            // Under the GLU, two weight rows make an output column.
            let columns = if glu { rows / 2 } else { rows };
            let grid = (word(op, columns.div_ceil(tile.1))?, word(op, m.div_ceil(tile.0))?);
            let overrides = if program == Program::LinearCoop { vec![glu as u32] } else { Vec::new() };
            self.dispatch(program, &formats, &overrides, &params, &buffers, grid)?;
        }
        Ok(self.wrap(&[m, width], out))
    }

    /// The rows of `x [m, k]` rounded as the integer GEMV against a `format` weight takes them
    /// (quantize_rows.wgsl); `None` where `k` holds no whole groups.
    fn rounded_rows(&self, op: Op, x: &Tensor, format: DType) -> Result<Option<Rounded>> {
        let &[m, k] = x.shape() else {
            return Err(Error::Invalid(format!("{op:?}: rows to round must be [m, k], not {:?}", x.shape())));
        };
        if !k.is_multiple_of(GROUP) || m == 0 {
            return Ok(None);
        }
        let src = self.f32s(x, op)?;
        let total = m * (k / GROUP);
        let codes = self.alloc(op, m * k / 4)?;
        let groups = self.alloc(op, 2 * total)?;
        let buffers = [(1, src.buffer()), (2, codes.buffer()), (3, groups.buffer())];
        let params = [word(op, total)?, bits(f32::NAN), (format == DType::Q4) as u32];
        self.run(Program::QuantizeRows, &[], &params, &buffers, word(op, total.div_ceil(QUANTIZE_GROUPS))?)?;
        Ok(Some(Rounded { codes, groups, format }))
    }

    /// The decode GEMV of `x [m <= 8, k]`, `k` a multiple of 4, with `norm` applied to the input
    /// first (float weights only: see [`gemv_input`](Self::gemv_input)) and `epilogue` to the
    /// sums: gemv.wgsl against a float weight, gemv_int8.wgsl against a quantized one, which
    /// takes `x` rounded: `rounded` where the caller rounded it once for several products of its
    /// format, else rounded here.
    #[allow(clippy::too_many_arguments)]
    fn gemv(
        &self,
        op: Op,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        norm: Option<RmsNorm>,
        epilogue: Epilogue,
        rounded: Option<&Rounded>,
    ) -> Result<Tensor> {
        let (m, k, n) = shapes::linear(x, w, bias)?;
        let weight = self.matrix(w, op)?;
        if norm.is_some() && weight.dtype.is_quantized() {
            return Err(Error::Invalid("the GEMV applies a norm only against float weights".into()));
        }
        let src = self.f32s(x, op)?;
        let up = match epilogue {
            Epilogue::Swiglu(u) => Some(self.storage(u, op)?),
            _ => None,
        };
        let residual = match epilogue {
            Epilogue::Add(r) => Some(self.f32s(r, op)?),
            _ => None,
        };
        let gain = norm.map(|nm| self.storage(nm.weight, op)).transpose()?;
        let out = self.alloc(op, m * n)?;
        let groups = k / GROUP;
        // Against a quantized weight the GEMV is the integer one, its rows rounded for the format.
        let quantized = weight.dtype.is_quantized();
        let rounded_here = match rounded {
            Some(r) if r.format == weight.dtype => None,
            _ if quantized => self.rounded_rows(op, x, weight.dtype)?,
            _ => None,
        };
        let rounded = rounded.filter(|r| r.format == weight.dtype).or(rounded_here.as_ref());
        let (program, input, x_groups) = match rounded {
            Some(r) if quantized => (Program::GemvInt8, r.codes.buffer(), Some(r.groups.buffer())),
            None if quantized => {
                return Err(Error::Invalid(format!("{op:?}: a quantized weight's rows must be whole groups, not {k}")));
            }
            _ => (Program::Gemv, src.buffer(), None),
        };
        // A weight kept in pieces: each piece's product fills its columns of the output.
        for (first_row, piece) in weight.pieces() {
            let rows = piece.len.checked_div(k).unwrap_or(n);
            let readers = self.with_bias(op, piece, bias)?;
            // Where there is no second matrix or norm, the weight stands in for the first and an
            // f32 reader of the unused buffer for the second; neither is read.
            let up_reader: &WgpuStorage = up.unwrap_or(piece);
            let mut formats = vec![piece.dtype, readers.1.dtype, up_reader.dtype];
            let mut params = piece_params(op, m, rows, k, bias.is_some(), n, first_row)?.to_vec();
            params.extend([word(op, groups)?, bits(norm.map_or(0.0, |nm| nm.eps))]);
            let mut overrides = vec![word(op, m)?, epilogue.code()];
            let mut buffers = vec![(1, input), (2, out.buffer())];
            buffers.extend(weight_and_bias_bindings(readers));
            buffers.extend(tensor_bindings(10, up_reader));
            match x_groups {
                Some(g) => buffers.push((9, g)),
                None => {
                    formats.push(gain.map_or(DType::F32, |g| g.dtype));
                    overrides.push(norm.is_some() as u32);
                    match gain {
                        Some(g) => buffers.extend(tensor_bindings(13, g)),
                        None => buffers.push((13, self.unused.raw())),
                    }
                }
            }
            buffers.push((16, residual.map_or(self.unused.raw(), |r| r.buffer())));
            let grid = queue::fold(word(op, rows.div_ceil(GEMV_ROWS))?)?;
            self.dispatch(program, &formats, &overrides, &params, &buffers, grid)?;
        }
        Ok(self.wrap(&[m, n], out))
    }
}

impl ProductOps for WgpuBackend {
    /// Under the bf16 policy a DiT matrix is kept in bf16, or in f16 where the products run on
    /// the matrix units (which take f16, not bf16): the same two bytes a weight, three more bits
    /// of mantissa, and the activations rounded to f16 beside it.
    fn product_weight(&self, w: Tensor) -> Result<Tensor> {
        match (self.precision, w.dtype()) {
            (Precision::Bf16, DType::F32) if self.cooperative => self.cast(&w, DType::F16),
            (Precision::Bf16, DType::F32) => self.cast(&w, DType::BF16),
            _ => Ok(w),
        }
    }

    fn linear(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let (m, k, _) = shapes::linear(x, w, bias)?;
        if is_gemv(m, k) {
            return self.gemv(Op::Linear, x, w, bias, None, Epilogue::Plain, None);
        }
        self.product(Op::Linear, x, w, bias, false)
    }

    /// On the matrix units the GLU is the product's epilogue (its halves never written out);
    /// elsewhere the product, then the GLU.
    fn linear_glu(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let (m, k, n) = shapes::linear(x, w, bias)?;
        let weight = self.matrix(w, Op::LinearGlu)?;
        if is_gemv(m, k) || !n.is_multiple_of(2) || !weight.pieces.is_empty() || !self.on_matrix_units(weight, k) {
            return composed::linear_glu(self, x, w, bias);
        }
        self.product(Op::LinearGlu, x, w, bias, true)
    }

    fn linear_add(&self, x: &Tensor, w: &Tensor, residual: &Tensor) -> Result<Tensor> {
        let (m, k, n) = shapes::linear(x, w, None)?;
        if !is_gemv(m, k) || residual.shape() != [m, n] {
            return composed::linear_add(self, x, w, residual);
        }
        self.gemv(Op::LinearAdd, x, w, None, None, Epilogue::Add(residual), None)
    }

    fn linear_swiglu(&self, x: &Tensor, norm: Option<RmsNorm>, gate: &Tensor, up: &Tensor) -> Result<Tensor> {
        let (m, k, _) = shapes::linear(x, gate, None)?;
        let op = Op::LinearSwiglu;
        let (g, u) = (self.matrix(gate, op)?, self.matrix(up, op)?);
        // The two matrices are read side by side: one shape and format, each whole.
        let paired = gate.shape() == up.shape() && g.dtype == u.dtype && g.pieces.is_empty() && u.pieces.is_empty();
        if !is_gemv(m, k) || !paired || !self.norm_fits(norm, k) {
            return composed::linear_swiglu(self, x, norm, gate, up);
        }
        let (x, norm) = self.gemv_input(x, norm, g.dtype.is_quantized())?;
        self.gemv(op, &x, gate, None, norm, Epilogue::Swiglu(up), None)
    }

    fn linear3(&self, x: &Tensor, norm: Option<RmsNorm>, w: [&Tensor; 3]) -> Result<[Tensor; 3]> {
        let (m, k, _) = shapes::linear(x, w[0], None)?;
        if !is_gemv(m, k) || !self.norm_fits(norm, k) {
            return composed::linear3(self, x, norm, w);
        }
        // A quantized input is normalised and rounded once for the three.
        let quantized = w.iter().any(|w| w.dtype().is_quantized());
        let (x, norm) = self.gemv_input(x, norm, quantized)?;
        let op = Op::Linear3;
        // Rounded once where the three share a quantized format (each product rounds its own
        // otherwise).
        let format = w[0].dtype();
        let shared = format.is_quantized() && w.iter().all(|w| w.dtype() == format);
        let rounded = if shared { self.rounded_rows(op, &x, format)? } else { None };
        let product = |w: &Tensor| self.gemv(op, &x, w, None, norm, Epilogue::Plain, rounded.as_ref());
        Ok([product(w[0])?, product(w[1])?, product(w[2])?])
    }
}
