//! The AR stages with quantized matrices (q8, q4) against the bf16 reference goldens on the tiny
//! checkpoint.
//!
//! Calibration: quantizing may move a stage's output as far as weight noise of the same size
//! does. The control is the bf16 model with each quantized matrix's own rounding errors added
//! back in a shuffled order (same sizes, no structure), run in bf16; the bound is
//! `QUANT_FACTOR` times the control's distance to the reference. The negative control is a
//! quantized copy whose scales are applied to the wrong group (each scale moved one group on),
//! which the bound must reject.
//!
//! Measured on the CPU backend (2026-12-01, `cargo nextest run --no-capture -p songloom-tests
//! --test parity_quantized`), relative distance = max |d| / max |reference|:
//!
//! | stage, format | ours | control (shuffled errors) | bound | scales one group off |
//! |---|---:|---:|---:|---:|
//! | LM hidden, q8 | 1.17e-2 | 1.48e-2 | 2.96e-2 | 4.82e-1 |
//! | LM hidden, q4 | 1.51e-1 | 1.30e-1 | 2.59e-1 | 9.08e-1 |
//! | depth hiddens, q8 | 1.40e-2 | 1.35e-2 | 2.69e-2 | 4.83e-1 |
//! | depth hiddens, q4 | 1.35e-1 | 1.43e-1 | 2.85e-1 | 7.87e-1 |
//! | depth logits, q8 | 1.25e-2 | 1.18e-2 | 2.36e-2 | 4.37e-1 |
//! | depth logits, q4 | 1.33e-1 | 1.08e-1 | 2.16e-1 | 6.84e-1 |
//!
//! Ours sits at the control's distance: the formats cost what their rounding costs, no more. A
//! GPU is held to the CPU in the same format within the bf16 stage's own bound (twice the bf16
//! reference's distance to its f32 control) plus the format's control distance: the decode
//! products compute the same integers on both (activations rounded to int8 per group), but a GPU
//! runs the prefill's products in bf16, and activations moved that far may round to other codes.
//! On the H200 (2026-12-01, after the integer decode products): LM q8 1.18e-2 from the CPU (bound
//! 2.58e-2), depth q8 2.3e-3 (its input projection takes the bf16 path), depth q4 2.3e-7.

use std::path::Path;

use songloom_engine::model_dir::{ACOUSTIC_DTYPE, ModelDir};
use songloom_engine::models::kv_cache::KV_DTYPE;
use songloom_engine::pipeline::rng::Rng;
use songloom_engine::plan::ArFormats;
use songloom_engine::quant;
use songloom_engine::quantized_copy::{self, Role};
use songloom_engine::{DType, DeviceKind};
use songloom_tests::stage_runs::{depth_run, dit_run, lm_run};
use songloom_tests::{
    Bound, Golden, bf16_bound, copy_tiny_model, cpu, devices, distance, edit_weights, tiny_model_dir,
};

const QUANT_FACTOR: f32 = 2.0;

const COMPONENTS: [&str; 2] = ["language_model", "rvq_depth_decoder"];

/// The tiny model with each quantized matrix's rounding errors (in `format`) added back
/// shuffled: the control for the format's distance.
fn shuffled_error_model(format: DType) -> tempfile::TempDir {
    let dir = copy_tiny_model();
    for component in COMPONENTS {
        edit_weights(dir.path(), component, |tensors| {
            for (k, (name, _, values)) in tensors.iter_mut().enumerate() {
                let target = match quantized_copy::role(component, name) {
                    Some(Role::Matrix) => format,
                    Some(Role::Table) => ArFormats::table(format),
                    None => continue,
                };
                let bf16: Vec<f32> = values.iter().map(|&v| DType::BF16.round(v)).collect();
                let back = quant::round_trip(&bf16, target).unwrap();
                let mut errors: Vec<f32> = back.iter().zip(&bf16).map(|(q, v)| q - v).collect();
                shuffle(&mut errors, k as u64);
                for ((v, b), e) in values.iter_mut().zip(&bf16).zip(&errors) {
                    *v = b + e;
                }
            }
        });
    }
    dir
}

/// Fisher-Yates with our seeded RNG.
fn shuffle(values: &mut [f32], seed: u64) {
    let mut rng = Rng::derive(seed, "shuffled-errors", 0);
    for i in (1..values.len()).rev() {
        let j = (rng.uniform() * (i + 1) as f64) as usize % (i + 1);
        values.swap(i, j);
    }
}

/// A quantized copy in `formats` whose scales (and offsets) each sit one group on from where
/// they belong.
fn scales_off_by_one_group(formats: ArFormats) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy");
    quantized_copy::write(&tiny_model_dir(), &copy, formats, &|_| {}).unwrap();
    for component in COMPONENTS {
        for entry in std::fs::read_dir(copy.join(component)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "safetensors") {
                roll_scales(&path);
            }
        }
    }
    dir
}

fn roll_scales(path: &Path) {
    use safetensors::tensor::{SafeTensors, TensorView};
    let bytes = std::fs::read(path).unwrap();
    let (_, metadata) = SafeTensors::read_metadata(&bytes).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let mut owned: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)> = file
        .tensors()
        .into_iter()
        .map(|(name, t)| {
            let mut data = t.data().to_vec();
            if name.ends_with(".scales") || name.ends_with(".offsets") {
                data.rotate_right(2); // one f16: each group gets its neighbour's
            }
            (name, t.dtype(), t.shape().to_vec(), data)
        })
        .collect();
    owned.sort_by(|a, b| a.0.cmp(&b.0));
    let views: Vec<(String, TensorView)> =
        owned.iter().map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap())).collect();
    let out = safetensors::serialize(views, metadata.metadata().clone()).unwrap();
    std::fs::write(path, out).unwrap();
}

/// One stage in one format: ours on every device, the shuffled-error control, the broken copy.
fn check_format(
    stage: &str,
    formats: ArFormats,
    format: DType,
    reference: &[f32],
    device_bound: Bound,
    run: &dyn Fn(&ModelDir, &songloom_engine::Device, DType) -> Vec<f32>,
) {
    let control_dir = shuffled_error_model(format);
    let control = run(&ModelDir::open(control_dir.path()).unwrap(), &cpu(), DType::BF16);
    let bound = Bound::calibrated(distance(&control, reference), QUANT_FACTOR, 0.0);
    // A GPU's bf16 prefill moves the activations the decode products then round to int8, which
    // may round them to other codes: as far again as the format's own rounding (the control).
    let device_bound = Bound { rel: device_bound.rel + distance(&control, reference).rel };
    println!("{stage} {format}: control (shuffled errors) rel {:.3e}", distance(&control, reference).rel);
    let on_cpu = run(&ModelDir::open(&tiny_model_dir()).unwrap(), &cpu(), format);
    for device in devices() {
        let kind = device.kind();
        let ours = run(&ModelDir::open(&tiny_model_dir()).unwrap(), &device, format);
        bound.check(&format!("{kind}: {stage} {format} vs bf16 reference"), &ours, reference);
        if kind != DeviceKind::Cpu {
            device_bound.check(&format!("{kind}: {stage} {format} vs cpu"), &ours, &on_cpu);
        }
    }
    let broken_dir = scales_off_by_one_group(formats);
    let broken = run(&ModelDir::open(&broken_dir.path().join("copy")).unwrap(), &cpu(), format);
    bound.rejects(&format!("{stage} {format} with scales one group off"), &broken, reference);
}

const FORMATS: [(ArFormats, DType); 2] = [(ArFormats::Q8, DType::Q8), (ArFormats::Q4, DType::Q4)];

#[test]
fn quantized_lm_matches_the_bf16_reference_within_its_calibrated_bound() {
    let g = Golden::open("lm");
    let device_bound = bf16_bound(&g, "reference", "control");
    for (formats, format) in FORMATS {
        check_format("lm hidden", formats, format, &g.values("reference"), device_bound, &|model, device, f| {
            lm_run(model, device, f, KV_DTYPE, &g)
        });
    }
}

#[test]
fn quantized_depth_decoder_matches_the_bf16_reference_within_its_calibrated_bound() {
    let g = Golden::open("depth");
    let codes = g.ids("codes");
    let (hiddens_bound, logits_bound) =
        (bf16_bound(&g, "reference", "control"), bf16_bound(&g, "reference_logits", "control_logits"));
    for (formats, format) in FORMATS {
        check_format("depth hiddens", formats, format, &g.values("reference"), hiddens_bound, &|model, device, f| {
            depth_run(model, device, f, KV_DTYPE, &codes, &g).0
        });
        check_format(
            "depth logits",
            formats,
            format,
            &g.values("reference_logits"),
            logits_bound,
            &|model, device, f| depth_run(model, device, f, KV_DTYPE, &codes, &g).1,
        );
    }
}

// ---------------------------------------------------------------- the DiT in q8

/// The DiT's block matrices, the ones a q8 DiT quantizes (engine/src/models/dit.rs).
fn is_dit_block_matrix(name: &str) -> bool {
    const MATRICES: [&str; 6] = [
        "attn.to_q.weight",
        "attn.to_k.weight",
        "attn.to_v.weight",
        "attn.to_out.0.weight",
        "ff_in.weight",
        "ff_out.weight",
    ];
    name.starts_with("transformer_blocks.") && MATRICES.iter().any(|m| name.ends_with(m))
}

/// The tiny model with each DiT block matrix (the `k`th tensor, its values) replaced by `edit`.
fn dit_edited(edit: impl Fn(usize, &[f32]) -> Vec<f32>) -> tempfile::TempDir {
    let dir = copy_tiny_model();
    edit_weights(dir.path(), "transformer", |tensors| {
        for (k, (name, _, values)) in tensors.iter_mut().enumerate() {
            if is_dit_block_matrix(name) {
                *values = edit(k, values);
            }
        }
    });
    dir
}

/// The DiT with q8 block matrices (the 12 GB tier's) against the f32 reference golden: the bound
/// is twice the distance of the model with each matrix's own q8 rounding errors added back
/// shuffled, and a copy with each scale one group off must fall outside it. A GPU runs the
/// products in bf16 after unpacking (kernels/quant.cu) and is held to the same bound.
#[test]
fn quantized_dit_matches_the_reference_within_its_calibrated_bound() {
    let g = Golden::open("dit");
    let reference = g.values("reference");
    let control_dir = dit_edited(|k, values| {
        let back = quant::round_trip(values, DType::Q8).unwrap();
        let mut errors: Vec<f32> = back.iter().zip(values).map(|(q, v)| q - v).collect();
        shuffle(&mut errors, k as u64);
        values.iter().zip(&errors).map(|(v, e)| v + e).collect()
    });
    let control = dit_run(&ModelDir::open(control_dir.path()).unwrap(), &cpu(), ACOUSTIC_DTYPE, &g);
    let bound = Bound::calibrated(distance(&control, &reference), QUANT_FACTOR, 0.0);
    println!("dit velocity q8: control (shuffled errors) rel {:.3e}", distance(&control, &reference).rel);
    for device in devices() {
        let ours = dit_run(&ModelDir::open(&tiny_model_dir()).unwrap(), &device, DType::Q8, &g);
        bound.check(&format!("{}: dit velocity q8 vs reference", device.kind()), &ours, &reference);
    }
    let broken_dir = dit_edited(|_, values| {
        let mut q = quant::quantize(values, DType::Q8).unwrap();
        q.scales.rotate_right(1);
        quant::dequantize(&q)
    });
    let broken = dit_run(&ModelDir::open(broken_dir.path()).unwrap(), &cpu(), ACOUSTIC_DTYPE, &g);
    bound.rejects("dit velocity q8 with scales one group off", &broken, &reference);
}
