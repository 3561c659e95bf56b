//! LoRA adapters: low-rank changes to the linear weights of the language model, the depth decoder
//! and the DiT, read in the two formats people publish and merged into the weights at load,
//!
//! `W' = W + scale · factor · (B @ A)`, in f32, then rounded to the weight's stored dtype,
//!
//! before any quantizing at load. `scale` is the user's (`--lora FILE:SCALE`), `factor` the
//! adapter's own. What PEFT 0.21.2 and diffusers 0.42.1 load is the reference
//! (`tools/oracle/lora_goldens.py`).
//!
//! | format | files | keys | factor |
//! |---|---|---|---|
//! | PEFT folder | `adapter_config.json`, `adapter_model.safetensors` | `base_model.model.{module}.lora_A.weight`, `….lora_B.weight` | `lora_alpha / r` (`/ sqrt(r)` with `use_rslora`), `rank_pattern` and `alpha_pattern` matched as PEFT does |
//! | diffusers pipeline file | `pytorch_lora_weights.safetensors` | `{component}.{module}.lora_A.weight`, `….lora_B.weight`, optional `{component}.{module}.alpha` | `alpha / rank`; no alpha: 1; or the `LoraConfig` per component in the header's `lora_adapter_metadata` |
//!
//! `{component}` is the model folder: `language_model`, `rvq_depth_decoder` or `transformer`; a
//! PEFT folder's keys name no component and are matched against each one's weights. A module's
//! weight is `{module}.weight`: `lora_A` is `[rank, in]`, `lora_B` `[out, rank]`. Everything else
//! (kohya's `lora_down`/`lora_up`, DoRA, LoRA on embeddings or biases, `modules_to_save`, a key that
//! names no weight, a shape that does not fit) is refused with the key named. A quantized copy
//! (`songloom model quantize`) stores packed words, which take no merge: there the adapters run
//! beside each matrix as a low-rank side product (`models::linear`), `y = x @ W^T + (x @ A^T) @
//! (scale · factor · B)^T`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Mutex;

use rayon::prelude::*;

use crate::device::Device;
use crate::error::{Error, Result};
use crate::models::linear::LowRank;
use crate::tensor::{CpuStorage, Storage, Tensor};
use crate::weights::Checkpoint;

/// The components an adapter may change, as the model folder names them.
pub const COMPONENTS: [&str; 3] = ["language_model", "rvq_depth_decoder", "transformer"];

/// The file of a PEFT folder that holds its settings, and the one that holds its weights.
pub const PEFT_CONFIG: &str = "adapter_config.json";
pub const PEFT_WEIGHTS: &str = "adapter_model.safetensors";
/// The header entry where diffusers keeps each component's `LoraConfig`.
const DIFFUSERS_METADATA: &str = "lora_adapter_metadata";

/// One `--lora FILE[:SCALE]`: an adapter's file or folder and the user's scale (1 when not given).
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterSpec {
    pub path: PathBuf,
    pub scale: f32,
}

impl FromStr for AdapterSpec {
    type Err = String;

    /// `FILE` or `FILE:SCALE`; a path that itself holds a colon takes a scale after it.
    fn from_str(text: &str) -> std::result::Result<Self, String> {
        let (path, scale) = match text.rsplit_once(':') {
            Some((path, scale)) if !path.is_empty() && scale.trim().parse::<f32>().is_ok() => {
                (path, scale.trim().parse::<f32>().expect("checked above"))
            }
            _ => (text, 1.0),
        };
        if path.is_empty() {
            return Err("a LoRA adapter needs a file or folder: FILE[:SCALE]".into());
        }
        if !scale.is_finite() {
            return Err(format!("the scale of LoRA adapter {path} must be a finite number (got {scale})"));
        }
        Ok(AdapterSpec { path: PathBuf::from(path), scale })
    }
}

impl std::fmt::Display for AdapterSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.path.display(), self.scale)
    }
}

/// The two formats of the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterFormat {
    Peft,
    Pipeline,
}

impl AdapterFormat {
    pub fn name(self) -> &'static str {
        match self {
            AdapterFormat::Peft => "PEFT folder",
            AdapterFormat::Pipeline => "diffusers pipeline file",
        }
    }
}

/// One module's low-rank pair.
#[derive(Debug)]
struct Module {
    /// The component that holds the module: from the key's prefix, else found when bound.
    component: Option<&'static str>,
    /// The module's path inside its component (`model.layers.0.self_attn.q_proj`).
    path: String,
    /// Its `lora_A` key as the file has it, for errors.
    key: String,
    rank: usize,
    in_features: usize,
    out_features: usize,
    /// `[rank, in]`, row-major.
    a: Vec<f32>,
    /// `[out, rank]`, row-major.
    b: Vec<f32>,
    factor: f32,
}

/// An adapter read from disk, with the user's scale.
#[derive(Debug)]
pub struct Adapter {
    pub spec: AdapterSpec,
    /// The file's or folder's name.
    pub name: String,
    /// SHA-256 of the file (a pipeline file), or of `adapter_config.json` followed by
    /// `adapter_model.safetensors` (a PEFT folder), in hex.
    pub sha256: String,
    pub format: AdapterFormat,
    modules: Vec<Module>,
}

/// The adapters of a load, in the order given. Empty: the model as it is.
#[derive(Debug, Default)]
pub struct Adapters {
    list: Vec<Adapter>,
}

/// A LoRA setting as PEFT's `LoraConfig` holds it (from `adapter_config.json` or diffusers'
/// header metadata).
#[derive(Debug, Clone)]
struct LoraSettings {
    r: usize,
    alpha: f32,
    rslora: bool,
    rank_pattern: Vec<(String, usize)>,
    alpha_pattern: Vec<(String, f32)>,
}

/// Which part of a module a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    A,
    B,
    Alpha,
}

fn adapter_error(path: &Path, detail: impl Into<String>) -> Error {
    Error::Adapter { path: path.to_path_buf(), detail: detail.into() }
}

impl Adapter {
    /// Reads the adapter at `spec.path`: a PEFT folder (or its `adapter_model.safetensors`), or a
    /// diffusers pipeline file.
    pub fn open(spec: &AdapterSpec) -> Result<Self> {
        let path = &spec.path;
        let folder = if path.is_dir() {
            Some(path.clone())
        } else if path.file_name().is_some_and(|n| n == PEFT_WEIGHTS)
            && path.parent().is_some_and(|p| p.join(PEFT_CONFIG).is_file())
        {
            path.parent().map(Path::to_path_buf)
        } else {
            None
        };
        if !path.exists() {
            return Err(adapter_error(path, "no such file or folder"));
        }
        // Named by its folder when a PEFT folder is given by its weights file.
        let named = folder.as_deref().unwrap_or(path);
        let name = named.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let adapter = match folder {
            Some(dir) => Self::open_peft(spec, &dir, name)?,
            None => Self::open_pipeline(spec, name)?,
        };
        if adapter.modules.is_empty() {
            return Err(adapter_error(path, "it holds no LoRA weights (no `lora_A.weight` / `lora_B.weight` keys)"));
        }
        Ok(adapter)
    }

    fn open_peft(spec: &AdapterSpec, dir: &Path, name: String) -> Result<Self> {
        let config_path = dir.join(PEFT_CONFIG);
        let weights_path = dir.join(PEFT_WEIGHTS);
        if !config_path.is_file() {
            return Err(adapter_error(dir, format!("a PEFT folder needs {PEFT_CONFIG}, which is missing")));
        }
        if !weights_path.is_file() {
            let detail = if dir.join("adapter_model.bin").is_file() {
                format!("it holds adapter_model.bin (a pickle): save it as {PEFT_WEIGHTS} (safetensors)")
            } else {
                format!("a PEFT folder needs {PEFT_WEIGHTS}, which is missing")
            };
            return Err(adapter_error(dir, detail));
        }
        let config: serde_json::Value = crate::weights::read_json(&config_path)?;
        let settings = LoraSettings::from_peft(&config, &config_path)?;
        let checkpoint = Checkpoint::open_file(&weights_path)?;
        let mut pairs = read_pairs(&checkpoint, &weights_path, AdapterFormat::Peft)?;
        for pair in pairs.values_mut() {
            let m = &mut pair.module;
            m.factor = settings.factor(&m.path, m.rank, &m.key, &config_path)?;
        }
        Ok(Adapter {
            spec: spec.clone(),
            name,
            sha256: crate::hash::sha256_files(&[&config_path, &weights_path])?,
            format: AdapterFormat::Peft,
            modules: pairs.into_values().map(|p| p.module).collect(),
        })
    }

    fn open_pipeline(spec: &AdapterSpec, name: String) -> Result<Self> {
        let path = &spec.path;
        if path.extension().is_none_or(|e| e != "safetensors") {
            return Err(adapter_error(
                path,
                "not a LoRA adapter: give a PEFT folder (adapter_config.json and adapter_model.safetensors) or a \
                 diffusers .safetensors file",
            ));
        }
        let checkpoint = Checkpoint::open_file(path)?;
        let mut pairs = read_pairs(&checkpoint, path, AdapterFormat::Pipeline)?;
        let metadata = checkpoint.header_metadata(DIFFUSERS_METADATA);
        let with_alpha = pairs.values().filter(|p| p.alpha.is_some()).count();
        if let Some(metadata) = metadata {
            if with_alpha > 0 {
                return Err(adapter_error(
                    path,
                    format!("it holds both `.alpha` keys and `{DIFFUSERS_METADATA}`: diffusers refuses that too"),
                ));
            }
            let parsed: serde_json::Value = serde_json::from_str(&metadata).map_err(|e| {
                adapter_error(path, format!("its `{DIFFUSERS_METADATA}` header entry is not JSON ({e})"))
            })?;
            for pair in pairs.values_mut() {
                let component = pair.module.component.expect("pipeline keys name their component");
                let settings = LoraSettings::from_metadata(&parsed, component, path)?;
                pair.module.factor = settings.factor(&pair.module.path, pair.module.rank, &pair.module.key, path)?;
            }
        } else {
            // diffusers gives a module without `.alpha` the component's most common alpha when
            // others have one, where the file alone says a factor of 1: such a file is refused.
            for component in COMPONENTS {
                let of = |p: &&Pair| p.module.component == Some(component);
                let (some, none): (Vec<&Pair>, Vec<&Pair>) = pairs.values().filter(of).partition(|p| p.alpha.is_some());
                if let (Some(_), Some(missing)) = (some.first(), none.first()) {
                    return Err(adapter_error(
                        path,
                        format!(
                            "`{}` has no `.alpha` while other modules of the {component} have one: give every \
                             module of a component an alpha, or none (a factor of 1)",
                            missing.module.key
                        ),
                    ));
                }
            }
            for pair in pairs.values_mut() {
                pair.module.factor = pair.alpha.map_or(1.0, |alpha| alpha / pair.module.rank as f32);
            }
        }
        Ok(Adapter {
            spec: spec.clone(),
            name,
            sha256: crate::hash::sha256_files(&[path])?,
            format: AdapterFormat::Pipeline,
            modules: pairs.into_values().map(|p| p.module).collect(),
        })
    }

    /// How many modules the adapter changes.
    pub fn module_count(&self) -> usize {
        self.modules.len()
    }

    /// The components the adapter changes (known once bound to a model).
    pub fn components(&self) -> Vec<&'static str> {
        let set: HashSet<&'static str> = self.modules.iter().filter_map(|m| m.component).collect();
        COMPONENTS.into_iter().filter(|c| set.contains(c)).collect()
    }

    /// The adapter in words: `vinyl (PEFT folder, scale 0.7): 14 modules of the language model`.
    pub fn describe(&self) -> String {
        let components: Vec<&str> = self.components().into_iter().map(component_name).collect();
        let changed = match components.len() {
            0 => String::new(),
            1 => format!(" of the {}", components[0]),
            n => format!(" of the {} and {}", components[..n - 1].join(", "), components[n - 1]),
        };
        format!(
            "{} ({}, scale {}): {} modules{changed}",
            self.name,
            self.format.name(),
            self.spec.scale,
            self.modules.len()
        )
    }

    /// The adapter as a recipe records it.
    pub fn recipe(&self) -> songloom_wire::AdapterRecipe {
        songloom_wire::AdapterRecipe {
            path: self.spec.path.display().to_string(),
            name: self.name.clone(),
            sha256: self.sha256.clone(),
            scale: self.spec.scale,
        }
    }
}

/// A module's pair as it is read, before its factor is known.
struct Pair {
    module: Module,
    alpha: Option<f32>,
}

/// A module's component (where the key names it) and path.
type ModuleKey = (Option<&'static str>, String);
/// A tensor with the key it was read under.
type KeyedTensor = (String, Tensor);

/// Reads every key of an adapter file into module pairs, checking names, parts and shapes.
fn read_pairs(checkpoint: &Checkpoint, path: &Path, format: AdapterFormat) -> Result<BTreeMap<String, Pair>> {
    let mut names: Vec<&str> = checkpoint.tensor_names().collect();
    names.sort_unstable();
    let mut parts: BTreeMap<ModuleKey, [Option<KeyedTensor>; 3]> = BTreeMap::new();
    for key in names {
        let (component, module, part) = classify(key, format).map_err(|detail| adapter_error(path, detail))?;
        let tensor = checkpoint.read(key)?;
        let slot = &mut parts.entry((component, module)).or_default()[part as usize];
        *slot = Some((key.to_string(), tensor));
    }
    let mut pairs = BTreeMap::new();
    for ((component, module), [a, b, alpha]) in parts {
        let shown = |part: &str| match component {
            Some(c) => format!("{c}.{module}.{part}"),
            None => format!("{module}.{part}"),
        };
        let (a, b) = match (a, b) {
            (Some(a), Some(b)) => (a, b),
            (a, b) => {
                let (present, missing) = match (&a, &b) {
                    (Some((key, _)), None) => (key.clone(), "lora_B.weight"),
                    (None, Some((key, _))) => (key.clone(), "lora_A.weight"),
                    _ => (shown("alpha"), "lora_A.weight and lora_B.weight"),
                };
                return Err(adapter_error(path, format!("`{present}` comes without its {missing}")));
            }
        };
        let ((a_key, a), (b_key, b)) = (a, b);
        let (rank, in_features) = a.dims2("lora").map_err(|_| {
            adapter_error(path, format!("`{a_key}` has shape {:?}, not [rank, in] (a linear layer's)", a.shape()))
        })?;
        let (out_features, b_rank) = b.dims2("lora").map_err(|_| {
            adapter_error(path, format!("`{b_key}` has shape {:?}, not [out, rank] (a linear layer's)", b.shape()))
        })?;
        if b_rank != rank || rank == 0 {
            return Err(adapter_error(
                path,
                format!("`{b_key}` has rank {b_rank} ({:?}) where `{a_key}` has {rank} ({:?})", b.shape(), a.shape()),
            ));
        }
        let alpha = match alpha {
            Some((key, t)) => match t.to_f32_vec()[..] {
                [value] if value.is_finite() && value > 0.0 => Some(value),
                _ => return Err(adapter_error(path, format!("`{key}` is not one positive number"))),
            },
            None => None,
        };
        let module = Module {
            component,
            path: module.clone(),
            key: a_key,
            rank,
            in_features,
            out_features,
            a: a.to_f32_vec(),
            b: b.to_f32_vec(),
            factor: 1.0,
        };
        pairs.insert(shown(""), Pair { module, alpha });
    }
    Ok(pairs)
}

/// Splits a key into its component (from a pipeline file's prefix), module path and part, or says
/// why it is not one this reader takes.
fn classify(key: &str, format: AdapterFormat) -> std::result::Result<(Option<&'static str>, String, Part), String> {
    let unsupported = |what: &str| format!("`{key}` is {what}, which Songloom does not load");
    if key.contains("lora_down") || key.contains("lora_up") || key.contains(".lora.down.") || key.contains(".lora.up.")
    {
        return Err(format!(
            "`{key}` is in kohya's naming (lora_down / lora_up); convert the adapter to PEFT's (lora_A / lora_B), \
             as diffusers' conversion scripts do"
        ));
    }
    if key.contains("lora_magnitude_vector") {
        return Err(unsupported("a DoRA magnitude"));
    }
    if key.contains("lora_embedding_") {
        return Err(unsupported("LoRA on an embedding table"));
    }
    let (rest, part) = if let Some(rest) = key.strip_suffix(".lora_A.weight") {
        (rest, Part::A)
    } else if let Some(rest) = key.strip_suffix(".lora_B.weight") {
        (rest, Part::B)
    } else if let Some(rest) = key.strip_suffix(".alpha")
        && format == AdapterFormat::Pipeline
    {
        (rest, Part::Alpha)
    } else if key.ends_with(".lora_B.bias") {
        return Err(unsupported("a LoRA bias (lora_bias)"));
    } else if (key.contains(".lora_A.") || key.contains(".lora_B.")) && key.ends_with(".weight") {
        return Err(format!(
            "`{key}` names an adapter inside the key (a model's state, not a saved adapter): save it with PEFT's \
             save_pretrained or diffusers' save_lora_weights"
        ));
    } else {
        return Err(format!(
            "`{key}` is not a LoRA weight (keys end in .lora_A.weight or .lora_B.weight{})",
            if format == AdapterFormat::Pipeline { ", or .alpha" } else { "" }
        ));
    };
    let rest = rest.strip_prefix("base_model.model.").unwrap_or(rest);
    for component in COMPONENTS {
        if let Some(module) = rest.strip_prefix(component).and_then(|r| r.strip_prefix('.')) {
            return Ok((Some(component), module.to_string(), part));
        }
    }
    if format == AdapterFormat::Pipeline {
        let prefix = rest.split('.').next().unwrap_or(rest);
        return Err(match prefix {
            "condition_encoder" | "vocoder" => {
                format!("`{key}` changes the {prefix}: adapters apply to the language model, depth decoder and DiT")
            }
            _ => format!(
                "`{key}` names no component of MiniMax-Music3: a pipeline file's keys start with {}",
                COMPONENTS.map(|c| format!("`{c}.`")).join(", ")
            ),
        });
    }
    Ok((None, rest.to_string(), part))
}

impl LoraSettings {
    /// From a PEFT `adapter_config.json`, refusing what a merge cannot reproduce.
    fn from_peft(config: &serde_json::Value, path: &Path) -> Result<Self> {
        let bad = |field: &str, detail: &str| adapter_error(path, format!("`{field}` {detail}"));
        let peft_type = config.get("peft_type").and_then(|v| v.as_str()).unwrap_or("LORA");
        if peft_type != "LORA" {
            return Err(bad("peft_type", &format!("is {peft_type}: only LORA adapters are supported")));
        }
        Self::from_fields(&|field| config.get(field).cloned(), path)
    }

    /// From diffusers' header metadata: `{component}.{field}` entries.
    fn from_metadata(metadata: &serde_json::Value, component: &str, path: &Path) -> Result<Self> {
        let get = |field: &str| metadata.get(format!("{component}.{field}")).cloned();
        if get("r").is_none() {
            return Err(adapter_error(
                path,
                format!("its `{DIFFUSERS_METADATA}` has no `{component}.r` for the {component}'s modules"),
            ));
        }
        Self::from_fields(&get, path)
    }

    fn from_fields(get: &dyn Fn(&str) -> Option<serde_json::Value>, path: &Path) -> Result<Self> {
        use serde_json::Value;
        let bad = |field: &str, detail: &str| adapter_error(path, format!("`{field}` {detail}"));
        let is_set = |v: &Option<Value>| match v {
            None | Some(Value::Null) | Some(Value::Bool(false)) => false,
            Some(Value::Array(a)) => !a.is_empty(),
            Some(Value::Object(o)) => !o.is_empty(),
            Some(Value::String(s)) => !s.is_empty(),
            Some(_) => true,
        };
        for (field, why) in [
            ("use_dora", "is set: DoRA adapters are not supported"),
            ("fan_in_fan_out", "is set: Songloom's weights are [out, in]"),
            ("lora_bias", "is set: LoRA biases are not supported"),
            ("modules_to_save", "lists modules saved whole: only low-rank pairs are supported"),
            ("layer_replication", "is set: layer replication is not supported"),
            ("target_parameters", "is set: LoRA on bare parameters is not supported"),
            ("trainable_token_indices", "is set: trained token rows are not supported"),
            // Variants whose forward is not `W + factor * B @ A` on every input.
            ("alora_invocation_tokens", "is set: activated LoRA (aLoRA) is not supported"),
            ("use_qalora", "is set: QA-LoRA is not supported"),
            ("use_bdlora", "is set: BD-LoRA is not supported"),
            ("arrow_config", "is set: Arrow routing is not supported"),
            ("kasa_config", "is set: KaSA is not supported"),
            ("monteclora_config", "is set: MonteCLoRA is not supported"),
            ("velora_config", "is set: VeLoRA is not supported"),
        ] {
            if is_set(&get(field)) {
                return Err(bad(field, why));
            }
        }
        if let Some(bias) = get("bias").filter(|b| !b.is_null())
            && bias != "none"
        {
            return Err(bad("bias", &format!("is {bias}: only \"none\" is supported")));
        }
        let r =
            get("r").and_then(|v| v.as_u64()).filter(|&r| r > 0).ok_or_else(|| bad("r", "is not a rank above 0"))?;
        let alpha = match get("lora_alpha") {
            None | Some(Value::Null) => 8.0, // PEFT's default
            Some(v) => v.as_f64().ok_or_else(|| bad("lora_alpha", "is not a number"))? as f32,
        };
        let rslora = get("use_rslora").and_then(|v| v.as_bool()).unwrap_or(false);
        let pattern = |field: &str| -> Result<Vec<(String, f64)>> {
            match get(field) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Object(map)) => map
                    .iter()
                    .map(|(k, v)| {
                        v.as_f64().map(|v| (k.clone(), v)).ok_or_else(|| bad(field, &format!("`{k}` is not a number")))
                    })
                    .collect(),
                Some(_) => Err(bad(field, "is not an object of module patterns")),
            }
        };
        Ok(LoraSettings {
            r: r as usize,
            alpha,
            rslora,
            rank_pattern: pattern("rank_pattern")?.into_iter().map(|(k, v)| (k, v as usize)).collect(),
            alpha_pattern: pattern("alpha_pattern")?.into_iter().map(|(k, v)| (k, v as f32)).collect(),
        })
    }

    /// The factor of the module at `module` whose pair has rank `rank`: its alpha over its rank
    /// (or the rank's square root), each taken from the first matching pattern as PEFT's
    /// `get_pattern_key` does, else the defaults.
    fn factor(&self, module: &str, rank: usize, key: &str, path: &Path) -> Result<f32> {
        let r = match first_match(&self.rank_pattern, module, path)? {
            Some(r) => r,
            None => self.r,
        };
        if r != rank {
            return Err(adapter_error(
                path,
                format!("`{key}` has rank {rank}, where the settings give this module {r}"),
            ));
        }
        let alpha = first_match(&self.alpha_pattern, module, path)?.unwrap_or(self.alpha);
        Ok(if self.rslora { alpha / (r as f32).sqrt() } else { alpha / r as f32 })
    }
}

/// The value of the first pattern that matches `module` in full after an optional `prefix.`
/// (PEFT's `re.match(rf"(.*\.)?({key})$", module)`).
fn first_match<T: Copy>(patterns: &[(String, T)], module: &str, path: &Path) -> Result<Option<T>> {
    for (pattern, value) in patterns {
        let regex = fancy_regex::Regex::new(&format!(r"^(?:.*\.)?(?:{pattern})$"))
            .map_err(|e| adapter_error(path, format!("the module pattern `{pattern}` is not a regex ({e})")))?;
        if regex.is_match(module).unwrap_or(false) {
            return Ok(Some(*value));
        }
    }
    Ok(None)
}

impl Adapters {
    /// Reads each adapter; nothing is checked against a model yet (see [`bind`](Self::bind)).
    pub fn open(specs: &[AdapterSpec]) -> Result<Self> {
        Ok(Adapters { list: specs.iter().map(Adapter::open).collect::<Result<_>>()? })
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Adapter> {
        self.list.iter()
    }

    /// Checks every module against the model's checkpoints before anything is loaded: the
    /// component that holds its weight (found by name for a PEFT folder) and the weight's shape
    /// `[out, in]` (a quantized copy's in weights, not in packed words).
    pub fn bind(&mut self, model_root: &Path) -> Result<()> {
        if self.list.is_empty() {
            return Ok(());
        }
        let mut checkpoints = Vec::new();
        for component in COMPONENTS {
            checkpoints.push((component, Checkpoint::open(&model_root.join(component))?));
        }
        for adapter in &mut self.list {
            let path = adapter.spec.path.clone();
            let mut seen = HashSet::new();
            for module in &mut adapter.modules {
                let weight = format!("{}.weight", module.path);
                let holders: Vec<&(&'static str, Checkpoint)> = match module.component {
                    Some(c) => checkpoints.iter().filter(|(name, _)| *name == c).collect(),
                    None => checkpoints.iter().filter(|(_, ckpt)| ckpt.contains(&weight)).collect(),
                };
                let (component, checkpoint) = match holders[..] {
                    [one] => one,
                    [] => {
                        return Err(adapter_error(
                            &path,
                            format!(
                                "`{}` targets `{weight}`, which neither the language model, the depth decoder nor the \
                                 DiT has: the adapter was made for another model",
                                module.key
                            ),
                        ));
                    }
                    _ => {
                        return Err(adapter_error(
                            &path,
                            format!(
                                "`{}` targets `{weight}`, which several components hold: prefix the key",
                                module.key
                            ),
                        ));
                    }
                };
                if !checkpoint.contains(&weight) {
                    return Err(adapter_error(
                        &path,
                        format!(
                            "`{}` targets `{weight}`, which the {} has not: the adapter was made for another model",
                            module.key,
                            component_name(component)
                        ),
                    ));
                }
                // A quantized copy's matrix is stored as packed words: its shape in weights.
                let mut shape = checkpoint.shape_of(&weight)?;
                if let Some(stored) = checkpoint.stored_format(&weight).filter(|f| f.is_quantized())
                    && let Some(words) = shape.last_mut()
                {
                    *words *= crate::quant::per_word(stored);
                }
                if shape != [module.out_features, module.in_features] {
                    return Err(adapter_error(
                        &path,
                        format!(
                            "`{}` is [{} x {}] ({}, rank {}), but `{weight}` of the {} is {shape:?}: the adapter was \
                             made for a model of another size",
                            module.key,
                            module.out_features,
                            module.in_features,
                            "out x in",
                            module.rank,
                            component_name(component)
                        ),
                    ));
                }
                if !seen.insert((*component, weight.clone())) {
                    return Err(adapter_error(&path, format!("`{weight}` is changed twice by `{}`", module.key)));
                }
                module.component = Some(component);
            }
        }
        Ok(())
    }

    /// The changes to one component's weights, for its [`VarBuilder`](crate::weights::VarBuilder);
    /// `None` when no adapter changes it. Call after [`bind`](Self::bind).
    pub fn for_component(&self, component: &str) -> Option<ComponentLora<'_>> {
        let mut deltas: HashMap<String, Vec<Delta<'_>>> = HashMap::new();
        for adapter in &self.list {
            for module in adapter.modules.iter().filter(|m| m.component == Some(component)) {
                let delta = Delta { module, weight: adapter.spec.scale * module.factor, adapter: &adapter.spec.path };
                deltas.entry(format!("{}.weight", module.path)).or_default().push(delta);
            }
        }
        (!deltas.is_empty()).then(|| ComponentLora {
            component: component_name(component),
            deltas,
            applied: Mutex::new(HashSet::new()),
        })
    }
}

fn component_name(component: &str) -> &'static str {
    match component {
        "language_model" => "language model",
        "rvq_depth_decoder" => "depth decoder",
        "transformer" => "DiT",
        _ => "model",
    }
}

/// One adapter's pair for one weight, with `scale · factor`.
struct Delta<'a> {
    module: &'a Module,
    weight: f32,
    adapter: &'a Path,
}

/// The adapters' changes to one component, merged into its weights as they are read.
pub struct ComponentLora<'a> {
    component: &'static str,
    /// Weight name -> the pairs that change it.
    deltas: HashMap<String, Vec<Delta<'a>>>,
    applied: Mutex<HashSet<String>>,
}

impl ComponentLora<'_> {
    /// `tensor` (the weight `name` as stored, or its rows `rows` of the first dimension) with every
    /// adapter's `scale · factor · (B @ A)` added in f32 and the sum rounded to the stored dtype.
    /// A pair whose `scale · factor` is 0 adds nothing, so the weight keeps its bits.
    pub(crate) fn merge(&self, name: &str, tensor: Tensor, rows: Option<(usize, usize)>) -> Result<Tensor> {
        let Some(deltas) = self.deltas.get(name) else {
            return Ok(tensor);
        };
        self.applied.lock().map_err(|_| Error::Invalid("a LoRA merge panicked".into()))?.insert(name.to_string());
        let live: Vec<&Delta> = deltas.iter().filter(|d| d.weight != 0.0).collect();
        if live.is_empty() {
            return Ok(tensor);
        }
        let shape = tensor.shape().to_vec();
        let (_, cols) = tensor.dims2("lora merge")?;
        let dtype = tensor.dtype();
        let Storage::Cpu(storage) = tensor.storage() else {
            return Err(Error::Invalid(format!("`{name}`: a LoRA merge needs the weight in host memory")));
        };
        let mut w = storage.to_f32_vec();
        let first_row = rows.map_or(0, |(start, _)| start);
        w.par_chunks_mut(cols).enumerate().for_each(|(i, row)| {
            let mut delta = vec![0.0f32; cols];
            for d in &live {
                let m = d.module;
                delta.iter_mut().for_each(|x| *x = 0.0);
                let b_row = &m.b[(first_row + i) * m.rank..][..m.rank];
                for (k, &b) in b_row.iter().enumerate() {
                    let a_row = &m.a[k * cols..(k + 1) * cols];
                    delta.iter_mut().zip(a_row).for_each(|(x, &a)| *x += b * a);
                }
                row.iter_mut().zip(&delta).for_each(|(x, &dx)| *x += d.weight * dx);
            }
        });
        Tensor::new(&shape, Storage::Cpu(CpuStorage::F32(w).to_dtype(dtype)?))
    }

    /// The side product of every live pair of the weight `name` (stored quantized): the `lora_A`s
    /// stacked by rank, the `lora_B`s side by side times each pair's `scale · factor`, in f32 on
    /// `device`; `None` when every pair's `scale · factor` is 0 (the weight as it is).
    pub(crate) fn low_rank(&self, name: &str, device: &Device) -> Result<Option<LowRank>> {
        let Some(deltas) = self.deltas.get(name) else {
            return Ok(None);
        };
        self.applied.lock().map_err(|_| Error::Invalid("a LoRA merge panicked".into()))?.insert(name.to_string());
        let live: Vec<&Delta> = deltas.iter().filter(|d| d.weight != 0.0).collect();
        let Some(first) = live.first() else {
            return Ok(None);
        };
        let (rows, cols) = (first.module.out_features, first.module.in_features);
        let rank: usize = live.iter().map(|d| d.module.rank).sum();
        let a: Vec<f32> = live.iter().flat_map(|d| d.module.a.iter().copied()).collect();
        let mut b = vec![0.0f32; rows * rank];
        let mut offset = 0;
        for d in &live {
            let m = d.module;
            for (row, out) in m.b.chunks(m.rank).zip(b.chunks_mut(rank)) {
                out[offset..offset + m.rank].iter_mut().zip(row).for_each(|(o, &x)| *o = d.weight * x);
            }
            offset += m.rank;
        }
        let a = device.upload(Tensor::from_f32(&[rank, cols], a)?)?;
        let b = device.upload(Tensor::from_f32(&[rows, rank], b)?)?;
        Ok(Some(LowRank { a, b }))
    }

    /// Refuses a component load that left a pair unapplied (a weight the model reads in another
    /// way than as a product's matrix), naming its key.
    pub(crate) fn finish(&self) -> Result<()> {
        let applied = self.applied.lock().map_err(|_| Error::Invalid("a LoRA merge panicked".into()))?;
        let mut missed: Vec<(&String, &Delta)> = self
            .deltas
            .iter()
            .filter(|(name, _)| !applied.contains(*name))
            .flat_map(|(n, ds)| ds.iter().map(move |d| (n, d)))
            .collect();
        missed.sort_by(|a, b| a.0.cmp(b.0));
        match missed.first() {
            None => Ok(()),
            Some((name, delta)) => Err(adapter_error(
                delta.adapter,
                format!(
                    "`{}` targets `{name}`, which the {} does not load as a linear layer's weight",
                    delta.module.key, self.component
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_take_an_optional_scale_after_the_last_colon() {
        let spec: AdapterSpec = "a/b.safetensors:0.5".parse().unwrap();
        assert_eq!((spec.path, spec.scale), (PathBuf::from("a/b.safetensors"), 0.5));
        let spec: AdapterSpec = "folder".parse().unwrap();
        assert_eq!((spec.path, spec.scale), (PathBuf::from("folder"), 1.0));
        let spec: AdapterSpec = "C:/x/y:-1".parse().unwrap();
        assert_eq!((spec.path, spec.scale), (PathBuf::from("C:/x/y"), -1.0));
        // A colon followed by no number belongs to the path.
        let spec: AdapterSpec = "odd:name".parse().unwrap();
        assert_eq!((spec.path, spec.scale), (PathBuf::from("odd:name"), 1.0));
        assert!("".parse::<AdapterSpec>().is_err());
        assert!("x:inf".parse::<AdapterSpec>().unwrap_err().contains("finite"));
    }

    #[test]
    fn keys_are_split_into_component_module_and_part() {
        use AdapterFormat::*;
        let k = "transformer.transformer_blocks.0.attn.to_q.lora_A.weight";
        assert_eq!(
            classify(k, Pipeline).unwrap(),
            (Some("transformer"), "transformer_blocks.0.attn.to_q".into(), Part::A)
        );
        let k = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight";
        assert_eq!(classify(k, Peft).unwrap(), (None, "model.layers.0.self_attn.q_proj".into(), Part::B));
        assert_eq!(classify("language_model.model.norm.alpha", Pipeline).unwrap().2, Part::Alpha);
        let kohya = classify("lora_unet_blocks_0.lora_down.weight", Pipeline).unwrap_err();
        assert!(kohya.contains("kohya"), "{kohya}");
        assert!(classify("unet.down.0.lora_A.weight", Pipeline).unwrap_err().contains("no component"));
        assert!(classify("vocoder.conv_in.lora_A.weight", Pipeline).unwrap_err().contains("vocoder"));
        assert!(classify("x.lora_magnitude_vector", Peft).unwrap_err().contains("DoRA"));
        assert!(classify("x.alpha", Peft).unwrap_err().contains("not a LoRA weight"));
        let named = classify("base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight", Peft);
        assert!(named.unwrap_err().contains("save_pretrained"));
    }

    #[test]
    fn settings_that_a_merge_cannot_reproduce_are_refused() {
        let p = Path::new("adapter_config.json");
        let base = serde_json::json!({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "bias": "none",
                                      "use_dora": false, "modules_to_save": null, "use_qalora": false});
        let settings = LoraSettings::from_peft(&base, p).unwrap();
        assert_eq!(settings.factor("x.q_proj", 4, "k", p).unwrap(), 2.0);
        let rslora = LoraSettings::from_peft(&serde_json::json!({"r": 4, "lora_alpha": 6, "use_rslora": true}), p);
        assert_eq!(rslora.unwrap().factor("x", 4, "k", p).unwrap(), 3.0);
        for (field, value) in [
            ("use_dora", serde_json::json!(true)),
            ("bias", serde_json::json!("all")),
            ("modules_to_save", serde_json::json!(["lm_head"])),
            ("alora_invocation_tokens", serde_json::json!([1, 2])),
            ("peft_type", serde_json::json!("LOHA")),
            ("r", serde_json::json!(0)),
        ] {
            let mut config = base.clone();
            config[field] = value;
            let err = LoraSettings::from_peft(&config, p).unwrap_err().to_string();
            assert!(err.contains(field) && err.contains("adapter_config.json"), "{field}: {err}");
        }
    }

    #[test]
    fn patterns_match_as_peft_does() {
        let p = Path::new("adapter_config.json");
        let patterns = vec![("down_proj".to_string(), 2usize), ("^layers.1.attn.to_q".to_string(), 8)];
        assert_eq!(first_match(&patterns, "model.layers.0.mlp.down_proj", p).unwrap(), Some(2));
        assert_eq!(first_match(&patterns, "model.layers.0.mlp.xdown_proj", p).unwrap(), None);
        assert_eq!(first_match(&patterns, "layers.1.attn.to_q", p).unwrap(), Some(8));
        assert_eq!(first_match(&patterns, "x.layers.1.attn.to_q", p).unwrap(), None);
    }
}
