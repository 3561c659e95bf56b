//! `songloom stage` runs each of the five stages of the committed tiny checkpoint from files and
//! writes outputs that match the reference goldens.

use std::path::{Path, PathBuf};
use std::process::Command;

use songloom_engine::weights::{Checkpoint, save_f32};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn golden(name: &str) -> PathBuf {
    fixtures().join("goldens").join(format!("{name}.safetensors"))
}

fn values(file: &Path, name: &str) -> (Vec<usize>, Vec<f32>) {
    let t = Checkpoint::open_file(file).unwrap().read(name).unwrap();
    (t.shape().to_vec(), t.to_f32_vec())
}

/// `songloom stage STAGE` on the tiny model, on the CPU.
fn run_stage(stage: &str, inputs: &Path, out: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_songloom"))
        .args(["stage", stage, "--model"])
        .arg(fixtures().join("tiny-music3"))
        .arg("--inputs")
        .arg(inputs)
        .arg("--out")
        .arg(out)
        .args(["--device", "cpu"])
        .output()
        .unwrap()
}

/// Runs a stage that must succeed and returns its output file.
fn stage(stage: &str, inputs: &Path, dir: &Path) -> PathBuf {
    let out = dir.join(format!("{stage}-out.safetensors"));
    let result = run_stage(stage, inputs, &out);
    assert!(result.status.success(), "stage {stage}: {}", String::from_utf8_lossy(&result.stderr));
    out
}

fn assert_close(what: &str, got: (Vec<usize>, Vec<f32>), want: (Vec<usize>, Vec<f32>), rel: f32) {
    assert_eq!(got.0, want.0, "{what}: shape");
    let scale = want.1.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let max = got.1.iter().zip(&want.1).fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(max <= rel * scale, "{what}: max |d| {max} over {}", rel * scale);
}

/// `max |a - b|` over `max |b|`, the measure of [`assert_close`].
fn max_relative(a: &[f32], b: &[f32]) -> f32 {
    let scale = b.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    a.iter().zip(b).fold(0.0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}

#[test]
fn every_stage_runs_from_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = stage("condition", &golden("condition_up"), dir.path());
    assert_close("condition", values(&out, "condition"), values(&golden("condition_up"), "control"), 1e-4);

    let out = stage("vocoder", &golden("vocoder"), dir.path());
    assert_close("vocoder", values(&out, "waveform"), values(&golden("vocoder"), "reference"), 1e-5);

    // The AR stages keep their keys and values in bf16, as the reference does: against the bf16
    // reference, within twice the distance the reference's own rounding puts between it and its
    // f32 control (tests/tests/parity.rs holds the f32 path to the control itself).
    let out = stage("lm", &golden("lm"), dir.path());
    let prefill = |name: &str| {
        let (shape, all) = values(&golden("lm"), name);
        (vec![2, shape[2]], all[..2 * shape[2]].to_vec())
    };
    let rel = 2.0 * max_relative(&prefill("reference").1, &prefill("control").1);
    assert_close("lm", values(&out, "last_hidden"), prefill("reference"), rel);

    let out = stage("depth", &golden("depth"), dir.path());
    for (what, output, golden_name) in [("depth hiddens", "hiddens", ""), ("depth logits", "logits", "_logits")] {
        let (reference, control) = (format!("reference{golden_name}"), format!("control{golden_name}"));
        let want = values(&golden("depth"), &reference);
        let rel = 2.0 * max_relative(&want.1, &values(&golden("depth"), &control).1);
        assert_close(what, values(&out, output), want, rel);
    }

    // The DiT golden holds three flow times; the stage takes one.
    let (l_shape, latents) = values(&golden("dit"), "latents");
    let (c_shape, condition) = values(&golden("dit"), "condition");
    let (v_shape, velocities) = values(&golden("dit"), "reference");
    let inputs = dir.path().join("dit-in.safetensors");
    save_f32(
        &inputs,
        &[
            ("latents".into(), l_shape, latents),
            ("condition".into(), c_shape, condition),
            ("timestep".into(), vec![1], vec![0.37]),
        ],
    )
    .unwrap();
    let out = stage("dit", &inputs, dir.path());
    let per_t = v_shape[1] * v_shape[2];
    let want = (vec![v_shape[1], v_shape[2]], velocities[per_t..2 * per_t].to_vec());
    assert_close("dit", values(&out, "velocity"), want, 1e-5);
}

#[test]
fn bad_stage_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.safetensors");
    let run = |stage: &str, inputs: &Path| run_stage(stage, inputs, &out);
    let result = run("vocoder", &golden("lm"));
    assert!(!result.status.success());
    let err = String::from_utf8_lossy(&result.stderr);
    assert!(err.contains("latents") && !err.contains("panicked"), "{err}");
    let result = run("nonsense", &golden("lm"));
    assert!(String::from_utf8_lossy(&result.stderr).contains("unknown stage"));
    assert!(!out.exists(), "a failed stage must not write its output");
}
