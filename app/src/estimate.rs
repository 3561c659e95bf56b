//! What a minute of music would take on a device, estimated from the rates its own kernels reach
//! in a short probe (a second or two): how fast a decode product reads its weights, how fast a DiT
//! block product and a vocoder convolution compute. A song's work is counted from the model's
//! geometry at the plan's formats, and its time is that work over those rates, the halves at once
//! where the device runs them so (CUDA's streams) and in turns where it has one queue (wgpu). It
//! leaves out what the probe does not see (the host's share of a frame, the two halves slowing each
//! other on one GPU), so it is labelled an estimate wherever it is shown.

use std::time::Instant;

use songloom_engine::config::{DepthConfig, DitConfig, LmConfig, PipelineConstants, VocoderConfig};
use songloom_engine::device::Conv1dParams;
use songloom_engine::pipeline::windows::window_starts;
use songloom_engine::plan::{Mode, Plan};
use songloom_engine::{DType, Device, Result, Tensor};

/// The logits rows of the real checkpoint's LM head that a decode step computes.
const HEAD_ROWS: usize = 16_389;
/// The latents of a full window (the DiT's sequence without its time token).
const WINDOW_LATENTS: usize = 690;

/// Rates the engine's kernels reached on a device.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    /// A decode product's weights read, in GB/s (in the plan's language-model format).
    pub weights_gb_s: f64,
    /// A DiT block product (a CFG pair's rows of a window), in TFLOP/s.
    pub matrix_tflop_s: f64,
    /// A vocoder convolution (a residual unit's, kernel 7), in TFLOP/s.
    pub conv_tflop_s: f64,
}

/// The bytes of weights a decode step reads (the layers in `format`, the head's rows in bf16).
pub fn decode_step_bytes(cfg: &LmConfig, head_rows: usize, format: DType) -> f64 {
    let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
    let (q, kv) = (cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim);
    let layer_params = h * q * 2 + h * kv * 2 + 3 * h * i;
    (cfg.num_hidden_layers * layer_params) as f64 * format.bits_per_weight() / 8.0 + 2.0 * (head_rows * h) as f64
}

/// The bytes of weights a depth frame reads: its layers run 7 times (the start and 6 steps) and
/// its 7 heads once each, each reading its weights again (they are larger than the L2 cache).
pub fn depth_frame_bytes(cfg: &DepthConfig, format: DType) -> f64 {
    let layer_params = 4 * cfg.hidden_size * cfg.hidden_size + 3 * cfg.hidden_size * cfg.intermediate_size;
    (7 * cfg.num_layers * layer_params + 7 * cfg.audio_vocab_size * cfg.hidden_size) as f64 * format.bits_per_weight()
        / 8.0
}

/// DiT FLOPs of one forward at `seq` tokens (GEMMs and attention).
pub fn dit_flops(seq: f64) -> f64 {
    let cfg = DitConfig::default();
    let inner = cfg.inner_dim() as f64;
    let concat = (2 * cfg.in_channels + cfg.condition_dim) as f64;
    let per_block = 2.0 * seq * inner * (4.0 * inner + 3.0 * cfg.ff_inner_dim as f64) + 4.0 * seq * seq * inner;
    cfg.num_layers as f64 * per_block + 2.0 * seq * concat * (concat + inner)
}

/// The vocoder's FLOPs for a window of `latents`, both channels: its convolutions (the input
/// projection, the upsampling transposed convolutions and each block's three residual units of a
/// kernel-7 and a kernel-1 convolution).
pub fn vocoder_flops(cfg: &VocoderConfig, latents: usize) -> f64 {
    let hidden = cfg.decoder_hidden_dim as f64;
    let mut length = latents as f64;
    let mut macs = hidden * cfg.decoder_input_dim as f64 * 7.0 * length;
    for (i, &stride) in cfg.upsampling_ratios.iter().enumerate() {
        let (c_in, c_out) = (hidden / 2f64.powi(i as i32), hidden / 2f64.powi(i as i32 + 1));
        macs += length * c_in * c_out * 2.0 * stride as f64;
        length *= stride as f64;
        macs += 3.0 * c_out * c_out * 8.0 * length;
    }
    macs += hidden / 2f64.powi(cfg.upsampling_ratios.len() as i32) * 7.0 * length;
    2.0 * 2.0 * macs
}

/// A song's work at the real geometry under a plan's formats.
#[derive(Debug, Clone, Copy)]
pub struct SongWork {
    pub frames: usize,
    pub windows: usize,
    pub steps: usize,
    /// Weights read by a frame's decode step and depth frame.
    pub frame_bytes: f64,
    /// A flow step's CFG pair through the DiT.
    pub pair_flops: f64,
    pub vocoder_flops: f64,
}

impl SongWork {
    /// A song of `seconds` with `steps` flow steps a window, under `plan`'s formats.
    pub fn of(plan: &Plan, seconds: f64, steps: usize) -> SongWork {
        let constants = PipelineConstants::default();
        let frames = (seconds * songloom_engine::config::ConditionConfig::default().frame_rate()) as usize;
        SongWork {
            frames,
            windows: window_starts(frames, &constants).len(),
            steps,
            frame_bytes: decode_step_bytes(&LmConfig::default(), HEAD_ROWS, plan.formats.lm)
                + depth_frame_bytes(&DepthConfig::default(), plan.formats.depth),
            pair_flops: 2.0 * dit_flops(WINDOW_LATENTS as f64),
            vocoder_flops: vocoder_flops(&VocoderConfig::default(), WINDOW_LATENTS),
        }
    }
}

/// How a device runs a streamed song's two halves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Halves {
    /// Side by side (CUDA: a stream each).
    AtOnce,
    /// Taking turns on one queue (wgpu): a song's work is the sum of theirs.
    InTurns,
}

/// The time a song's work would take at some rates.
#[derive(Debug, Clone, Copy)]
pub struct Estimate {
    pub ar_s: f64,
    pub acoustic_s: f64,
    pub song_s: f64,
    pub first_audio_s: f64,
}

impl Estimate {
    /// Streamed with the halves at once, the acoustic half runs beside the AR loop and the song
    /// ends a window after the later of the two; in turns, or phase by phase, the song is the sum
    /// of the two. Streamed, first audio comes a window after the first window's frames.
    pub fn of(work: &SongWork, rates: &Rates, mode: Mode, halves: Halves) -> Estimate {
        let constants = PipelineConstants::default();
        let frame_s = work.frame_bytes / (rates.weights_gb_s * 1e9);
        let window_s = work.steps as f64 * work.pair_flops / (rates.matrix_tflop_s * 1e12)
            + work.vocoder_flops / (rates.conv_tflop_s * 1e12);
        let ar_s = work.frames as f64 * frame_s;
        let acoustic_s = work.windows as f64 * window_s;
        // The first window waits for its frames; streamed at once, the last for the AR loop's end.
        let first_window_s = constants.chunk_frames.min(work.frames) as f64 * frame_s;
        let (song_s, first_audio_s) = match (mode, halves) {
            (Mode::Streamed, Halves::AtOnce) => {
                ((ar_s + window_s).max(first_window_s + acoustic_s), first_window_s + window_s)
            }
            (Mode::Streamed, Halves::InTurns) => (ar_s + acoustic_s, first_window_s + window_s),
            (Mode::Phased, _) => (ar_s + acoustic_s, ar_s + window_s),
        };
        Estimate { ar_s, acoustic_s, song_s, first_audio_s }
    }
}

/// A run of `f` long enough to time alone (a CPU-run adapter's): one run is enough.
const LONG_RUN_S: f64 = 0.2;

/// The time of a run of `f`, waited for, in seconds, after one untimed run (the programs' first
/// build): the median of three, or the one run where that took long.
fn timed(device: &Device, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut run = || -> Result<f64> {
        let start = Instant::now();
        f()?;
        device.synchronize()?;
        Ok(start.elapsed().as_secs_f64())
    };
    run()?;
    let first = run()?;
    if first > LONG_RUN_S {
        return Ok(first);
    }
    let mut times = [first, run()?, run()?];
    times.sort_by(f64::total_cmp);
    Ok(times[1])
}

/// Random values in [-0.01, 0.01) of `shape` on the device.
fn noise(device: &Device, shape: &[usize], seed: u64) -> Result<Tensor> {
    device.fill_uniform(shape, DType::F32, seed, -0.01, 0.01)
}

/// The rates of three small runs of the engine's own kernels at the real model's shapes: a decode
/// product (2 rows through 4096 x 4096 weights in the plan's LM format, 16 back to back), a DiT
/// block product (1380 x 2048 -> 2048 in the plan's DiT format, or the precision's product format
/// for a float one) and a vocoder residual convolution (192 channels, kernel 7, 2048 samples). A
/// few seconds on a CPU-run adapter (lavapipe), milliseconds on a GPU.
pub fn probe(device: &Device, plan: &Plan) -> Result<Rates> {
    let (k, n) = (4096, 4096);
    let x = noise(device, &[2, k], 1)?;
    let w = device.cast(&noise(device, &[n, k], 2)?, plan.formats.lm)?;
    let calls = 16;
    let gemv_s = timed(device, || {
        for _ in 0..calls {
            device.linear(&x, &w, None)?;
        }
        Ok(())
    })? / calls as f64;
    let weights_gb_s = (n * k) as f64 * plan.formats.lm.bits_per_weight() / 8.0 / gemv_s / 1e9;

    let (m, inner) = (2 * WINDOW_LATENTS, DitConfig::default().inner_dim());
    let x = noise(device, &[m, inner], 3)?;
    // In the plan's format where it quantizes the DiT (the 12 GB plan's q8), which some adapters
    // run on other programs than the precision's float format.
    let w = noise(device, &[inner, inner], 4)?;
    let w = if plan.acoustic.is_quantized() { device.cast(&w, plan.acoustic)? } else { device.product_weight(w)? };
    let matrix_s = timed(device, || device.linear(&x, &w, None).map(drop))?;
    let matrix_tflop_s = 2.0 * (m * inner * inner) as f64 / matrix_s / 1e12;

    let (channels, samples, kernel) = (192, 2048, 7);
    let x = noise(device, &[channels, samples], 5)?;
    let w = noise(device, &[channels, channels, kernel], 6)?;
    let params = Conv1dParams::new(&x, &w, kernel / 2, 1)?;
    let conv_s = timed(device, || device.conv1d(&x, &w, None, &params).map(drop))?;
    let conv_tflop_s = 2.0 * (channels * channels * kernel * samples) as f64 / conv_s / 1e12;
    Ok(Rates { weights_gb_s, matrix_tflop_s, conv_tflop_s })
}

#[cfg(test)]
mod tests {
    use super::*;
    use songloom_engine::plan::{Geometry, WeightsChoice, Workload};
    use songloom_engine::{DeviceChoice, DeviceKind, DeviceOptions, Precision};

    fn plan_8bit() -> Plan {
        let geometry = Geometry { head_rows: HEAD_ROWS, ..Geometry::default() };
        let work = Workload::planned_song_on_gpu(Precision::Bf16);
        geometry.choose(WeightsChoice::EightBit, Some(Mode::Streamed), None, None, &work).unwrap()
    }

    /// The rates at which `work`'s stages take a frame (decode step and depth frame), a DiT pair and
    /// a vocoder window in these times, in seconds.
    fn rates_of_stages(work: &SongWork, frame_s: f64, pair_s: f64, window_s: f64) -> Rates {
        Rates {
            weights_gb_s: work.frame_bytes / frame_s / 1e9,
            matrix_tflop_s: work.pair_flops / pair_s / 1e12,
            conv_tflop_s: work.vocoder_flops / window_s / 1e12,
        }
    }

    /// The counts agree with what `bench --what stages` reported on the H200 at the real geometry
    /// (docs/BENCHMARKS.md): 7.51 GB of q8 LM weights a step (lm_head in bf16 included), 4.27 GB a
    /// depth frame, 6.98 TFLOP a DiT pair; and the vocoder's count with its time on the H200 (64.8 ms
    /// under CUDA) is a rate the GPU can reach.
    #[test]
    fn the_work_counts_match_the_benchmarked_ones() {
        let work = SongWork::of(&plan_8bit(), 60.0, 30);
        assert_eq!((work.frames, work.windows), (1500, 14));
        let lm = decode_step_bytes(&LmConfig::default(), HEAD_ROWS, DType::Q8);
        assert!((lm / 1e9 - 7.51).abs() < 0.05, "{lm}");
        let depth = depth_frame_bytes(&DepthConfig::default(), DType::Q8);
        assert!((depth / 1e9 - 4.27).abs() < 0.01, "{depth}");
        assert!((work.pair_flops / 1e12 - 6.98).abs() < 0.01, "{}", work.pair_flops);
        let vocoder_tflop_s = work.vocoder_flops / 0.0648 / 1e12;
        assert!((10.0..100.0).contains(&vocoder_tflop_s), "{vocoder_tflop_s}");
    }

    /// Given the rates the H200's CUDA stages reached in a song's shapes (8-bit: a 5.6 ms frame, a
    /// 24.3 ms DiT pair, a 64.8 ms vocoder window), the estimate comes within what the halves cost
    /// each other of the measured song (15.3 s, first audio 2.39 s; the estimate leaves the
    /// interference out, so it is shorter); phase by phase it is the halves' sum.
    #[test]
    fn the_stage_rates_of_the_h200_give_its_song() {
        let work = SongWork::of(&plan_8bit(), 60.0, 30);
        let rates = rates_of_stages(&work, 5.6e-3, 24.3e-3, 64.8e-3);
        let streamed = Estimate::of(&work, &rates, Mode::Streamed, Halves::AtOnce);
        assert!((12.0..12.5).contains(&streamed.song_s), "{streamed:?}");
        assert!((1.0..2.4).contains(&streamed.first_audio_s), "{streamed:?}");
        let phased = Estimate::of(&work, &rates, Mode::Phased, Halves::AtOnce);
        assert!((phased.song_s - (phased.ar_s + phased.acoustic_s)).abs() < 1e-9);
        assert!(phased.first_audio_s > phased.ar_s);
    }

    /// Given the rates an H100's stages reached through Vulkan (8-bit: a 10.52 ms decode step and
    /// a 5.82 ms depth frame, an 84.08 ms DiT pair, a 156.1 ms vocoder window; docs/BENCHMARKS.md,
    /// session 28), the halves in turns give 62 s against the song's measured 74.7 s (first audio
    /// 8.25 s); the host's share of a frame is what is left out. The halves at once would have
    /// said 41 s, far from what one queue does.
    #[test]
    fn the_vulkan_stage_rates_of_an_h100_give_its_song() {
        let work = SongWork::of(&plan_8bit(), 60.0, 30);
        let rates = rates_of_stages(&work, 16.34e-3, 84.08e-3, 156.1e-3);
        let turns = Estimate::of(&work, &rates, Mode::Streamed, Halves::InTurns);
        assert!((61.0..63.0).contains(&turns.song_s), "{turns:?}");
        assert!((turns.song_s - (turns.ar_s + turns.acoustic_s)).abs() < 1e-9);
        assert!((5.0..7.0).contains(&turns.first_audio_s), "{turns:?}");
        let at_once = Estimate::of(&work, &rates, Mode::Streamed, Halves::AtOnce);
        assert!((39.0..42.0).contains(&at_once.song_s), "{at_once:?}");
    }

    /// The probe's rates are positive and finite on every device here (the CPU; lavapipe where
    /// installed), and a faster rate gives a shorter estimate.
    #[test]
    fn the_probe_measures_every_rate() {
        let plan = plan_8bit();
        for kind in [DeviceKind::Cpu, DeviceKind::Wgpu] {
            let Ok(device) = Device::open(DeviceChoice::Kind(kind), DeviceOptions::default()) else {
                println!("{kind:?} skipped: not available here");
                continue;
            };
            let rates = probe(&device, &plan).unwrap();
            for rate in [rates.weights_gb_s, rates.matrix_tflop_s, rates.conv_tflop_s] {
                assert!(rate.is_finite() && rate > 0.0, "{kind:?}: {rates:?}");
            }
            let work = SongWork::of(&plan, 60.0, 30);
            let slow = Estimate::of(&work, &rates, Mode::Streamed, Halves::InTurns);
            let doubled = Rates {
                weights_gb_s: 2.0 * rates.weights_gb_s,
                matrix_tflop_s: 2.0 * rates.matrix_tflop_s,
                conv_tflop_s: 2.0 * rates.conv_tflop_s,
            };
            let fast = Estimate::of(&work, &doubled, Mode::Streamed, Halves::InTurns);
            assert!((fast.song_s - slow.song_s / 2.0).abs() < 1e-6 * slow.song_s, "{slow:?} {fast:?}");
            println!("{kind:?}: {rates:?}: a 60 s song in about {:.0} s", slow.song_s);
            // A plan with a q8 DiT (the 12 GB one) probes its products in q8.
            let quantized = Plan { acoustic: DType::Q8, ..plan.clone() };
            let q8 = probe(&device, &quantized).unwrap();
            assert!(q8.matrix_tflop_s.is_finite() && q8.matrix_tflop_s > 0.0, "{kind:?}: {q8:?}");
        }
    }
}
