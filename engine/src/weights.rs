//! Checkpoint access: memory-mapped safetensors (one file or shards behind an `index.json`) and a
//! VarBuilder that checks each tensor's shape and dtype, casts it to the dtype its stage runs in and
//! puts it on the device once.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use half::f16;
use memmap2::Mmap;
use safetensors::SafeTensors;
use safetensors::tensor::{Dtype, Metadata};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::lora::ComponentLora;
use crate::models::linear::LowRank;
use crate::quant;
use crate::tensor::{CpuStorage, DType, Storage, Tensor};

/// One mapped safetensors file with its parsed header.
struct MappedFile {
    path: PathBuf,
    mmap: Mmap,
    header_len: usize,
    metadata: Metadata,
}

impl MappedFile {
    fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        // SAFETY: the file is opened read-only and the mapping lives as long as `MappedFile`. A file
        // changed on disk while mapped is outside what we guard against (as in every mmap loader).
        let mmap = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        let (header_len, metadata) = SafeTensors::read_metadata(&mmap)
            .map_err(|e| Error::CorruptFile { path: path.to_path_buf(), reason: e.to_string() })?;
        Ok(MappedFile { path: path.to_path_buf(), mmap, header_len, metadata })
    }

    fn bytes(&self, offsets: (usize, usize)) -> &[u8] {
        let start = 8 + self.header_len;
        &self.mmap[start + offsets.0..start + offsets.1]
    }
}

/// The safetensors files of one model component (`language_model/`, `transformer/`, ...).
pub struct Checkpoint {
    dir: PathBuf,
    files: Vec<MappedFile>,
    /// Tensor name -> index into `files`.
    locations: HashMap<String, usize>,
}

#[derive(serde::Deserialize)]
struct ShardIndex {
    weight_map: HashMap<String, String>,
}

impl Checkpoint {
    /// Opens a component directory: `*.safetensors.index.json` with its shards, or one
    /// `*.safetensors` file.
    pub fn open(dir: &Path) -> Result<Self> {
        if !dir.is_dir() {
            return Err(Error::MissingComponent(dir.to_path_buf()));
        }
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        let index = entries.iter().find(|p| p.to_string_lossy().ends_with(".safetensors.index.json"));
        let shard_names: Vec<String> = match index {
            Some(index) => {
                let parsed: ShardIndex = read_json(index)?;
                let mut names: Vec<String> = parsed.weight_map.into_values().collect();
                names.sort();
                names.dedup();
                // A shard is a file of this folder: the index names no path elsewhere.
                let plain = |name: &str| {
                    let mut parts = Path::new(name).components();
                    matches!((parts.next(), parts.next()), (Some(std::path::Component::Normal(_)), None))
                };
                if let Some(bad) = names.iter().find(|n| !plain(n)) {
                    return Err(Error::CorruptFile {
                        path: index.clone(),
                        reason: format!("it names the shard `{bad}`, which is not a file of this folder"),
                    });
                }
                names
            }
            None => {
                let singles: Vec<String> = entries
                    .iter()
                    .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
                    .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .collect();
                if singles.len() != 1 {
                    return Err(Error::Io {
                        path: dir.to_path_buf(),
                        cause: std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            format!("expected one .safetensors file or an index.json, found {}", singles.len()),
                        ),
                    });
                }
                singles
            }
        };
        let mut files = Vec::new();
        let mut locations = HashMap::new();
        for name in shard_names {
            let file = MappedFile::open(&dir.join(&name))?;
            for tensor in file.metadata.tensors().into_keys() {
                locations.insert(tensor, files.len());
            }
            files.push(file);
        }
        Ok(Checkpoint { dir: dir.to_path_buf(), files, locations })
    }

    /// Opens one safetensors file (stage inputs, goldens).
    pub fn open_file(path: &Path) -> Result<Self> {
        let file = MappedFile::open(path)?;
        let locations = file.metadata.tensors().into_keys().map(|name| (name, 0)).collect();
        Ok(Checkpoint { dir: path.to_path_buf(), files: vec![file], locations })
    }

    /// Reads an integer tensor (i64, i32, u32 or u8) as i64 values with its shape.
    pub fn read_integers(&self, name: &str) -> Result<(Vec<usize>, Vec<i64>)> {
        let shape = self.shape_of(name)?;
        let file = &self.files[self.locations[name]];
        let info = file.metadata.info(name).expect("indexed tensor has metadata");
        let bytes = file.bytes(info.data_offsets);
        let values = match info.dtype {
            Dtype::I64 => cast_copy::<i64>(bytes),
            Dtype::I32 => cast_copy::<i32>(bytes).into_iter().map(i64::from).collect(),
            Dtype::U32 => cast_copy::<u32>(bytes).into_iter().map(i64::from).collect(),
            Dtype::U8 => bytes.iter().map(|&b| i64::from(b)).collect(),
            other => {
                return Err(Error::WrongDType {
                    name: name.to_string(),
                    location: file.path.display().to_string(),
                    expected: "an integer (i64, i32, u32 or u8)".to_string(),
                    found: format!("{other:?}"),
                });
            }
        };
        Ok((shape, values))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry `key` of the first file's header metadata (`__metadata__`), if it has one.
    pub fn header_metadata(&self, key: &str) -> Option<String> {
        self.files.first()?.metadata.metadata().as_ref()?.get(key).cloned()
    }

    /// Refuses the first float tensor (a quantized copy's scales and offsets too) that holds NaN
    /// or infinite values, naming its component, name and count; reads every byte, so it costs a
    /// pass over the files where loading would not read them anyway.
    pub fn check_finite(&self) -> Result<()> {
        for file in &self.files {
            let mut tensors: Vec<(String, &safetensors::tensor::TensorInfo)> =
                file.metadata.tensors().into_iter().collect();
            tensors.sort_by_key(|(_, info)| info.data_offsets.0);
            for (name, info) in tensors {
                let bytes = file.bytes(info.data_offsets);
                let bad = match info.dtype {
                    Dtype::F32 => count_non_finite(&cast_copy_cow::<u32>(bytes), F32_EXPONENT),
                    Dtype::BF16 => count_non_finite(&cast_copy_cow::<u16>(bytes), BF16_EXPONENT),
                    Dtype::F16 => count_non_finite(&cast_copy_cow::<u16>(bytes), F16_EXPONENT),
                    _ => 0,
                };
                check_finite(&file.path, &name, bad)?;
            }
        }
        Ok(())
    }

    pub fn contains(&self, name: &str) -> bool {
        self.locations.contains_key(name)
    }

    pub fn tensor_names(&self) -> impl Iterator<Item = &str> {
        self.locations.keys().map(String::as_str)
    }

    /// Reads one tensor into host memory in its stored float dtype.
    pub fn read(&self, name: &str) -> Result<Tensor> {
        self.read_rows(name, None)
    }

    /// Reads rows `[start, end)` of the first dimension of a tensor (all of it with `None`).
    pub fn read_rows(&self, name: &str, rows: Option<(usize, usize)>) -> Result<Tensor> {
        let &file = self
            .locations
            .get(name)
            .ok_or_else(|| Error::MissingTensor { name: name.to_string(), location: self.dir.display().to_string() })?;
        let file = &self.files[file];
        let info = file.metadata.info(name).expect("indexed tensor has metadata");
        let mut bytes = file.bytes(info.data_offsets);
        let mut shape = info.shape.clone();
        if let Some((start, end)) = rows {
            let first = shape.first().copied().unwrap_or(0);
            if start > end || end > first {
                return Err(Error::WrongShape {
                    name: name.to_string(),
                    location: file.path.display().to_string(),
                    expected: vec![end],
                    found: shape,
                });
            }
            let row_bytes = bytes.len() / first.max(1);
            bytes = &bytes[start * row_bytes..end * row_bytes];
            shape[0] = end - start;
        }
        // Each float is checked for NaN and infinity as it passes through host memory, so a damaged
        // checkpoint is named at load, before anything is generated from it.
        let storage = match info.dtype {
            Dtype::F32 => CpuStorage::F32(finite_copy(&file.path, name, bytes, F32_EXPONENT)?),
            Dtype::BF16 => CpuStorage::BF16(finite_copy(&file.path, name, bytes, BF16_EXPONENT)?),
            Dtype::F16 => CpuStorage::F16(finite_copy(&file.path, name, bytes, F16_EXPONENT)?),
            other => {
                return Err(Error::WrongDType {
                    name: name.to_string(),
                    location: file.path.display().to_string(),
                    expected: "a float (f32, bf16 or f16)".to_string(),
                    found: format!("{other:?}"),
                });
            }
        };
        Tensor::new(&shape, Storage::Cpu(storage))
    }

    /// The format a tensor is stored in: `q8` or `q4` for a quantized copy's matrix (words under
    /// its name, `{name}.scales` and, for q4, `{name}.offsets` beside it), else its float dtype.
    pub fn stored_format(&self, name: &str) -> Option<DType> {
        let file = &self.files[*self.locations.get(name)?];
        if self.contains(&format!("{name}.scales")) {
            return file.metadata.metadata().as_ref()?.get(&format!("{name}.format")).and_then(|f| match f.as_str() {
                "q8" => Some(DType::Q8),
                "q4" => Some(DType::Q4),
                _ => None,
            });
        }
        match file.metadata.info(name)?.dtype {
            Dtype::F32 => Some(DType::F32),
            Dtype::BF16 => Some(DType::BF16),
            Dtype::F16 => Some(DType::F16),
            _ => None,
        }
    }

    /// A quantized copy's matrix `[rows, cols]` as stored (see [`stored_format`](Self::stored_format)).
    pub fn read_quantized(&self, name: &str, shape: &[usize], dtype: DType) -> Result<Tensor> {
        let location = self.location_of(name);
        let corrupt = |reason: String| Error::CorruptFile { path: location.clone().into(), reason };
        let word_shape = self.shape_of(name)?;
        let file = &self.files[self.locations[name]];
        let info = file.metadata.info(name).expect("indexed tensor has metadata");
        if info.dtype != Dtype::U32 {
            return Err(corrupt(format!("`{name}` holds {:?}, not the u32 words of {dtype} weights", info.dtype)));
        }
        let words = cast_copy::<u32>(file.bytes(info.data_offsets));
        let len: usize = shape.iter().product();
        let groups = len / quant::GROUP;
        if word_shape.iter().product::<usize>() * quant::per_word(dtype) != len {
            return Err(corrupt(format!("`{name}` holds {word_shape:?} words, not {dtype} weights of {shape:?}")));
        }
        let halves = |what: &str| -> Result<Vec<f16>> {
            let t = self.read(&format!("{name}.{what}"))?;
            match t.into_storage() {
                Storage::Cpu(CpuStorage::F16(v)) if v.len() == groups => Ok(v),
                _ => Err(corrupt(format!("`{name}.{what}` is not {groups} f16 values"))),
            }
        };
        let data = quant::QuantData {
            dtype,
            len,
            words,
            scales: halves("scales")?,
            offsets: if dtype == DType::Q4 { halves("offsets")? } else { Vec::new() },
        };
        Tensor::new(shape, Storage::Cpu(CpuStorage::Quant(data)))
    }

    /// The stored shape of a tensor.
    pub fn shape_of(&self, name: &str) -> Result<Vec<usize>> {
        let &file = self
            .locations
            .get(name)
            .ok_or_else(|| Error::MissingTensor { name: name.to_string(), location: self.dir.display().to_string() })?;
        Ok(self.files[file].metadata.info(name).expect("indexed tensor has metadata").shape.clone())
    }

    fn location_of(&self, name: &str) -> String {
        self.locations
            .get(name)
            .map_or_else(|| self.dir.display().to_string(), |&i| self.files[i].path.display().to_string())
    }
}

/// The exponent bits of each float format: all set is NaN or infinity.
const F32_EXPONENT: u32 = 0x7f80_0000;
const BF16_EXPONENT: u16 = 0x7f80;
const F16_EXPONENT: u16 = 0x7c00;

/// Values per thread below which counting is not split: a thread costs more than it saves.
const COUNT_CHUNK: usize = 1 << 24;

/// How many of `bits` (floats as their bit patterns) have every bit of `exponent` set, i.e. are
/// NaN or infinite. A branch-free loop the compiler vectorizes, split over the cores for big
/// tensors.
pub fn count_non_finite<T>(bits: &[T], exponent: T) -> usize
where
    T: Copy + Send + Sync + PartialEq + std::ops::BitAnd<Output = T>,
{
    let count = |part: &[T]| part.iter().map(|&b| usize::from((b & exponent) == exponent)).sum::<usize>();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(bits.len() / COUNT_CHUNK);
    if threads <= 1 {
        return count(bits);
    }
    let chunk = bits.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let parts: Vec<_> = bits.chunks(chunk).map(|part| scope.spawn(move || count(part))).collect();
        parts.into_iter().map(|p| p.join().expect("counting does not panic")).sum()
    })
}

/// Refuses a model directory any of whose components (the folders holding safetensors files)
/// has a float tensor with NaN or infinite values; see [`Checkpoint::check_finite`].
pub fn check_model_finite(root: &Path) -> Result<()> {
    let mut components: Vec<PathBuf> =
        std::fs::read_dir(root).map_err(|e| Error::io(root, e))?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    components.sort();
    for dir in components.iter().filter(|d| d.is_dir()) {
        let holds_weights = std::fs::read_dir(dir)
            .map_err(|e| Error::io(dir, e))?
            .any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "safetensors")));
        if holds_weights {
            Checkpoint::open(dir)?.check_finite()?;
        }
    }
    Ok(())
}

/// What a component folder holds, as the errors name it.
fn component_name(folder: &str) -> &str {
    match folder {
        "language_model" => "language model",
        "rvq_depth_decoder" => "depth decoder",
        "condition_encoder" => "condition encoder",
        "transformer" => "DiT",
        other => other,
    }
}

/// Refuses a tensor of the file at `path` that holds `bad` NaN or infinite values.
fn check_finite(path: &Path, name: &str, bad: usize) -> Result<()> {
    if bad == 0 {
        return Ok(());
    }
    let folder = path.parent().and_then(Path::file_name).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Err(Error::Invalid(format!(
        "{}: the {} tensor `{name}` holds {bad} NaN or infinite {}; this checkpoint is damaged: download or convert it again",
        path.display(),
        component_name(&folder),
        if bad == 1 { "value" } else { "values" },
    )))
}

/// The tensor `name`'s little-endian bytes as floats `T`, refused if any is NaN or infinite
/// (every bit of `exponent`, in the floats' `Bits`, set).
fn finite_copy<T, Bits>(path: &Path, name: &str, bytes: &[u8], exponent: Bits) -> Result<Vec<T>>
where
    T: bytemuck::Pod,
    Bits: bytemuck::Pod + Send + Sync + PartialEq + std::ops::BitAnd<Output = Bits>,
{
    let values = cast_copy::<T>(bytes);
    check_finite(path, name, count_non_finite(bytemuck::cast_slice::<T, Bits>(&values), exponent))?;
    Ok(values)
}

/// Little-endian bytes as typed values, in place where they are aligned for `T`.
fn cast_copy_cow<T: bytemuck::Pod>(bytes: &[u8]) -> std::borrow::Cow<'_, [T]> {
    match bytemuck::try_cast_slice::<u8, T>(bytes) {
        Ok(values) => std::borrow::Cow::Borrowed(values),
        Err(_) => std::borrow::Cow::Owned(cast_copy(bytes)),
    }
}

/// Copies little-endian bytes into typed values; mapped data may be misaligned for `T`.
fn cast_copy<T: bytemuck::Pod>(bytes: &[u8]) -> Vec<T> {
    match bytemuck::try_cast_slice::<u8, T>(bytes) {
        Ok(values) => values.to_vec(),
        Err(_) => bytes.chunks_exact(size_of::<T>()).map(bytemuck::pod_read_unaligned).collect(),
    }
}

pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::BadJson { path: path.to_path_buf(), reason: e.to_string() })
}

/// Where a [`VarBuilder`] takes its tensors from.
#[derive(Clone, Copy)]
enum Source<'a> {
    Checkpoint(&'a Checkpoint),
    /// Deterministic pseudo-random weights of whatever shape is asked for: the real geometry
    /// without the real files, for benchmarks.
    Synthetic {
        seed: u64,
    },
}

/// Weights under a name prefix, cast to one dtype and placed on one device.
#[derive(Clone)]
pub struct VarBuilder<'a> {
    source: Source<'a>,
    device: &'a Device,
    dtype: DType,
    /// The format of the matrices of products and of embedding tables: `dtype`, or a quantized
    /// format (see [`matrix`](Self::matrix)).
    format: DType,
    /// Embedding tables stay in host memory (a gather reads a few rows a frame).
    host_tables: bool,
    prefix: String,
    /// LoRA adapters merged into the weights as they are read.
    lora: Option<&'a ComponentLora<'a>>,
}

impl<'a> VarBuilder<'a> {
    pub fn new(checkpoint: &'a Checkpoint, device: &'a Device, dtype: DType) -> Self {
        VarBuilder {
            source: Source::Checkpoint(checkpoint),
            device,
            dtype,
            format: dtype,
            host_tables: false,
            prefix: String::new(),
            lora: None,
        }
    }

    /// A builder that makes up weights (scaled uniform noise, seeded by name) instead of reading
    /// them, so a stage can be built at full size with no checkpoint.
    pub fn synthetic(seed: u64, device: &'a Device, dtype: DType) -> Self {
        VarBuilder {
            source: Source::Synthetic { seed },
            device,
            dtype,
            format: dtype,
            host_tables: false,
            prefix: String::new(),
            lora: None,
        }
    }

    pub fn device(&self) -> &'a Device {
        self.device
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The same weights with another runtime dtype (and matrices in it).
    pub fn with_dtype(&self, dtype: DType) -> Self {
        VarBuilder { dtype, format: dtype, ..self.clone() }
    }

    /// Matrices and embedding tables in `format` (a quantized one, or this builder's dtype).
    pub fn with_format(&self, format: DType) -> Self {
        VarBuilder { format, ..self.clone() }
    }

    /// Embedding tables kept in host memory when `on_host`.
    pub fn with_host_tables(&self, on_host: bool) -> Self {
        VarBuilder { host_tables: on_host, ..self.clone() }
    }

    pub fn format(&self) -> DType {
        self.format
    }

    /// Weights with `lora`'s adapters merged in as they are read (in their stored dtype, before
    /// any cast or quantizing).
    pub fn with_lora(&self, lora: Option<&'a ComponentLora<'a>>) -> Self {
        VarBuilder { lora, ..self.clone() }
    }

    /// A product's matrix `[rows, cols]` in this builder's format. A quantized format is made on
    /// the device from the dtype's copy (or read as stored from a quantized checkpoint, which must
    /// hold that format); `cols` must be whole groups.
    pub fn matrix(&self, shape: &[usize], name: &str) -> Result<Tensor> {
        self.formatted(shape, name, self.format, self.device)
    }

    /// An embedding table `[rows, width]` for gathers: q8 wherever the matrices are quantized,
    /// in host memory when the builder says so.
    pub fn table(&self, shape: &[usize], name: &str) -> Result<Tensor> {
        let format = crate::plan::ArFormats::table(self.format);
        if self.host_tables && self.device.kind() != crate::device::DeviceKind::Cpu {
            let host = Device::cpu();
            return self.formatted(shape, name, format, &host);
        }
        self.formatted(shape, name, format, self.device)
    }

    fn formatted(&self, shape: &[usize], name: &str, format: DType, device: &Device) -> Result<Tensor> {
        let on = VarBuilder { device, ..self.clone() };
        if format == DType::F8E4M3 {
            return device.cast(&on.get(shape, name)?, format);
        }
        if !format.is_quantized() {
            return on.get(shape, name);
        }
        let full = self.full_name(name);
        let cols = shape.last().copied().unwrap_or(0);
        if !cols.is_multiple_of(quant::GROUP) {
            return Err(Error::Invalid(format!(
                "`{full}` has {cols} columns, not whole groups of {}: this model cannot take {format} weights",
                quant::GROUP
            )));
        }
        if let Source::Checkpoint(checkpoint) = self.source
            && let Some(stored) = checkpoint.stored_format(&full).filter(|f| f.is_quantized())
        {
            if stored != format {
                return Err(Error::Invalid(format!(
                    "`{full}` is stored as {stored} in {}, not {format}: load this copy with its own weights",
                    checkpoint.location_of(&full)
                )));
            }
            let tensor = checkpoint.read_quantized(&full, shape, stored)?;
            return device.upload(tensor);
        }
        let plain = on.get(shape, name)?;
        device.cast(&plain, format)
    }

    /// The low-rank side product of the adapters that change the matrix `name` where it is stored
    /// quantized (a quantized copy's packed words take no merge); `None` where there is none, or
    /// where they were merged into the float matrix as it was read.
    pub fn low_rank(&self, name: &str) -> Result<Option<LowRank>> {
        let (Some(lora), Source::Checkpoint(checkpoint)) = (self.lora, self.source) else {
            return Ok(None);
        };
        let full = self.full_name(name);
        if !checkpoint.stored_format(&full).is_some_and(|f| f.is_quantized()) {
            return Ok(None);
        }
        lora.low_rank(&full, self.device)
    }

    fn full_name(&self, name: &str) -> String {
        if self.prefix.is_empty() { name.to_string() } else { format!("{}.{name}", self.prefix) }
    }

    /// Weights under `prefix.` (nested prefixes join with dots).
    pub fn pp(&self, prefix: impl std::fmt::Display) -> Self {
        VarBuilder { prefix: self.full_name(&prefix.to_string()), ..self.clone() }
    }

    /// The tensor `name` with exactly `shape`, in this builder's dtype, on its device.
    pub fn get(&self, shape: &[usize], name: &str) -> Result<Tensor> {
        let full = self.full_name(name);
        if let Source::Synthetic { seed } = self.source {
            return self.synthetic_tensor(seed, &full, shape);
        }
        let tensor = self.read_checked(shape, &full)?;
        self.place(tensor)
    }

    /// Scaled uniform noise seeded by the tensor's name, made on the device: `1 / sqrt(fan_in)`
    /// wide for matrices, around 1 for vectors (norm weights, alphas).
    fn synthetic_tensor(&self, seed: u64, name: &str, shape: &[usize]) -> Result<Tensor> {
        let seed = crate::hash::fnv1a_continue(seed ^ crate::hash::FNV_OFFSET, name.bytes());
        let fan_in: usize = shape.iter().skip(1).product();
        let (center, half_width) =
            if shape.len() <= 1 { (1.0, 0.1) } else { (0.0, 1.0 / (fan_in.max(1) as f32).sqrt()) };
        self.device.fill_uniform(shape, self.dtype, seed, center, half_width)
    }

    /// Like [`get`](Self::get) but kept in f32 whatever the builder's dtype.
    pub fn get_f32(&self, shape: &[usize], name: &str) -> Result<Tensor> {
        self.with_dtype(DType::F32).get(shape, name)
    }

    /// A weight-normed parameter stored as `{name}_g` and `{name}_v`, folded to
    /// `g * v / ||v||` with the norm over every dim but the first (torch's `weight_norm(dim=0)`).
    pub fn get_weight_norm(&self, shape: &[usize], name: &str) -> Result<Tensor> {
        if let Source::Synthetic { seed } = self.source {
            return self.synthetic_tensor(seed, &self.full_name(name), shape);
        }
        let g_shape: Vec<usize> = shape.iter().enumerate().map(|(i, &d)| if i == 0 { d } else { 1 }).collect();
        let g = self.read_checked(&g_shape, &self.full_name(&format!("{name}_g")))?.to_f32_vec();
        let v = self.read_checked(shape, &self.full_name(&format!("{name}_v")))?.to_f32_vec();
        let per_row = (v.len() / shape[0].max(1)).max(1);
        let mut w = v;
        for (row, g) in w.chunks_mut(per_row).zip(&g) {
            let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            row.iter_mut().for_each(|x| *x = g * *x / norm);
        }
        self.place(Tensor::from_f32(shape, w)?)
    }

    /// Rows `[start, end)` of the tensor `name`, whose full shape must be `shape`.
    pub fn get_rows(&self, shape: &[usize], name: &str, start: usize, end: usize) -> Result<Tensor> {
        let full = self.full_name(name);
        let checkpoint = match self.source {
            Source::Checkpoint(c) => c,
            Source::Synthetic { seed } => {
                let mut rows = shape.to_vec();
                rows[0] = end.saturating_sub(start);
                return self.synthetic_tensor(seed, &full, &rows);
            }
        };
        let found = checkpoint.shape_of(&full)?;
        if found != shape {
            return Err(Error::WrongShape {
                name: full.clone(),
                location: checkpoint.location_of(&full),
                expected: shape.to_vec(),
                found,
            });
        }
        let mut tensor = checkpoint.read_rows(&full, Some((start, end)))?;
        if let Some(lora) = self.lora {
            tensor = lora.merge(&full, tensor, Some((start, end)))?;
        }
        self.place(tensor)
    }

    fn read_checked(&self, shape: &[usize], full: &str) -> Result<Tensor> {
        let checkpoint = match self.source {
            Source::Checkpoint(c) => c,
            Source::Synthetic { .. } => {
                return Err(Error::Invalid(format!("synthetic weights are made on the device, not read: {full}")));
            }
        };
        if let Some(stored) = checkpoint.stored_format(full).filter(|f| f.is_quantized()) {
            return Err(Error::Invalid(format!(
                "`{full}` is stored as {stored} in {}, not {}: load this copy with its own weights",
                checkpoint.location_of(full),
                self.format
            )));
        }
        let tensor = checkpoint.read(full)?;
        if tensor.shape() != shape {
            return Err(Error::WrongShape {
                name: full.to_string(),
                location: checkpoint.location_of(full),
                expected: shape.to_vec(),
                found: tensor.shape().to_vec(),
            });
        }
        match self.lora {
            Some(lora) => lora.merge(full, tensor, None),
            None => Ok(tensor),
        }
    }

    fn place(&self, tensor: Tensor) -> Result<Tensor> {
        let tensor = match tensor.storage() {
            Storage::Cpu(s) if s.dtype() != self.dtype => {
                Tensor::new(tensor.shape(), Storage::Cpu(s.to_dtype(self.dtype)?))?
            }
            _ => tensor,
        };
        self.device.upload(tensor)
    }
}

/// Writes f32 tensors to a safetensors file atomically: a temporary file beside it, then a rename,
/// so a failure never leaves a half-written file.
pub fn save_f32(path: &Path, tensors: &[(String, Vec<usize>, Vec<f32>)]) -> Result<()> {
    use safetensors::tensor::TensorView;
    let views = tensors
        .iter()
        .map(|(name, shape, data)| {
            let view = TensorView::new(Dtype::F32, shape.clone(), bytemuck::cast_slice(data))
                .map_err(|e| Error::Invalid(format!("tensor `{name}`: {e}")))?;
            Ok((name.clone(), view))
        })
        .collect::<Result<Vec<_>>>()?;
    let bytes = safetensors::serialize(views, None).map_err(|e| Error::Invalid(e.to_string()))?;
    write_atomically(path, &bytes)
}

/// Writes `bytes` to a temporary file in `path`'s directory and renames it over `path`; the
/// temporary is removed on every failure.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let (prefix, suffix) = crate::partial::affixes(&name);
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(&suffix);
    // Readable by others, as a file written in place would be (a temporary is private).
    if let Some(permissions) = readable(false) {
        builder.permissions(permissions);
    }
    let mut temp = builder.tempfile_in(dir).map_err(|e| Error::io(dir, e))?;
    temp.write_all(bytes).and_then(|_| temp.as_file().sync_all()).map_err(|e| Error::io(path, e))?;
    temp.persist(path).map_err(|e| Error::io(path, e.error))?;
    Ok(())
}

/// Permissions for a finished file (`rw-r--r--`) or folder (`rwxr-xr-x`); `None` where files
/// have no such modes.
pub(crate) fn readable(folder: bool) -> Option<std::fs::Permissions> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        Some(std::fs::Permissions::from_mode(if folder { 0o755 } else { 0o644 }))
    }
    #[cfg(not(unix))]
    {
        let _ = folder;
        None
    }
}

#[cfg(test)]
mod tests {
    use half::bf16;

    use super::*;

    /// Writes `component/weights.safetensors` under `root` with one tensor of each float format,
    /// two values per tensor.
    fn write_component(root: &Path, component: &str, f32s: [f32; 2], bf16s: [bf16; 2], f16s: [f16; 2]) -> PathBuf {
        use safetensors::tensor::TensorView;
        let dir = root.join(component);
        std::fs::create_dir_all(&dir).unwrap();
        let views = vec![
            ("a.f32".to_string(), TensorView::new(Dtype::F32, vec![2], bytemuck::cast_slice(&f32s)).unwrap()),
            ("b.bf16".to_string(), TensorView::new(Dtype::BF16, vec![2], bytemuck::cast_slice(&bf16s)).unwrap()),
            ("c.f16".to_string(), TensorView::new(Dtype::F16, vec![2], bytemuck::cast_slice(&f16s)).unwrap()),
        ];
        std::fs::write(dir.join("weights.safetensors"), safetensors::serialize(views, None).unwrap()).unwrap();
        dir
    }

    #[test]
    fn non_finite_weights_are_named_with_their_component_and_count() {
        let root = tempfile::tempdir().unwrap();
        let ok = [bf16::from_f32(1.0), bf16::from_f32(-2.0)];
        let (f16_ok, f32_ok) = ([f16::from_f32(0.5), f16::MAX], [f32::MAX, -0.0]);
        let good = write_component(root.path(), "vocoder", f32_ok, ok, f16_ok);
        let good = Checkpoint::open(&good).unwrap();
        for name in ["a.f32", "b.bf16", "c.f16"] {
            good.read(name).unwrap();
        }
        good.check_finite().unwrap();

        let cases = [
            ("transformer", "a.f32", "the DiT", "2 NaN or infinite values", [f32::NAN, f32::NEG_INFINITY], ok, f16_ok),
            (
                "language_model",
                "b.bf16",
                "the language model",
                "1 NaN or infinite value;",
                f32_ok,
                [bf16::INFINITY, ok[0]],
                f16_ok,
            ),
            (
                "rvq_depth_decoder",
                "c.f16",
                "the depth decoder",
                "1 NaN or infinite value;",
                f32_ok,
                ok,
                [f16::NAN, f16_ok[0]],
            ),
        ];
        for (component, bad, named, count, f32s, bf16s, f16s) in cases {
            let dir = write_component(root.path(), component, f32s, bf16s, f16s);
            let checkpoint = Checkpoint::open(&dir).unwrap();
            let read = checkpoint.read(bad).unwrap_err().to_string();
            let checked = checkpoint.check_finite().unwrap_err().to_string();
            for err in [&read, &checked] {
                assert!(err.contains(named) && err.contains(&format!("`{bad}`")) && err.contains(count), "{err}");
            }
            let err = check_model_finite(root.path()).unwrap_err().to_string();
            assert!(err.contains(&format!("`{bad}`")), "{err}");
            std::fs::remove_dir_all(&dir).unwrap();
        }
        check_model_finite(root.path()).unwrap();
    }

    /// Counts agree over the threads a big tensor is split into, whichever part holds the values.
    #[test]
    fn non_finite_values_are_counted_across_threads() {
        let mut bits = vec![bf16::from_f32(1.0).to_bits(); 3 * COUNT_CHUNK + 7];
        let bad = [0, COUNT_CHUNK - 1, COUNT_CHUNK, 2 * COUNT_CHUNK + 1, bits.len() - 1];
        for (i, &at) in bad.iter().enumerate() {
            // +inf, -inf, NaN and a NaN with payload.
            bits[at] = [0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffff][i];
        }
        // The largest finite bf16 has all but the exponent's last bit set.
        bits[5] = 0x7f7f;
        assert_eq!(count_non_finite(&bits, BF16_EXPONENT), bad.len());
        assert_eq!(count_non_finite(&bits[1..COUNT_CHUNK - 1], BF16_EXPONENT), 0);
    }
}
