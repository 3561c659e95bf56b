//! What `songloom devices` advises for the real model: on each GPU that runs here, the plan a
//! 60 s song would load under (`--precision bf16`, the device's free memory) and what that plan
//! measured on an H200 (docs/BENCHMARKS.md); on the CPU, what its measured DiT speed implies.
//! Every figure for a device other than the one measured is labelled an estimate.

use songloom_engine::pipeline::{MemoryRequest, Pipeline};
use songloom_engine::plan::{ArFormats, Mode, PLANNED_SONG_FRAMES, PLANNED_SONG_PROMPT, Plan};
use songloom_engine::{DType, Device, DeviceChoice, DeviceKind, DeviceOptions, Precision};

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

/// What the wgpu backend measured on the H200 through Vulkan (docs/BENCHMARKS.md, "wgpu backend"):
/// a 60 s song phase by phase in 430.6 s, 18 times CUDA's, before the DiT ran on the matrix units,
/// which took its forward pair from 681 to 159 ms (the song not measured again).
const WGPU_SPEED: &str = "on the H200 through Vulkan a 60 s song took 431 s phase by phase with the wgpu shaders, \
     18 times CUDA's time, before the DiT ran on the tensor cores through cooperative matrices, which made its \
     steps 4.3 times faster (docs/BENCHMARKS.md); other GPUs scale with their memory bandwidth and FP32 rate, \
     or their f16 matrix rate where wgpu offers cooperative matrices";

pub fn for_device(kind: DeviceKind) -> String {
    if kind == DeviceKind::Cpu {
        return "the real model here: hours for a minute of music (one 30-step DiT window takes about 25 minutes \
                on the measured 2-core CPU, docs/BENCHMARKS.md); the embedded model takes seconds"
            .into();
    }
    let options = DeviceOptions { precision: Precision::Bf16, ..DeviceOptions::default() };
    let plan = Device::open(DeviceChoice::Kind(kind), options).and_then(|device| {
        Pipeline::synthetic_plan(&device, MemoryRequest::default(), PLANNED_SONG_PROMPT, PLANNED_SONG_FRAMES)
    });
    match plan {
        Err(e) => format!("the real model here: {e}"),
        Ok(plan) => {
            let speed = match measured(&plan) {
                // The H200 table is CUDA's; the shaders are timed apart, per stage.
                _ if kind == DeviceKind::Wgpu => WGPU_SPEED.into(),
                Some(seconds) => format!(
                    "a 60 s song took {seconds:.1} s under this plan on an H200; on this GPU, an estimate: about that \
                     times the H200's memory bandwidth (4.8 TB/s) over this one's"
                ),
                None => "this plan has not been timed; docs/BENCHMARKS.md has the measured ones".into(),
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
