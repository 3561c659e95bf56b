//! The CUDA C kernels of `kernels/`, embedded in the binary and compiled by NVRTC straight to the
//! device's machine code (sm_90 on an H200, sm_110 on Jetson Thor, sm_87 on Orin), kept on disk
//! for the next run ([`super::kernel_cache`]). One place holds the compile options.

use std::collections::HashMap;
use std::ffi::{CString, c_char};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaFunction};
use cudarc::nvrtc::{CompileOptions, Ptx, compile_ptx_with_opts};

use super::decode_shapes::{DecodeShape, instantiations};
use super::kernel_cache::{self, EntryKey, Origin};
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
            "add_f32_x4",
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
            "layer_norm4_f32",
            "layer_norm4_bf16",
            "rope_f32",
            "rope_rows_f32",
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
            "attention_bf16_d64",
            "attention_bf16_d64_rot16",
            "attention_bf16_d64_rot32",
            "attention_stage_kv",
            "attention_stage_kv_rot16",
            "attention_stage_kv_rot32",
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
    ("sampling.cu", include_str!("../../../kernels/sampling.cu"), &["shortlist_top_k", "draw_guided", "drawn_ids"]),
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
    (
        "fp8.cu",
        include_str!("../../../kernels/fp8.cu"),
        &["quantize_rows_e4m3_f32", "quantize_rows_e4m3_bf16", "fp8_finish", "fp8_bias_glu"],
    ),
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

fn options(arch: &str) -> Vec<String> {
    vec![format!("--gpu-architecture={arch}"), "-default-device".into()]
}

/// Compiles one kernel file to PTX for `arch` (e.g. `sm_90`).
pub fn compile(name: &str, body: &str, arch: &str) -> Result<Ptx> {
    let opts = CompileOptions { options: options(arch), name: Some(name.to_string()), ..Default::default() };
    compile_ptx_with_opts(source_of(name, body), opts).map_err(|e| Error::Gpu(format!("compiling kernels/{name}: {e}")))
}

/// Compiles one kernel file to machine code (a CUBIN) for the real architecture `arch`, which the
/// driver loads without compiling anything itself.
pub fn compile_cubin(name: &str, body: &str, arch: &str) -> Result<Vec<u8>> {
    use cudarc::nvrtc::{result, sys};
    let failed = |what: &str, e: &dyn std::fmt::Display| Error::Gpu(format!("compiling kernels/{name}: {what}: {e}"));
    let source = CString::new(source_of(name, body)).map_err(|e| failed("source", &e))?;
    let file = CString::new(name).map_err(|e| failed("name", &e))?;
    let program = result::create_program(&source, Some(&file)).map_err(|e| failed("NVRTC", &e))?;
    // SAFETY: `program` was just created and is destroyed once, below; the sizes NVRTC reports
    // are the buffers' lengths.
    let image = unsafe {
        let compiled = result::compile_program(program, &options(arch)).map_err(|e| {
            let log = result::get_program_log(program).map(|l| text(&l)).unwrap_or_default();
            failed(&e.to_string(), &log)
        });
        let image = compiled.and_then(|()| {
            let mut size = 0usize;
            sys::nvrtcGetCUBINSize(program, &mut size).result().map_err(|e| failed("CUBIN size", &e))?;
            let mut image = vec![0u8; size];
            sys::nvrtcGetCUBIN(program, image.as_mut_ptr() as *mut c_char).result().map_err(|e| failed("CUBIN", &e))?;
            Ok(image)
        });
        let _ = result::destroy_program(program);
        image
    }?;
    if image.is_empty() {
        return Err(Error::Gpu(format!("compiling kernels/{name}: NVRTC made no machine code for {arch}")));
    }
    Ok(image)
}

fn text(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// NVRTC's and the driver's versions: a new one of either may compile differently.
fn toolchain() -> &'static str {
    static TOOLCHAIN: OnceLock<String> = OnceLock::new();
    TOOLCHAIN.get_or_init(|| {
        let (mut major, mut minor, mut driver) = (0, 0, 0);
        // SAFETY: each call writes the integers it is given.
        unsafe {
            let _ = cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor);
            let _ = cudarc::driver::sys::cuDriverGetVersion(&mut driver);
        }
        format!("nvrtc {major}.{minor}, driver {driver}")
    })
}

/// Files compiled only when one of their kernels is first asked for: most runs never need them,
/// and NVRTC takes seconds over each. Their compile starts in the background when a device opens,
/// so a run that does need one rarely waits for it.
const ON_DEMAND: &[&str] = &["gemv_quant.cu", "fp8.cu"];

pub struct Kernels {
    ctx: Arc<CudaContext>,
    arch: String,
    /// Which file (an index into `SOURCES`) holds each kernel.
    file_of: HashMap<&'static str, usize>,
    /// Each file's functions, once loaded.
    files: Vec<OnceLock<std::result::Result<HashMap<&'static str, CudaFunction>, String>>>,
}

/// A kernel file's machine code, and where it came from.
pub struct Image {
    pub bytes: Vec<u8>,
    pub origin: Origin,
    /// How long getting it took: reading the disk, or compiling.
    pub seconds: f64,
}

type Slot = Arc<OnceLock<std::result::Result<Arc<Image>, String>>>;

/// Machine code per architecture and file, made once per process: a file asked for while its
/// background compile runs waits for that one.
static IMAGES: Mutex<Vec<(String, &'static str, Slot)>> = Mutex::new(Vec::new());

fn image_slot(arch: &str, file: &'static str) -> Result<Slot> {
    let mut images = IMAGES.lock().map_err(|_| Error::Gpu("the kernel cache was poisoned".into()))?;
    if let Some((_, _, slot)) = images.iter().find(|(a, f, _)| a == arch && *f == file) {
        return Ok(slot.clone());
    }
    let slot = Slot::default();
    images.push((arch.to_string(), file, slot.clone()));
    Ok(slot)
}

fn entry_key(arch: &str, file: &str, body: &str) -> EntryKey {
    let mut parts = vec![toolchain().to_string(), arch.to_string(), source_of(file, body)];
    parts.extend(options(arch));
    EntryKey { label: format!("{file} {arch}"), parts }
}

fn image(arch: &str, file: &'static str, body: &'static str) -> Result<Arc<Image>> {
    let slot = image_slot(arch, file)?;
    let made = slot.get_or_init(|| {
        let start = Instant::now();
        let dir = kernel_cache::default_dir();
        let (bytes, origin) =
            kernel_cache::get_or_make(dir.as_deref(), &entry_key(arch, file, body), || compile_cubin(file, body, arch))
                .map_err(|e| e.to_string())?;
        Ok(Arc::new(Image { bytes, origin, seconds: start.elapsed().as_secs_f64() }))
    });
    made.clone().map_err(Error::Gpu)
}

/// Where kernel file `file`'s machine code for `arch` is kept between runs (`None`: nowhere).
pub fn cache_entry(arch: &str, file: &str) -> Option<std::path::PathBuf> {
    let (_, body, _) = SOURCES.iter().find(|(f, _, _)| *f == file)?;
    kernel_cache::default_dir().map(|dir| kernel_cache::entry_path(&dir, &entry_key(arch, file, body)))
}

/// The kernel files this process has made so far: (file, architecture, where from, seconds).
pub fn made_so_far() -> Vec<(&'static str, String, Origin, f64)> {
    let Ok(images) = IMAGES.lock() else { return Vec::new() };
    images
        .iter()
        .filter_map(|(arch, file, slot)| match slot.get() {
            Some(Ok(image)) => Some((*file, arch.clone(), image.origin, image.seconds)),
            _ => None,
        })
        .collect()
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
        let on_demand = || SOURCES.iter().filter(|(file, _, _)| ON_DEMAND.contains(file));
        for &(file, body, _) in on_demand() {
            let arch = arch.to_string();
            // Detached: its result waits in `IMAGES` for the first kernel asked of the file.
            let _ = std::thread::Builder::new()
                .name("songloom-kernels".into())
                .spawn(move || image(&arch, file, body).is_ok());
        }
        // The other files compile side by side (a machine's first run), then load in order.
        std::thread::scope(|scope| {
            for &(file, body, _) in SOURCES.iter().filter(|(file, _, _)| !ON_DEMAND.contains(file)) {
                scope.spawn(move || image(arch, file, body).is_ok());
            }
        });
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
            let image = image(&self.arch, file, body).map_err(|e| e.to_string())?;
            let module = match self.ctx.load_module(Ptx::from_binary(image.bytes.clone())) {
                Ok(module) => Ok(module),
                // A cached entry the driver refuses (one written by a driver that reported the
                // same version, say) is dropped and the file compiled afresh.
                Err(_) if image.origin == Origin::Disk => {
                    let (dir, key) = (kernel_cache::default_dir(), entry_key(&self.arch, file, body));
                    kernel_cache::forget(dir.as_deref(), &key);
                    // Compiled afresh and written back, so the next run reads a good entry.
                    let (fresh, _) =
                        kernel_cache::get_or_make(dir.as_deref(), &key, || compile_cubin(file, body, &self.arch))
                            .map_err(|e| e.to_string())?;
                    self.ctx.load_module(Ptx::from_binary(fresh))
                }
                Err(e) => Err(e),
            }
            .map_err(|e| format!("loading kernels/{file}: {e}"))?;
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
