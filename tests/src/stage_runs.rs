//! The AR stages run the way the parity tests hold them against their goldens, with the
//! matrices in a given format.

use songloom_engine::model_dir::ModelDir;
use songloom_engine::stage::depth_teacher_forced;
use songloom_engine::{DType, Device, Tensor};

use crate::Golden;

/// The language model's last hidden state after the golden's prefill, then after each of its
/// feedback steps, concatenated; its KV cache in `kv_dtype`.
pub fn lm_run(model: &ModelDir, device: &Device, format: DType, kv_dtype: DType, g: &Golden) -> Vec<f32> {
    let lm = model.language_model(device, None, format).unwrap().with_kv_dtype(kv_dtype);
    let ids = g.ids("input_ids");
    let feedback = g.tensor("feedback");
    let steps = feedback.shape()[0];
    let mut cache = lm.new_cache(device, 2, ids.len() / 2 + steps).unwrap();
    let mut out = lm.forward(device, &lm.embed(device, &ids).unwrap(), &mut cache).unwrap().to_f32_vec();
    let h = feedback.shape()[2];
    let fb = feedback.to_f32_vec();
    for s in 0..steps {
        let step = device.upload(Tensor::from_f32(&[2, h], fb[s * 2 * h..(s + 1) * 2 * h].to_vec()).unwrap()).unwrap();
        out.extend(lm.forward(device, &step, &mut cache).unwrap().to_f32_vec());
    }
    out
}

/// One teacher-forced depth-decoder frame: its hidden states and logits; its KV cache in
/// `kv_dtype`.
pub fn depth_run(
    model: &ModelDir,
    device: &Device,
    format: DType,
    kv_dtype: DType,
    codes: &[u32],
    g: &Golden,
) -> (Vec<f32>, Vec<f32>) {
    let lm = model.language_model(device, Some(0..0), format).unwrap();
    let depth = model.depth_decoder(device, format).unwrap().with_kv_dtype(kv_dtype);
    let last_hidden = device.upload(g.tensor("last_hidden")).unwrap();
    let (h, l) = depth_teacher_forced(model, &lm, &depth, device, &last_hidden, codes).unwrap();
    (h.to_f32_vec(), l.to_f32_vec())
}

/// The DiT's velocity at each of the golden's flow times, its block matrices in `format` where
/// that is quantized (otherwise as the device's precision has them).
pub fn dit_run(model: &ModelDir, device: &Device, format: DType, g: &Golden) -> Vec<f32> {
    let dit = model.transformer(device, format).unwrap();
    let latents = device.upload(g.tensor("latents")).unwrap();
    let condition = device.upload(g.tensor("condition")).unwrap();
    g.values("timesteps")
        .into_iter()
        .flat_map(|t| dit.forward(device, &latents, t, &condition).unwrap().to_f32_vec())
        .collect()
}
