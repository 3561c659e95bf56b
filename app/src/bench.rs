//! `songloom bench`: GEMM rates at the model's shapes and stage timings, with synthetic weights
//! at the real geometry (no checkpoint needed). Numbers go to docs/BENCHMARKS.md by hand, with the
//! command and the machine.

use std::time::Instant;

use anyhow::{Result, bail};
use clap::Args;
use songloom_engine::config::DitConfig;
use songloom_engine::models::dit::Dit;
use songloom_engine::weights::VarBuilder;
use songloom_engine::{DType, Device, Tensor};

#[derive(Args)]
pub struct BenchArgs {
    /// Synthetic weights: `full` is the real checkpoint's geometry.
    #[arg(long, default_value = "full")]
    synthetic: String,
    #[arg(long, default_value = "auto")]
    device: String,
    /// What to time: gemm, dit-block or all.
    #[arg(long, default_value = "all")]
    what: String,
    /// Timed repetitions per measurement (the best is reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
}

pub fn run(args: BenchArgs) -> Result<()> {
    if args.synthetic != "full" {
        bail!("unknown synthetic geometry `{}` (expected full)", args.synthetic);
    }
    let device = Device::from_name(&args.device)?;
    println!("device: {} ({} threads)", device.name(), rayon_threads());
    let all = args.what == "all";
    if all || args.what == "gemm" {
        gemm(&device, args.repeat)?;
    }
    if all || args.what == "dit-block" {
        dit_block(&device, args.repeat)?;
    }
    if !all && args.what != "gemm" && args.what != "dit-block" {
        bail!("unknown benchmark `{}` (expected gemm, dit-block or all)", args.what);
    }
    Ok(())
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The best of `repeat` runs of `f`, in seconds.
fn best_of(repeat: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?; // warm-up
    let mut best = f64::INFINITY;
    for _ in 0..repeat.max(1) {
        let start = Instant::now();
        f()?;
        best = best.min(start.elapsed().as_secs_f64());
    }
    Ok(best)
}

fn filled(shape: &[usize], value: f32) -> Result<Tensor> {
    let n = shape.iter().product();
    Ok(Tensor::from_f32(shape, (0..n).map(|i| value * ((i % 7) as f32 - 3.0)).collect())?)
}

fn gemm(device: &Device, repeat: usize) -> Result<()> {
    // (label, m, k, n, weight dtype)
    let shapes = [
        ("square 2048^3 (peak reference)", 2048, 2048, 2048, DType::F32),
        ("DiT attention proj 690x2048 -> 2048", 690, 2048, 2048, DType::F32),
        ("DiT ff_in 690x2048 -> 16384", 690, 2048, 16384, DType::F32),
        ("DiT ff_out 690x8192 -> 2048", 690, 8192, 2048, DType::F32),
        ("LM decode q_proj 2x4096 -> 4096 (bf16)", 2, 4096, 4096, DType::BF16),
        ("LM decode gate_proj 2x4096 -> 12288 (bf16)", 2, 4096, 12288, DType::BF16),
        ("LM prefill gate_proj 448x4096 -> 12288 (bf16)", 448, 4096, 12288, DType::BF16),
    ];
    println!("{:<48} {:>10} {:>12} {:>10}", "GEMM", "ms", "GFLOP/s", "GB/s (w)");
    for (label, m, k, n, dtype) in shapes {
        let x = device.upload(filled(&[m, k], 1e-3)?)?;
        let w = device.cast(&device.upload(filled(&[n, k], 1e-3)?)?, dtype)?;
        let secs = best_of(repeat, || {
            device.linear(&x, &w, None)?;
            Ok(())
        })?;
        let flops = 2.0 * (m * k * n) as f64;
        let weight_bytes = (n * k * dtype.size_in_bytes()) as f64;
        println!("{label:<48} {:>10.2} {:>12.1} {:>10.1}", secs * 1e3, flops / secs / 1e9, weight_bytes / secs / 1e9);
    }
    Ok(())
}

/// One DiT block at sequence 690 (a full 689-latent window plus the time token): the difference
/// between a one-block and a two-block model, so the shared input and output projections cancel.
fn dit_block(device: &Device, repeat: usize) -> Result<()> {
    let time = |layers: usize| -> Result<f64> {
        let cfg = DitConfig { num_layers: layers, ..DitConfig::default() };
        let dit = Dit::new(&cfg, &VarBuilder::synthetic(7, device, DType::F32))?;
        let latents = device.upload(filled(&[cfg.in_channels, 689], 0.1)?)?;
        let condition = device.upload(filled(&[689, cfg.condition_dim], 0.1)?)?;
        best_of(repeat, || {
            dit.forward(device, &latents, 0.5, &condition)?;
            Ok(())
        })
    };
    let (one, two) = (time(1)?, time(2)?);
    let block = two - one;
    let cfg = DitConfig::default();
    let inner = cfg.inner_dim() as f64;
    let gemm_flops = 2.0 * 690.0 * inner * (4.0 * inner + 3.0 * cfg.ff_inner_dim as f64);
    let attn_flops = 4.0 * 690.0 * 690.0 * inner;
    println!(
        "DiT block at seq 690: {:.1} ms ({:.1} GFLOP/s over {:.1} GFLOP); 36 blocks ~ {:.1} s per forward",
        block * 1e3,
        (gemm_flops + attn_flops) / block / 1e9,
        (gemm_flops + attn_flops) / 1e9,
        block * 36.0
    );
    Ok(())
}
