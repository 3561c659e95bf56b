//! The memory plan of a song, made before anything is loaded: the weight format of each stage,
//! the KV cache for the requested length, the workspaces, and the predicted peak against a
//! budget. The most exact plan that fits is chosen; when none does, the error names the smallest
//! plan there is. When both halves cannot be resident at once, the plan runs phase by phase: the
//! AR half, its weights freed, then the acoustic half.
//!
//! | tier (GPU) | LM | depth decoder | DiT, vocoder | mode |
//! |---|---|---|---|---|
//! | reference | bf16 | bf16 | f32 (as the precision) | streamed |
//! | 24 GB | q8 | q8 | bf16 | streamed |
//! | 12 GB | q4 | q8 | q8 DiT blocks, bf16 vocoder | streamed |
//! | 8 GB | q4 | q4 | bf16 | phase by phase |
//!
//! Under the bf16 precision each AR format is tried with the DiT's block matrices in bf16, then
//! in q8 (their products are unpacked to bf16 first; the 12 GB tier does not fit otherwise: its
//! bf16 DiT is 4.9 of the 12 GB). Embedding tables are q8 wherever their half is quantized; norms, biases, the sliced `lm_head`
//! and the condition encoder stay bf16.

use crate::config::{ConditionConfig, DepthConfig, DitConfig, LmConfig, VocoderConfig};
use crate::error::{Error, Result};
use crate::precision::{Precision, names};
use crate::tensor::DType;

const GB: u64 = 1_000_000_000;

/// A GPU's own memory beside the model: the CUDA context, cuBLAS handles and their workspaces
/// (measured on the H200).
pub const GPU_RUNTIME_BYTES: u64 = 600_000_000;

/// The song the advice, the benchmarks and `model info` plan for: 60 s (1,500 frames at 25 Hz)
/// after a 300-token prompt.
pub const PLANNED_SONG_PROMPT: usize = 300;
pub const PLANNED_SONG_FRAMES: usize = 1500;

/// The AR half's weight formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArFormats {
    pub lm: DType,
    pub depth: DType,
}

impl ArFormats {
    pub const BF16: ArFormats = ArFormats { lm: DType::BF16, depth: DType::BF16 };
    pub const Q8: ArFormats = ArFormats { lm: DType::Q8, depth: DType::Q8 };
    pub const Q4_LM: ArFormats = ArFormats { lm: DType::Q4, depth: DType::Q8 };
    pub const Q4: ArFormats = ArFormats { lm: DType::Q4, depth: DType::Q4 };

    /// Most exact first.
    pub const ALL: [ArFormats; 4] = [ArFormats::BF16, ArFormats::Q8, ArFormats::Q4_LM, ArFormats::Q4];

    /// The format of a half's embedding table: q8 wherever the half is quantized (a gather reads
    /// one row, so 4 bits would save little and cost accuracy).
    pub fn table(format: DType) -> DType {
        if format.is_quantized() { DType::Q8 } else { format }
    }

    pub fn describe(&self) -> String {
        if self.lm == self.depth {
            format!("{} AR weights", self.lm)
        } else {
            format!("{} LM, {} depth decoder", self.lm, self.depth)
        }
    }
}

/// What `--weights` asks of the AR half; `Auto` lets the plan choose. The CLI, the window and the
/// recipe spell each choice as [`WeightsChoice::name`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightsChoice {
    #[default]
    Auto,
    Bf16,
    EightBit,
    /// 4-bit LM; the depth decoder 8-bit where that fits, else 4-bit.
    FourBit,
    /// 4-bit LM and depth decoder.
    FourBitAll,
}

impl WeightsChoice {
    pub const ALL: [WeightsChoice; 5] = [
        WeightsChoice::Auto,
        WeightsChoice::Bf16,
        WeightsChoice::EightBit,
        WeightsChoice::FourBit,
        WeightsChoice::FourBitAll,
    ];

    /// The choices a quantized copy can be written in.
    pub const QUANTIZED: [WeightsChoice; 3] =
        [WeightsChoice::EightBit, WeightsChoice::FourBit, WeightsChoice::FourBitAll];

    pub fn name(self) -> &'static str {
        match self {
            WeightsChoice::Auto => "auto",
            WeightsChoice::Bf16 => "bf16",
            WeightsChoice::EightBit => "8bit",
            WeightsChoice::FourBit => "4bit",
            WeightsChoice::FourBitAll => "4bit-all",
        }
    }

    /// What the choice means, for help texts.
    pub fn meaning(self) -> &'static str {
        match self {
            WeightsChoice::Auto => "the most exact that fits the budget",
            WeightsChoice::Bf16 => "as the checkpoint holds them",
            WeightsChoice::EightBit => "8-bit language model and depth decoder",
            WeightsChoice::FourBit => "a 4-bit language model, the depth decoder 8-bit where it fits",
            WeightsChoice::FourBitAll => "a 4-bit language model and depth decoder",
        }
    }

    pub fn parse(name: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|w| w.name() == name).ok_or_else(|| {
            Error::Invalid(format!("unknown weights `{name}` (expected {})", names(&Self::ALL.map(Self::name))))
        })
    }

    /// The formats a choice names by itself (`auto` names none).
    pub fn formats(self) -> Option<ArFormats> {
        match self {
            WeightsChoice::Auto => None,
            WeightsChoice::Bf16 => Some(ArFormats::BF16),
            WeightsChoice::EightBit => Some(ArFormats::Q8),
            WeightsChoice::FourBit => Some(ArFormats::Q4_LM),
            WeightsChoice::FourBitAll => Some(ArFormats::Q4),
        }
    }

    /// The choice that names `formats`.
    pub fn of(formats: ArFormats) -> Self {
        match formats.lm {
            DType::Q8 => WeightsChoice::EightBit,
            DType::Q4 if formats.depth == DType::Q4 => WeightsChoice::FourBitAll,
            DType::Q4 => WeightsChoice::FourBit,
            _ => WeightsChoice::Bf16,
        }
    }

    /// A quantized copy's `stored` formats, which this choice must allow: a copy runs in its own.
    pub fn for_copy(self, stored: ArFormats) -> Result<ArFormats> {
        if self.allows(stored) {
            return Ok(stored);
        }
        Err(Error::Invalid(format!(
            "this model is a quantized copy with {}; --weights {} cannot be had from it (use --weights auto or {}, \
             or the bf16 checkpoint)",
            stored.describe(),
            self.name(),
            WeightsChoice::of(stored).name()
        )))
    }

    fn allows(self, formats: ArFormats) -> bool {
        match self {
            WeightsChoice::Auto => true,
            WeightsChoice::Bf16 => formats == ArFormats::BF16,
            WeightsChoice::EightBit => formats == ArFormats::Q8,
            WeightsChoice::FourBit => formats.lm == DType::Q4,
            WeightsChoice::FourBitAll => formats == ArFormats::Q4,
        }
    }
}

impl std::fmt::Display for WeightsChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for WeightsChoice {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// How the two halves share the device once a plan is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Both halves resident; windows run while the AR loop goes on.
    Streamed,
    /// Phase by phase: the AR half, its weights freed, then the acoustic half; first audio comes
    /// later.
    Phased,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Streamed => "streamed",
            Mode::Phased => "phased",
        }
    }
}

/// What `--mode` asks for: a [`Mode`] by name, or `auto` (streamed where it fits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModeChoice {
    #[default]
    Auto,
    Only(Mode),
}

impl ModeChoice {
    pub const ALL: [ModeChoice; 3] =
        [ModeChoice::Auto, ModeChoice::Only(Mode::Streamed), ModeChoice::Only(Mode::Phased)];

    pub fn name(self) -> &'static str {
        match self {
            ModeChoice::Auto => "auto",
            ModeChoice::Only(mode) => mode.name(),
        }
    }

    /// What the choice means, for help texts.
    pub fn meaning(self) -> &'static str {
        match self {
            ModeChoice::Auto => "streamed where it fits",
            ModeChoice::Only(Mode::Streamed) => "both halves resident",
            ModeChoice::Only(Mode::Phased) => "the AR half, then the acoustic half: less memory, first audio later",
        }
    }

    /// The mode asked for; `None` lets the plan choose.
    pub fn mode(self) -> Option<Mode> {
        match self {
            ModeChoice::Auto => None,
            ModeChoice::Only(mode) => Some(mode),
        }
    }

    pub fn parse(name: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name).ok_or_else(|| {
            Error::Invalid(format!("unknown mode `{name}` (expected {})", names(&Self::ALL.map(Self::name))))
        })
    }
}

impl std::fmt::Display for ModeChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ModeChoice {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// The model's geometry, as its configs give it.
#[derive(Debug, Clone, Default)]
pub struct Geometry {
    pub lm: LmConfig,
    /// The `lm_head` rows kept (the sampleable ones).
    pub head_rows: usize,
    pub depth: DepthConfig,
    pub condition: ConditionConfig,
    pub dit: DitConfig,
    pub vocoder: VocoderConfig,
}

/// What a plan is made for: the song's length, the device's fixed costs and the acoustic precision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Workload {
    pub precision: Precision,
    /// Prompt tokens (one CFG row).
    pub prompt: usize,
    /// Frames of the song.
    pub frames: usize,
    /// The device's own memory: the driver's context and libraries (CUDA's measured; none on
    /// the CPU).
    pub runtime_bytes: u64,
    /// The device is a GPU: the language model's embedding table lives in host memory, and the
    /// precision policy decides the DiT's weights.
    pub gpu: bool,
}

impl Workload {
    /// A song of `prompt` tokens and `frames` frames on a GPU under `precision`.
    pub fn on_gpu(precision: Precision, prompt: usize, frames: usize) -> Self {
        Workload { precision, prompt, frames, runtime_bytes: GPU_RUNTIME_BYTES, gpu: true }
    }

    /// The planned 60 s song on a GPU under `precision`.
    pub fn planned_song_on_gpu(precision: Precision) -> Self {
        Self::on_gpu(precision, PLANNED_SONG_PROMPT, PLANNED_SONG_FRAMES)
    }
}

/// Bytes a plan holds on the device, part by part.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PartBytes {
    pub lm: u64,
    pub depth: u64,
    pub condition: u64,
    pub dit: u64,
    pub vocoder: u64,
    pub kv_cache: u64,
    pub ar_workspace: u64,
    pub acoustic_workspace: u64,
    /// The CUDA context, cuBLAS handles and their workspaces.
    pub runtime: u64,
    /// The language model's embedding table when it is in host memory (not part of the peak).
    pub host_table: u64,
}

/// How many songs fit `budget` at most `most`, `parts(k)` being the bytes of `k` songs at once.
fn songs_that_fit(parts: impl Fn(usize) -> PartBytes, mode: Mode, budget: u64, most: usize) -> usize {
    (1..=most).take_while(|&k| parts(k).peak(mode) <= budget).count()
}

impl PartBytes {
    /// The most the parts hold at once: both halves when streamed, the larger one phase by phase.
    fn peak(&self, mode: Mode) -> u64 {
        let ar_half = self.lm + self.depth + self.kv_cache + self.ar_workspace;
        let acoustic_half = self.condition + self.dit + self.vocoder + self.acoustic_workspace;
        self.runtime
            + match mode {
                Mode::Streamed => ar_half + acoustic_half,
                Mode::Phased => ar_half.max(acoustic_half),
            }
    }
}

/// A plan: formats, mode and the predicted peak.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub formats: ArFormats,
    /// The DiT's block matrices: f32, or bf16 under the bf16 precision, or q8 (under the bf16
    /// precision, when a streamed plan does not fit otherwise). The vocoder follows the precision.
    pub acoustic: DType,
    pub mode: Mode,
    pub workload: Workload,
    pub part_bytes: PartBytes,
    /// Predicted bytes on the device at most.
    pub peak_bytes: u64,
    /// The budget the plan was chosen under, if any.
    pub budget_bytes: Option<u64>,
}

/// Bytes in words: GB to one decimal, MB below 1 GB.
pub fn size(bytes: u64) -> String {
    let bytes = bytes as f64;
    let gb = GB as f64;
    if bytes >= 0.95 * gb { format!("{:.1} GB", bytes / gb) } else { format!("{:.0} MB", bytes / 1e6) }
}

/// An estimate in bytes, whole.
fn whole(bytes: f64) -> u64 {
    bytes.round() as u64
}

fn bytes(params: f64, dtype: DType) -> f64 {
    params * dtype.bits_per_weight() / 8.0
}

impl Geometry {
    /// The LM's embedding table's bytes when its layers' matrices are in `format`.
    fn lm_table(&self, format: DType) -> f64 {
        bytes((self.lm.vocab_size * self.lm.hidden_size) as f64, ArFormats::table(format))
    }

    /// The LM's bytes with its layers' matrices in `format`, its table included.
    fn lm(&self, format: DType) -> f64 {
        let c = &self.lm;
        let (h, q, kv, i) = (
            c.hidden_size as f64,
            (c.num_attention_heads * c.head_dim) as f64,
            (c.num_key_value_heads * c.head_dim) as f64,
            c.intermediate_size as f64,
        );
        let layers = c.num_hidden_layers as f64;
        let matrices = layers * (2.0 * h * q + 2.0 * h * kv + 3.0 * h * i);
        let small = layers * (2.0 * h + 2.0 * c.head_dim as f64) + h + self.head_rows as f64 * h;
        bytes(matrices, format) + self.lm_table(format) + bytes(small, DType::BF16)
    }

    fn depth(&self, format: DType) -> f64 {
        let c = &self.depth;
        let (h, i, v) = (c.hidden_size as f64, c.intermediate_size as f64, c.audio_vocab_size as f64);
        let codebooks = (c.num_codebooks - 1) as f64;
        let matrices = c.num_layers as f64 * (4.0 * h * h + 3.0 * h * i) + h * h + codebooks * v * h;
        let small = c.num_layers as f64 * 2.0 * h + h + c.max_position_embeddings as f64 * h;
        bytes(matrices, format) + bytes(codebooks * v * h, ArFormats::table(format)) + bytes(small, DType::BF16)
    }

    fn condition(&self) -> f64 {
        let c = &self.condition;
        bytes((c.out_dim * c.condition_hidden_dim * 3 + c.out_dim + c.num_condition_layers + 1) as f64, DType::BF16)
    }

    /// The DiT with its block matrices in `matrices` (a quantized format leaves the input and
    /// output projections in bf16).
    fn dit(&self, matrices: DType) -> f64 {
        let c = &self.dit;
        let (inner, ff) = (c.inner_dim() as f64, c.ff_inner_dim as f64);
        let concat = (2 * c.in_channels + c.condition_dim) as f64;
        let blocks = c.num_layers as f64 * (4.0 * inner * inner + 3.0 * inner * ff);
        let io = concat * concat
            + concat * inner
            + inner * c.in_channels as f64
            + c.in_channels as f64 * c.in_channels as f64;
        let small =
            c.num_layers as f64 * (4.0 * inner + 2.0 * ff) + (c.fourier_embedding_dim as f64 + 2.0 * inner) * inner;
        let io_dtype = if matrices.is_packed() { DType::BF16 } else { matrices };
        bytes(blocks, matrices) + bytes(io, io_dtype) + bytes(small, DType::F32)
    }

    /// What a DiT with block matrices in `matrices` needs beyond its activations: the bf16 copy a
    /// quantized one's largest matrix is unpacked into for its products, or FP8's encoded
    /// activations (a CFG pair's widest input) and cuBLASLt's 32 MiB workspace.
    fn dit_extra_workspace(&self, matrices: DType) -> f64 {
        let c = &self.dit;
        if matrices.is_quantized() {
            (2 * c.ff_inner_dim * c.inner_dim() * 2) as f64
        } else if matrices == DType::F8E4M3 {
            (2 * 691 * c.ff_inner_dim + (32 << 20)) as f64
        } else {
            0.0
        }
    }

    fn vocoder(&self) -> f64 {
        let c = &self.vocoder;
        let hidden = c.decoder_hidden_dim;
        let mut params = c.decoder_input_dim * c.latent_channels / 2 + hidden * c.decoder_input_dim * 7;
        for (i, &stride) in c.upsampling_ratios.iter().enumerate() {
            let (c_in, c_out) = (hidden >> i, hidden >> (i + 1));
            params += c_in * c_out * 2 * stride + 3 * (c_out * c_out * 8);
        }
        bytes(params as f64 * 1.05, DType::F32)
    }

    /// The LM's KV cache for `positions` (both CFG rows, in the caches' dtype).
    fn kv_cache(&self, positions: usize) -> f64 {
        let c = &self.lm;
        let bytes = crate::models::kv_cache::KV_DTYPE.bits_per_weight() / 8.0;
        (c.num_hidden_layers * 2 * 2 * positions * c.num_key_value_heads * c.head_dim) as f64 * bytes
    }

    /// A window's DiT activations, or the vocoder's last stage: a time span's im2col matrix
    /// (the CUDA backend makes 65536 steps at a time) beside four signals of the whole window.
    /// Measured on the H200 at the real geometry: DiT 0.144 GB a branch, vocoder 1.49 GB before the
    /// im2col was made in spans.
    fn acoustic_workspace(&self) -> f64 {
        let length = 690.0;
        // The two CFG branches go through the DiT as one batch.
        let dit = 2.0 * length * (self.dit.ff_inner_dim as f64 * 3.0 + self.dit.inner_dim() as f64 * 12.0) * 4.0;
        let c = &self.vocoder;
        let samples = length * c.hop_length() as f64;
        let last = (c.decoder_hidden_dim >> c.upsampling_ratios.len()).max(1) as f64;
        let vocoder = (samples.min(65536.0) * last * 7.0 + 4.0 * samples * last) * 4.0;
        dit.max(vocoder)
    }

    /// Prefill activations and a quantized matrix's bf16 copy for products beyond the decode shapes.
    fn ar_workspace(&self, prompt: usize) -> f64 {
        let c = &self.lm;
        let prefill = (2 * prompt * (2 * c.intermediate_size + 4 * c.hidden_size) * 4) as f64;
        prefill + (c.intermediate_size * c.hidden_size * 2) as f64
    }

    /// The plan of `formats` in `mode` for `work`, the DiT's matrices as the precision has them.
    pub fn plan(&self, formats: ArFormats, mode: Mode, work: &Workload) -> Plan {
        self.plan_with_dit(formats, work.precision.dit_matrices(), mode, work)
    }

    /// The plan of `formats` and the DiT's block matrices in `acoustic`, in `mode`, for `work`.
    pub fn plan_with_dit(&self, formats: ArFormats, acoustic: DType, mode: Mode, work: &Workload) -> Plan {
        let host_table = if work.gpu { self.lm_table(formats.lm) } else { 0.0 };
        let part_bytes = PartBytes {
            lm: whole(self.lm(formats.lm) - host_table),
            depth: whole(self.depth(formats.depth)),
            condition: whole(self.condition()),
            dit: whole(self.dit(acoustic)),
            vocoder: whole(self.vocoder()),
            kv_cache: whole(self.kv_cache(work.prompt + work.frames + 1)),
            ar_workspace: whole(self.ar_workspace(work.prompt)),
            acoustic_workspace: whole(self.acoustic_workspace() + self.dit_extra_workspace(acoustic)),
            runtime: work.runtime_bytes,
            host_table: whole(host_table),
        };
        let peak_bytes = part_bytes.peak(mode);
        Plan { formats, acoustic, mode, workload: *work, part_bytes, peak_bytes, budget_bytes: None }
    }

    /// The most exact plan `choice` allows within `budget_bytes` (streamed before phase by phase,
    /// then less exact weights), or an error naming the smallest plan and what it needs. A
    /// quantized copy (`stored`) takes only its own formats.
    pub fn choose(
        &self,
        choice: WeightsChoice,
        mode: Option<Mode>,
        stored: Option<ArFormats>,
        budget_bytes: Option<u64>,
        work: &Workload,
    ) -> Result<Plan> {
        let formats: Vec<ArFormats> = match stored {
            Some(stored) => vec![choice.for_copy(stored)?],
            None => ArFormats::ALL.into_iter().filter(|f| choice.allows(*f)).collect(),
        };
        // Under the bf16 precision each AR format is tried with the DiT in bf16, then in q8 (its
        // products cost 4.1e-3 relative against bf16 at full size, a fifteenth of what q4 weights
        // cost the LM's). FP8 is as small as q8.
        let dits: &[DType] = match work.precision {
            Precision::Bf16 => &[DType::BF16, DType::Q8],
            precision => &[precision.dit_matrices()],
        };
        let candidates: Vec<Plan> = [Mode::Streamed, Mode::Phased]
            .into_iter()
            .filter(|m| mode.is_none_or(|asked| asked == *m))
            .flat_map(|mode| formats.iter().flat_map(move |f| dits.iter().map(move |d| (*f, *d, mode))))
            .map(|(formats, dit, mode)| Plan { budget_bytes, ..self.plan_with_dit(formats, dit, mode, work) })
            .collect();
        if let Some(plan) = candidates.iter().find(|p| budget_bytes.is_none_or(|b| p.peak_bytes <= b)) {
            return Ok(plan.clone());
        }
        let smallest = candidates.iter().min_by_key(|p| p.peak_bytes).expect("a candidate");
        let hint = if work.gpu && work.precision.dit_matrices() == DType::F32 {
            "; --precision bf16 halves the DiT"
        } else {
            ""
        };
        Err(Error::Invalid(format!(
            "no plan fits in {}: the smallest ({}) needs {}{hint}",
            size(budget_bytes.unwrap_or(0)),
            Plan { budget_bytes: None, ..smallest.clone() }.describe(),
            size(smallest.peak_bytes),
        )))
    }
}

impl Plan {
    /// One line: formats, mode, peak.
    pub fn describe(&self) -> String {
        let mode = match self.mode {
            Mode::Streamed => "streamed",
            Mode::Phased => "phase by phase (first audio after the AR half)",
        };
        let budget = self.budget_bytes.map_or(String::new(), |b| format!(" of a {} budget", size(b)));
        format!("{}, {} DiT, {mode}, {} at most{budget}", self.formats.describe(), self.acoustic, size(self.peak_bytes))
    }

    /// The same formats and mode for another song: its peak, checked against the budget.
    pub fn for_song(&self, geometry: &Geometry, prompt: usize, frames: usize) -> Result<Plan> {
        let work = Workload { prompt, frames, ..self.workload };
        let plan = Plan {
            budget_bytes: self.budget_bytes,
            ..geometry.plan_with_dit(self.formats, self.acoustic, self.mode, &work)
        };
        match self.budget_bytes {
            Some(budget) if plan.peak_bytes > budget => Err(Error::Invalid(format!(
                "this song ({frames} frames) needs {} under the loaded plan ({}), over the {} budget: make it shorter or load smaller weights",
                size(plan.peak_bytes),
                self.formats.describe(),
                size(budget)
            ))),
            _ => Ok(plan),
        }
    }

    /// The same formats and mode for several songs at once, `songs` giving each one's prompt
    /// tokens and frames: a KV cache a song, everything else shared but, streamed on a GPU, the
    /// acoustic workspace: each song's windows run on its own thread and stream, and memory freed on
    /// one stream is not reused by another (measured: docs/BENCHMARKS.md, "Several songs at once").
    /// The songs' decode rows and depth frames are a few MB. Over the budget, the error says how
    /// many songs like the longest of them fit. `rendering` more songs have left the AR loop but
    /// still make their audio: streamed on a GPU, each still holds an acoustic workspace.
    pub fn for_batch(&self, geometry: &Geometry, songs: &[(usize, usize)], rendering: usize) -> Result<Plan> {
        let Some(&longest) = songs.iter().max_by_key(|&&(prompt, frames)| prompt + frames) else {
            return Err(Error::Invalid("a batch needs at least one song".into()));
        };
        let kv = |(prompt, frames): (usize, usize)| whole(geometry.kv_cache(prompt + frames + 1));
        let work = Workload { prompt: longest.0, frames: longest.1, ..self.workload };
        let one = geometry.plan_with_dit(self.formats, self.acoustic, self.mode, &work);
        let mut plan = Plan { budget_bytes: self.budget_bytes, ..one.clone() };
        let kv_bytes = songs.iter().map(|&song| kv(song)).sum();
        plan.part_bytes = self.batch_parts(one.part_bytes, songs.len() + rendering, kv_bytes);
        plan.peak_bytes = plan.part_bytes.peak(self.mode);
        match self.budget_bytes {
            Some(budget) if plan.peak_bytes > budget => {
                let parts = |k: usize| self.batch_parts(one.part_bytes, k, k as u64 * kv(longest));
                let fit = songs_that_fit(parts, self.mode, budget, songs.len());
                Err(Error::Invalid(format!(
                    "{} songs at once need {} under the loaded plan ({}), over the {} budget: at most {fit} songs like \
                     the longest of them fit at once",
                    songs.len(),
                    size(plan.peak_bytes),
                    self.formats.describe(),
                    size(budget)
                )))
            }
            _ => Ok(plan),
        }
    }

    /// The parts of one song's plan (`one`) for `songs` songs making audio, whose KV caches take
    /// `kv_bytes`.
    fn batch_parts(&self, one: PartBytes, songs: usize, kv_bytes: u64) -> PartBytes {
        let per_song_acoustic = self.workload.gpu && self.mode == Mode::Streamed;
        let acoustic_workspace =
            if per_song_acoustic { one.acoustic_workspace * songs as u64 } else { one.acoustic_workspace };
        PartBytes { kv_cache: kv_bytes, acoustic_workspace, ..one }
    }

    /// How many songs like the one the plan was made for run at once within its budget, at most
    /// `most` (all of them without a budget).
    pub fn batch_capacity(&self, geometry: &Geometry, most: usize) -> usize {
        let Some(budget) = self.budget_bytes else { return most };
        let kv = whole(geometry.kv_cache(self.workload.prompt + self.workload.frames + 1));
        songs_that_fit(|k| self.batch_parts(self.part_bytes, k, k as u64 * kv), self.mode, budget, most)
    }

    /// The plan part by part, in GB, for the window and `--verbose` output.
    pub fn table(&self) -> String {
        let s = &self.part_bytes;
        let gb = |bytes: u64| bytes as f64 / GB as f64;
        let rows = [
            ("language model", s.lm),
            ("depth decoder", s.depth),
            ("condition encoder", s.condition),
            ("DiT", s.dit),
            ("vocoder", s.vocoder),
            ("KV cache", s.kv_cache),
            ("AR workspace", s.ar_workspace),
            ("acoustic workspace", s.acoustic_workspace),
            ("GPU runtime", s.runtime),
        ];
        let mut lines: Vec<String> = rows.iter().map(|(name, b)| format!("  {name:<20} {:>6.2} GB", gb(*b))).collect();
        if s.host_table > 0 {
            lines.push(format!("  {:<20} {:>6.2} GB in host memory", "LM embedding table", gb(s.host_table)));
        }
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn real() -> Geometry {
        Geometry { head_rows: 16_389, ..Geometry::default() }
    }

    /// Each choice parses its own name, and a bad name's error lists every choice there is.
    #[test]
    fn choices_parse_their_names_and_errors_list_them_all() {
        for w in WeightsChoice::ALL {
            assert_eq!(WeightsChoice::parse(w.name()).unwrap(), w);
            assert_eq!(w.name().parse::<WeightsChoice>().unwrap(), w);
        }
        let err = WeightsChoice::parse("2bit").unwrap_err().to_string();
        assert!(err.contains("`2bit`") && err.contains("auto, bf16, 8bit, 4bit or 4bit-all"), "{err}");
        for m in ModeChoice::ALL {
            assert_eq!(m.name().parse::<ModeChoice>().unwrap(), m);
        }
        let err = ModeChoice::parse("both").unwrap_err().to_string();
        assert!(err.contains("auto, streamed or phased"), "{err}");
        assert_eq!(ModeChoice::parse("phased").unwrap().mode(), Some(Mode::Phased));
    }

    /// A batch holds a KV cache a song beside one copy of everything else (streamed on a GPU, an
    /// acoustic workspace a song too); over the budget it is refused with the number of songs like
    /// its longest that fit, and that many do fit.
    #[test]
    fn a_batch_counts_a_cache_a_song_and_names_how_many_fit() {
        let geometry = real();
        let kv = |p: usize, f: usize| whole(geometry.kv_cache(p + f + 1));
        let songs = [(300, 1500), (120, 750), (300, 1500)];
        for (work, mode) in [
            (Workload::on_gpu(Precision::Bf16, 300, 1500), Mode::Streamed),
            (Workload::on_gpu(Precision::Bf16, 300, 1500), Mode::Phased),
            (Workload { gpu: false, runtime_bytes: 0, ..Workload::on_gpu(Precision::Bf16, 300, 1500) }, Mode::Streamed),
        ] {
            let one = geometry.plan(ArFormats::BF16, mode, &work);
            let batch = Plan { budget_bytes: None, ..one.clone() }.for_batch(&geometry, &songs, 0).unwrap();
            assert_eq!(batch.part_bytes.kv_cache, 2 * kv(300, 1500) + kv(120, 750));
            let workspaces = if work.gpu && mode == Mode::Streamed { 3 } else { 1 };
            assert_eq!(batch.part_bytes.acoustic_workspace, workspaces * one.part_bytes.acoustic_workspace);
            let own_workspace = if workspaces > 1 { one.part_bytes.acoustic_workspace } else { 0 };
            let each = kv(300, 1500) + own_workspace;
            // A budget with room for two long songs and a little more.
            let budget = Plan { budget_bytes: None, ..one.clone() }
                .for_batch(&geometry, &[(300, 1500); 2], 0)
                .unwrap()
                .peak_bytes
                + each / 2;
            let planned = Plan { budget_bytes: Some(budget), ..one };
            let err = planned.for_batch(&geometry, &[(300, 1500); 4], 0).unwrap_err().to_string();
            assert!(err.contains("4 songs at once") && err.contains("at most 2 songs"), "{mode:?}: {err}");
            assert!(planned.for_batch(&geometry, &[(300, 1500); 2], 0).is_ok());
            assert!(planned.for_batch(&geometry, &[(300, 1500); 3], 0).is_err());
            assert_eq!(planned.batch_capacity(&geometry, 8), 2);
            // A song still making its audio holds its workspace (streamed on a GPU), not its cache.
            let unbudgeted = Plan { budget_bytes: None, ..planned.clone() };
            let peak = |rendering| unbudgeted.for_batch(&geometry, &[(300, 1500); 2], rendering).unwrap().peak_bytes;
            assert_eq!(peak(1), peak(0) + own_workspace, "{mode:?}");
            let fits_beside_one = planned.for_batch(&geometry, &[(300, 1500); 2], 1).is_ok();
            assert_eq!(fits_beside_one, own_workspace <= each / 2, "{mode:?}");
        }
    }

    #[test]
    fn the_real_models_sizes_are_its_parameter_counts() {
        let g = real();
        // 8,584,475,648 LM parameters (the checkpoint), less the lm_head rows not kept.
        let lm_params = 8_584_475_648.0 - (200_000.0 - 16_389.0) * 4096.0;
        assert!((g.lm(DType::BF16) / 2.0 / lm_params - 1.0).abs() < 1e-3, "{}", g.lm(DType::BF16) / 2.0);
        assert!((g.depth(DType::BF16) / 2.0 / 646_025_216.0 - 1.0).abs() < 2e-2, "{}", g.depth(DType::BF16) / 2.0);
        assert!((g.dit(DType::F32) / 4.0 / 2.4e9 - 1.0).abs() < 0.05, "{}", g.dit(DType::F32) / 4.0);
    }

    #[test]
    fn a_tight_budget_takes_smaller_weights_then_phases_and_names_the_smallest_plan() {
        let g = real();
        let work = Workload::planned_song_on_gpu(Precision::Bf16);
        let peak = |f, mode| g.plan(f, mode, &work).peak_bytes;
        let choose = |choice, budget: u64| g.choose(choice, None, None, Some(budget), &work);
        let roomy = choose(WeightsChoice::Auto, 80 * GB).unwrap();
        assert_eq!((roomy.formats, roomy.mode), (ArFormats::BF16, Mode::Streamed));
        // Just under bf16's peak: the next most exact streamed plan, the DiT's blocks in q8; under
        // that, q8 AR weights with the bf16 DiT.
        let budget = peak(ArFormats::BF16, Mode::Streamed) - 1;
        let tight = choose(WeightsChoice::Auto, budget).unwrap();
        assert_eq!((tight.formats, tight.acoustic, tight.mode), (ArFormats::BF16, DType::Q8, Mode::Streamed));
        let tighter = choose(WeightsChoice::Auto, tight.peak_bytes - 1).unwrap();
        assert_eq!((tighter.formats, tighter.acoustic, tighter.mode), (ArFormats::Q8, DType::BF16, Mode::Streamed));
        // Under every streamed plan: phase by phase, with the most exact weights that fit.
        let budget = g.plan_with_dit(ArFormats::Q4, DType::Q8, Mode::Streamed, &work).peak_bytes - 1;
        let small = choose(WeightsChoice::Auto, budget).unwrap();
        assert_eq!(small.mode, Mode::Phased, "{}", small.describe());
        assert!(small.peak_bytes <= budget);
        assert!(peak(ArFormats::Q4, Mode::Phased) < peak(ArFormats::BF16, Mode::Phased));
        let err = choose(WeightsChoice::Auto, GB).unwrap_err().to_string();
        assert!(err.contains("no plan fits in 1.0 GB") && err.contains("the smallest"), "{err}");
        // A streamed 4-bit plan over its budget with the bf16 DiT takes the q8 DiT (the 12 GB tier).
        let streamed_q4 = |budget| g.choose(WeightsChoice::FourBit, Some(Mode::Streamed), None, Some(budget), &work);
        let bf16_dit = g.plan(ArFormats::Q4_LM, Mode::Streamed, &work);
        let q8_dit = streamed_q4(bf16_dit.peak_bytes - 1).unwrap();
        assert_eq!((q8_dit.formats, q8_dit.acoustic, q8_dit.mode), (ArFormats::Q4_LM, DType::Q8, Mode::Streamed));
        assert!(
            q8_dit.peak_bytes < bf16_dit.peak_bytes - 2 * GB,
            "{} against {}",
            q8_dit.describe(),
            bf16_dit.describe()
        );
        assert!(q8_dit.describe().contains("q8 DiT"), "{}", q8_dit.describe());
        assert!(q8_dit.for_song(&g, PLANNED_SONG_PROMPT, PLANNED_SONG_FRAMES).is_ok_and(|p| p.acoustic == DType::Q8));
        // Only the bf16 precision quantizes the DiT.
        let reference = Workload { precision: Precision::Reference, ..work };
        let plans = g.choose(WeightsChoice::FourBit, Some(Mode::Streamed), None, None, &reference).unwrap();
        assert_ne!(plans.acoustic, DType::Q8);
        let forced = choose(WeightsChoice::EightBit, 80 * GB).unwrap();
        assert_eq!(forced.formats, ArFormats::Q8);
        assert!(WeightsChoice::parse("2bit").is_err());
        // A quantized copy plans only its own formats, and refuses others by name.
        let copy = g.choose(WeightsChoice::Auto, None, Some(ArFormats::Q4), None, &work).unwrap();
        assert_eq!(copy.formats, ArFormats::Q4);
        let err = g.choose(WeightsChoice::Bf16, None, Some(ArFormats::Q4), None, &work).unwrap_err().to_string();
        assert!(err.contains("quantized copy") && err.contains("--weights bf16"), "{err}");
        // A longer song under the loaded plan is checked against its budget.
        let exact = choose(WeightsChoice::EightBit, peak(ArFormats::Q8, Mode::Streamed)).unwrap();
        assert!(exact.for_song(&g, PLANNED_SONG_PROMPT, PLANNED_SONG_FRAMES).is_ok());
        let err = exact.for_song(&g, PLANNED_SONG_PROMPT, 9000).unwrap_err().to_string();
        assert!(err.contains("over the") && err.contains("budget"), "{err}");
    }
}
