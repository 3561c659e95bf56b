//! The CUDA C kernels of `kernels/`, embedded in the binary and compiled once per process by NVRTC
//! for the device's own architecture (sm_90 on an H200, sm_110 on Jetson Thor, sm_87 on Orin).
//! One place holds the compile options.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaFunction};
use cudarc::nvrtc::{CompileOptions, Ptx, compile_ptx_with_opts};

use crate::error::{Error, Result};

const COMMON: &str = include_str!("../../../kernels/common.cuh");

/// The decode-product kernels, four per activation row count (see kernels/gemv.cu).
macro_rules! gemv_kernels {
    ($($m:literal),*) => {
        [
            "gemv_bf16",
            $(
                concat!("gemv_bf16_k8_m", $m),
                concat!("gemv_add_bf16_k8_m", $m),
                concat!("gemv_swiglu_bf16_k8_m", $m),
                concat!("gemv_group3_bf16_k8_m", $m),
            )*
        ]
    };
}

/// (file name, source, kernel names)
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
            "write_kv_f32",
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
        ],
    ),
    (
        "attention.cu",
        include_str!("../../../kernels/attention.cu"),
        &[
            "attention_f32",
            "attention_tiled_d64",
            "attention_mma_d64",
            "attention_decode_g1",
            "attention_decode_g2",
            "attention_decode_g4",
            "attention_decode_g8",
        ],
    ),
    ("gemv.cu", include_str!("../../../kernels/gemv.cu"), &gemv_kernels!(1, 2, 3, 4, 5, 6, 7, 8)),
    ("sampling.cu", include_str!("../../../kernels/sampling.cu"), &["shortlist_top_k"]),
];

/// The full source NVRTC sees for one file.
pub fn source_of(body: &str) -> String {
    format!("{COMMON}\n{body}")
}

/// Compiles one kernel file to PTX for `arch` (e.g. `sm_90`).
pub fn compile(name: &str, body: &str, arch: &str) -> Result<Ptx> {
    let opts = CompileOptions {
        options: vec![format!("--gpu-architecture={arch}"), "-default-device".into()],
        name: Some(name.to_string()),
        ..Default::default()
    };
    compile_ptx_with_opts(source_of(body), opts).map_err(|e| Error::Gpu(format!("compiling kernels/{name}: {e}")))
}

pub struct Kernels {
    functions: HashMap<&'static str, CudaFunction>,
}

/// PTX per architecture, compiled once per process.
static COMPILED: Mutex<Vec<(String, Vec<Ptx>)>> = Mutex::new(Vec::new());

fn compiled(arch: &str) -> Result<Vec<Ptx>> {
    let mut cache = COMPILED.lock().map_err(|_| Error::Gpu("the kernel cache was poisoned".into()))?;
    if let Some((_, ptx)) = cache.iter().find(|(a, _)| a == arch) {
        return Ok(ptx.clone());
    }
    let ptx = SOURCES.iter().map(|(file, body, _)| compile(file, body, arch)).collect::<Result<Vec<_>>>()?;
    cache.push((arch.to_string(), ptx.clone()));
    Ok(ptx)
}

impl Kernels {
    pub fn load(ctx: &Arc<CudaContext>, arch: &str) -> Result<Self> {
        let mut functions = HashMap::new();
        for ((file, _, names), ptx) in SOURCES.iter().zip(compiled(arch)?) {
            let module = ctx.load_module(ptx).map_err(|e| Error::Gpu(format!("loading kernels/{file}: {e}")))?;
            for &name in names.iter() {
                let f = module.load_function(name).map_err(|e| Error::Gpu(format!("kernel {name}: {e}")))?;
                functions.insert(name, f);
            }
        }
        Ok(Kernels { functions })
    }

    pub fn get(&self, name: &str) -> &CudaFunction {
        &self.functions[name]
    }
}
