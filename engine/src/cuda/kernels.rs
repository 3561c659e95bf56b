//! The CUDA C kernels of `kernels/`, embedded in the binary and compiled once per process by NVRTC
//! for the device's own architecture (sm_90 on an H200, sm_110 on Jetson Thor, sm_87 on Orin).
//! One place holds the compile options.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction};
use cudarc::nvrtc::{CompileOptions, Ptx, compile_ptx_with_opts};

use super::decode_shapes::{DecodeShape, instantiations};
use crate::error::{Error, Result};

const COMMON: &str = include_str!("../../../kernels/common.cuh");

/// (file name, source, kernel names): the decode products' kernels are not listed, but come from
/// their launch-shape table ([`DecodeShape`]), which also writes their instantiations.
pub const SOURCES: &[(&str, &str, &[&str])] = &[
    (
        "elementwise.cu",
        include_str!("../../../kernels/elementwise.cu"),
        &[
            "add_f32",
            "scale_f32",
            "silu_f32",
            "silu_mul_f32",
            "tanh_f32",
            "f32_to_bf16_kernel",
            "f32_to_bf16_x4",
            "bf16_to_f32_kernel",
            "add_bias_f32",
            "bias_glu_f32",
            "add_bias_bf16",
            "embedding_f32",
            "embedding_bf16",
            "write_rows_f32",
            "write_rows_bf16",
            "write_kv_f32",
            "write_kv_bf16",
            "transpose_f32",
            "slice_cols_f32",
            "snake_f32",
            "snake_bf16",
            "resample_nearest_f32",
            "im2col_t_f32",
            "col2im_f32",
            "col2im_bf16",
            "fill_uniform_f32",
            "fill_uniform_bf16",
            "count_non_finite_f32",
        ],
    ),
    (
        "norm.cu",
        include_str!("../../../kernels/norm.cu"),
        &[
            "rms_norm_f32",
            "rms_norm_bf16",
            "rms_norm_vec_f32",
            "rms_norm_vec_bf16",
            "layer_norm_f32",
            "layer_norm_bf16",
            "rope_f32",
            "qk_norm_rope_append128_f32",
            "qk_norm_rope_append128_bf16",
            "qk_norm_rope_append128_f32_kv_bf16",
            "qk_norm_rope_append128_bf16_kv_bf16",
        ],
    ),
    (
        "attention.cu",
        include_str!("../../../kernels/attention.cu"),
        &[
            "attention_f32",
            "attention_kv_bf16",
            "attention_tiled_d64",
            "attention_mma_d64",
            "attention_decode_g1_f32",
            "attention_decode_g2_f32",
            "attention_decode_g4_f32",
            "attention_decode_g8_f32",
            "attention_decode_g1_bf16",
            "attention_decode_g2_bf16",
            "attention_decode_g4_bf16",
            "attention_decode_g8_bf16",
        ],
    ),
    ("gemv.cu", include_str!("../../../kernels/gemv.cu"), &["gemv_bf16"]),
    ("sampling.cu", include_str!("../../../kernels/sampling.cu"), &["shortlist_top_k"]),
    (
        "quant.cu",
        include_str!("../../../kernels/quant.cu"),
        &[
            "quantize_q8_f32",
            "quantize_q8_bf16",
            "quantize_q4_f32",
            "quantize_q4_bf16",
            "dequantize_q8_f32",
            "dequantize_q8_bf16",
            "dequantize_q4_f32",
            "dequantize_q4_bf16",
            "embedding_q8",
            "embedding_q4",
        ],
    ),
    ("gemv_quant.cu", include_str!("../../../kernels/gemv_quant.cu"), &["quantize_activations"]),
];

/// The full source NVRTC sees for kernel file `name`: the common header, the file, and the
/// instantiations of its decode products.
pub fn source_of(name: &str, body: &str) -> String {
    format!("{COMMON}\n{body}{}", instantiations(name))
}

/// The names of file `name`'s kernels: those [`SOURCES`] lists and its decode products'.
pub fn names_of(name: &str) -> Vec<&'static str> {
    let listed = SOURCES.iter().filter(|(file, _, _)| *file == name).flat_map(|(_, _, names)| names.iter().copied());
    listed.chain(DecodeShape::all().filter(|s| s.file() == name).map(|s| s.name)).collect()
}

/// Compiles one kernel file to PTX for `arch` (e.g. `sm_90`).
pub fn compile(name: &str, body: &str, arch: &str) -> Result<Ptx> {
    let opts = CompileOptions {
        options: vec![format!("--gpu-architecture={arch}"), "-default-device".into()],
        name: Some(name.to_string()),
        ..Default::default()
    };
    compile_ptx_with_opts(source_of(name, body), opts).map_err(|e| Error::Gpu(format!("compiling kernels/{name}: {e}")))
}

/// Files compiled only when one of their kernels is first asked for: most runs never need them,
/// and NVRTC takes seconds over each.
const ON_DEMAND: &[&str] = &["gemv_quant.cu"];

pub struct Kernels {
    ctx: Arc<CudaContext>,
    arch: String,
    /// Which file (an index into `SOURCES`) holds each kernel.
    file_of: HashMap<&'static str, usize>,
    /// Each file's functions, once loaded.
    files: Vec<OnceLock<std::result::Result<HashMap<&'static str, CudaFunction>, String>>>,
}

/// PTX per architecture and file, compiled once per process.
static COMPILED: Mutex<Vec<(String, &'static str, Ptx)>> = Mutex::new(Vec::new());

fn compiled(arch: &str, file: &'static str, body: &str) -> Result<Ptx> {
    let cache = || COMPILED.lock().map_err(|_| Error::Gpu("the kernel cache was poisoned".into()));
    if let Some((_, _, ptx)) = cache()?.iter().find(|(a, f, _)| a == arch && *f == file) {
        return Ok(ptx.clone());
    }
    // Compiled outside the lock: another thread may compile another file meanwhile.
    let ptx = compile(file, body, arch)?;
    cache()?.push((arch.to_string(), file, ptx.clone()));
    Ok(ptx)
}

impl Kernels {
    /// Compiles and loads every kernel file but those compiled on demand, so a broken kernel shows
    /// when the device opens.
    pub fn load(ctx: &Arc<CudaContext>, arch: &str) -> Result<Self> {
        let mut file_of = HashMap::new();
        for (index, (file, _, _)) in SOURCES.iter().enumerate() {
            for name in names_of(file) {
                file_of.insert(name, index);
            }
        }
        let kernels = Kernels {
            ctx: ctx.clone(),
            arch: arch.to_string(),
            file_of,
            files: SOURCES.iter().map(|_| OnceLock::new()).collect(),
        };
        for (index, (file, _, _)) in SOURCES.iter().enumerate() {
            if !ON_DEMAND.contains(file) {
                kernels.file(index)?;
            }
        }
        Ok(kernels)
    }

    /// The functions of file `index`, loading it the first time.
    fn file(&self, index: usize) -> Result<&HashMap<&'static str, CudaFunction>> {
        let loaded = self.files[index].get_or_init(|| {
            let (file, body, _) = SOURCES[index];
            let ptx = compiled(&self.arch, file, body).map_err(|e| e.to_string())?;
            let module = self.ctx.load_module(ptx).map_err(|e| format!("loading kernels/{file}: {e}"))?;
            names_of(file)
                .into_iter()
                .map(|name| module.load_function(name).map(|f| (name, f)).map_err(|e| format!("kernel {name}: {e}")))
                .collect()
        });
        loaded.as_ref().map_err(|e| Error::Gpu(e.clone()))
    }

    pub fn get(&self, name: &str) -> Result<&CudaFunction> {
        let &index = self.file_of.get(name).ok_or_else(|| Error::Gpu(format!("no kernel named {name}")))?;
        self.file(index)?.get(name).ok_or_else(|| Error::Gpu(format!("kernel {name} is not in its file")))
    }
}
