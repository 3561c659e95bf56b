//! Shared helpers of the parity tests: the committed fixtures, the goldens' tensors and a distance
//! whose bound is calibrated on the reference's own precision noise.

use std::path::{Path, PathBuf};

use songloom_engine::weights::Checkpoint;
use songloom_engine::{Device, DeviceChoice, DeviceKind, DeviceOptions, Precision, Tensor};

pub mod conformance;
pub mod music_checks;
pub mod stage_runs;

/// `tests/fixtures`, or `$SONGLOOM_FIXTURES` when the test binary runs away from its source tree
/// (on the GPU machine).
pub fn fixtures() -> PathBuf {
    match std::env::var_os("SONGLOOM_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"),
    }
}

/// The tiny checkpoint made by `tools/oracle/make_goldens.py`, in the real directory layout.
pub fn tiny_model_dir() -> PathBuf {
    fixtures().join("tiny-music3")
}

pub struct Golden {
    file: Checkpoint,
}

impl Golden {
    pub fn open(name: &str) -> Golden {
        let path = fixtures().join("goldens").join(format!("{name}.safetensors"));
        Golden { file: Checkpoint::open_file(&path).unwrap_or_else(|e| panic!("golden {name}: {e}")) }
    }

    pub fn tensor(&self, name: &str) -> Tensor {
        let t = self.file.read(name).unwrap_or_else(|e| panic!("{e}"));
        Tensor::from_f32(t.shape(), t.to_f32_vec()).unwrap()
    }

    pub fn values(&self, name: &str) -> Vec<f32> {
        self.tensor(name).to_f32_vec()
    }

    pub fn ids(&self, name: &str) -> Vec<u32> {
        self.file.read_integers(name).unwrap().1.into_iter().map(|v| v as u32).collect()
    }
}

/// How far one result lies from another, relative to the reference's largest magnitude.
#[derive(Debug, Clone, Copy)]
pub struct Distance {
    pub max_abs: f32,
    pub mean_abs: f32,
    /// `max_abs / max |reference|`.
    pub rel: f32,
}

pub fn distance(ours: &[f32], reference: &[f32]) -> Distance {
    assert_eq!(ours.len(), reference.len(), "compared tensors differ in size");
    assert!(ours.iter().all(|v| v.is_finite()), "result holds non-finite values");
    let scale = reference.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(f32::MIN_POSITIVE);
    let diffs: Vec<f32> = ours.iter().zip(reference).map(|(a, b)| (a - b).abs()).collect();
    let max_abs = diffs.iter().copied().fold(0.0, f32::max);
    let mean_abs = diffs.iter().sum::<f32>() / diffs.len().max(1) as f32;
    Distance { max_abs, mean_abs, rel: max_abs / scale }
}

/// A relative bound: `factor` times the distance between the reference and its higher-precision
/// control (the precision noise the reference itself carries), never below `floor`.
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    pub rel: f32,
}

impl Bound {
    pub fn calibrated(control: Distance, factor: f32, floor: f32) -> Bound {
        Bound { rel: (control.rel * factor).max(floor) }
    }

    pub fn accepts(&self, d: Distance) -> bool {
        d.rel <= self.rel
    }

    /// Asserts `ours` is within the bound of `reference`, printing both for the log.
    pub fn check(&self, what: &str, ours: &[f32], reference: &[f32]) -> Distance {
        let d = distance(ours, reference);
        println!(
            "{what}: rel {:.3e} (max |d| {:.3e}, mean |d| {:.3e}), bound {:.3e}",
            d.rel, d.max_abs, d.mean_abs, self.rel
        );
        assert!(self.accepts(d), "{what}: relative distance {:.3e} exceeds the bound {:.3e}", d.rel, self.rel);
        d
    }

    /// Asserts a deliberately broken result is caught by the bound.
    pub fn rejects(&self, what: &str, broken: &[f32], reference: &[f32]) {
        let d = distance(broken, reference);
        println!("{what} (negative control): rel {:.3e}, bound {:.3e}", d.rel, self.rel);
        assert!(
            !self.accepts(d),
            "{what}: the bound {:.3e} did not catch the broken input (rel {:.3e})",
            self.rel,
            d.rel
        );
    }
}

/// A bf16 stage's bound: twice the distance between the bf16 reference (`reference`) and its f32
/// control run (`control`) in golden `g`.
pub fn bf16_bound(g: &Golden, reference: &str, control: &str) -> Bound {
    Bound::calibrated(distance(&g.values(control), &g.values(reference)), 2.0, 0.0)
}

pub fn cpu() -> Device {
    Device::cpu()
}

/// Every backend that can run here, each opened with `options`: the CPU always, the others where
/// they work (else the reason is printed and the backend skipped) and where
/// `SONGLOOM_TEST_DEVICES`, if set, names them.
pub fn devices_with(options: DeviceOptions) -> Vec<Device> {
    DeviceKind::ALL
        .into_iter()
        .filter(|kind| *kind == DeviceKind::Cpu || wanted(*kind))
        .filter_map(|kind| match Device::open(DeviceChoice::Kind(kind), options) {
            Ok(device) => Some(device),
            Err(e) => {
                println!("{kind} skipped: {e}");
                None
            }
        })
        .collect()
}

/// [`devices_with`] the default options (the reference precision).
pub fn devices() -> Vec<Device> {
    devices_with(DeviceOptions::default())
}

/// The kinds of [`devices`], for tests that hand a fresh `Device` to each run.
pub fn device_kinds() -> Vec<DeviceKind> {
    devices().iter().map(|d| d.kind()).collect()
}

/// A device of an available kind (from [`device_kinds`]).
pub fn device_of(kind: DeviceKind) -> Device {
    Device::from_choice(DeviceChoice::Kind(kind)).unwrap_or_else(|e| panic!("{kind}: {e}"))
}

/// Whether the GPU runs take `kind`: `SONGLOOM_TEST_DEVICES=wgpu` (say) keeps them to the
/// backends named, beside the CPU.
fn wanted(kind: DeviceKind) -> bool {
    std::env::var("SONGLOOM_TEST_DEVICES").map_or(true, |w| w.split(',').any(|n| n == kind.name()))
}

/// A device of `kind` under `precision`, or why there is none (or why it is left out:
/// `SONGLOOM_TEST_DEVICES`, as in [`devices_with`]).
pub fn gpu_with(kind: DeviceKind, precision: Precision) -> songloom_engine::Result<Device> {
    if !wanted(kind) {
        return Err(songloom_engine::Error::Invalid(format!("{kind} not in SONGLOOM_TEST_DEVICES")));
    }
    Device::open(DeviceChoice::Kind(kind), DeviceOptions { precision, ..DeviceOptions::default() })
}

/// Copies the tiny model into a temporary directory so a test can break one file of it.
pub fn copy_tiny_model() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&tiny_model_dir(), dir.path());
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Rewrites a component's weights as one f32 safetensors file after `edit` changed some of them.
pub fn edit_weights(root: &Path, component: &str, edit: impl FnOnce(&mut Vec<(String, Vec<usize>, Vec<f32>)>)) {
    let dir = root.join(component);
    let ckpt = songloom_engine::weights::Checkpoint::open(&dir).unwrap();
    let mut names: Vec<String> = ckpt.tensor_names().map(str::to_string).collect();
    names.sort();
    let mut tensors: Vec<_> = names
        .into_iter()
        .map(|n| {
            let t = ckpt.read(&n).unwrap();
            (n, t.shape().to_vec(), t.to_f32_vec())
        })
        .collect();
    drop(ckpt);
    edit(&mut tensors);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().contains(".safetensors") {
            std::fs::remove_file(path).unwrap();
        }
    }
    songloom_engine::weights::save_f32(&dir.join("diffusion_pytorch_model.safetensors"), &tensors).unwrap();
}
