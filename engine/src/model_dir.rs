//! A MiniMax-Music3 model directory in the diffusers layout (`language_model/`,
//! `rvq_depth_decoder/`, `condition_encoder/`, `transformer/`, `vocoder/`, `scheduler/`,
//! `tokenizer/`) and the loading of each stage under the reference dtype policy: bf16 for the
//! language model, depth decoder and condition encoder; f32 for the DiT and vocoder.

use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::config::{self, PipelineConstants};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::lora::Adapters;
use crate::models::{
    condition::ConditionEncoder, depth::DepthDecoder, dit::Dit, lm::LanguageModel, scheduler::FlowMatchEuler,
    vocoder::Vocoder,
};
use crate::plan::{ArFormats, Geometry};
use crate::tensor::DType;
use crate::weights::{Checkpoint, VarBuilder};

/// The dtype each half of the model runs in under the reference policy.
pub const AR_DTYPE: DType = DType::BF16;
pub const ACOUSTIC_DTYPE: DType = DType::F32;

pub struct ModelDir {
    root: PathBuf,
    pub constants: PipelineConstants,
    /// LoRA adapters merged into the language model's, depth decoder's and DiT's weights at load.
    adapters: Adapters,
}

impl ModelDir {
    pub fn open(root: &Path) -> Result<Self> {
        if root.is_file() {
            return Err(Error::Invalid(format!(
                "{} is a file, not a model: give the model's folder (the one holding language_model/, \
                 transformer/ and the others)",
                root.display()
            )));
        }
        if !root.is_dir() {
            return Err(Error::io(
                root,
                std::io::Error::new(std::io::ErrorKind::NotFound, "model directory not found"),
            ));
        }
        let constants = config::read_optional(&root.join("songloom.json"))?;
        Ok(ModelDir { root: root.to_path_buf(), constants, adapters: Adapters::default() })
    }

    /// The model with `adapters` merged into its weights whenever a stage loads, each checked
    /// against the checkpoints now (keys, shapes, float weights), before anything is loaded.
    pub fn with_adapters(mut self, mut adapters: Adapters) -> Result<Self> {
        adapters.bind(&self.root)?;
        self.adapters = adapters;
        Ok(self)
    }

    /// The adapters merged at load (none by default).
    pub fn adapters(&self) -> &Adapters {
        &self.adapters
    }

    /// Builds a stage with `component`'s adapters merged into the weights `build` reads, then
    /// refuses an adapter weight the stage did not read.
    fn with_lora<T>(&self, component: &str, vb: VarBuilder, build: impl FnOnce(&VarBuilder) -> Result<T>) -> Result<T> {
        let lora = self.adapters.for_component(component);
        let stage = build(&vb.with_lora(lora.as_ref()))?;
        if let Some(lora) = &lora {
            lora.finish()?;
        }
        Ok(stage)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn component(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    fn open_component<T: serde::de::DeserializeOwned + config::Checked>(&self, name: &str) -> Result<(T, Checkpoint)> {
        let dir = self.component(name);
        let cfg = config::read_config(&dir, "config.json")?;
        Ok((cfg, Checkpoint::open(&dir)?))
    }

    /// The token ids the language model can sample: the end token and the semantic codes.
    pub fn sampleable_rows(&self) -> Range<u32> {
        self.constants.sampleable_rows()
    }

    /// The language model with `lm_head` over `head_rows` (the sampleable rows when `None`), its
    /// matrices in `format` and its embedding table in host memory when the device is a GPU.
    pub fn language_model(
        &self,
        device: &Device,
        head_rows: Option<Range<u32>>,
        format: DType,
    ) -> Result<LanguageModel> {
        let (cfg, ckpt) = self.open_component::<config::LmConfig>("language_model")?;
        let rows = head_rows.unwrap_or_else(|| self.sampleable_rows());
        let vb = VarBuilder::new(&ckpt, device, AR_DTYPE).with_format(format).with_host_tables(true);
        self.with_lora("language_model", vb, |vb| LanguageModel::new(&cfg, vb, rows))
    }

    /// The depth decoder with its matrices in `format`.
    pub fn depth_decoder(&self, device: &Device, format: DType) -> Result<DepthDecoder> {
        let (cfg, ckpt) = self.open_component::<config::DepthConfig>("rvq_depth_decoder")?;
        let vb = VarBuilder::new(&ckpt, device, AR_DTYPE).with_format(format);
        self.with_lora("rvq_depth_decoder", vb, |vb| DepthDecoder::new(&cfg, vb))
    }

    /// The model's geometry, from its configs (nothing else is read).
    pub fn geometry(&self) -> Result<Geometry> {
        let read = |name: &str| self.component(name);
        let rows = self.sampleable_rows();
        Ok(Geometry {
            lm: config::read_config(&read("language_model"), "config.json")?,
            head_rows: (rows.end - rows.start) as usize,
            depth: config::read_config(&read("rvq_depth_decoder"), "config.json")?,
            condition: config::read_config(&read("condition_encoder"), "config.json")?,
            dit: config::read_config(&read("transformer"), "config.json")?,
            vocoder: config::read_config(&read("vocoder"), "config.json")?,
        })
    }

    /// The AR half's formats when this is a quantized copy (`songloom model quantize`), read from
    /// the first layer's matrices; `None` for a float checkpoint.
    pub fn stored_formats(&self) -> Result<Option<ArFormats>> {
        let lm = Checkpoint::open(&self.component("language_model"))?;
        let depth = Checkpoint::open(&self.component("rvq_depth_decoder"))?;
        let lm = lm.stored_format("model.layers.0.self_attn.q_proj.weight").filter(|f| f.is_quantized());
        let depth = depth.stored_format("layers.0.attn.to_q.weight").filter(|f| f.is_quantized());
        Ok(match (lm, depth) {
            (None, None) => None,
            (lm, depth) => Some(ArFormats { lm: lm.unwrap_or(AR_DTYPE), depth: depth.unwrap_or(AR_DTYPE) }),
        })
    }

    pub fn condition_encoder(&self, device: &Device) -> Result<ConditionEncoder> {
        let (cfg, ckpt) = self.open_component::<config::ConditionConfig>("condition_encoder")?;
        ConditionEncoder::new(&cfg, &VarBuilder::new(&ckpt, device, AR_DTYPE))
    }

    /// The DiT, its block matrices quantized to `format` where that is a quantized format (q8),
    /// otherwise (pass [`ACOUSTIC_DTYPE`]) as the precision policy has them.
    pub fn transformer(&self, device: &Device, format: DType) -> Result<Dit> {
        let (cfg, ckpt) = self.open_component::<config::DitConfig>("transformer")?;
        let vb = VarBuilder::new(&ckpt, device, ACOUSTIC_DTYPE).with_format(format);
        self.with_lora("transformer", vb, |vb| Dit::new(&cfg, vb))
    }

    pub fn vocoder(&self, device: &Device) -> Result<Vocoder> {
        let (cfg, ckpt) = self.open_component::<config::VocoderConfig>("vocoder")?;
        Vocoder::new(&cfg, &VarBuilder::new(&ckpt, device, ACOUSTIC_DTYPE))
    }

    /// What names this model for the songs it makes (a score records it, and an edit of a song from
    /// another model is refused): a hash of every component's config, the tokenizer, and the
    /// acoustic half's checkpoints (their headers and samples of their data). The AR half's weights
    /// are left out so that a quantized copy (`songloom model quantize`) is the same model.
    pub fn identity(&self) -> Result<String> {
        let mut hash = crate::hash::FNV_OFFSET;
        for component in
            ["language_model", "rvq_depth_decoder", "condition_encoder", "transformer", "vocoder", "tokenizer"]
        {
            let dir = self.component(component);
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .map_err(|e| Error::io(&dir, e))?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect();
            files.sort();
            let acoustic = matches!(component, "condition_encoder" | "transformer" | "vocoder");
            for file in files {
                let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let bytes = if name.ends_with(".safetensors") {
                    if !acoustic {
                        continue;
                    }
                    sampled_bytes(&file)?
                } else if name.ends_with(".json") || name.ends_with(".txt") {
                    std::fs::read(&file).map_err(|e| Error::io(&file, e))?
                } else {
                    continue;
                };
                hash = crate::hash::fnv1a_continue(hash, format!("{component}/{name}").bytes().chain(bytes));
            }
        }
        Ok(format!("music3-{hash:016x}"))
    }

    pub fn scheduler(&self, steps: usize) -> Result<FlowMatchEuler> {
        let cfg = config::read_config(&self.component("scheduler"), "scheduler_config.json")?;
        FlowMatchEuler::new(&cfg, steps)
    }
}

/// A checkpoint's size, its header and 4 KiB at nine places of its data: enough to tell two
/// checkpoints apart without reading gigabytes.
fn sampled_bytes(file: &Path) -> Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    const SAMPLE: u64 = 4096;
    let io = |e| Error::io(file, e);
    let mut f = std::fs::File::open(file).map_err(io)?;
    let size = f.metadata().map_err(io)?.len();
    let mut out = size.to_le_bytes().to_vec();
    for i in 0..=8u64 {
        let at = (size.saturating_sub(SAMPLE)) * i / 8;
        f.seek(SeekFrom::Start(at)).map_err(io)?;
        let mut chunk = Vec::new();
        (&mut f).take(SAMPLE).read_to_end(&mut chunk).map_err(io)?;
        out.extend(chunk);
    }
    Ok(out)
}
