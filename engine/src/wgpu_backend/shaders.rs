//! The WGSL programs of the wgpu backend: each is `shaders/common.wgsl`, then a reader for each
//! tensor the program takes in a weight format (generated here, since WGSL has no generics), then
//! the program's own file. A program is named by its file and the formats of its readers, and
//! compiled once per device ([`super::pipelines`]).

use crate::tensor::DType;

const COMMON: &str = include_str!("../../../shaders/common.wgsl");
const GEMV_SUMS: &str = include_str!("../../../shaders/gemv_sums.wgsl");
const CONV_PARAMS: &str = include_str!("../../../shaders/conv_params.wgsl");
const PRODUCT_PARAMS: &str = include_str!("../../../shaders/product_params.wgsl");
const COOPERATIVE_PREAMBLE: &str = "enable f16;\nenable wgpu_cooperative_matrix;\n";

/// Declares [`Program`] from one list: each program's variant and its file in `shaders/`
/// (without `.wgsl`), which is also its name.
macro_rules! programs {
    ($($variant:ident => $file:literal;)*) => {
        /// A shader file, with the names of the tensor readers it calls (`w(i)`, `bias(i)`, ...).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Program {
            $($variant,)*
        }

        impl Program {
            pub const ALL: [Program; [$($file),*].len()] = [$(Program::$variant),*];

            pub fn name(self) -> &'static str {
                match self {
                    $(Program::$variant => $file,)*
                }
            }

            fn body(self) -> &'static str {
                match self {
                    $(Program::$variant => include_str!(concat!("../../../shaders/", $file, ".wgsl")),)*
                }
            }
        }
    };
}

programs! {
    Unary => "unary";
    Binary => "binary";
    Fill => "fill";
    Cast => "cast";
    FillUniform => "fill_uniform";
    Layout => "layout";
    WriteRowsBf16 => "write_rows_bf16";
    Gather => "gather";
    Norms => "norms";
    Rope => "rope";
    Attention => "attention";
    AttentionTiled => "attention_tiled";
    AttentionCoop => "attention_coop";
    AttentionSplit => "attention_split";
    AttentionMerge => "attention_merge";
    Linear => "linear";
    LinearWide => "linear_wide";
    LinearCoop => "linear_coop";
    Gemv => "gemv";
    GemvInt8 => "gemv_int8";
    QuantizeRows => "quantize_rows";
    Conv => "conv";
    ConvTiled => "conv_tiled";
    Snake => "snake";
    CountNonFinite => "count_non_finite";
    Shortlist => "shortlist";
}

impl Program {
    /// The readers the program calls, with the first binding of each.
    pub fn readers(self) -> &'static [(&'static str, u32)] {
        match self {
            Program::Gather => &[("table", 3)],
            Program::Norms => &[("weight", 3), ("bias", 6)],
            Program::Linear | Program::LinearWide | Program::LinearCoop | Program::Conv | Program::ConvTiled => {
                &[("w", 3), ("bias", 6)]
            }
            // SwiGLU's second matrix from 10, the input norm's weight from 13 (lost at 9, the
            // residual at 16).
            Program::Gemv => &[("w", 3), ("bias", 6), ("up", 10), ("gain", 13)],
            Program::GemvInt8 => &[("w", 3), ("bias", 6), ("up", 10)],
            Program::Snake => &[("alpha", 3)],
            // The keys from 3, the values from 6 (room for a quantized reader's three bindings).
            Program::Attention | Program::AttentionTiled | Program::AttentionCoop | Program::AttentionSplit => {
                &[("k", 3), ("v", 6)]
            }
            _ => &[],
        }
    }

    /// The readers the program takes a chunk at a time, one load each: the float GEMV's weights
    /// 4 values a load ([`float_chunk_reader`]); the integer GEMV's weights and the weight of the
    /// products on the matrix units 16 bytes a load ([`chunk_reader`]).
    fn reads_in_chunks(self, reader: &str) -> bool {
        match self {
            Program::Gemv | Program::GemvInt8 => matches!(reader, "w" | "up"),
            Program::LinearCoop => reader == "w",
            _ => false,
        }
    }

    /// The formats a reader of the program can take.
    pub fn formats_of(self, reader: &str) -> &'static [DType] {
        match self {
            Program::Gemv if self.reads_in_chunks(reader) => &[DType::F32, DType::BF16, DType::F16],
            Program::GemvInt8 if self.reads_in_chunks(reader) => &[DType::Q8, DType::Q4],
            Program::LinearCoop if self.reads_in_chunks(reader) => &[DType::F16, DType::Q8, DType::Q4],
            _ => &READER_FORMATS,
        }
    }

    /// WGSL the program shares with others, placed after the readers.
    fn shared(self) -> &'static str {
        match self {
            Program::Gemv | Program::GemvInt8 => GEMV_SUMS,
            Program::Conv | Program::ConvTiled => CONV_PARAMS,
            Program::Linear | Program::LinearWide | Program::LinearCoop => PRODUCT_PARAMS,
            _ => "",
        }
    }

    /// The program's override constants, each a `u32` or `bool` set when its pipeline is built.
    pub fn overrides(self) -> &'static [&'static str] {
        match self {
            // x's rows, the epilogue's code and whether x is normalised on the way.
            Program::Gemv => &["M", "EPILOGUE", "NORM"],
            Program::GemvInt8 => &["M", "EPILOGUE"],
            // Whether the product's halves meet in the GLU.
            Program::LinearCoop => &["GLU"],
            _ => &[],
        }
    }

    /// Whether the program runs on the matrix units through wgpu's experimental cooperative
    /// matrices (with f16 arithmetic): built only where the adapter offers both.
    pub fn is_cooperative(self) -> bool {
        matches!(self, Program::LinearCoop | Program::AttentionCoop)
    }

    /// The full source with the readers in `formats` (one for each of [`readers`](Self::readers)).
    pub fn source(self, formats: &[DType]) -> String {
        assert_eq!(formats.len(), self.readers().len(), "{}: a format for each reader", self.name());
        // WGSL's `enable` directives come before everything else.
        let mut source = String::from(if self.is_cooperative() { COOPERATIVE_PREAMBLE } else { "" });
        source.push_str(COMMON);
        for (&(name, binding), &dtype) in self.readers().iter().zip(formats) {
            let text = if self.reads_in_chunks(name) && self == Program::Gemv {
                float_chunk_reader(name, binding, dtype)
            } else if self.reads_in_chunks(name) {
                chunk_reader(name, binding, dtype)
            } else {
                reader(name, binding, dtype)
            };
            source.push_str(&text);
        }
        source.push_str(self.shared());
        source.push_str(self.body());
        source
    }
}

/// Every format a reader can take.
pub const READER_FORMATS: [DType; 5] = [DType::F32, DType::BF16, DType::F16, DType::Q8, DType::Q4];

/// How many bindings a tensor in `dtype` takes: its data, then the group scales and offsets of the
/// quantized formats.
pub fn bindings_of(dtype: DType) -> u32 {
    match dtype {
        DType::Q8 => 2,
        DType::Q4 => 3,
        _ => 1,
    }
}

/// WGSL for `fn {name}(i: u32) -> f32`, element `i` of a tensor in `dtype` read as f32, and
/// `fn {name}4(i: u32) -> vec4<f32>`, elements `i..i + 4` for `i` a multiple of 4, with its
/// bindings from `binding` on; and, for the decode products, the rounding correction of [`middle`]
/// (the quantized layouts: `quant`).
fn reader(name: &str, binding: u32, dtype: DType) -> String {
    let data = |ty: &str| format!("@group(0) @binding({binding}) var<storage, read> {name}_data: array<{ty}>;\n");
    let scales = format!("@group(0) @binding({}) var<storage, read> {name}_scales: array<u32>;\n", binding + 1);
    let offsets = format!("@group(0) @binding({}) var<storage, read> {name}_offsets: array<u32>;\n", binding + 2);
    let half = |array: &str, index: &str| half(name, array, index);
    let rounding = middle(name, dtype);
    let scalar = |body: &str| format!("fn {name}(i: u32) -> f32 {{\n{body}\n}}\n");
    let vector = |body: &str| format!("fn {name}4(i: u32) -> vec4<f32> {{\n{body}\n}}\n");
    let bf16_pair = "vec2<f32>(bitcast<f32>(word << 16u), bitcast<f32>(word & 0xffff0000u))";
    match dtype {
        DType::F32 => [
            data("f32"),
            scalar(&format!("    return {name}_data[i];")),
            vector(&format!(
                "    return vec4<f32>({name}_data[i], {name}_data[i + 1u], {name}_data[i + 2u], {name}_data[i + 3u]);"
            )),
            rounding,
        ]
        .concat(),
        DType::BF16 => [
            data("u32"),
            scalar(&format!(
                "    let word = {name}_data[i >> 1u];\n    \
                 return bitcast<f32>(select(word << 16u, word & 0xffff0000u, (i & 1u) == 1u));"
            )),
            vector(&format!(
                "    var word = {name}_data[i >> 1u];\n    let low = {bf16_pair};\n    \
                 word = {name}_data[(i >> 1u) + 1u];\n    return vec4<f32>(low, {bf16_pair});"
            )),
            rounding,
        ]
        .concat(),
        DType::F16 => [
            data("u32"),
            scalar(&format!("    return {};", half("data", "i"))),
            vector(&format!(
                "    return vec4<f32>(unpack2x16float({name}_data[i >> 1u]), unpack2x16float({name}_data[(i >> 1u) + 1u]));"
            )),
            rounding,
        ]
        .concat(),
        DType::Q8 => [
            data("u32"),
            scales,
            scalar(&format!(
                "    let g = i / 32u;\n    let byte = ({name}_data[i >> 2u] >> (8u * (i & 3u))) & 0xffu;\n    \
                 return f32(bitcast<i32>(byte << 24u) >> 24u) * {};",
                half("scales", "g")
            )),
            vector(&format!(
                "    let g = i / 32u;\n    let word = bitcast<i32>({name}_data[i >> 2u]);\n    \
                 let codes = vec4<i32>(word << 24u, word << 16u, word << 8u, word) >> vec4<u32>(24u);\n    \
                 return vec4<f32>(codes) * {};",
                half("scales", "g")
            )),
            rounding,
        ]
        .concat(),
        DType::Q4 => [
            data("u32"),
            scales,
            offsets,
            scalar(&format!(
                "    let g = i / 32u;\n    let code = ({name}_data[i >> 3u] >> (4u * (i & 7u))) & 0xfu;\n    \
                 return f32(code) * {} + {};",
                half("scales", "g"),
                half("offsets", "g")
            )),
            vector(&format!(
                "    let g = i / 32u;\n    let word = {name}_data[i >> 3u] >> (4u * (i & 7u));\n    \
                 let codes = (vec4<u32>(word) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(0xfu);\n    \
                 return vec4<f32>(codes) * {} + vec4<f32>({});",
                half("scales", "g"),
                half("offsets", "g")
            )),
            rounding,
        ]
        .concat(),
        DType::F8E4M3 => unreachable!("wgpu holds no fp8 tensor: `supports` refuses them"),
    }
}

/// WGSL for element `index` of the f16 array `{name}_{array}` (two to a word), as f32.
fn half(name: &str, array: &str, index: &str) -> String {
    format!("unpack2x16float({name}_{array}[{index} >> 1u])[{index} & 1u]")
}

/// WGSL for the decode products' rounding correction of a tensor in `dtype`: whether it applies
/// (`{name}_corrects_rounding`) and `{name}_middle(g)`, q4's `offset + 7.5 * scale` of group `g`.
fn middle(name: &str, dtype: DType) -> String {
    if dtype == DType::Q4 {
        let (offset, scale) = (half(name, "offsets", "g"), half(name, "scales", "g"));
        format!(
            "const {name}_corrects_rounding: bool = true;\n\
             fn {name}_middle(g: u32) -> f32 {{ return {offset} + 7.5 * {scale}; }}\n"
        )
    } else {
        format!("const {name}_corrects_rounding: bool = false;\nfn {name}_middle(g: u32) -> f32 {{ return 0.0; }}\n")
    }
}

/// WGSL reading a float weight 4 values a load (16 bytes of f32, 8 of bf16 or f16), with its
/// binding at `binding`: `{name}_chunk(c)`, values `4c .. 4c + 4` as f32.
fn float_chunk_reader(name: &str, binding: u32, dtype: DType) -> String {
    let (element, body) = match dtype {
        DType::F32 => ("vec4<f32>", "v".to_string()),
        DType::BF16 => (
            "vec2<u32>",
            "vec4<f32>(bitcast<f32>(v.x << 16u), bitcast<f32>(v.x & 0xffff0000u), \
             bitcast<f32>(v.y << 16u), bitcast<f32>(v.y & 0xffff0000u))"
                .to_string(),
        ),
        DType::F16 => ("vec2<u32>", "vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y))".to_string()),
        other => unreachable!("{other:?} weights are not read 4 values a load"),
    };
    format!(
        "@group(0) @binding({binding}) var<storage, read> {name}_data: array<{element}>;\n\
         fn {name}_chunk(c: u32) -> vec4<f32> {{\n    let v = {name}_data[c];\n    return {body};\n}}\n"
    )
}

/// WGSL reading a weight 16 bytes at a time, its rows whole chunks long, with its bindings from
/// `binding` on: `{name}_PER_CHUNK` values a chunk (16 of q8, half a group; 32 of q4, a whole one;
/// 8 of f16), `{name}_load(c)` chunk `c`, `{name}_quarter(raw, c, j)` values `4j .. 4j + 4` of
/// chunk `c` (`raw`, as loaded) as f32, and for the quantized formats `{name}_scale(c)` the scale
/// and offset of its group (offset 0 for q8).
fn chunk_reader(name: &str, binding: u32, dtype: DType) -> String {
    let data = format!("@group(0) @binding({binding}) var<storage, read> {name}_data: array<vec4<u32>>;\n");
    let load = format!("fn {name}_load(c: u32) -> vec4<u32> {{ return {name}_data[c]; }}\n");
    let quarter =
        |body: &str| format!("fn {name}_quarter(raw: vec4<u32>, c: u32, j: u32) -> vec4<f32> {{\n{body}\n}}\n");
    if dtype == DType::F16 {
        let values = quarter("    return vec4<f32>(unpack2x16float(raw[2u * j]), unpack2x16float(raw[2u * j + 1u]));");
        return format!("{data}const {name}_PER_CHUNK: u32 = 8u;\n{load}{values}");
    }
    let scales = format!("@group(0) @binding({}) var<storage, read> {name}_scales: array<u32>;\n", binding + 1);
    let offsets = format!("@group(0) @binding({}) var<storage, read> {name}_offsets: array<u32>;\n", binding + 2);
    let (per_chunk, group, extra, offset, values) = match dtype {
        // A word holds 4 codes, the first in its low byte.
        DType::Q8 => (
            16,
            "(c >> 1u)",
            String::new(),
            "0.0".to_string(),
            quarter(&format!(
                "    let word = bitcast<i32>(raw[j]);\n    \
                 let codes = vec4<i32>(word << 24u, word << 16u, word << 8u, word) >> vec4<u32>(24u);\n    \
                 return vec4<f32>(codes) * {name}_scale(c).x;"
            )),
        ),
        // A word holds 8 codes, the first in its low nibble.
        DType::Q4 => (
            32,
            "c",
            offsets,
            half(name, "offsets", "c"),
            quarter(&format!(
                "    let word = raw[j / 2u] >> (16u * (j % 2u));\n    \
                 let codes = (vec4<u32>(word) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(0xfu);\n    \
                 let group = {name}_scale(c);\n    \
                 return vec4<f32>(codes) * group.x + vec4<f32>(group.y);"
            )),
        ),
        other => unreachable!("{other:?} weights are not read in chunks"),
    };
    format!(
        "{data}{scales}{extra}const {name}_PER_CHUNK: u32 = {per_chunk}u;\n{load}\
         fn {name}_scale(c: u32) -> vec2<f32> {{ return vec2<f32>({}, {offset}); }}\n{values}",
        half(name, "scales", group)
    )
}

/// Every program with every combination of reader formats it can be built with, for the test that
/// validates them all.
pub fn every_variant() -> Vec<(Program, Vec<DType>)> {
    let mut all = Vec::new();
    for program in Program::ALL {
        let mut combos: Vec<Vec<DType>> = vec![Vec::new()];
        for &(reader, _) in program.readers() {
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    program.formats_of(reader).iter().map(move |&d| {
                        let mut next = c.clone();
                        next.push(d);
                        next
                    })
                })
                .collect();
        }
        all.extend(combos.into_iter().map(|formats| (program, formats)));
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every program in every reader format parses and validates as WGSL (naga, the compiler wgpu
    /// itself uses), on a machine without a GPU.
    /// What naga is told the device can do: the f16 packing built-ins every Vulkan, Metal and
    /// DX12 adapter has (the backend refuses an adapter without them), nothing optional.
    /// A cooperative program is told the device has f16 arithmetic and cooperative matrices too,
    /// and is also written out as SPIR-V (what wgpu hands Vulkan), which catches what naga's
    /// SPIR-V writer cannot express: with its override constants (booleans there) all false, then
    /// all true.
    fn validate(source: &str, overrides: &[&str]) -> Result<(), String> {
        let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
        let cooperative = source.starts_with(COOPERATIVE_PREAMBLE);
        let mut capabilities = naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32;
        if cooperative {
            capabilities |= naga::valid::Capabilities::SHADER_FLOAT16 | naga::valid::Capabilities::COOPERATIVE_MATRIX;
        }
        let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities)
            .validate(&module)
            .map_err(|e| e.emit_to_string(source))?;
        if cooperative {
            for value in [0.0, 1.0] {
                let mut constants = naga::back::PipelineConstants::default();
                constants.extend(overrides.iter().map(|name| (name.to_string(), value)));
                let (module, info) =
                    naga::back::pipeline_constants::process_overrides(&module, &info, None, &constants)
                        .map_err(|e| format!("overrides at {value}: {e}"))?;
                naga::back::spv::write_vec(&module, &info, &naga::back::spv::Options::default(), None)
                    .map_err(|e| format!("SPIR-V with overrides at {value}: {e}"))?;
            }
        }
        Ok(())
    }

    #[test]
    fn every_shader_variant_is_valid_wgsl() {
        let variants = every_variant();
        assert!(variants.len() > Program::ALL.len(), "the reader formats multiply the programs");
        for (program, formats) in variants {
            if let Err(e) = validate(&program.source(&formats), program.overrides()) {
                panic!("{} {formats:?}: {e}", program.name());
            }
        }
    }

    /// The negative control: a shader with an error in it is refused.
    #[test]
    fn a_broken_shader_fails_validation() {
        let source = Program::Unary.source(&[]).replace("y[i] = silu(v);", "y[i] = silu(v) + p.n;");
        assert!(validate(&source, &[]).is_err(), "an f32 plus a u32 is refused");
        let half = Program::Gather.source(&[DType::F16]);
        assert!(validate(&half, &[]).is_ok());
    }
}
