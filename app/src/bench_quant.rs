//! `songloom bench --what quant`: the weight formats' distances to bf16 at the real geometry, with
//! synthetic weights (which have no outlier channels, so real weights quantize worse): each
//! product's relative error (the DiT's at a full window, q8), and the language model's last hidden state over 50 teacher-forced
//! decode steps after a prefill.

use anyhow::Result;
use songloom_engine::config::{DepthConfig, DitConfig, LmConfig, PipelineConstants};
use songloom_engine::models::lm::LanguageModel;
use songloom_engine::pipeline::rng::Rng;
use songloom_engine::weights::VarBuilder;
use songloom_engine::{DType, Device, Tensor};

use crate::output::say;

const FORMATS: [DType; 2] = [DType::Q8, DType::Q4];

/// `||a - b|| / ||b||`.
fn relative_rms(a: &[f32], b: &[f32]) -> f64 {
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        diff += ((x - y) as f64).powi(2);
        norm += (*y as f64).powi(2);
    }
    (diff / norm.max(f64::MIN_POSITIVE)).sqrt()
}

/// Pearson correlation of `a` and `b`.
fn correlation(a: &[f32], b: &[f32]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().map(|&x| x as f64).sum::<f64>() / n, b.iter().map(|&x| x as f64).sum::<f64>() / n);
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        let (dx, dy) = (*x as f64 - ma, *y as f64 - mb);
        sab += dx * dy;
        saa += dx * dx;
        sbb += dy * dy;
    }
    sab / (saa * sbb).sqrt().max(f64::MIN_POSITIVE)
}

pub fn distances(device: &Device) -> Result<()> {
    products(device)?;
    dit_products(device)?;
    teacher_forced(device)
}

/// The DiT's block matrices at a full window (690 rows), q8 against bf16: the 12 GB tier's DiT.
fn dit_products(device: &Device) -> Result<()> {
    let dit = DitConfig::default();
    let (inner, ff) = (dit.inner_dim(), dit.ff_inner_dim);
    let shapes = [("DiT to_q", inner, inner), ("DiT ff_in", 2 * ff, inner), ("DiT ff_out", inner, ff)];
    say!("{:<20} {:>14}", "product (690 rows)", "q8 rel RMS");
    for (k, (name, rows, cols)) in shapes.into_iter().enumerate() {
        let w = device.fill_uniform(&[rows, cols], DType::BF16, 200 + k as u64, 0.0, 1.0 / (cols as f32).sqrt())?;
        let x =
            device.upload(Tensor::from_f32(&[690, cols], Rng::derive(6, "quant-x", k as u64).normals(690 * cols))?)?;
        let reference = device.to_host(&device.linear(&x, &w, None)?)?;
        let y = device.to_host(&device.linear(&x, &device.cast(&w, DType::Q8)?, None)?)?;
        say!("{name:<20} {:>14.3e}", relative_rms(&y, &reference));
    }
    Ok(())
}

/// Each matrix shape of the AR half: a decode product (batch 2) against its bf16 form.
fn products(device: &Device) -> Result<()> {
    let (lm, depth) = (LmConfig::default(), DepthConfig::default());
    let (h, i, q, kv) = (
        lm.hidden_size,
        lm.intermediate_size,
        lm.num_attention_heads * lm.head_dim,
        lm.num_key_value_heads * lm.head_dim,
    );
    let (dh, di) = (depth.hidden_size, depth.intermediate_size);
    let shapes = [
        ("LM q_proj", q, h),
        ("LM k_proj", kv, h),
        ("LM o_proj", h, q),
        ("LM gate_proj", i, h),
        ("LM down_proj", h, i),
        ("depth to_q", dh, dh),
        ("depth gate_proj", di, dh),
        ("depth down_proj", dh, di),
        ("depth audio head", depth.audio_vocab_size, dh),
    ];
    say!("{:<20} {:>14} {:>14}", "product (2 rows)", "q8 rel RMS", "q4 rel RMS");
    for (k, (name, rows, cols)) in shapes.into_iter().enumerate() {
        let w = device.fill_uniform(&[rows, cols], DType::BF16, 100 + k as u64, 0.0, 1.0 / (cols as f32).sqrt())?;
        let x = device.upload(Tensor::from_f32(&[2, cols], Rng::derive(5, "quant-x", k as u64).normals(2 * cols))?)?;
        let reference = device.to_host(&device.linear(&x, &w, None)?)?;
        let mut errors = Vec::new();
        for format in FORMATS {
            let y = device.to_host(&device.linear(&x, &device.cast(&w, format)?, None)?)?;
            errors.push(relative_rms(&y, &reference));
        }
        say!("{name:<20} {:>14.3e} {:>14.3e}", errors[0], errors[1]);
    }
    Ok(())
}

/// The language model's last hidden state over a prefill of 2 x 300 tokens and 50 decode steps
/// fed the same embeddings (teacher forced), each format against bf16.
fn teacher_forced(device: &Device) -> Result<()> {
    let steps = 50;
    let ids: Vec<u32> = (0..600u32).map(|i| (i * 7919) % 150_000).collect();
    let run = |format: DType| -> Result<Vec<Vec<f32>>> {
        let vb = VarBuilder::synthetic(7, device, DType::BF16).with_format(format).with_host_tables(true);
        let rows = PipelineConstants::default().sampleable_rows();
        let lm = LanguageModel::new(&LmConfig::default(), &vb, rows)?;
        let mut cache = lm.new_cache(device, 2, 300 + steps + 1)?;
        let mut hiddens = vec![device.to_host(&lm.forward(device, &lm.embed(device, &ids)?, &mut cache)?)?];
        for s in 0..steps {
            let token = 151_675 + (s as u32 * 131) % 16_384;
            let embed = lm.embed(device, &[token, token])?;
            hiddens.push(device.to_host(&lm.forward(device, &embed, &mut cache)?)?);
        }
        Ok(hiddens)
    };
    let reference = run(DType::BF16)?;
    for format in FORMATS {
        let ours = run(format)?;
        let errors: Vec<f64> = ours.iter().zip(&reference).map(|(a, b)| relative_rms(a, b)).collect();
        let correlations: Vec<f64> = ours.iter().zip(&reference).map(|(a, b)| correlation(a, b)).collect();
        let worst = errors.iter().copied().fold(0.0, f64::max);
        let lowest = correlations.iter().copied().fold(1.0, f64::min);
        say!(
            "LM last hidden, {format} against bf16: prefill rel RMS {:.3e} (correlation {:.6}); over {steps} teacher-forced steps worst rel RMS {worst:.3e}, lowest correlation {lowest:.6}",
            errors[0],
            correlations[0]
        );
    }
    Ok(())
}
