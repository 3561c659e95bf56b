//! What `songloom devices` advises for the real model: on each GPU that runs here, the plan a
//! 60 s song would load under (`--precision bf16`, the device's free memory) and what that plan
//! measured on an H200 (docs/BENCHMARKS.md), or through wgpu, what the adapter's own rates imply
//! ([`crate::estimate`]); on the CPU, what its measured DiT speed implies. Every figure for a
//! device other than the one measured is labelled an estimate.

use songloom_engine::pipeline::{MemoryRequest, Pipeline};
use songloom_engine::plan::{ArFormats, Mode, PLANNED_SONG_FRAMES, PLANNED_SONG_PROMPT, Plan};
use songloom_engine::{DType, Device, DeviceChoice, DeviceKind, DeviceOptions, Precision};

use crate::estimate::{self, Estimate, Halves, SongWork};

/// 60 s songs on one H200 by plan, from docs/BENCHMARKS.md (session 20 for the 8-bit plan, session
/// 16 for the other streamed ones, "the tiers with a bf16 KV cache, in one lease" for the phased):
/// the AR formats, the DiT's block matrices, the mode, seconds. The others ran before the DiT's
/// CFG pair was batched and its attention moved to bf16, so they overstate today's times.
const MEASURED_ON_H200: [(ArFormats, DType, Mode, f64); 5] = [
    (ArFormats::BF16, DType::BF16, Mode::Streamed, 21.22),
    (ArFormats::Q8, DType::BF16, Mode::Streamed, 15.2),
    (ArFormats::Q4_LM, DType::Q8, Mode::Streamed, 18.81),
    (ArFormats::Q4_LM, DType::BF16, Mode::Phased, 21.45),
    (ArFormats::Q4, DType::BF16, Mode::Phased, 21.61),
];

/// Seconds a 60 s song took on the H200 under `plan`'s formats and mode, if measured.
fn measured(plan: &Plan) -> Option<f64> {
    MEASURED_ON_H200
        .iter()
        .find(|(formats, dit, mode, _)| (*formats, *dit, *mode) == (plan.formats, plan.acoustic, plan.mode))
        .map(|m| m.3)
}

/// Through Vulkan on an H100, a 60 s song (8-bit, 74.7 s) took this many times the estimate its
/// stages' rates give with the halves in turns (62.0 s; docs/BENCHMARKS.md, session 28): the
/// host's share of each frame (sampling, reading the codes back), which the probe does not see.
const HOST_SHARE_THROUGH_WGPU: f64 = 1.20;

/// On the H200 under CUDA, a 60 s song (8-bit, 15.3 s) took this many times the estimate its
/// stages' rates give with the halves side by side (docs/BENCHMARKS.md, session 26): what they
/// cost each other on one GPU.
const HALVES_SHARING_ONE_GPU: f64 = 1.25;

/// An estimate from the device's rates, probed now: a 60 s song's work over them, the halves
/// side by side (CUDA's streams) or in turns (wgpu's one queue).
fn probed_estimate(device: &Device, plan: &Plan, halves: Halves) -> String {
    let rates = match estimate::probe(device, plan) {
        Ok(rates) => rates,
        Err(e) => return format!("its speed could not be probed: {e}"),
    };
    let song = Estimate::of(&SongWork::of(plan, 60.0, 30), &rates, plan.mode, halves);
    let (how, left_out) = match halves {
        Halves::InTurns => (
            "taking turns on the adapter's one queue",
            format!(
                "the host's share of each frame, which made a song through Vulkan on an H100 {HOST_SHARE_THROUGH_WGPU}x its estimate"
            ),
        ),
        Halves::AtOnce => (
            "side by side",
            format!(
                "the host's share and the halves slowing each other, which made a song on the H200 {HALVES_SHARING_ONE_GPU}x its estimate"
            ),
        ),
    };
    format!(
        "an estimate from this device's rates, probed now (decode products read {:.0} GB/s of {} weights, DiT \
         products {:.1} TFLOP/s, vocoder convolutions {:.2} TFLOP/s): a 60 s song in about {:.0} s, first audio after \
         about {:.0} s (AR half {:.0} s, acoustic half {:.0} s, {how}); it leaves out {left_out}",
        rates.weights_gb_s,
        plan.formats.lm,
        rates.matrix_tflop_s,
        rates.conv_tflop_s,
        song.song_s,
        song.first_audio_s,
        song.ar_s,
        song.acoustic_s,
    )
}

pub fn for_device(kind: DeviceKind) -> String {
    if kind == DeviceKind::Cpu {
        return "the real model here: hours for a minute of music (one 30-step DiT window takes about 25 minutes \
                on the measured 2-core CPU, docs/BENCHMARKS.md); the embedded model takes seconds"
            .into();
    }
    let options = DeviceOptions { precision: Precision::Bf16, ..DeviceOptions::default() };
    let planned = Device::open(DeviceChoice::Kind(kind), options).and_then(|device| {
        let plan =
            Pipeline::synthetic_plan(&device, MemoryRequest::default(), PLANNED_SONG_PROMPT, PLANNED_SONG_FRAMES)?;
        Ok((device, plan))
    });
    match planned {
        Err(e) => format!("the real model here: {e}"),
        Ok((device, plan)) => {
            let speed = match measured(&plan) {
                // The H200 table is CUDA's; the shaders have their own speeds.
                _ if kind == DeviceKind::Wgpu => probed_estimate(&device, &plan, Halves::InTurns),
                Some(seconds) => format!(
                    "a 60 s song took {seconds:.1} s under this plan on an H200; on this GPU, an estimate: about that \
                     times the H200's memory bandwidth (4.8 TB/s) over this one's"
                ),
                None => probed_estimate(&device, &plan, Halves::AtOnce),
            };
            format!("the real model here (a 60 s song, --precision bf16): {}; {speed}", plan.describe())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use songloom_engine::plan::{Geometry, WeightsChoice, Workload};

    /// The plans the tiers choose are the ones measured.
    #[test]
    fn each_tier_budget_finds_its_measured_song() {
        let geometry = Geometry { head_rows: 16_389, ..Geometry::default() };
        let work = Workload::planned_song_on_gpu(Precision::Bf16);
        for (budget_bytes, seconds) in
            [(150_000_000_000, 21.22), (16_500_000_000, 15.2), (12_000_000_000, 18.81), (8_000_000_000, 21.45)]
        {
            let plan = geometry.choose(WeightsChoice::Auto, None, None, Some(budget_bytes), &work).unwrap();
            assert_eq!(measured(&plan), Some(seconds), "{}", plan.describe());
        }
        let all_q4 = geometry.choose(WeightsChoice::FourBitAll, None, None, Some(8_000_000_000), &work).unwrap();
        assert_eq!(measured(&all_q4), Some(21.61), "{}", all_q4.describe());
    }
}
