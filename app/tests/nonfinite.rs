//! A checkpoint holding NaN or infinite weights is refused while it loads, before anything is
//! generated: the error names the component, the tensor and how many values are bad, and no song
//! is written. Copies of the tiny test model each get a few bad values planted in one tensor.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tiny_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny-music3")
}

fn songloom(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_songloom")).args(args).env("XDG_CACHE_HOME", cache).output().unwrap()
}

/// Copies a folder and everything under it (the tiny model is under 2 MB).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Overwrites the first `count` values of tensor `name` in the safetensors file `file` with
/// `bits` (a float's bit pattern, little-endian, of the tensor's width).
fn plant(file: &Path, name: &str, bits: &[u8], count: usize) {
    let mut bytes = std::fs::read(file).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    let start = 8 + header_len + header[name]["data_offsets"][0].as_u64().unwrap() as usize;
    let width = match header[name]["dtype"].as_str().unwrap() {
        "F32" => 4,
        "BF16" | "F16" => 2,
        other => panic!("{name} is {other}"),
    };
    assert_eq!(bits.len(), width, "{name}: a value is {width} bytes");
    for i in 0..count {
        // Every other value, so the count is not of one run.
        let at = start + 2 * i * width;
        bytes[at..at + width].copy_from_slice(bits);
    }
    std::fs::write(file, bytes).unwrap();
}

/// `generate` on `model`, both halves resident and phase by phase (where the acoustic half loads
/// only after the AR half has run), fails before generating with an error that says each of
/// `expected`, and writes no song.
fn assert_refused_at_load(model: &Path, expected: &[&str]) {
    for mode in ["streamed", "phased"] {
        assert_refused_in_mode(model, mode, expected);
    }
}

fn assert_refused_in_mode(model: &Path, mode: &str, expected: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("song.wav");
    let result = songloom(
        dir.path(),
        &[
            "generate",
            "--model",
            model.to_str().unwrap(),
            "--prompt",
            "warm lo-fi piano",
            "--lyrics",
            "[verse]\\nla la la",
            "--duration",
            "8",
            "--steps",
            "2",
            "--device",
            "cpu",
            "--mode",
            mode,
            "--no-play",
            "--json",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&result.stderr);
    assert!(!result.status.success(), "{mode}: a damaged checkpoint made a song: {err}");
    for want in expected {
        assert!(err.contains(want), "{mode}: the error does not say `{want}`: {err}");
    }
    assert!(!err.contains("window") && !err.contains("panicked"), "{err}");
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert!(!stdout.contains("\"ar_frames\"") && !stdout.contains("\"audio\""), "{mode}: it generated first: {stdout}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(!out.exists() && !left.iter().any(|n| n.to_string_lossy().contains("song")), "{left:?}");
}

#[test]
fn nan_in_the_dit_is_named_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny");
    copy_dir(&tiny_model(), &model);
    let file = model.join("transformer/diffusion_pytorch_model-00002-of-00002.safetensors");
    plant(&file, "proj_out.weight", &f32::NAN.to_le_bytes(), 3);
    assert_refused_at_load(&model, &["the DiT", "`proj_out.weight`", "3 NaN or infinite values"]);
}

#[test]
fn infinity_in_the_language_model_is_named_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny");
    copy_dir(&tiny_model(), &model);
    let file = model.join("language_model/model-00004-of-00005.safetensors");
    plant(&file, "model.layers.1.mlp.up_proj.weight", &0x7f80u16.to_le_bytes(), 2);
    assert_refused_at_load(
        &model,
        &["the language model", "`model.layers.1.mlp.up_proj.weight`", "2 NaN or infinite values"],
    );
}

/// A quantized copy's words cannot be NaN, but its f16 scales can (0x7c00 is +inf in f16, 0x7f80 in bf16).
#[test]
fn infinity_in_a_quantized_copys_scales_is_named_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny-8bit");
    let made = songloom(
        dir.path(),
        &["model", "quantize", tiny_model().to_str().unwrap(), "--weights", "8bit", "--out", model.to_str().unwrap()],
    );
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let file = model.join("rvq_depth_decoder/diffusion_pytorch_model.safetensors");
    plant(&file, "audio_heads.1.weight.scales", &0x7c00u16.to_le_bytes(), 1);
    assert_refused_at_load(&model, &["the depth decoder", "`audio_heads.1.weight.scales`", "1 NaN or infinite value"]);
}
