//! `songloom model quantize`: a copy of a model directory with the AR half's matrices stored in a
//! quantized format, which loads with no quantizing and gives the same bits as quantizing at load.
//!
//! The layout is the diffusers one with two components rewritten, `language_model/` and
//! `rvq_depth_decoder/`. In their safetensors files a quantized matrix `W` of shape `[rows, cols]`
//! is three tensors (two for q8):
//!
//! | tensor | dtype | shape | holds |
//! |---|---|---|---|
//! | `W` | U32 | `[rows, cols / per_word]` | the packed words ([`crate::quant`]: 4 weights a word in q8, 8 in q4) |
//! | `W.scales` | F16 | `[rows, cols / 32]` | a scale per group of 32 |
//! | `W.offsets` | F16 | `[rows, cols / 32]` | q4 only: the group's offset |
//!
//! and the file's metadata says `W.format` = `q8` or `q4`. Every other tensor is kept as stored;
//! the shard index names the new tensors' files. The other components are copied as they are.
//! The copy is made in a temporary folder beside the destination and renamed into place at the
//! end, so a failure leaves nothing behind and an existing folder is never written into.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, TensorView};

use crate::error::{Error, Result};
use crate::plan::{ArFormats, WeightsChoice};
use crate::precision::names;
use crate::quant::{self, QuantData};
use crate::tensor::{DType, Storage};
use crate::weights::{Checkpoint, read_json};

/// What a tensor of the AR half is to the loader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A product's matrix, in the half's format.
    Matrix,
    /// An embedding table, q8 wherever the half is quantized.
    Table,
}

/// The role of tensor `name` of `component`, as the language model and depth decoder load it
/// (`VarBuilder::matrix` and `VarBuilder::table`); `None` for what stays as stored.
pub fn role(component: &str, name: &str) -> Option<Role> {
    let layer_matrix = |suffixes: &[&str]| name.contains("layers.") && suffixes.iter().any(|s| name.ends_with(s));
    match component {
        "language_model" => {
            if name == "model.embed_tokens.weight" {
                Some(Role::Table)
            } else if layer_matrix(&["_proj.weight"]) {
                Some(Role::Matrix)
            } else {
                None
            }
        }
        "rvq_depth_decoder" => {
            if name == "audio_embeddings.weight" {
                Some(Role::Table)
            } else if name == "projection.weight"
                || (name.starts_with("audio_heads.") && name.ends_with(".weight"))
                || layer_matrix(&["attn.to_q.weight", "attn.to_k.weight", "attn.to_v.weight", "attn.to_out.weight"])
                || layer_matrix(&["_proj.weight"])
            {
                Some(Role::Matrix)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Copies the model at `src` to `dst` (which must not exist) with the AR half in `formats`.
/// `progress` hears each file as it is written, by its path inside the copy.
pub fn write(src: &Path, dst: &Path, formats: ArFormats, progress: &dyn Fn(&Path)) -> Result<()> {
    if formats == ArFormats::BF16 {
        let quantized = WeightsChoice::QUANTIZED.map(WeightsChoice::name);
        return Err(Error::Invalid(format!("a quantized copy needs {} weights", names(&quantized))));
    }
    if dst.exists() {
        return Err(Error::Invalid(format!("{} already exists; name a new folder for the copy", dst.display())));
    }
    let parent = dst.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = dst.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let (prefix, suffix) = crate::partial::affixes(&name);
    let temp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(&suffix)
        .tempdir_in(parent)
        .map_err(|e| Error::io(parent, e))?;
    let root = temp.path().to_path_buf();
    let relative = |file: &Path| progress(file.strip_prefix(&root).unwrap_or(file));
    copy_tree(src, temp.path(), formats, &relative)?;
    if let Some(permissions) = crate::weights::readable(true) {
        std::fs::set_permissions(temp.path(), permissions).map_err(|e| Error::io(temp.path(), e))?;
    }
    let kept = temp.keep();
    std::fs::rename(&kept, dst).map_err(|e| {
        let _ = std::fs::remove_dir_all(&kept);
        Error::io(dst, e)
    })
}

fn format_of(component: &str, formats: ArFormats) -> Option<DType> {
    match component {
        "language_model" => Some(formats.lm),
        "rvq_depth_decoder" => Some(formats.depth),
        _ => None,
    }
}

fn copy_tree(src: &Path, dst: &Path, formats: ArFormats, progress: &dyn Fn(&Path)) -> Result<()> {
    let entries = std::fs::read_dir(src).map_err(|e| Error::io(src, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(src, e))?;
        let (from, to) = (entry.path(), dst.join(entry.file_name()));
        let component = entry.file_name().to_string_lossy().into_owned();
        if from.is_dir() {
            std::fs::create_dir(&to).map_err(|e| Error::io(&to, e))?;
            match format_of(&component, formats) {
                Some(format) => quantize_component(&component, &from, &to, format, progress)?,
                None => copy_plain(&from, &to, progress)?,
            }
        } else {
            std::fs::copy(&from, &to).map_err(|e| Error::io(&to, e))?;
        }
    }
    Ok(())
}

fn copy_plain(src: &Path, dst: &Path, progress: &dyn Fn(&Path)) -> Result<()> {
    for entry in std::fs::read_dir(src).map_err(|e| Error::io(src, e))? {
        let entry = entry.map_err(|e| Error::io(src, e))?;
        let (from, to) = (entry.path(), dst.join(entry.file_name()));
        if from.is_dir() {
            std::fs::create_dir(&to).map_err(|e| Error::io(&to, e))?;
            copy_plain(&from, &to, progress)?;
        } else {
            // A hard link costs nothing for a 10 GB DiT; a copy where links cannot be made.
            if std::fs::hard_link(&from, &to).is_err() {
                std::fs::copy(&from, &to).map_err(|e| Error::io(&to, e))?;
            }
            progress(&to);
        }
    }
    Ok(())
}

#[derive(serde::Deserialize, serde::Serialize)]
struct ShardIndex {
    #[serde(default)]
    metadata: serde_json::Value,
    weight_map: HashMap<String, String>,
}

/// One component with its matrices quantized: each safetensors file rewritten under its own
/// name, the index (if any) extended with the scales' and offsets' names.
fn quantize_component(component: &str, src: &Path, dst: &Path, format: DType, progress: &dyn Fn(&Path)) -> Result<()> {
    let checkpoint = Checkpoint::open(src)?;
    // A tied table is also the head, which is read in rows as stored: it stays as it is.
    let tied = component == "language_model"
        && crate::config::read_config::<crate::config::LmConfig>(src, "config.json")?.tie_word_embeddings;
    let mut files: Vec<PathBuf> = Vec::new();
    let mut index: Option<(PathBuf, ShardIndex)> = None;
    for entry in std::fs::read_dir(src).map_err(|e| Error::io(src, e))? {
        let path = entry.map_err(|e| Error::io(src, e))?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.ends_with(".safetensors.index.json") {
            index = Some((path.clone(), read_json(&path)?));
        } else if name.ends_with(".safetensors") {
            files.push(path);
        } else if path.is_file() {
            std::fs::copy(&path, dst.join(&name)).map_err(|e| Error::io(dst.join(&name), e))?;
        }
    }
    files.sort();
    for file in &files {
        let shard = Checkpoint::open_file(file)?;
        let mut names: Vec<String> = shard.tensor_names().map(str::to_string).collect();
        names.sort();
        let out = dst.join(file.file_name().expect("a file"));
        write_shard(component, &checkpoint, &names, format, tied, &out)?;
        if let Some((_, index)) = index.as_mut() {
            let shard_name = file.file_name().expect("a file").to_string_lossy().into_owned();
            for name in names.iter().filter(|n| role(component, n).is_some()) {
                // Names the shard does not hold are dropped below.
                for part in ["scales", "offsets"] {
                    index.weight_map.insert(format!("{name}.{part}"), shard_name.clone());
                }
            }
        }
        progress(&out);
    }
    if let Some((path, mut index)) = index {
        // Offsets exist for q4 tensors only; the index names only tensors its shards hold.
        let mut written = std::collections::HashSet::new();
        for file in &files {
            let shard = Checkpoint::open_file(&dst.join(file.file_name().expect("a file")))?;
            written.extend(shard.tensor_names().map(str::to_string));
        }
        index.weight_map.retain(|name, _| written.contains(name));
        let out = dst.join(path.file_name().expect("a file"));
        let text = serde_json::to_string_pretty(&index).map_err(|e| Error::Invalid(e.to_string()))?;
        crate::weights::write_atomically(&out, text.as_bytes())?;
    }
    Ok(())
}

/// The bytes of one tensor as stored, or its quantized parts.
enum Entry {
    Plain { dtype: Dtype, shape: Vec<usize>, bytes: Vec<u8> },
    Quantized { shape: Vec<usize>, data: QuantData },
}

fn view(dtype: Dtype, shape: Vec<usize>, bytes: &[u8]) -> Result<TensorView<'_>> {
    TensorView::new(dtype, shape, bytes).map_err(|e| Error::Invalid(e.to_string()))
}

fn write_shard(
    component: &str,
    checkpoint: &Checkpoint,
    names: &[String],
    format: DType,
    tied: bool,
    out: &Path,
) -> Result<()> {
    let mut entries = Vec::new();
    for name in names {
        let tensor = checkpoint.read(name)?;
        let shape = tensor.shape().to_vec();
        let target = match role(component, name) {
            Some(Role::Matrix) => Some(format),
            Some(Role::Table) if !tied => Some(ArFormats::table(format)),
            Some(Role::Table) => None,
            None => None,
        };
        let cols = shape.last().copied().unwrap_or(0);
        let entry = match target {
            Some(target) if shape.len() == 2 && cols.is_multiple_of(quant::GROUP) => {
                // The loader rounds to the AR half's bf16 before quantizing; so does the copy.
                let Storage::Cpu(storage) = tensor.storage() else { unreachable!("read into host memory") };
                let values = storage.to_dtype(DType::BF16)?.to_f32_vec();
                Entry::Quantized { shape, data: quant::quantize(&values, target)? }
            }
            _ => {
                let Storage::Cpu(storage) = tensor.storage() else { unreachable!("read into host memory") };
                let (dtype, bytes) = match storage {
                    crate::tensor::CpuStorage::F32(v) => (Dtype::F32, bytemuck::cast_slice(v).to_vec()),
                    crate::tensor::CpuStorage::BF16(v) => (Dtype::BF16, bytemuck::cast_slice(v).to_vec()),
                    crate::tensor::CpuStorage::F16(v) => (Dtype::F16, bytemuck::cast_slice(v).to_vec()),
                    other => {
                        return Err(Error::Invalid(format!(
                            "`{name}` in {} is already {}: quantize the bf16 checkpoint",
                            checkpoint.dir().display(),
                            other.dtype()
                        )));
                    }
                };
                Entry::Plain { dtype, shape, bytes }
            }
        };
        entries.push((name.clone(), entry));
    }
    let mut metadata = HashMap::new();
    let mut views: Vec<(String, TensorView)> = Vec::new();
    for (name, entry) in &entries {
        match entry {
            Entry::Plain { dtype, shape, bytes } => views.push((name.clone(), view(*dtype, shape.clone(), bytes)?)),
            Entry::Quantized { shape, data } => {
                let rows = shape[0];
                let groups = shape[1] / quant::GROUP;
                metadata.insert(format!("{name}.format"), data.dtype.to_string());
                let words = vec![rows, shape[1] / quant::per_word(data.dtype)];
                views.push((name.clone(), view(Dtype::U32, words, bytemuck::cast_slice(&data.words))?));
                views.push((
                    format!("{name}.scales"),
                    view(Dtype::F16, vec![rows, groups], bytemuck::cast_slice(&data.scales))?,
                ));
                if !data.offsets.is_empty() {
                    views.push((
                        format!("{name}.offsets"),
                        view(Dtype::F16, vec![rows, groups], bytemuck::cast_slice(&data.offsets))?,
                    ));
                }
            }
        }
    }
    let bytes = safetensors::serialize(views, Some(metadata)).map_err(|e| Error::Invalid(e.to_string()))?;
    crate::weights::write_atomically(out, &bytes)
}
