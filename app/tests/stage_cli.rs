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

fn tiny() -> PathBuf {
    fixtures().join("tiny-music3")
}

/// `songloom stage STAGE` on the tiny model, on the CPU.
fn run_stage(stage: &str, inputs: &Path, out: &Path) -> std::process::Output {
    run_stage_of(&tiny(), &[], stage, inputs, out)
}

/// `songloom stage STAGE --model MODEL FLAGS...` on the CPU.
fn run_stage_of(model: &Path, flags: &[&str], stage: &str, inputs: &Path, out: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_songloom"))
        .args(["stage", stage, "--model"])
        .arg(model)
        .arg("--inputs")
        .arg(inputs)
        .arg("--out")
        .arg(out)
        .args(["--device", "cpu"])
        .args(flags)
        .output()
        .unwrap()
}

/// Runs a stage that must succeed and returns its output file.
fn stage(stage: &str, inputs: &Path, dir: &Path) -> PathBuf {
    stage_of(&tiny(), &[], stage, inputs, &dir.join(format!("{stage}-out.safetensors")))
}

/// Runs a stage of `model` with `flags` that must succeed, writing `out`.
fn stage_of(model: &Path, flags: &[&str], stage: &str, inputs: &Path, out: &Path) -> PathBuf {
    let result = run_stage_of(model, flags, stage, inputs, out);
    assert!(result.status.success(), "stage {stage} {flags:?}: {}", String::from_utf8_lossy(&result.stderr));
    out.to_path_buf()
}

/// Writes a safetensors file of `(name, dtype, shape, little-endian bytes)`.
fn save_tensors(path: &Path, tensors: &[(&str, &str, Vec<usize>, Vec<u8>)]) {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        let offsets = [data.len(), data.len() + bytes.len()];
        header.insert(name.to_string(), serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": offsets}));
        data.extend_from_slice(bytes);
    }
    let header = serde_json::to_vec(&header).unwrap();
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend(header);
    file.extend(data);
    std::fs::write(path, file).unwrap();
}

/// A copy of the tiny model with `weights`, made as a user makes one (`songloom model quantize`).
fn quantized_copy(weights: &str, dir: &Path) -> PathBuf {
    let out = dir.join(format!("tiny-{weights}"));
    let result = Command::new(env!("CARGO_BIN_EXE_songloom"))
        .args(["model", "quantize"])
        .arg(tiny())
        .args(["--weights", weights, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(result.status.success(), "quantize {weights}: {}", String::from_utf8_lossy(&result.stderr));
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

/// The largest [`max_relative`] distance each AR format may put between a stage's outputs and the
/// bf16 stage's: 8-bit groups of 32 round each weight to 1/254 of its group's largest, 4-bit ones
/// to 1/15 of its group's range, and the error grows through the layers.
const Q8_BOUND: f32 = 0.05;
const Q4_BOUND: f32 = 0.35;

/// The AR stages of a q8 and a q4 copy made with `model quantize`, and of the bf16 checkpoint
/// quantized at load (`--weights 8bit`), run and land near the bf16 stage, within what each
/// format costs; other inputs' outputs land outside that bound; a copy and quantizing at load
/// give the same bits.
#[test]
fn quantized_stages_run_near_the_bf16_stage() {
    let dir = tempfile::tempdir().unwrap();
    let (q8, q4) = (quantized_copy("8bit", dir.path()), quantized_copy("4bit-all", dir.path()));

    // Other inputs: the prompt's ids reversed, the frame's codes rotated.
    let other = dir.path().join("other.safetensors");
    let (ids_shape, ids) = Checkpoint::open_file(&golden("lm")).unwrap().read_integers("input_ids").unwrap();
    let seq = ids_shape[1];
    let reversed: Vec<i64> = ids.chunks(seq).flat_map(|row| row.iter().rev().copied()).collect();
    let (codes_shape, mut codes) = Checkpoint::open_file(&golden("depth")).unwrap().read_integers("codes").unwrap();
    codes.rotate_left(1);
    let (hidden_shape, hidden) = values(&golden("depth"), "last_hidden");
    let bytes = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect();
    save_tensors(
        &other,
        &[
            ("input_ids", "I64", ids_shape, bytes(&reversed)),
            ("codes", "I64", codes_shape, bytes(&codes)),
            ("last_hidden", "F32", hidden_shape, hidden.iter().flat_map(|x| x.to_le_bytes()).collect()),
        ],
    );

    for (stage, outputs) in [("lm", &["last_hidden"][..]), ("depth", &["hiddens", "logits"][..])] {
        let out = |what: &str| dir.path().join(format!("{stage}-{what}.safetensors"));
        let bf16 = stage_of(&tiny(), &[], stage, &golden(stage), &out("bf16"));
        let runs = [
            ("q8 copy", stage_of(&q8, &[], stage, &golden(stage), &out("q8")), Q8_BOUND),
            (
                "--weights 8bit",
                stage_of(&tiny(), &["--weights", "8bit"], stage, &golden(stage), &out("load8")),
                Q8_BOUND,
            ),
            ("q4 copy", stage_of(&q4, &["--weights", "4bit-all"], stage, &golden(stage), &out("q4")), Q4_BOUND),
        ];
        let broken = stage_of(&tiny(), &[], stage, &other, &out("other"));
        for name in outputs {
            let want = values(&bf16, name);
            for (what, file, bound) in &runs {
                let got = values(file, name);
                assert_eq!(got.0, want.0, "{stage} {name} of the {what}: shape");
                let distance = max_relative(&got.1, &want.1);
                assert!(distance > 0.0 && distance <= *bound, "{stage} {name} of the {what}: {distance} over {bound}");
            }
            let distance = max_relative(&values(&broken, name).1, &want.1);
            assert!(distance > Q4_BOUND, "{stage} {name} of other inputs: {distance} within {Q4_BOUND}");
            assert_eq!(values(&runs[0].1, name), values(&runs[1].1, name), "{stage} {name}: copy and load differ");
        }
    }
}

/// A quantized copy cannot give other weights than its own: a clear error, no output.
#[test]
fn a_quantized_copy_refuses_other_weights() {
    let dir = tempfile::tempdir().unwrap();
    let q4 = quantized_copy("4bit-all", dir.path());
    let out = dir.path().join("out.safetensors");
    for weights in ["bf16", "8bit"] {
        let result = run_stage_of(&q4, &["--weights", weights], "lm", &golden("lm"), &out);
        let err = String::from_utf8_lossy(&result.stderr);
        assert!(!result.status.success(), "--weights {weights} of a q4 copy ran");
        assert!(
            err.contains("quantized copy with q4") && err.contains(&format!("--weights {weights} cannot")),
            "{err}"
        );
        assert!(!err.contains("panicked") && !out.exists(), "{err}");
    }
}

/// `stage --lora` merges the adapter as `generate` does: the DiT with the PEFT folder's adapter
/// against PEFT running it on the reference DiT (golden `lora_dit`), and far from the plain DiT.
#[test]
fn a_stage_runs_with_a_lora_adapter() {
    let dir = tempfile::tempdir().unwrap();
    let g = golden("lora_dit");
    let (l_shape, latents) = values(&g, "latents");
    let (c_shape, condition) = values(&g, "condition");
    let (v_shape, velocities) = values(&g, "peft_reference");
    let (_, timesteps) = values(&g, "timesteps");
    let inputs = dir.path().join("dit-in.safetensors");
    save_f32(
        &inputs,
        &[
            ("latents".into(), l_shape, latents),
            ("condition".into(), c_shape, condition),
            ("timestep".into(), vec![1], vec![timesteps[1]]),
        ],
    )
    .unwrap();
    let adapter = fixtures().join("lora/dit-peft");
    let out =
        stage_of(&tiny(), &["--lora", adapter.to_str().unwrap()], "dit", &inputs, &dir.path().join("a.safetensors"));
    let per_t = v_shape[1] * v_shape[2];
    let want = (vec![v_shape[1], v_shape[2]], velocities[per_t..2 * per_t].to_vec());
    assert_close("dit with the adapter", values(&out, "velocity"), want.clone(), 1e-5);
    let plain = stage("dit", &inputs, dir.path());
    assert!(max_relative(&values(&plain, "velocity").1, &want.1) > 1e-2, "the adapter changed nothing");
}
