//! Runs one stage of a model directory on given tensors, so anyone can hold a stage against the
//! reference without writing Rust (`songloom stage`). Inputs and outputs are named f32 tensors
//! (token ids and codes as integers).

use std::path::Path;

use crate::device::Device;
use crate::error::{Error, Result};
use crate::model_dir::{ACOUSTIC_DTYPE, ModelDir};
use crate::plan::{ArFormats, WeightsChoice};
use crate::tensor::Tensor;
use crate::weights::Checkpoint;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Condition,
    Dit,
    Vocoder,
    Lm,
    Depth,
}

impl Stage {
    pub const ALL: [Stage; 5] = [Stage::Condition, Stage::Dit, Stage::Vocoder, Stage::Lm, Stage::Depth];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Condition => "condition",
            Stage::Dit => "dit",
            Stage::Vocoder => "vocoder",
            Stage::Lm => "lm",
            Stage::Depth => "depth",
        }
    }

    pub fn parse(name: &str) -> Result<Self> {
        Stage::ALL.into_iter().find(|s| s.name() == name).ok_or_else(|| {
            Error::Invalid(format!("unknown stage `{name}` (expected condition, dit, vocoder, lm or depth)"))
        })
    }
}

/// A named output tensor.
pub type Named = (String, Tensor);

/// Reads a stage's named inputs from a safetensors file.
pub struct StageInputs {
    file: Checkpoint,
}

impl StageInputs {
    pub fn open(path: &Path) -> Result<Self> {
        Ok(StageInputs { file: Checkpoint::open_file(path)? })
    }

    fn tensor(&self, name: &str, rank: usize) -> Result<Tensor> {
        let t = self.file.read(name)?;
        if t.shape().len() != rank {
            return Err(Error::shape(
                "stage input",
                format!("`{name}` has shape {:?}, expected rank {rank}", t.shape()),
            ));
        }
        let values = t.to_f32_vec();
        Tensor::from_f32(t.shape(), values)
    }

    fn ids(&self, name: &str) -> Result<(Vec<usize>, Vec<u32>)> {
        let (shape, values) = self.file.read_integers(name)?;
        let ids = values
            .into_iter()
            .map(|v| u32::try_from(v).map_err(|_| Error::Invalid(format!("`{name}` holds {v}, not a token id"))))
            .collect::<Result<_>>()?;
        Ok((shape, ids))
    }
}

/// The AR half's formats for a stage of `model` under `--weights choice`: a quantized copy runs
/// in its own formats (refusing a choice that does not allow them, as `generate` does), a float
/// checkpoint in bf16 or quantized at load as the choice says.
pub fn stage_formats(model: &ModelDir, choice: WeightsChoice) -> Result<ArFormats> {
    match model.stored_formats()? {
        Some(stored) => choice.for_copy(stored).map_err(|e| Error::Invalid(format!("{}: {e}", model.root().display()))),
        None => Ok(choice.formats().unwrap_or(ArFormats::BF16)),
    }
}

/// Runs `stage` of `model` on `inputs`, the AR stages' matrices in `formats`, and returns its
/// outputs in host memory.
pub fn run_stage(
    stage: Stage,
    model: &ModelDir,
    device: &Device,
    formats: ArFormats,
    inputs: &StageInputs,
) -> Result<Vec<Named>> {
    let up = |t: Tensor| device.upload(t);
    let host = |name: &str, t: &Tensor| -> Result<Named> {
        Ok((name.to_string(), Tensor::from_f32(t.shape(), device.to_host(t)?)?))
    };
    match stage {
        Stage::Condition => {
            let encoder = model.condition_encoder(device)?;
            let out = encoder.forward(device, &up(inputs.tensor("frame_hiddens", 2)?)?)?;
            Ok(vec![host("condition", &out)?])
        }
        Stage::Dit => {
            let dit = model.transformer(device, ACOUSTIC_DTYPE)?;
            let t = inputs.tensor("timestep", 1)?.to_f32_vec();
            let [t] = t.as_slice() else {
                return Err(Error::shape("stage input", "`timestep` must hold one value"));
            };
            let v =
                dit.forward(device, &up(inputs.tensor("latents", 2)?)?, *t, &up(inputs.tensor("condition", 2)?)?)?;
            Ok(vec![host("velocity", &v)?])
        }
        Stage::Vocoder => {
            let vocoder = model.vocoder(device)?;
            let wave = vocoder.forward(device, &up(inputs.tensor("latents", 2)?)?)?;
            Ok(vec![host("waveform", &wave)?])
        }
        Stage::Lm => {
            let (shape, ids) = inputs.ids("input_ids")?;
            let [batch, seq] = shape[..] else {
                return Err(Error::shape("stage input", format!("`input_ids` has shape {shape:?}, expected [2, S]")));
            };
            let lm = model.language_model(device, None, formats.lm)?;
            let mut cache = lm.new_cache(device, batch, seq)?;
            let hidden = lm.forward(device, &lm.embed(device, &ids)?, &mut cache)?;
            Ok(vec![host("last_hidden", &hidden)?])
        }
        Stage::Depth => {
            let (_, codes) = inputs.ids("codes")?;
            let last_hidden = up(inputs.tensor("last_hidden", 2)?)?;
            let lm = model.language_model(device, Some(0..0), formats.lm)?;
            let depth = model.depth_decoder(device, formats.depth)?;
            let (hiddens, logits) = depth_teacher_forced(model, &lm, &depth, device, &last_hidden, &codes)?;
            Ok(vec![host("hiddens", &hiddens)?, host("logits", &logits)?])
        }
    }
}

/// One depth-decoder frame with the codes given: the conditional row's hidden state per codebook
/// step `[codebooks - 1, hidden]` and the heads' logits `[codebooks - 1, batch, audio_vocab]`.
pub fn depth_teacher_forced(
    model: &ModelDir,
    lm: &crate::models::lm::LanguageModel,
    depth: &crate::models::depth::DepthDecoder,
    device: &Device,
    last_hidden: &Tensor,
    codes: &[u32],
) -> Result<(Tensor, Tensor)> {
    let n = depth.config().num_codebooks;
    let batch = last_hidden.shape()[0];
    if codes.len() != n {
        return Err(Error::shape("depth", format!("{} codes given for {n} codebooks", codes.len())));
    }
    let c0 = codes[0] + model.constants.code_offset;
    let c0_embed = device.cat_rows(&vec![&lm.embed(device, &[c0])?; batch])?;
    let mut frame = depth.new_frame(device, batch)?;
    let mut hidden = depth.start_frame(device, &mut frame, last_hidden, &c0_embed)?;
    let (mut hiddens, mut logits) = (Vec::new(), Vec::new());
    for (k, &code) in codes.iter().enumerate().skip(1) {
        hiddens.push(device.slice_rows(&hidden, 0, 1)?);
        logits.push(depth.head_logits(device, k, &hidden)?);
        if k + 1 < n {
            hidden = depth.step(device, &mut frame, k, code)?;
        }
    }
    let hiddens = device.cat_rows(&hiddens.iter().collect::<Vec<_>>())?;
    let vocab = depth.config().audio_vocab_size;
    let logits = device.cat_rows(&logits.iter().collect::<Vec<_>>())?.reshape(&[n - 1, batch, vocab])?;
    Ok((hiddens, logits))
}
