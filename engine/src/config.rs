//! Each component's `config.json`, read with serde. Defaults are the real checkpoint's values
//! (`MiniMaxAI/MiniMax-Music3`, diffusers layout), so a field the file omits means what it means
//! there; a tiny checkpoint overrides them.

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::weights::read_json;

/// transformers' `Qwen3Config`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct LmConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f64,
    pub max_position_embeddings: usize,
    pub tie_word_embeddings: bool,
    /// Older transformers write `rope_theta` at the top level ...
    rope_theta: Option<f64>,
    /// ... newer ones inside `rope_parameters`.
    rope_parameters: Option<RopeParameters>,
}

#[derive(Debug, Clone, Deserialize)]
struct RopeParameters {
    rope_theta: f64,
}

impl Default for LmConfig {
    fn default() -> Self {
        LmConfig {
            vocab_size: 200_000,
            hidden_size: 4096,
            intermediate_size: 12288,
            num_hidden_layers: 36,
            num_attention_heads: 32,
            num_key_value_heads: 8,
            head_dim: 128,
            rms_norm_eps: 1e-6,
            max_position_embeddings: 10240,
            tie_word_embeddings: false,
            rope_theta: None,
            rope_parameters: None,
        }
    }
}

impl LmConfig {
    pub fn rope_theta(&self) -> f64 {
        self.rope_parameters.as_ref().map(|r| r.rope_theta).or(self.rope_theta).unwrap_or(1e6)
    }
}

/// diffusers' `MiniMaxMusic3RVQDepthDecoder`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct DepthConfig {
    pub hidden_size: usize,
    pub num_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub audio_vocab_size: usize,
    pub num_codebooks: usize,
    pub max_position_embeddings: usize,
}

impl Default for DepthConfig {
    fn default() -> Self {
        DepthConfig {
            hidden_size: 4096,
            num_layers: 4,
            num_attention_heads: 16,
            intermediate_size: 6144,
            audio_vocab_size: 1024,
            num_codebooks: 8,
            max_position_embeddings: 16,
        }
    }
}

/// diffusers' `MiniMaxMusic3ConditionEncoder`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct ConditionConfig {
    pub condition_hidden_dim: usize,
    pub num_condition_layers: usize,
    pub out_dim: usize,
    pub input_sampling_rate: usize,
    pub input_hop_length: usize,
    pub output_sampling_rate: usize,
    pub output_hop_length: usize,
}

impl Default for ConditionConfig {
    fn default() -> Self {
        ConditionConfig {
            condition_hidden_dim: 4096,
            num_condition_layers: 8,
            out_dim: 2048,
            input_sampling_rate: 24000,
            input_hop_length: 960,
            output_sampling_rate: 44100,
            output_hop_length: 512,
        }
    }
}

impl ConditionConfig {
    /// AR frames per second (25 for the real checkpoint).
    pub fn frame_rate(&self) -> f64 {
        self.input_sampling_rate as f64 / self.input_hop_length as f64
    }

    /// Latent frames for `frames` AR frames, evaluated left to right in f64 and truncated, as the
    /// reference's `int(frames * out_sr / in_sr * in_hop / out_hop)` does.
    pub fn latent_length(&self, frames: usize) -> usize {
        let l = frames as f64 * self.output_sampling_rate as f64 / self.input_sampling_rate as f64
            * self.input_hop_length as f64
            / self.output_hop_length as f64;
        (l as usize).max(1)
    }
}

/// diffusers' `MiniMaxMusic3Transformer1DModel`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct DitConfig {
    pub in_channels: usize,
    pub condition_dim: usize,
    pub num_layers: usize,
    pub num_attention_heads: usize,
    pub attention_head_dim: usize,
    pub ff_inner_dim: usize,
    pub rotary_dim: usize,
    pub fourier_embedding_dim: usize,
}

impl Default for DitConfig {
    fn default() -> Self {
        DitConfig {
            in_channels: 128,
            condition_dim: 2048,
            num_layers: 36,
            num_attention_heads: 32,
            attention_head_dim: 64,
            ff_inner_dim: 8192,
            rotary_dim: 32,
            fourier_embedding_dim: 256,
        }
    }
}

impl DitConfig {
    pub fn inner_dim(&self) -> usize {
        self.num_attention_heads * self.attention_head_dim
    }
}

/// diffusers' `MiniMaxMusic3Vocoder`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct VocoderConfig {
    pub latent_channels: usize,
    pub decoder_input_dim: usize,
    pub decoder_hidden_dim: usize,
    pub upsampling_ratios: Vec<usize>,
    pub sampling_rate: usize,
}

impl Default for VocoderConfig {
    fn default() -> Self {
        VocoderConfig {
            latent_channels: 128,
            decoder_input_dim: 1024,
            decoder_hidden_dim: 1536,
            upsampling_ratios: vec![8, 8, 4, 2],
            sampling_rate: 44100,
        }
    }
}

impl VocoderConfig {
    /// Waveform samples per latent frame.
    pub fn hop_length(&self) -> usize {
        self.upsampling_ratios.iter().product()
    }
}

/// diffusers' `FlowMatchEulerDiscreteScheduler`, the fields this model's schedule depends on.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct SchedulerConfig {
    pub num_train_timesteps: usize,
    pub shift: f64,
    pub invert_sigmas: bool,
    pub use_dynamic_shifting: bool,
    pub stochastic_sampling: bool,
    pub use_karras_sigmas: bool,
    pub use_exponential_sigmas: bool,
    pub use_beta_sigmas: bool,
    pub shift_terminal: Option<f64>,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            num_train_timesteps: 1,
            shift: 1.0,
            invert_sigmas: true,
            use_dynamic_shifting: false,
            stochastic_sampling: false,
            use_karras_sigmas: false,
            use_exponential_sigmas: false,
            use_beta_sigmas: false,
            shift_terminal: None,
        }
    }
}

/// The reference pipeline's constants (diffusers `encoders.py`, `before_denoise.py`,
/// `denoise.py`, `decoders.py`). The real checkpoint has no file for them; a tiny checkpoint sets
/// the token ids of its small vocabulary in `songloom.json` at the model's root.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct PipelineConstants {
    pub audio_end_id: u32,
    pub audio_cfg_id: u32,
    pub code_offset: u32,
    pub semantic_vocab_size: u32,
    pub max_prompt_tokens: usize,
    pub max_frames: usize,
    pub ar_cfg_scale: f32,
    pub ar_cfg_top_k: usize,
    pub ar_sampling_top_k: usize,
    pub dit_cfg_scale: f32,
    pub chunk_frames: usize,
    pub chunk_hop: usize,
    pub overlap_latents: usize,
    pub crop_left_latents: usize,
    pub crop_right_latents: usize,
    /// Whether sampling the end token ends the song (benchmarks turn it off to run to length).
    pub stop_on_end_token: bool,
}

impl PipelineConstants {
    /// The token ids the language model can sample: the end token and the semantic codes.
    pub fn sampleable_rows(&self) -> std::ops::Range<u32> {
        self.audio_end_id.min(self.code_offset)..self.code_offset + self.semantic_vocab_size
    }
}

impl Default for PipelineConstants {
    fn default() -> Self {
        PipelineConstants {
            audio_end_id: 151_670,
            audio_cfg_id: 151_654,
            code_offset: 151_675,
            semantic_vocab_size: 16_384,
            max_prompt_tokens: 5_000,
            max_frames: 9_000,
            ar_cfg_scale: 1.5,
            ar_cfg_top_k: 50,
            ar_sampling_top_k: 50,
            dit_cfg_scale: 1.7,
            chunk_frames: 200,
            chunk_hop: 100,
            overlap_latents: 172,
            crop_left_latents: 86,
            crop_right_latents: 344 - 86,
            stop_on_end_token: true,
        }
    }
}

/// A config whose values are checked when it is read, so a value out of range is refused at load
/// (naming the field) instead of surfacing later as a crash or a broken file.
pub trait Checked {
    /// The first field out of its range: its name and what is wrong.
    fn check(&self) -> std::result::Result<(), (&'static str, String)>;
}

/// `Err((field, ..))` unless `value` lies in `range`.
fn within<T: PartialOrd + std::fmt::Display>(
    field: &'static str,
    value: T,
    range: std::ops::RangeInclusive<T>,
) -> std::result::Result<(), (&'static str, String)> {
    if range.contains(&value) {
        Ok(())
    } else {
        Err((field, format!("is {value}, outside {}..={}", range.start(), range.end())))
    }
}

/// `Err((field, ..))` unless `value` divides by `by`.
fn multiple(field: &'static str, value: usize, by: usize, of: &str) -> std::result::Result<(), (&'static str, String)> {
    if by > 0 && value.is_multiple_of(by) {
        Ok(())
    } else {
        Err((field, format!("is {value}, not a multiple of {of} ({by})")))
    }
}

/// A size no component of this model comes near (the largest, the LM's vocabulary, is 200000).
const MAX_SIZE: usize = 1 << 24;

impl Checked for LmConfig {
    fn check(&self) -> std::result::Result<(), (&'static str, String)> {
        within("vocab_size", self.vocab_size, 1..=MAX_SIZE)?;
        within("hidden_size", self.hidden_size, 1..=MAX_SIZE)?;
        within("intermediate_size", self.intermediate_size, 1..=MAX_SIZE)?;
        within("num_hidden_layers", self.num_hidden_layers, 1..=1024)?;
        within("num_key_value_heads", self.num_key_value_heads, 1..=1024)?;
        within("num_attention_heads", self.num_attention_heads, 1..=1024)?;
        multiple("num_attention_heads", self.num_attention_heads, self.num_key_value_heads, "num_key_value_heads")?;
        within("head_dim", self.head_dim, 2..=1024)?;
        multiple("head_dim", self.head_dim, 2, "two")?;
        within("max_position_embeddings", self.max_position_embeddings, 1..=MAX_SIZE)?;
        within("rms_norm_eps", self.rms_norm_eps, f64::MIN_POSITIVE..=1.0)?;
        within("rope_theta", self.rope_theta(), 1.0..=1e12)
    }
}

impl Checked for DepthConfig {
    fn check(&self) -> std::result::Result<(), (&'static str, String)> {
        within("hidden_size", self.hidden_size, 1..=MAX_SIZE)?;
        within("num_layers", self.num_layers, 1..=1024)?;
        within("num_attention_heads", self.num_attention_heads, 1..=1024)?;
        multiple("hidden_size", self.hidden_size, self.num_attention_heads, "num_attention_heads")?;
        within("intermediate_size", self.intermediate_size, 1..=MAX_SIZE)?;
        within("audio_vocab_size", self.audio_vocab_size, 1..=MAX_SIZE)?;
        within("num_codebooks", self.num_codebooks, 2..=64)?;
        within("max_position_embeddings", self.max_position_embeddings, self.num_codebooks..=MAX_SIZE)
    }
}

impl Checked for ConditionConfig {
    fn check(&self) -> std::result::Result<(), (&'static str, String)> {
        within("condition_hidden_dim", self.condition_hidden_dim, 1..=MAX_SIZE)?;
        within("num_condition_layers", self.num_condition_layers, 1..=64)?;
        within("out_dim", self.out_dim, 1..=MAX_SIZE)?;
        within("input_sampling_rate", self.input_sampling_rate, 1..=1_000_000)?;
        within("input_hop_length", self.input_hop_length, 1..=1_000_000)?;
        within("output_sampling_rate", self.output_sampling_rate, 1..=1_000_000)?;
        within("output_hop_length", self.output_hop_length, 1..=1_000_000)
    }
}

impl Checked for DitConfig {
    fn check(&self) -> std::result::Result<(), (&'static str, String)> {
        within("in_channels", self.in_channels, 1..=MAX_SIZE)?;
        within("condition_dim", self.condition_dim, 1..=MAX_SIZE)?;
        within("num_layers", self.num_layers, 1..=1024)?;
        within("num_attention_heads", self.num_attention_heads, 1..=1024)?;
        within("attention_head_dim", self.attention_head_dim, 1..=1024)?;
        within("ff_inner_dim", self.ff_inner_dim, 1..=MAX_SIZE)?;
        within("rotary_dim", self.rotary_dim, 0..=self.attention_head_dim)?;
        multiple("rotary_dim", self.rotary_dim, 2, "two")?;
        within("fourier_embedding_dim", self.fourier_embedding_dim, 2..=MAX_SIZE)?;
        multiple("fourier_embedding_dim", self.fourier_embedding_dim, 2, "two")
    }
}

impl Checked for VocoderConfig {
    fn check(&self) -> std::result::Result<(), (&'static str, String)> {
        within("latent_channels", self.latent_channels, 1..=MAX_SIZE)?;
        within("decoder_input_dim", self.decoder_input_dim, 1..=MAX_SIZE)?;
        within("decoder_hidden_dim", self.decoder_hidden_dim, 1..=MAX_SIZE)?;
        // What a WAV file and a sound card take.
        within("sampling_rate", self.sampling_rate, 8_000..=384_000)?;
        if self.upsampling_ratios.is_empty() || self.upsampling_ratios.iter().any(|&r| r == 0 || r > 64) {
            return Err((
                "upsampling_ratios",
                format!("is {:?}: each must be 1..=64, and one at least", self.upsampling_ratios),
            ));
        }
        within("upsampling_ratios", self.hop_length(), 1..=8192)
    }
}

impl Checked for SchedulerConfig {
    fn check(&self) -> std::result::Result<(), (&'static str, String)> {
        within("num_train_timesteps", self.num_train_timesteps, 1..=1_000_000)?;
        within("shift", self.shift, f64::MIN_POSITIVE..=1e6)
    }
}

impl Checked for PipelineConstants {
    fn check(&self) -> std::result::Result<(), (&'static str, String)> {
        within("max_prompt_tokens", self.max_prompt_tokens, 3..=MAX_SIZE)?;
        within("max_frames", self.max_frames, 1..=MAX_SIZE)?;
        within("chunk_frames", self.chunk_frames, 2..=MAX_SIZE)?;
        within("chunk_hop", self.chunk_hop, 1..=self.chunk_frames - 1)?;
        within("semantic_vocab_size", self.semantic_vocab_size, 1..=u32::MAX / 2)?;
        within("ar_sampling_top_k", self.ar_sampling_top_k, 1..=MAX_SIZE)?;
        within("ar_cfg_top_k", self.ar_cfg_top_k, 1..=MAX_SIZE)?;
        within("ar_cfg_scale", self.ar_cfg_scale, 0.0..=100.0)?;
        within("dit_cfg_scale", self.dit_cfg_scale, 0.0..=100.0)
    }
}

/// Reads a component's `dir/file` into `T` and checks its values; the file must exist.
pub fn read_config<T: serde::de::DeserializeOwned + Checked>(dir: &Path, file: &str) -> Result<T> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Err(Error::io(dir, std::io::Error::other("not a folder: a model component is a folder"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Error::MissingComponent(dir.to_path_buf())),
        Err(e) => return Err(Error::io(dir, e)),
    }
    if let Err(e) = std::fs::read_dir(dir) {
        return Err(Error::io(dir, std::io::Error::new(e.kind(), "the component folder cannot be read")));
    }
    let path = dir.join(file);
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Err(Error::io(&path, std::io::Error::other("not a file"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::io(&path, std::io::Error::new(e.kind(), "the component's config file is missing")));
        }
        Err(e) => return Err(Error::io(&path, e)),
    }
    checked(read_json(&path)?, &path)
}

/// Reads an optional `path` into `T` and checks it, or the defaults where it does not exist.
pub fn read_optional<T: serde::de::DeserializeOwned + Default + Checked>(path: &Path) -> Result<T> {
    if path.is_file() { checked(read_json(path)?, path) } else { Ok(T::default()) }
}

fn checked<T: Checked>(config: T, path: &Path) -> Result<T> {
    config.check().map_err(|(field, detail)| Error::BadConfig { path: path.to_path_buf(), field, detail })?;
    Ok(config)
}
