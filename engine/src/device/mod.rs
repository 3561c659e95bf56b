//! `Device` is the enum the rest of the program sees; each backend implements [`Backend`] and its
//! op-family traits (traits inside, an enum at the boundary). Which backend runs is chosen at run time: every
//! backend is compiled in, and one that cannot run here says why.

mod backend;
pub mod composed;
pub mod kind;
pub mod op;
mod params;
mod recording;
pub mod storage;

pub use backend::{AttentionOps, Backend, ConvOps, ElementwiseOps, LayoutOps, NormOps, ProductOps, SamplingOps};
pub use kind::DeviceKind;
pub use op::{Op, Operand};
pub use params::{
    AttentionInputs, AttentionShape, Candidates, Conv1dParams, ConvTranspose1dParams, DeviceShortlist, KvSlot,
    MemoryUse, RmsNorm, Rotary, Shortlist, ThreadPriority,
};
pub use recording::{RecordedStep, StepRecording};

use crate::cpu::CpuBackend;
use crate::cuda::CudaBackend;
use crate::error::{Error, Result};
use crate::precision::{Precision, names};
use crate::wgpu_backend::WgpuBackend;

impl DeviceKind {
    pub fn parse(name: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name).ok_or_else(|| unknown_device(name))
    }
}

fn unknown_device(name: &str) -> Error {
    let mut all = vec!["auto"];
    all.extend(DeviceKind::ALL.map(DeviceKind::name));
    Error::Invalid(format!("unknown device `{name}` (expected {})", names(&all)))
}

/// What `--device` asks for: a backend by name, or `auto`, which takes the first of
/// [`DeviceChoice::AUTO_ORDER`] that runs here, as [`Device::open`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    #[default]
    Auto,
    Kind(DeviceKind),
}

impl DeviceChoice {
    /// `auto` first, then every backend.
    pub const ALL: [DeviceChoice; DeviceKind::ALL.len() + 1] = {
        let mut all = [DeviceChoice::Auto; DeviceKind::ALL.len() + 1];
        let mut i = 0;
        while i < DeviceKind::ALL.len() {
            all[i + 1] = DeviceChoice::Kind(DeviceKind::ALL[i]);
            i += 1;
        }
        all
    };

    /// The backends `auto` tries, in [`Device::open`]'s order; wgpu only on a real GPU adapter.
    pub const AUTO_ORDER: [DeviceKind; 3] = [DeviceKind::Cuda, DeviceKind::Wgpu, DeviceKind::Cpu];

    pub fn name(self) -> &'static str {
        match self {
            DeviceChoice::Auto => "auto",
            DeviceChoice::Kind(kind) => kind.name(),
        }
    }

    pub fn parse(name: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name).ok_or_else(|| {
            Error::Invalid(format!("unknown device `{name}` (expected {})", names(&Self::ALL.map(Self::name))))
        })
    }

    /// What `auto` takes, in words, from [`Self::AUTO_ORDER`].
    pub fn auto_meaning() -> String {
        let step = |kind: DeviceKind| match kind {
            DeviceKind::Cuda => "CUDA where it works",
            DeviceKind::Wgpu => "wgpu on a real GPU adapter (never a CPU implementation such as lavapipe)",
            DeviceKind::Cpu => "the CPU",
        };
        Self::AUTO_ORDER.map(step).join(", else ")
    }

    /// The choices and what `auto` takes, for help texts.
    pub fn help() -> String {
        format!("{}; auto takes {}", names(&Self::ALL.map(Self::name)), Self::auto_meaning())
    }
}

impl std::str::FromStr for DeviceChoice {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

impl std::fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a device is opened.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceOptions {
    pub precision: Precision,
    /// Fill every fresh result buffer with a NaN sentinel before an op writes it, so an element an
    /// op forgets to write shows in a test (the conformance suite) instead of holding stale data.
    pub sentinel_fill: bool,
}

/// The bit patterns a [`DeviceOptions::sentinel_fill`] buffer holds before it is written: all ones
/// in f32, and all ones in bf16 as read back to f32 (the top half).
pub const SENTINEL_BITS: [u32; 2] = [u32::MAX, 0xffff_0000];

/// A backend and whether it can run here: its description, or why not.
#[derive(Debug, Clone)]
pub struct Probe {
    pub kind: DeviceKind,
    pub status: std::result::Result<String, String>,
    /// Whether `auto` may take it: not a wgpu adapter that is a CPU implementation (lavapipe).
    pub auto: bool,
}

/// The device a model runs on, picked at run time.
pub enum Device {
    Cpu(CpuBackend),
    Cuda(Box<CudaBackend>),
    Wgpu(Box<WgpuBackend>),
}

impl Device {
    pub fn cpu() -> Self {
        Device::Cpu(CpuBackend::new(DeviceOptions::default()))
    }

    /// The backend `choice` names, under the reference precision.
    pub fn from_choice(choice: DeviceChoice) -> Result<Self> {
        Self::open(choice, DeviceOptions::default())
    }

    /// Opens the backend `choice` names. A named backend that cannot run here is an error that says
    /// why; `auto` takes CUDA where it works, else wgpu on a real GPU adapter (never a CPU
    /// implementation such as lavapipe, which `wgpu` by name still reaches), else the CPU.
    pub fn open(choice: DeviceChoice, options: DeviceOptions) -> Result<Self> {
        match choice {
            // Only CUDA has FP8 tensor cores: `auto` under fp8 means CUDA or the reason it can't.
            DeviceChoice::Auto if options.precision == Precision::Fp8 => Self::open_kind(DeviceKind::Cuda, options)
                .map_err(|e| {
                    Error::Invalid(format!("--precision fp8 runs on CUDA only, and CUDA is not available: {e}"))
                }),
            DeviceChoice::Auto => Ok(Self::open_kind(DeviceKind::Cuda, options)
                .or_else(|_| WgpuBackend::new_on_gpu(options).map(|w| Device::Wgpu(Box::new(w))))
                .unwrap_or_else(|_| Device::Cpu(CpuBackend::new(options)))),
            DeviceChoice::Kind(kind) => Self::open_kind(kind, options)
                .map_err(|e| Error::Invalid(format!("device `{kind}` is not available: {e}"))),
        }
    }

    fn open_kind(kind: DeviceKind, options: DeviceOptions) -> Result<Self> {
        match kind {
            DeviceKind::Cpu => {
                options.precision.refused_without_fp8("the CPU")?;
                Ok(Device::Cpu(CpuBackend::new(options)))
            }
            DeviceKind::Cuda => Ok(Device::Cuda(Box::new(CudaBackend::new(0, options)?))),
            DeviceKind::Wgpu => {
                options.precision.refused_without_fp8("wgpu (Vulkan, Metal, DirectX)")?;
                Ok(Device::Wgpu(Box::new(WgpuBackend::new(options)?)))
            }
        }
    }

    /// Each backend and whether it can run here.
    pub fn probe_all() -> Vec<Probe> {
        DeviceKind::ALL
            .into_iter()
            .map(|kind| {
                let opened = Self::open_kind(kind, DeviceOptions::default());
                let auto = match &opened {
                    Ok(Device::Wgpu(w)) => w.is_real_gpu(),
                    Ok(_) => true,
                    Err(_) => false,
                };
                Probe { kind, status: opened.map(|d| d.description()).map_err(|e| e.to_string()), auto }
            })
            .collect()
    }
}

impl std::ops::Deref for Device {
    type Target = dyn Backend;

    fn deref(&self) -> &Self::Target {
        match self {
            Device::Cpu(b) => b,
            Device::Cuda(b) => b.as_ref(),
            Device::Wgpu(b) => b.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_parse_to_their_choice_and_others_are_refused() {
        for choice in DeviceChoice::ALL {
            assert_eq!(DeviceChoice::parse(choice.name()).unwrap(), choice);
        }
        let err = DeviceChoice::parse("tpu").unwrap_err().to_string();
        assert!(err.contains("`tpu`") && err.contains("auto, cpu, cuda or wgpu"), "{err}");
    }

    /// `auto` takes the first backend of its order that runs here and that the probes let it
    /// take, so the help text made from that order says what `Device::open` does.
    #[test]
    fn auto_takes_the_first_fit_backend_of_its_order() {
        let probes = Device::probe_all();
        let fit = |kind: DeviceKind| probes.iter().any(|p| p.kind == kind && p.status.is_ok() && p.auto);
        let expected = DeviceChoice::AUTO_ORDER.into_iter().find(|k| fit(*k)).expect("the CPU runs everywhere");
        let picked = Device::open(DeviceChoice::Auto, DeviceOptions::default()).unwrap().kind();
        assert_eq!(picked, expected, "auto: {}", DeviceChoice::auto_meaning());
        assert_eq!(DeviceChoice::AUTO_ORDER.last(), Some(&DeviceKind::Cpu));
        let help = DeviceChoice::help();
        assert!(help.starts_with("auto, cpu, cuda or wgpu; auto takes CUDA"), "{help}");
        assert!(help.find("CUDA") < help.find("wgpu on a real GPU") && help.find("wgpu on") < help.find("the CPU"));
    }

    /// `auto` never takes what the probes say it may not (a wgpu adapter that is a CPU
    /// implementation, lavapipe here), and the window's account of its pick agrees.
    #[test]
    fn auto_passes_over_what_the_probes_mark_unfit() {
        let probes = Device::probe_all();
        let picked = Device::open(DeviceChoice::Auto, DeviceOptions::default()).unwrap().kind();
        let probe = probes.iter().find(|p| p.kind == picked).expect("a probe of every kind");
        assert!(probe.status.is_ok() && probe.auto, "auto took {picked}: {probe:?}");
        for p in &probes {
            if let (Err(_), true) = (&p.status, p.auto) {
                panic!("{} cannot run here but is marked for auto", p.kind);
            }
        }
    }
}
