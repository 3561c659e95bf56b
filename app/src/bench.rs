//! `songloom bench`: GEMM rates at the model's shapes and stage timings, with synthetic weights
//! at the real geometry made on the device (no checkpoint needed). Numbers go to
//! docs/BENCHMARKS.md by hand, with the command and the machine.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use songloom_engine::config::{DitConfig, PipelineConstants, VocoderConfig};
use songloom_engine::device::{Conv1dParams, ConvTranspose1dParams};
use songloom_engine::models::depth::DepthFrame;
use songloom_engine::models::dit::Dit;
use songloom_engine::models::vocoder::Vocoder;
use songloom_engine::pipeline::ar::FrameParts;
use songloom_engine::pipeline::rng::Rng;
use songloom_engine::pipeline::{Cancel, Event, MemoryRequest, Observer, Pipeline, Request, RngChooser};
use songloom_engine::plan::{PLANNED_SONG_FRAMES, PLANNED_SONG_PROMPT};
use songloom_engine::prompt::PromptIds;
use songloom_engine::weights::VarBuilder;
use songloom_engine::{DType, Device, DeviceChoice, DeviceKind, DeviceOptions, Precision, Tensor};

use crate::engine_args::EngineArgs;
use crate::estimate::{decode_step_bytes, depth_frame_bytes, dit_flops};
use crate::output::say;

#[derive(Args)]
pub struct BenchArgs {
    /// Synthetic weights: `full` is the real checkpoint's geometry.
    #[arg(long, default_value = "full")]
    synthetic: String,
    /// gemm, conv (the vocoder's convolutions), launch (what one small operation costs the host and
    /// the device), dit-block, dit-ops
    /// (each op of a DiT block timed alone), stages, song, batch (several
    /// songs at once, `--songs`), precision (the
    /// fast policies' distance to exact f32 at full size, GPU only), quant (the weight formats'
    /// distances to bf16 at full size, GPU only) or all (all = gemm and dit-block, what a CPU can do).
    #[arg(long, default_value = "all")]
    what: String,
    /// Timed repetitions per measurement.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Length of the song for `--what song`, in seconds.
    #[arg(long, default_value_t = 60.0)]
    duration: f64,
    /// Flow-matching steps per window for `--what song`.
    #[arg(long, default_value_t = 30)]
    steps: usize,
    /// For `--what batch`: the numbers of songs made at once, each batch timed in turn.
    #[arg(long, default_value = "1,2,4,8", value_delimiter = ',')]
    songs: Vec<usize>,
    // The device, and for `stages` and `song` the weights, budget and mode, as `generate` takes them.
    #[command(flatten)]
    pub engine: EngineArgs,
}

pub fn run(args: BenchArgs) -> Result<()> {
    if args.synthetic != "full" {
        bail!("unknown synthetic geometry `{}` (expected full)", args.synthetic);
    }
    let memory = args.engine.memory_request();
    let device = args.engine.open_device()?;
    say!("device: {} ({}; precision {})", device.kind(), device.description(), args.engine.precision);
    match args.what.as_str() {
        "all" => {
            gemm(&device, args.repeat)?;
            dit_block(&device, args.repeat)
        }
        "gemm" => gemm(&device, args.repeat),
        "launch" => launch_cost(&device),
        "conv" => convolutions(&device, args.repeat),
        "dit-block" => dit_block(&device, args.repeat),
        "dit-ops" => dit_ops(&device, args.repeat),
        "stages" => stages(device, memory, args.repeat),
        "song" => song(device, memory, args.duration, args.steps),
        "batch" => batch(device, memory, args.duration, args.steps, &args.songs),
        "edits" => edits(device, memory, args.duration, args.steps),
        "quant" => {
            if device.kind() != DeviceKind::Cuda {
                bail!("`--what quant` measures the quantized formats at full size: give --device cuda");
            }
            crate::bench_quant::distances(&device)
        }
        "precision" => {
            if device.kind() != DeviceKind::Cuda {
                bail!("`--what precision` compares the GPU's precision policies: give --device cuda");
            }
            drop(device);
            precision_distances()
        }
        other => {
            bail!(
                "unknown benchmark `{other}` (expected gemm, conv, dit-block, dit-ops, stages, song, batch, edits, precision, quant or all)"
            )
        }
    }
}

/// The median of `repeat` timed runs of `f` after one warm-up, in seconds; the device is
/// synchronized around each run so the clock sees the work.
fn median_of(device: &Device, repeat: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    device.synchronize()?;
    let mut times = Vec::new();
    for _ in 0..repeat.max(1) {
        let start = Instant::now();
        f()?;
        device.synchronize()?;
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// The median time of `runs` single runs of `f`, each issued on an idle device and waited for,
/// and the median time the host took to issue one, in seconds. Two warm-up runs go first: a
/// recorded step runs op by op once, then is recorded.
fn latency(device: &Device, runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<(f64, f64)> {
    f()?;
    f()?;
    device.synchronize()?;
    let (mut waited, mut issued) = (Vec::new(), Vec::new());
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        f()?;
        issued.push(start.elapsed().as_secs_f64());
        device.synchronize()?;
        waited.push(start.elapsed().as_secs_f64());
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Ok((median(waited), median(issued)))
}

/// Runs `f` once inside the GPU profiler's recording range when `SONGLOOM_PROFILE` names
/// `stage` (for `ncu --profile-from-start off songloom bench ...`).
fn profiled(device: &Device, stage: &str, f: impl FnOnce() -> Result<()>) -> Result<()> {
    if std::env::var("SONGLOOM_PROFILE").ok().as_deref() != Some(stage) {
        return Ok(());
    }
    device.synchronize()?;
    device.profiler(true)?;
    f()?;
    device.synchronize()?;
    device.profiler(false)?;
    Ok(())
}

/// What one small operation costs: the host's time to issue it and the time to completion, over
/// a long run of element-wise adds on a decode-sized activation.
fn launch_cost(device: &Device) -> Result<()> {
    let x = filled(device, &[2, 4096], 1e-3)?;
    let count = 2000;
    let mut issued = 0.0;
    let total = median_of(device, 3, || {
        let start = Instant::now();
        let mut y = x.clone();
        for _ in 0..count {
            y = device.add(&y, &x)?;
        }
        issued = start.elapsed().as_secs_f64();
        Ok(())
    })?;
    say!(
        "small op (add of [2, 4096]): issued in {:.2} us, done in {:.2} us each over {count}",
        issued / count as f64 * 1e6,
        total / count as f64 * 1e6
    );
    Ok(())
}

/// The device's copy rate: a 1 GiB f32 buffer scaled into another (read once, written once), the
/// ceiling a weight-streaming product can approach.
fn copy_ceiling(device: &Device) -> Result<()> {
    let n = 1 << 28;
    let x = device.fill_uniform(&[n], DType::F32, 1, 0.0, 1.0)?;
    let secs = median_of(device, 5, || {
        device.scale(&x, 1.0)?;
        Ok(())
    })?;
    say!("device copy (1 GiB read + 1 GiB written): {:.0} GB/s", 2.0 * (n * 4) as f64 / secs / 1e9);
    Ok(())
}

fn filled(device: &Device, shape: &[usize], value: f32) -> Result<Tensor> {
    let n = shape.iter().product();
    Ok(device.upload(Tensor::from_f32(shape, (0..n).map(|i| value * ((i % 7) as f32 - 3.0)).collect())?)?)
}

/// Bytes of weights a decode product cycles through in `gemm`: past the largest GPU cache (the
/// H200's 60 MB L2) several times over.
const DECODE_BYTES_PAST_CACHES: f64 = 512e6;

fn gemm(device: &Device, repeat: usize) -> Result<()> {
    // (label, m, k, n, weight dtype); `None`: a DiT matrix as the precision policy keeps it
    // (`product_weight`: f32, bf16, or f16 where wgpu's products run on the matrix units).
    let shapes = [
        ("square 2048^3 (peak reference)", 2048, 2048, 2048, Some(DType::F32)),
        ("DiT attention proj 690x2048 -> 2048", 690, 2048, 2048, None),
        ("DiT ff_in 690x2048 -> 16384", 690, 2048, 16384, None),
        ("DiT ff_out 690x8192 -> 2048", 690, 8192, 2048, None),
        // A CFG pair, as a denoising step runs them.
        ("DiT pair attention proj 1380x2048 -> 2048", 1380, 2048, 2048, None),
        ("DiT pair ff_in 1380x2048 -> 16384", 1380, 2048, 16384, None),
        ("DiT pair ff_out 1380x8192 -> 2048", 1380, 8192, 2048, None),
        ("LM decode q_proj 2x4096 -> 4096 (bf16)", 2, 4096, 4096, Some(DType::BF16)),
        ("LM decode gate_proj 2x4096 -> 12288 (bf16)", 2, 4096, 12288, Some(DType::BF16)),
        ("LM prefill gate_proj 448x4096 -> 12288 (bf16)", 448, 4096, 12288, Some(DType::BF16)),
        ("LM decode down_proj 2x12288 -> 4096 (bf16)", 2, 12288, 4096, Some(DType::BF16)),
        ("LM decode q_proj 2x4096 -> 4096 (q8)", 2, 4096, 4096, Some(DType::Q8)),
        ("LM decode gate_proj 2x4096 -> 12288 (q8)", 2, 4096, 12288, Some(DType::Q8)),
        ("LM decode down_proj 2x12288 -> 4096 (q8)", 2, 12288, 4096, Some(DType::Q8)),
        ("LM decode q_proj 2x4096 -> 4096 (q4)", 2, 4096, 4096, Some(DType::Q4)),
        ("LM decode gate_proj 2x4096 -> 12288 (q4)", 2, 4096, 12288, Some(DType::Q4)),
        ("LM decode down_proj 2x12288 -> 4096 (q4)", 2, 12288, 4096, Some(DType::Q4)),
        ("LM prefill gate_proj 448x4096 -> 12288 (q8)", 448, 4096, 12288, Some(DType::Q8)),
        ("depth 14x1024 -> 4096 (q8)", 14, 1024, 4096, Some(DType::Q8)),
    ];
    launch_cost(device)?;
    copy_ceiling(device)?;
    say!("{:<48} {:>10} {:>12} {:>10}", "GEMM", "ms", "GFLOP/s", "GB/s (w)");
    for (label, m, k, n, dtype) in shapes {
        let x = filled(device, &[m, k], 1e-3)?;
        let weight = || -> Result<Tensor> {
            // Made on the device: the copies of a decode product's weight run to 512 MB.
            let w = device.fill_uniform(&[n, k], DType::F32, 7, 0.0, 1e-3)?;
            Ok(match dtype {
                Some(dtype) => device.cast(&w, dtype)?,
                None => device.product_weight(w)?,
            })
        };
        let w = weight()?;
        let weight_bytes = (n * k) as f64 * w.dtype().bits_per_weight() / 8.0;
        // Decode products are timed back to back, as a decode step runs them, each against its
        // own copy of the weight, the copies together larger than any cache (a decode step
        // never finds its weights there).
        // The larger products are timed five to a measurement, so the host's wait for the device
        // is a fifth of what it would be.
        let (calls, copies) =
            if m <= 8 { (20, (DECODE_BYTES_PAST_CACHES / weight_bytes).ceil() as usize) } else { (5, 1) };
        let mut weights = vec![w];
        while weights.len() < copies.min(calls) {
            weights.push(weight()?);
        }
        let secs = median_of(device, repeat, || {
            for call in 0..calls {
                device.linear(&x, &weights[call % weights.len()], None)?;
            }
            Ok(())
        })? / calls as f64;
        let flops = 2.0 * (m * k * n) as f64;
        let label = if dtype.is_none() { format!("{label} ({})", weights[0].dtype()) } else { label.to_string() };
        say!("{label:<48} {:>10.3} {:>12.1} {:>10.1}", secs * 1e3, flops / secs / 1e9, weight_bytes / secs / 1e9);
    }
    // The DiT's ff_in for a CFG pair with its bias and GLU, as a block runs it, and without
    // each of them.
    let (m, k, n) = (1380, 2048, 16384);
    let x = filled(device, &[m, k], 1e-3)?;
    let w = device.product_weight(device.fill_uniform(&[n, k], DType::F32, 7, 0.0, 1e-3)?)?;
    let bias = filled(device, &[n], 1e-2)?;
    let calls = 5;
    for (what, glu, bias) in [("bias", false, Some(&bias)), ("GLU", true, None), ("bias + GLU", true, Some(&bias))] {
        let secs = median_of(device, repeat, || {
            for _ in 0..calls {
                if glu {
                    device.linear_glu(&x, &w, bias)?;
                } else {
                    device.linear(&x, &w, bias)?;
                }
            }
            Ok(())
        })? / calls as f64;
        let label = format!("DiT pair ff_in + {what} {m}x{k} -> {n} ({})", w.dtype());
        say!("{label:<48} {:>10.3} {:>12.1}", secs * 1e3, 2.0 * (m * k * n) as f64 / secs / 1e9);
    }
    Ok(())
}

/// The vocoder's convolutions at its shapes: a residual unit's (kernel 7, dilation 3) and an
/// upsampling one (stride 4, kernel 8), each over a stretch of samples.
fn convolutions(device: &Device, repeat: usize) -> Result<()> {
    say!("{:<56} {:>10} {:>12}", "convolution", "ms", "GFLOP/s");
    // (label, c_in, c_out, kernel, input length, dilation or stride, padding, transposed)
    let shapes = [
        ("residual 192 -> 192, kernel 7, dilation 3, 2048 samples", 192, 192, 7, 2048, 3, 9, false),
        ("upsampling 384 -> 192, kernel 8, stride 4, 512 -> 2048", 384, 192, 8, 512, 4, 2, true),
    ];
    for (label, c_in, c_out, kernel, length, step, padding, transposed) in shapes {
        let x = device.fill_uniform(&[c_in, length], DType::F32, 1, 0.0, 0.01)?;
        let (secs, t_out) = if transposed {
            let w = device.fill_uniform(&[c_in, c_out, kernel], DType::F32, 2, 0.0, 0.01)?;
            let params = ConvTranspose1dParams::new(&x, &w, step, padding)?;
            let secs = median_of(device, repeat, || Ok(device.conv_transpose1d(&x, &w, None, &params).map(drop)?))?;
            (secs, params.t_out())
        } else {
            let w = device.fill_uniform(&[c_out, c_in, kernel], DType::F32, 2, 0.0, 0.01)?;
            let params = Conv1dParams::new(&x, &w, padding, step)?;
            let secs = median_of(device, repeat, || Ok(device.conv1d(&x, &w, None, &params).map(drop)?))?;
            (secs, params.t_out())
        };
        // A transposed convolution's products: each input sample meets every tap once.
        let macs = if transposed { c_in * c_out * kernel * length } else { c_in * c_out * kernel * t_out };
        say!("{label:<56} {:>10.3} {:>12.1}", secs * 1e3, 2.0 * macs as f64 / secs / 1e9);
    }
    Ok(())
}

/// One DiT block at sequence 690 (a full 689-latent window plus the time token): the difference
/// between a two-block and a one-block model, so the shared input and output projections cancel.
fn dit_block(device: &Device, repeat: usize) -> Result<()> {
    let time = |layers: usize| -> Result<f64> {
        let cfg = DitConfig { num_layers: layers, ..DitConfig::default() };
        let dit = Dit::new(&cfg, &VarBuilder::synthetic(7, device, DType::F32))?;
        let latents = filled(device, &[cfg.in_channels, 689], 0.1)?;
        let condition = filled(device, &[689, cfg.condition_dim], 0.1)?;
        median_of(device, repeat, || {
            dit.forward(device, &latents, 0.5, &condition)?;
            Ok(())
        })
    };
    let (one, two) = (time(1)?, time(2)?);
    let block = two - one;
    let flops = dit_flops(690.0) / 36.0;
    say!(
        "DiT block at seq 690: {:.2} ms ({:.1} GFLOP/s over {:.1} GFLOP); 36 blocks ~ {:.3} s per forward",
        block * 1e3,
        flops / block / 1e9,
        flops / 1e9,
        block * 36.0
    );
    Ok(())
}

/// One op of a DiT block, run on its inputs.
type BlockOp<'a> = dyn Fn() -> songloom_engine::Result<Tensor> + 'a;

/// Each op of one DiT block at sequence 690 timed alone, for one window and for a CFG pair (two
/// windows, as a step runs them), in the order the block runs them, with its matrices as the
/// precision policy keeps them: where a forward's time goes.
fn dit_ops(device: &Device, repeat: usize) -> Result<()> {
    let cfg = DitConfig::default();
    let (seq, inner, ff) = (690, cfg.inner_dim(), cfg.ff_inner_dim);
    let block_format = device.precision().dit_matrices();
    let matrix = |rows: usize, cols: usize| -> Result<Tensor> {
        let w = filled(device, &[rows, cols], 1e-3)?;
        Ok(if block_format.is_packed() { device.cast(&w, block_format)? } else { device.product_weight(w)? })
    };
    let [q_w, k_w, v_w, out_w] =
        [matrix(inner, inner)?, matrix(inner, inner)?, matrix(inner, inner)?, matrix(inner, inner)?];
    let (ff_in, ff_in_b) = (matrix(2 * ff, inner)?, filled(device, &[2 * ff], 0.01)?);
    let (ff_out, ff_out_b) = (matrix(inner, ff)?, filled(device, &[inner], 0.01)?);
    let (norm_w, norm_b) = (filled(device, &[inner], 0.1)?, filled(device, &[inner], 0.01)?);
    for windows in [1, 2] {
        let rows = windows * seq;
        let x = filled(device, &[rows, inner], 0.1)?;
        let (rotary, shape) = (
            songloom_engine::models::dit::rotary(&cfg, seq),
            songloom_engine::models::dit::attention_shape(&cfg, seq, windows),
        );
        let n = device.layer_norm(&x, &norm_w, &norm_b, 1e-5)?;
        let [q, k, v] = device.linear3(&n, None, [&q_w, &k_w, &v_w])?;
        let glu = device.linear_glu(&n, &ff_in, Some(&ff_in_b))?;
        let product = |k: usize, n: usize| 2.0 * (rows * k * n) as f64;
        // (label, how many a block runs, its FLOPs, the op)
        let ops: Vec<(&str, usize, f64, Box<BlockOp>)> = vec![
            ("layer norm", 2, 0.0, Box::new(|| device.layer_norm(&x, &norm_w, &norm_b, 1e-5))),
            (
                "q, k, v products",
                1,
                3.0 * product(inner, inner),
                Box::new(|| Ok(device.linear3(&n, None, [&q_w, &k_w, &v_w])?.into_iter().next().expect("three"))),
            ),
            (
                "attention (rotary in it)",
                1,
                4.0 * (windows * seq * seq * inner) as f64,
                Box::new(|| device.attention_rotated(&q, &k, &v, shape, rotary)),
            ),
            ("attention out product", 1, product(inner, inner), Box::new(|| device.linear(&q, &out_w, None))),
            ("residual add", 2, 0.0, Box::new(|| device.add(&x, &q))),
            (
                "ff_in product and GLU",
                1,
                product(inner, 2 * ff),
                Box::new(|| device.linear_glu(&n, &ff_in, Some(&ff_in_b))),
            ),
            ("ff_out product", 1, product(ff, inner), Box::new(|| device.linear(&glu, &ff_out, Some(&ff_out_b)))),
        ];
        let mut times = Vec::new();
        for (label, count, flops, op) in &ops {
            let secs = median_of(device, repeat, || {
                op()?;
                Ok(())
            })?;
            times.push((*label, *count as f64 * secs, *flops));
        }
        let block: f64 = times.iter().map(|t| t.1).sum();
        let flops: f64 = times.iter().map(|t| t.2).sum();
        say!(
            "one DiT block at seq 690 for {windows} window(s), each op alone ({} matrices): {:.3} ms, {:.1} TFLOP/s",
            q_w.dtype(),
            block * 1e3,
            flops / block / 1e12
        );
        for (label, secs, flops) in times {
            let rate = if flops > 0.0 { format!("{:>7.1} TFLOP/s", flops / secs / 1e12) } else { String::new() };
            say!("  {label:<24} {:>8.3} ms {:>5.1} % {rate}", secs * 1e3, 100.0 * secs / block);
        }
    }
    if let Some(how) = songloom_engine::cuda::fp8::scaling() {
        say!("FP8 products: {how}");
    }
    Ok(())
}

fn bench_constants() -> PipelineConstants {
    PipelineConstants { stop_on_end_token: false, ..PipelineConstants::default() }
}

/// The pipeline with synthetic weights under `plan`, saying how long they took to make and which
/// part took what: a quantized or f16 matrix is made on the device and passes through the host,
/// which a lease pays for before every stage or song it times.
fn synthetic_pipeline(device: Device, plan: &songloom_engine::plan::Plan) -> Result<Pipeline> {
    use songloom_engine::pipeline::{Half, Stage};
    let start = Instant::now();
    // Each half's parts, in the order its loader reports them done.
    let parts = |half: Half| match half {
        Half::Ar => ["language model", "depth decoder", ""],
        Half::Acoustic => ["condition encoder", "DiT", "vocoder"],
    };
    let times = std::sync::Mutex::new((Instant::now(), Vec::<(&str, f64)>::new()));
    let events = |event: Event| {
        if let Event::Stage { stage: Stage::Load { half }, done, .. } = event {
            let mut times = times.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            if done > 0 {
                let seconds = (now - times.0).as_secs_f64();
                times.1.push((parts(half)[done - 1], seconds));
            }
            times.0 = now;
        }
    };
    let pipeline = Pipeline::synthetic_planned(device, 7, bench_constants(), plan, &events)?;
    pipeline.device.synchronize()?;
    let parts: Vec<String> = times
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .1
        .into_iter()
        .map(|(part, seconds)| format!("{part} {seconds:.1} s"))
        .collect();
    say!(
        "synthetic full-size weights made on the device in {:.1} s ({})",
        start.elapsed().as_secs_f64(),
        parts.join(", ")
    );
    Ok(pipeline)
}

/// Each stage of the full-size model once, with synthetic weights.
fn stages(device: Device, memory: MemoryRequest, repeat: usize) -> Result<()> {
    let plan = Pipeline::synthetic_plan(&device, memory, PLANNED_SONG_PROMPT, PLANNED_SONG_FRAMES)?;
    say!("plan: {}", plan.describe());
    let pipeline = synthetic_pipeline(device, &plan)?;
    let device = &pipeline.device;
    report_memory(device, "after loading");
    let (ar, acoustic) = pipeline.stages()?;
    let (lm, depth, dit, vocoder) = (&ar.lm, &ar.depth, &acoustic.dit, &acoustic.vocoder);
    let formats = pipeline.formats();
    let cfg = lm.config();

    // LM decode step, batch 2, after a 300-token prefill.
    let prompt_len = PLANNED_SONG_PROMPT;
    // A planned song's cache: a recorded step covers the whole cache, so its size is part of what
    // is measured. It holds each variant's warm-up, timed and profiled steps.
    let mut cache = lm.new_cache(device, 2, PLANNED_SONG_PROMPT + PLANNED_SONG_FRAMES + 1)?;
    let ids: Vec<u32> = (0..2 * prompt_len as u32).map(|i| (i * 7919) % 150_000).collect();
    let prefill = Instant::now();
    let mut hidden = workspace(device, plan.budget_bytes, "LM prefill 2x300", || {
        Ok(lm.forward(device, &lm.embed(device, &ids)?, &mut cache)?)
    })?;
    device.synchronize()?;
    let prefill_s = prefill.elapsed().as_secs_f64();
    let feedback = device.cat_rows(&[&lm.embed(device, &[151_700])?, &lm.embed(device, &[151_700])?])?;
    let steps = 50; // per timed run; the cache holds the warm-up run too
    let mut issued = 0.0;
    let per_step = median_of(device, 1, || {
        let start = Instant::now();
        for _ in 0..steps {
            hidden = lm.forward(device, &feedback, &mut cache)?;
            lm.logits(device, &hidden)?;
        }
        issued = start.elapsed().as_secs_f64() / steps as f64;
        Ok(())
    })? / steps as f64;
    profiled(device, "decode", || {
        hidden = lm.forward(device, &feedback, &mut cache)?;
        lm.logits(device, &hidden)?;
        Ok(())
    })?;
    let head_rows = lm.head_rows().len();
    let weight_bytes = decode_step_bytes(cfg, head_rows, formats.lm);
    say!(
        "LM prefill 2x{prompt_len}: {:.1} ms; decode step (batch 2, lm_head over {head_rows} rows): {:.3} ms, {:.0} GB/s of {} weights ({:.2} GB; floor at 4.3 TB/s {:.3} ms)",
        prefill_s * 1e3,
        per_step * 1e3,
        weight_bytes / per_step / 1e9,
        formats.lm,
        weight_bytes / 1e9,
        weight_bytes / 4.3e12 * 1e3
    );
    say!("  the host issued a decode step's work in {:.3} ms", issued * 1e3);
    // The AR loop waits for each step's sampled codes, so a step's cost in a song is its latency:
    // issued on an idle device and waited for.
    let step_of = |hidden: Tensor| -> Result<()> {
        lm.logits(device, &hidden)?;
        Ok(())
    };
    let (step_direct, step_direct_issued) = latency(device, 30, || {
        let hidden = lm.forward(device, &feedback, &mut cache)?;
        step_of(hidden)
    })?;
    let (step_recorded, step_recorded_issued) = latency(device, 30, || {
        let hidden = lm.decode(device, &feedback, &mut cache)?;
        step_of(hidden)
    })?;
    profiled(device, "decode-recorded", || {
        let hidden = lm.decode(device, &feedback, &mut cache)?;
        step_of(hidden)
    })?;
    say!(
        "decode step waited for: {:.3} ms op by op (the host issued it in {:.3} ms); {}: {:.3} ms ({:.2}x; the host issued it in {:.3} ms)",
        step_direct * 1e3,
        step_direct_issued * 1e3,
        cache.step_mode(),
        step_recorded * 1e3,
        step_recorded / step_direct,
        step_recorded_issued * 1e3
    );

    // Depth decoder, one frame: start + 6 steps + 7 heads.
    let lm_hidden = hidden.clone();
    let c0 = device.cat_rows(&[&lm.embed(device, &[151_700])?, &lm.embed(device, &[151_700])?])?;
    let frame_of = |f: &mut DepthFrame| -> Result<()> {
        let mut h = depth.start_frame(device, f, &lm_hidden, &c0)?;
        for k in 1..8 {
            depth.head_logits(device, k, &h)?;
            if k < 7 {
                h = depth.step(device, f, k, 3)?;
            }
        }
        Ok(())
    };
    let mut direct = depth.new_frame(device, 2)?.op_by_op();
    workspace(device, plan.budget_bytes, "depth frame", || frame_of(&mut direct))?;
    let (frame, direct_issued) = latency(device, repeat.max(20), || frame_of(&mut direct))?;
    let depth_bytes = depth_frame_bytes(depth.config(), formats.depth);
    say!(
        "depth frame (7 codebooks, batch 2, {} weights): {:.3} ms, {:.0} GB/s of {:.2} GB read; the host issued it in {:.3} ms",
        formats.depth,
        frame * 1e3,
        depth_bytes / frame / 1e9,
        depth_bytes / 1e9,
        direct_issued * 1e3
    );
    profiled(device, "depth", || frame_of(&mut direct))?;
    let mut recorded = depth.new_frame(device, 2)?;
    let (frame_recorded, issued) = latency(device, repeat.max(20), || frame_of(&mut recorded))?;
    say!(
        "depth frame, {}: {:.3} ms ({:.2}x op by op); the host issued it in {:.3} ms",
        recorded.mode(),
        frame_recorded * 1e3,
        frame_recorded / frame,
        issued * 1e3
    );
    profiled(device, "depth-recorded", || frame_of(&mut recorded))?;

    // DiT, CFG pair at a full window.
    let latents = filled(device, &[128, 689], 0.1)?;
    let condition = filled(device, &[689, 2048], 0.1)?;
    let zeros = device.upload(Tensor::zeros(&[689, 2048]))?;
    workspace(device, plan.budget_bytes, "DiT forward pair", || {
        let [velocity, _] = dit.forward_cfg(device, &latents, 0.5, &condition, &zeros)?;
        Ok(velocity)
    })?;
    workspace(device, plan.budget_bytes, "vocoder window", || Ok(vocoder.forward(device, &latents)?))?;
    let one_by_one = median_of(device, repeat, || {
        dit.forward(device, &latents, 0.5, &condition)?;
        dit.forward(device, &latents, 0.5, &zeros)?;
        Ok(())
    })?;
    let pair = median_of(device, repeat, || {
        dit.forward_cfg(device, &latents, 0.5, &condition, &zeros)?;
        Ok(())
    })?;
    profiled(device, "dit", || {
        dit.forward_cfg(device, &latents, 0.5, &condition, &zeros)?;
        Ok(())
    })?;
    let flops = 2.0 * dit_flops(690.0);
    for (how, secs) in [("one batch of two", pair), ("one forward after the other", one_by_one)] {
        say!(
            "DiT forward pair at seq 690 (CFG), {how}: {:.2} ms, {:.1} TFLOP/s ({:.2} TFLOP)",
            secs * 1e3,
            flops / secs / 1e12,
            flops / 1e12
        );
    }

    let voc = median_of(device, repeat, || {
        vocoder.forward(device, &latents)?;
        Ok(())
    })?;
    say!("vocoder window (689 latents -> 352768 stereo samples): {:.2} ms", voc * 1e3);
    report_memory(device, "after the stages");
    Ok(())
}

/// Runs `f` and reports the most memory it held above what was in use before (the allocator's
/// account: its peak is reset by setting the budget again).
fn workspace<T>(device: &Device, budget_bytes: Option<u64>, what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let before = device.memory().map(|m| m.in_use);
    device.set_memory_limit(budget_bytes)?;
    let out = f()?;
    device.synchronize()?;
    if let (Some(before), Some(after)) = (before, device.memory()) {
        say!(
            "workspace of the {what}: {:.3} GB above the {:.2} GB in use",
            after.peak.saturating_sub(before) as f64 / 1e9,
            before as f64 / 1e9
        );
    }
    Ok(out)
}

/// The allocator's account: in use now and the peak since the budget was set.
fn report_memory(device: &Device, when: &str) {
    if let Some(m) = device.memory() {
        say!(
            "memory {when}: {:.2} GB in use, peak {:.2} GB (the pool's account); {:.2} of {:.2} GB free on the device",
            m.in_use as f64 / 1e9,
            m.peak as f64 / 1e9,
            m.free as f64 / 1e9,
            m.total as f64 / 1e9
        );
    }
}

/// The fast precision policies against exact f32 at the real geometry, where the tiny model's
/// parity tests cannot reach (its heads are 16 wide; the tensor-core attention takes 64): one DiT
/// block and the whole DiT (36 blocks) at sequence 690, and one vocoder window, on noise inputs
/// with the same synthetic weights under each policy; fp8 also against bf16. The distance is the
/// tests' (`songloom_tests::distance`): the largest difference over the largest reference
/// magnitude. Synthetic weights are uniform, without the outlier channels trained ones have, so
/// FP8's distances here are a floor for real weights'.
fn precision_distances() -> Result<()> {
    let mut rng = Rng::derive(11, "precision-bench", 0);
    let (latents, condition) = (rng.normals(128 * 689), rng.normals(689 * 2048));
    let mut runs: Vec<PrecisionRun> = Vec::new();
    for precision in Precision::ALL {
        let name = precision.name();
        let device = match Device::open(
            DeviceChoice::Kind(DeviceKind::Cuda),
            DeviceOptions { precision, ..DeviceOptions::default() },
        ) {
            Ok(device) => device,
            Err(e) if precision == Precision::Fp8 => {
                say!("{name}: {e}");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let vb = VarBuilder::synthetic(7, &device, DType::F32);
        let latents = device.upload(Tensor::from_f32(&[128, 689], latents.clone())?)?;
        let condition = device.upload(Tensor::from_f32(&[689, 2048], condition.clone())?)?;
        let velocity = |layers: usize| -> Result<Vec<f32>> {
            let cfg = DitConfig { num_layers: layers, ..DitConfig::default() };
            Ok(device.to_host(&Dit::new(&cfg, &vb)?.forward(&device, &latents, 0.5, &condition)?)?)
        };
        let (block, whole) = (velocity(1)?, velocity(DitConfig::default().num_layers)?);
        let waveform = device.to_host(&Vocoder::new(&VocoderConfig::default(), &vb)?.forward(&device, &latents)?)?;
        runs.push((name, block, whole, waveform));
    }
    let Some(((_, block, whole, waveform), others)) = runs.split_first() else { return Ok(()) };
    for (name, b, v, w) in others {
        say!(
            "{name} against exact f32, full size: one DiT block's velocity rel {:.3e}, the whole DiT's {:.3e}, \
             vocoder waveform rel {:.3e}",
            relative_distance(b, block),
            relative_distance(v, whole),
            relative_distance(w, waveform)
        );
    }
    let find = |name: &str| others.iter().find(|run| run.0 == name);
    if let (Some(fp8), Some(bf16)) = (find("fp8"), find("bf16")) {
        say!(
            "fp8 against bf16, full size: one DiT block's velocity rel {:.3e}, the whole DiT's {:.3e}",
            relative_distance(&fp8.1, &bf16.1),
            relative_distance(&fp8.2, &bf16.2)
        );
    }
    Ok(())
}

/// A policy's name, one DiT block's velocity, the whole DiT's velocity and the vocoder's waveform.
type PrecisionRun = (&'static str, Vec<f32>, Vec<f32>, Vec<f32>);

/// The largest difference over the largest reference magnitude.
fn relative_distance(ours: &[f32], reference: &[f32]) -> f32 {
    let scale = reference.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(f32::MIN_POSITIVE);
    ours.iter().zip(reference).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max) / scale
}

/// A whole song, streamed, with the end token disabled so it runs to its length.
fn song(device: Device, memory: MemoryRequest, duration: f64, steps: usize) -> Result<()> {
    let frames = (duration * songloom_engine::config::ConditionConfig::default().frame_rate()) as usize;
    let plan = Pipeline::synthetic_plan(&device, memory, 300, frames)?;
    say!("plan: {}\n{}", plan.describe(), plan.table());
    let pipeline = synthetic_pipeline(device, &plan)?;
    report_memory(&pipeline.device, "after loading");
    let prompt = synthetic_prompt(&pipeline.constants, 0);
    let req = Request {
        description: String::new(),
        lyrics: String::new(),
        duration_s: duration,
        seed: 1,
        steps,
        guidance: None,
    };
    let events = |_: Event| {};
    // The AR loop alone, to set its frames inside the song against: the frames past the first 30
    // timed, which leaves out the prefill and the steps' recording.
    let ar_alone = |frames: usize| -> Result<(f64, FrameParts)> {
        let start = Instant::now();
        let observer = Observer { events: &events, cancel: &Cancel::default() };
        let (_, run) = pipeline.frames_and_run(&prompt, frames, &mut RngChooser { seed: 1 }, observer)?;
        Ok((start.elapsed().as_secs_f64(), run.parts))
    };
    let alone_frames = 200.min(frames.saturating_sub(30)).max(1);
    let ((long_s, long_parts), (short_s, short_parts)) = (ar_alone(30 + alone_frames)?, ar_alone(30)?);
    let ar_frame_alone_s = (long_s - short_s) / alone_frames as f64;
    let alone_ms = {
        let (long, short) = (parts_s(&long_parts), parts_s(&short_parts));
        std::array::from_fn::<f64, 4, _>(|i| (long[i] - short[i]) / alone_frames as f64 * 1e3)
    };
    let stats = pipeline.generate_ids(
        &prompt,
        &req,
        Instant::now(),
        Observer { events: &events, cancel: &Cancel::default() },
    )?;
    let seconds = stats.samples as f64 / stats.sample_rate as f64;
    say!(
        "song: {seconds:.2} s of audio ({} frames, {} windows, {steps} steps) in {:.2} s = {:.2}x real time; first audio after {:.2} s; AR loop {:.2} s ({:.1} frames/s), acoustic busy {:.2} s",
        stats.frames,
        stats.windows,
        stats.total_s,
        seconds / stats.total_s,
        stats.time_to_first_audio_s.unwrap_or(f64::NAN),
        stats.ar_s,
        stats.frames as f64 / stats.ar_s,
        stats.acoustic_s
    );
    let ar_frame_s = stats.ar_s / stats.frames as f64;
    say!(
        "where the time went: an AR frame took {:.2} ms in the song and {:.2} ms alone ({:.2}x); the AR thread waited for the device {:.2} s of its {:.2} s (its host work {:.0} %); the acoustic half was busy {:.2} s; both halves ran at once for {:.2} s ({:.0} % of the song)",
        ar_frame_s * 1e3,
        ar_frame_alone_s * 1e3,
        ar_frame_s / ar_frame_alone_s,
        stats.ar_device_wait_s,
        stats.ar_s,
        100.0 * (1.0 - stats.ar_device_wait_s / stats.ar_s),
        stats.acoustic_s,
        stats.overlap_s,
        100.0 * stats.overlap_s / stats.total_s
    );
    let frames = stats.frames.max(1) as f64;
    let issuing_s = stats.ar_s - stats.ar_device_wait_s - stats.ar_sampling_s - stats.ar_handing_on_s;
    say!(
        "the AR thread's host work a frame: issuing the device's work {:.2} ms, drawing the codes {:.2} ms, handing the frame on {:.2} ms",
        issuing_s / frames * 1e3,
        stats.ar_sampling_s / frames * 1e3,
        stats.ar_handing_on_s / frames * 1e3
    );
    let in_song_ms =
        [stats.ar_semantic_s, stats.ar_depth_s, stats.ar_states_s, stats.ar_feed_s].map(|s| s / frames * 1e3);
    say!(
        "an AR frame's parts in the song (alone), ms: logits, shortlist and semantic draw {:.2} ({:.2}); depth decoder's codes {:.2} ({:.2}); hidden states read back and handed on {:.2} ({:.2}); fed back and the decode step issued {:.2} ({:.2})",
        in_song_ms[0],
        alone_ms[0],
        in_song_ms[1],
        alone_ms[1],
        in_song_ms[2],
        alone_ms[2],
        in_song_ms[3],
        alone_ms[3]
    );
    report_memory(&pipeline.device, "after the song");
    report_kernels();
    Ok(())
}

/// A loop's frame parts in seconds: semantic draw, depth decoder, hidden states, feeding back.
fn parts_s(p: &FrameParts) -> [f64; 4] {
    [p.semantic_s, p.depth_s, p.states_s, p.feed_s]
}

/// A song's codes (a frame each) and interleaved audio.
type Made = (Vec<Vec<u32>>, Vec<f32>);

/// For each count of `songs`, that many songs of `duration` made at once, streamed, with the end
/// token disabled: the batch's time and songs an hour, each song's first audio, the AR frame inside
/// the batch (every song's frame is one step of the batch), and the DiT's work over the acoustic
/// half's busy time (the vocoder's and the condition encoder's time counted in: a lower bound).
fn batch(device: Device, memory: MemoryRequest, duration: f64, steps: usize, songs: &[usize]) -> Result<()> {
    use songloom_engine::pipeline::{BatchSong, Stats, no_arrivals};
    use std::sync::{Arc, Mutex};

    let frames = (duration * songloom_engine::config::ConditionConfig::default().frame_rate()) as usize;
    let plan = Pipeline::synthetic_plan(&device, memory, 300, frames)?;
    say!("plan: {}", plan.describe());
    let pipeline = synthetic_pipeline(device, &plan)?;
    report_memory(&pipeline.device, "after loading");
    say!("songs like these that fit the plan's budget at once: {}", pipeline.batch_capacity(64));
    let ceiling = product_ceiling(&pipeline.device)?;
    if let Some((tflop_s, format)) = ceiling {
        say!(
            "the ceiling the DiT is held against: a large {format} product (8192x4096 -> 4096) at {tflop_s:.1} TFLOP/s"
        );
    }
    let mut one_song_s = None;
    // The first song (seed 1, the same prompt) in every batch: its codes and audio against its
    // run in the first batch timed, to show a song in a batch is the song alone.
    let mut first_song: Option<Made> = None;
    for &n in songs {
        let made: Arc<Mutex<Made>> = Arc::default();
        let kept = made.clone();
        let mut first_events: Option<songloom_engine::pipeline::EventSink> = Some(Arc::new(move |event| {
            let mut kept = kept.lock().expect("not poisoned");
            match event {
                Event::Audio { samples, .. } => kept.1.extend(samples),
                Event::Score(score) => kept.0 = score.codes.frames.clone(),
                _ => {}
            }
        }));
        let outcomes: Vec<Mutex<Option<songloom_engine::Result<Stats>>>> = (0..n).map(|_| Mutex::new(None)).collect();
        let tally_before = pipeline.acoustic_tally();
        let started = Instant::now();
        let batch: Vec<BatchSong> = outcomes
            .iter()
            .enumerate()
            .map(|(k, slot)| BatchSong {
                req: Request {
                    description: String::new(),
                    lyrics: String::new(),
                    duration_s: duration,
                    seed: k as u64 + 1,
                    steps,
                    guidance: None,
                },
                prompt: Some(synthetic_prompt(&pipeline.constants, k as u32)),
                events: first_events.take().unwrap_or_else(|| Arc::new(|_| {})),
                cancel: Cancel::default(),
                started,
                done: Box::new(move |outcome| *slot.lock().expect("not poisoned") = Some(outcome)),
            })
            .collect();
        pipeline.generate_batch(batch, &no_arrivals);
        let total_s = started.elapsed().as_secs_f64();
        let stats: Vec<Stats> = outcomes
            .into_iter()
            .map(|slot| slot.into_inner().expect("not poisoned").unwrap_or(Err(songloom_engine::Error::Cancelled)))
            .collect::<songloom_engine::Result<_>>()?;
        let first_audio: Vec<String> =
            stats.iter().map(|s| format!("{:.2}", s.time_to_first_audio_s.unwrap_or(f64::NAN))).collect();
        let ar_frame_ms = stats.iter().map(|s| s.ar_s / s.frames as f64).sum::<f64>() / n as f64 * 1e3;
        let windows: usize = stats.iter().map(|s| s.windows).sum();
        // The acoustic thread's busy time serves every song at once; a song's own busy spans
        // overlap the others'.
        let tally = pipeline.acoustic_tally();
        let busy_s = tally.busy_s - tally_before.busy_s;
        let passes = tally.passes - tally_before.passes;
        let windows_a_pass = (tally.windows_stepped - tally_before.windows_stepped) as f64 / passes.max(1) as f64;
        let dit_tflops = windows as f64 * steps as f64 * 2.0 * dit_flops(690.0) / busy_s / 1e12;
        let one = *one_song_s.get_or_insert(total_s);
        say!(
            "{n} song(s) of {duration:.0} s at once: {total_s:.2} s ({:.2}x one song's), {:.0} songs an hour; first audio [{}] s; AR frame {ar_frame_ms:.2} ms; acoustic busy {busy_s:.2} s for {windows} windows ({passes} DiT passes of {windows_a_pass:.2} windows on average), DiT at {dit_tflops:.1} TFLOP/s over it{}",
            total_s / one,
            n as f64 * 3600.0 / total_s,
            first_audio.join(", "),
            ceiling.map_or(String::new(), |(tflop_s, _)| format!(
                ", {:.0} % of the ceiling",
                100.0 * dit_tflops / tflop_s
            )),
        );
        report_memory(&pipeline.device, &format!("after {n} song(s)"));
        let made = std::mem::take(&mut *made.lock().expect("not poisoned"));
        match &first_song {
            None => first_song = Some(made),
            Some((codes, audio)) => {
                let same = codes.iter().zip(&made.0).take_while(|(a, b)| a == b).count();
                let distance = if audio.len() == made.1.len() {
                    format!("{:.2e}", relative_distance(&made.1, audio))
                } else {
                    format!("n/a ({} against {} samples)", made.1.len(), audio.len())
                };
                say!(
                    "song 1 in the batch of {n} against its run in the first batch: {same} of {} frames' codes the same before the first difference, bit-identical audio {}, relative distance {distance}",
                    codes.len(),
                    made.1 == *audio
                );
            }
        }
    }
    report_kernels();
    Ok(())
}

/// On a GPU, the rate a large product reaches in the precision's product format (the DiT's
/// matrices' form under bf16), and that format: what the DiT's rate inside a song is held against.
fn product_ceiling(device: &Device) -> Result<Option<(f64, DType)>> {
    if device.kind() == DeviceKind::Cpu {
        return Ok(None);
    }
    let (m, k, n) = (8192, 4096, 4096);
    let x = device.fill_uniform(&[m, k], DType::F32, 1, -0.01, 0.01)?;
    let w = device.product_weight(device.fill_uniform(&[n, k], DType::F32, 2, -0.01, 0.01)?)?;
    let secs = median_of(device, 5, || {
        device.linear(&x, &w, None)?;
        Ok(())
    })?;
    Ok(Some((2.0 * (m * k * n) as f64 / secs / 1e12, w.dtype())))
}

/// A 300-token prompt of synthetic ids (synthetic weights have no tokenizer), its unconditional
/// twin as the real one is made; `variant` changes its second half (new lyrics).
fn synthetic_prompt(constants: &PipelineConstants, variant: u32) -> PromptIds {
    let ids: Vec<u32> = (0..300u32).map(|i| (i * 7919 + if i >= 150 { variant } else { 0 }) % 150_000).collect();
    let mut uncond = ids.clone();
    let n = uncond.len();
    uncond[1..n - 2].fill(constants.audio_cfg_id);
    PromptIds { text: String::new(), cond: ids, uncond }
}

/// A song of `duration`, then each edit of it timed beside it: what an edit costs against making
/// the song again.
fn edits(device: Device, memory: MemoryRequest, duration: f64, steps: usize) -> Result<()> {
    use songloom_engine::pipeline::edit::{Edit, Original};
    use songloom_engine::pipeline::score::Score;
    use std::sync::{Arc, Mutex};

    let frames = (duration * songloom_engine::config::ConditionConfig::default().frame_rate()) as usize;
    let plan = Pipeline::synthetic_plan(&device, memory, 300, frames + 250)?;
    say!("plan: {}", plan.describe());
    let pipeline = synthetic_pipeline(device, &plan)?;
    let prompt = synthetic_prompt(&pipeline.constants, 0);
    let req = Request {
        description: String::new(),
        lyrics: "[verse]\none\ntwo\nthree\nfour".into(),
        duration_s: duration,
        seed: 1,
        steps,
        guidance: None,
    };
    let audio: Mutex<Vec<f32>> = Mutex::new(Vec::new());
    let score: Mutex<Option<Arc<Score>>> = Mutex::new(None);
    let collect = |e: Event| match e {
        Event::Audio { samples, .. } => audio.lock().expect("not poisoned").extend(samples),
        Event::Score(s) => *score.lock().expect("not poisoned") = Some(s),
        _ => {}
    };
    let cancel = Cancel::default();
    let stats = pipeline.generate_ids(&prompt, &req, Instant::now(), Observer { events: &collect, cancel: &cancel })?;
    let seconds = stats.samples as f64 / stats.sample_rate as f64;
    say!(
        "song: {seconds:.2} s ({} frames, {} windows) in {:.2} s (AR {:.2} s, acoustic busy {:.2} s)",
        stats.frames,
        stats.windows,
        stats.total_s,
        stats.ar_s,
        stats.acoustic_s
    );
    let interleaved = audio.into_inner().expect("not poisoned");
    let planar =
        [interleaved.iter().step_by(2).copied().collect(), interleaved.iter().skip(1).step_by(2).copied().collect()];
    let score = score.into_inner().expect("not poisoned").context("the song sent no score")?;
    let original = Original { request: &req, score: &score, audio: &planar };
    let resung = synthetic_prompt(&pipeline.constants, 17);
    let middle = seconds / 2.0;
    let edits = [
        ("extend +10 s", Edit::Extend { seconds: Some(10.0) }, 1, &prompt),
        ("another path from the middle", Edit::From { at_s: middle, description: None }, 2, &prompt),
        (
            "re-sing from the middle",
            Edit::Resing { line: 3, lyrics: "three again".into(), at_s: Some(middle) },
            2,
            &resung,
        ),
        ("re-render 8 s in the middle", Edit::Rerender { from_s: middle - 4.0, to_s: middle + 4.0 }, 2, &prompt),
    ];
    for (name, edit, seed, new_prompt) in edits {
        let started = Instant::now();
        let edited = pipeline.edit_ids(
            &original,
            &edit,
            seed,
            new_prompt,
            &prompt,
            Observer { events: &|_| {}, cancel: &cancel },
        )?;
        let total_s = started.elapsed().as_secs_f64();
        let rate = stats.sample_rate as f64;
        say!(
            "edit {name}: {total_s:.2} s ({:.0} % of the song's time); new audio from {:.2} s{}, {} windows rendered, {} frames (the kept ones forced through the AR models in passes)",
            100.0 * total_s / stats.total_s,
            edited.changed_from_sample as f64 / rate,
            edited.changed_to_sample.map_or(String::new(), |to| format!(" to {:.2} s", to as f64 / rate)),
            edited.stats.windows,
            edited.stats.frames,
        );
    }
    Ok(())
}

/// Where this process's CUDA kernel files came from (the disk cache or NVRTC) and how long each
/// took; a file compiled in the background while the song ran shows here too.
fn report_kernels() {
    let made = songloom_engine::cuda::kernels::made_so_far();
    let files: Vec<String> = made
        .iter()
        .map(|(file, arch, origin, seconds)| format!("{file} ({arch}) {origin} in {seconds:.2} s"))
        .collect();
    if !files.is_empty() {
        say!("kernels: {}", files.join("; "));
    }
}
