//! LoRA adapters against the reference: the tiny checkpoint with the adapters of
//! `tests/fixtures/lora/` (PEFT folders and a diffusers pipeline file) merged at load, held against
//! what PEFT 0.21.2 and diffusers 0.42.1 compute with the same adapters loaded
//! (`tools/oracle/lora_goldens.py`, goldens `lora_{lm,depth,dit}`).
//!
//! The bounds are calibrated as in `parity.rs`: on the reference's own precision noise (its
//! distance to the same run one precision up). Two negative controls show each bound can fail:
//! the model without the adapter, and the adapter with `lora_A` and `lora_B` swapped.

use std::path::{Path, PathBuf};

use songloom_engine::lora::{AdapterSpec, Adapters};
use songloom_engine::model_dir::{ACOUSTIC_DTYPE, ModelDir};
use songloom_engine::models::kv_cache::KV_DTYPE;
use songloom_engine::plan::ArFormats;
use songloom_engine::weights::{Checkpoint, save_f32};
use songloom_engine::{DType, Device, DeviceKind};
use songloom_tests::{Bound, Golden, bf16_bound, cpu, devices, distance, fixtures, stage_runs, tiny_model_dir};

/// The pipeline file's goldens are made at this user scale (`lora_goldens.py` PIPELINE_SCALE).
const PIPELINE_SCALE: f32 = 0.5;
/// f32 stages: as `parity.rs`, the f32 reference's distance to its f64 control times this,
/// floored at f32 noise.
const F32_FACTOR: f32 = 8.0;
const F32_FLOOR: f32 = 2e-6;

/// One stage an adapter changes.
struct Case {
    stage: &'static str,
    golden: &'static str,
    peft_folder: &'static str,
    /// The stage's output for the golden's inputs.
    run: fn(&ModelDir, &Device, &Golden) -> Vec<f32>,
    /// The bound from the golden's `{format}_reference` and `{format}_control`.
    bound: fn(&Golden, &str) -> Bound,
}

fn lm_run(model: &ModelDir, device: &Device, g: &Golden) -> Vec<f32> {
    stage_runs::lm_run(model, device, DType::BF16, KV_DTYPE, g)
}

fn depth_run(model: &ModelDir, device: &Device, g: &Golden) -> Vec<f32> {
    stage_runs::depth_run(model, device, DType::BF16, KV_DTYPE, &g.ids("codes"), g).0
}

fn dit_run(model: &ModelDir, device: &Device, g: &Golden) -> Vec<f32> {
    stage_runs::dit_run(model, device, ACOUSTIC_DTYPE, g)
}

fn bf16_case_bound(g: &Golden, format: &str) -> Bound {
    bf16_bound(g, &format!("{format}_reference"), &format!("{format}_control"))
}

fn f32_case_bound(g: &Golden, format: &str) -> Bound {
    let control = distance(&g.values(&format!("{format}_control")), &g.values(&format!("{format}_reference")));
    Bound::calibrated(control, F32_FACTOR, F32_FLOOR)
}

const CASES: [Case; 3] = [
    Case { stage: "lm", golden: "lora_lm", peft_folder: "lm-peft", run: lm_run, bound: bf16_case_bound },
    Case { stage: "depth", golden: "lora_depth", peft_folder: "depth-peft", run: depth_run, bound: bf16_case_bound },
    Case { stage: "dit", golden: "lora_dit", peft_folder: "dit-peft", run: dit_run, bound: f32_case_bound },
];

fn lora_fixture(name: &str) -> PathBuf {
    fixtures().join("lora").join(name)
}

fn spec(path: PathBuf, scale: f32) -> AdapterSpec {
    AdapterSpec { path, scale }
}

fn pipeline_file() -> PathBuf {
    lora_fixture("pytorch_lora_weights.safetensors")
}

/// The tiny model with `specs` merged at load.
fn adapted(root: &Path, specs: &[AdapterSpec]) -> ModelDir {
    ModelDir::open(root).unwrap().with_adapters(Adapters::open(specs).unwrap()).unwrap()
}

/// Why the model at `root` refuses `specs` (reading them, or binding them to the model).
fn refusal(root: &Path, specs: &[AdapterSpec]) -> String {
    let bound = Adapters::open(specs).and_then(|a| ModelDir::open(root).unwrap().with_adapters(a));
    match bound {
        Ok(_) => panic!("{specs:?} was accepted"),
        Err(e) => e.to_string(),
    }
}

/// Each format's adapter for `case`, with the scale its golden was made at.
fn adapters_of(case: &Case) -> [(&'static str, AdapterSpec); 2] {
    [("peft", spec(lora_fixture(case.peft_folder), 1.0)), ("pipeline", spec(pipeline_file(), PIPELINE_SCALE))]
}

type Tensors = Vec<(String, Vec<usize>, Vec<f32>)>;

fn read_all(path: &Path) -> Tensors {
    let file = Checkpoint::open_file(path).unwrap();
    let mut names: Vec<String> = file.tensor_names().map(str::to_string).collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let t = file.read(&n).unwrap();
            (n, t.shape().to_vec(), t.to_f32_vec())
        })
        .collect()
}

/// A PEFT folder's copy in `dir` with its weights edited.
fn edited_peft(folder: &str, dir: &Path, edit: impl FnOnce(&mut Tensors)) -> PathBuf {
    let src = lora_fixture(folder);
    let dst = dir.join(folder);
    std::fs::create_dir_all(&dst).unwrap();
    std::fs::copy(src.join("adapter_config.json"), dst.join("adapter_config.json")).unwrap();
    let mut tensors = read_all(&src.join("adapter_model.safetensors"));
    edit(&mut tensors);
    save_f32(&dst.join("adapter_model.safetensors"), &tensors).unwrap();
    dst
}

/// The pipeline file's copy in `dir` with its tensors edited.
fn edited_pipeline(dir: &Path, name: &str, edit: impl FnOnce(&mut Tensors)) -> PathBuf {
    let mut tensors = read_all(&pipeline_file());
    edit(&mut tensors);
    let path = dir.join(name);
    save_f32(&path, &tensors).unwrap();
    path
}

fn transpose(rows: usize, cols: usize, data: &[f32]) -> Vec<f32> {
    (0..cols).flat_map(|c| (0..rows).map(move |r| data[r * cols + c])).collect()
}

/// `lora_A` and `lora_B` swapped (each transposed so that it still fits) in every module whose
/// weight is square; the others are kept.
fn swap_a_and_b(tensors: &mut Tensors) {
    let a_keys: Vec<String> = tensors.iter().filter(|t| t.0.ends_with("lora_A.weight")).map(|t| t.0.clone()).collect();
    for a_key in a_keys {
        let b_key = a_key.replace("lora_A", "lora_B");
        let a = tensors.iter().position(|t| t.0 == a_key).unwrap();
        let b = tensors.iter().position(|t| t.0 == b_key).unwrap();
        let (rank, fan_in, fan_out) = (tensors[a].1[0], tensors[a].1[1], tensors[b].1[0]);
        if fan_in != fan_out {
            continue;
        }
        let new_a = transpose(fan_out, rank, &tensors[b].2);
        let new_b = transpose(rank, fan_in, &tensors[a].2);
        tensors[a].2 = new_a;
        tensors[b].2 = new_b;
    }
}

#[test]
fn adapters_match_the_peft_and_diffusers_references() {
    for case in &CASES {
        let g = Golden::open(case.golden);
        for (format, adapter) in adapters_of(case) {
            let bound = (case.bound)(&g, format);
            let reference = g.values(&format!("{format}_reference"));
            let model = adapted(&tiny_model_dir(), std::slice::from_ref(&adapter));
            let on_cpu = (case.run)(&model, &cpu(), &g);
            for device in devices() {
                let name = device.kind();
                let ours = (case.run)(&model, &device, &g);
                bound.check(
                    &format!("{name}: {} with the {format} adapter vs reference", case.stage),
                    &ours,
                    &reference,
                );
                if name != DeviceKind::Cpu {
                    bound.check(&format!("{name}: {} with the {format} adapter vs cpu", case.stage), &ours, &on_cpu);
                }
            }

            // Negative control 1: the model without the adapter.
            let plain = (case.run)(&ModelDir::open(&tiny_model_dir()).unwrap(), &cpu(), &g);
            bound.rejects(&format!("{} without the {format} adapter", case.stage), &plain, &reference);
        }

        // Negative control 2: the PEFT adapter with A and B swapped.
        let dir = tempfile::tempdir().unwrap();
        let swapped = edited_peft(case.peft_folder, dir.path(), swap_a_and_b);
        let broken = (case.run)(&adapted(&tiny_model_dir(), &[spec(swapped, 1.0)]), &cpu(), &g);
        let bound = (case.bound)(&g, "peft");
        bound.rejects(&format!("{} with lora_A and lora_B swapped", case.stage), &broken, &g.values("peft_reference"));
    }
}

/// Two adapters add up: the pipeline file at scale 0.5 twice is the file at scale 1 once, in
/// every stage (within one rounding of the stored dtype).
#[test]
fn adapters_given_twice_add_their_scales() {
    for case in &CASES {
        let g = Golden::open(case.golden);
        let half = spec(pipeline_file(), 0.5);
        let twice = (case.run)(&adapted(&tiny_model_dir(), &[half.clone(), half]), &cpu(), &g);
        let once = (case.run)(&adapted(&tiny_model_dir(), &[spec(pipeline_file(), 1.0)]), &cpu(), &g);
        let at_half = (case.run)(&adapted(&tiny_model_dir(), &[spec(pipeline_file(), 0.5)]), &cpu(), &g);
        let d = distance(&twice, &once);
        let effect = distance(&at_half, &once);
        println!("{}: two halves vs one whole rel {:.3e}; half vs whole {:.3e}", case.stage, d.rel, effect.rel);
        assert!(d.rel < effect.rel / 20.0, "{}: {d:?} vs {effect:?}", case.stage);
    }
}

#[test]
fn an_adapter_at_scale_zero_is_bit_identical_to_none() {
    for case in &CASES {
        let g = Golden::open(case.golden);
        for device in devices() {
            let plain = (case.run)(&ModelDir::open(&tiny_model_dir()).unwrap(), &device, &g);
            for (format, adapter) in adapters_of(case) {
                let zero = spec(adapter.path, 0.0);
                let ours = (case.run)(&adapted(&tiny_model_dir(), &[zero]), &device, &g);
                assert!(
                    ours == plain,
                    "{}: {} at scale 0 on {} differs from no adapter",
                    case.stage,
                    format,
                    device.kind()
                );
            }
        }
    }
}

/// Quantizing at load quantizes the merged weights: an 8-bit load with the adapter lies within
/// the 8-bit error of the adapter's reference, and far from the adapter-less model.
#[test]
fn adapters_merge_before_quantizing_at_load() {
    let g = Golden::open("lora_lm");
    let model = adapted(&tiny_model_dir(), &[spec(lora_fixture("lm-peft"), 1.0)]);
    let q8 = stage_runs::lm_run(&model, &cpu(), ArFormats::Q8.lm, KV_DTYPE, &g);
    let bf16 = lm_run(&model, &cpu(), &g);
    let reference = g.values("peft_reference");
    let plain = lm_run(&ModelDir::open(&tiny_model_dir()).unwrap(), &cpu(), &g);
    let (quantized, without) = (distance(&q8, &reference), distance(&plain, &reference));
    println!("q8 with adapter vs reference rel {:.3e}; no adapter {:.3e}", quantized.rel, without.rel);
    assert!(q8 != bf16, "the 8-bit load was not quantized");
    assert!(quantized.rel < without.rel / 10.0, "q8 {quantized:?} vs no adapter {without:?}");
}

#[test]
fn adapters_that_do_not_fit_are_refused_naming_the_key() {
    let root = tiny_model_dir();
    let dir = tempfile::tempdir().unwrap();
    let key = "transformer.transformer_blocks.0.attn.to_q.lora_A.weight";

    // A pair for a model of another width.
    let narrow = edited_pipeline(dir.path(), "narrow.safetensors", |t| {
        let a = t.iter_mut().find(|t| t.0 == key).unwrap();
        let (rank, cols) = (a.1[0], a.1[1] / 2);
        a.1 = vec![rank, cols];
        a.2 = (0..rank).flat_map(|r| a.2[r * 2 * cols..r * 2 * cols + cols].to_vec()).collect();
    });
    let err = refusal(&root, &[spec(narrow.clone(), 1.0)]);
    assert!(err.contains(key) && err.contains("another size") && err.contains("narrow.safetensors"), "{err}");

    // A module the model has not.
    let unknown = edited_pipeline(dir.path(), "unknown.safetensors", |t| {
        for t in t.iter_mut().filter(|t| t.0.starts_with("transformer.transformer_blocks.1.attn.to_q.")) {
            t.0 = t.0.replace("transformer_blocks.1", "transformer_blocks.7");
        }
    });
    let err = refusal(&root, &[spec(unknown, 1.0)]);
    assert!(
        err.contains("transformer.transformer_blocks.7.attn.to_q.lora_A.weight") && err.contains("another model"),
        "{err}"
    );

    // Kohya's naming, a component adapters do not change, a missing half, a key that is no LoRA weight.
    let renamed = |name: &str, from: &'static str, to: &'static str| {
        edited_pipeline(dir.path(), name, |t| {
            if let Some(t) = t.iter_mut().find(|t| t.0 == key) {
                t.0 = t.0.replace(from, to);
            }
        })
    };
    let cases = [
        (renamed("kohya.safetensors", "lora_A", "lora_down"), "kohya"),
        (renamed("vocoder.safetensors", "transformer.transformer_blocks", "vocoder.blocks"), "vocoder"),
        (renamed("half.safetensors", "lora_A.weight", "lora_A.weight.extra"), "not a LoRA weight"),
        (edited_pipeline(dir.path(), "lonely.safetensors", |t| t.retain(|t| t.0 != key)), "without"),
    ];
    for (path, expected) in cases {
        let err = refusal(&root, &[spec(path.clone(), 1.0)]);
        assert!(err.contains(expected) && err.contains(&path.display().to_string()), "{expected}: {err}");
    }

    // Some modules of a component with `.alpha` and others without: readers disagree, so refused.
    let mixed = edited_pipeline(dir.path(), "mixed.safetensors", |t| {
        t.retain(|t| t.0 != "transformer.transformer_blocks.0.attn.to_q.alpha")
    });
    let err = refusal(&root, &[spec(mixed, 1.0)]);
    assert!(
        err.contains("transformer.transformer_blocks.0.attn.to_q.lora_A.weight") && err.contains(".alpha"),
        "{err}"
    );

    // A PEFT folder whose settings give another rank than its weights have.
    let folder = edited_peft("dit-peft", dir.path(), |_| {});
    let config = folder.join("adapter_config.json");
    let text = std::fs::read_to_string(&config).unwrap().replace("\"r\": 4", "\"r\": 8");
    std::fs::write(&config, text).unwrap();
    let err = refusal(&root, &[spec(folder.clone(), 1.0)]);
    assert!(err.contains("rank 4") && err.contains("lora_A.weight"), "{err}");
    // ... or DoRA.
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("\"r\": 8", "\"r\": 4")
        .replace("\"use_dora\": false", "\"use_dora\": true");
    std::fs::write(&config, text).unwrap();
    let err = refusal(&root, &[spec(folder, 1.0)]);
    assert!(err.contains("use_dora"), "{err}");

    // A path that is not there.
    let err = refusal(&root, &[spec(lora_fixture("nowhere"), 1.0)]);
    assert!(err.contains("nowhere") && err.contains("no such file"), "{err}");

    // A quantized copy's matrices are checked in weights, not in packed words.
    let copy = dir.path().join("tiny-8bit");
    songloom_engine::quantized_copy::write(&root, &copy, ArFormats::Q8, &|_| {}).unwrap();
    let err = refusal(&copy, &[spec(narrow, 1.0)]);
    assert!(err.contains(key) && err.contains("another size"), "{err}");
}

/// A quantized copy's packed matrices take no merge: the adapters run beside them as a low-rank
/// side product. Its distance to the adapter's reference is the copy's own quantization error
/// (the copy without adapter against the plain golden) plus the bf16 bound; scale 0 is the copy
/// as it is, bit for bit.
#[test]
fn adapters_apply_to_a_quantized_copy_as_a_side_product() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("tiny-8bit");
    songloom_engine::quantized_copy::write(&tiny_model_dir(), &copy, ArFormats::Q8, &|_| {}).unwrap();
    type Run = fn(&ModelDir, &Device, &Golden) -> Vec<f32>;
    let lm: Run = |m, d, g| stage_runs::lm_run(m, d, ArFormats::Q8.lm, KV_DTYPE, g);
    let depth: Run = |m, d, g| stage_runs::depth_run(m, d, ArFormats::Q8.depth, KV_DTYPE, &g.ids("codes"), g).0;
    for (stage, run, plain_golden, golden, folder) in
        [("lm", lm, "lm", "lora_lm", "lm-peft"), ("depth", depth, "depth", "lora_depth", "depth-peft")]
    {
        let (g, plain_g) = (Golden::open(golden), Golden::open(plain_golden));
        let plain_copy = run(&ModelDir::open(&copy).unwrap(), &cpu(), &plain_g);
        let quantization = distance(&plain_copy, &plain_g.values("reference"));
        let bound = Bound { rel: quantization.rel + bf16_case_bound(&g, "peft").rel };
        let model = adapted(&copy, &[spec(lora_fixture(folder), 1.0)]);
        for device in devices() {
            let ours = run(&model, &device, &g);
            bound.check(
                &format!("{}: q8 copy {stage} with a side product", device.kind()),
                &ours,
                &g.values("peft_reference"),
            );
        }
        let without = run(&ModelDir::open(&copy).unwrap(), &cpu(), &g);
        bound.rejects(&format!("q8 copy {stage} without the adapter"), &without, &g.values("peft_reference"));
        let swapped = edited_peft(folder, dir.path(), swap_a_and_b);
        let broken = run(&adapted(&copy, &[spec(swapped, 1.0)]), &cpu(), &g);
        bound.rejects(&format!("q8 copy {stage} with lora_A and lora_B swapped"), &broken, &g.values("peft_reference"));
        let zero = run(&adapted(&copy, &[spec(lora_fixture(folder), 0.0)]), &cpu(), &g);
        assert!(zero == without, "{stage}: a side product at scale 0 changed the copy");
        println!("{stage}: the copy's own quantization error rel {:.3e}", quantization.rel);
    }
}

/// The recipe's record of an adapter: its path, name, scale and the file's SHA-256.
#[test]
fn adapters_are_recorded_with_their_checksums() {
    let adapters = Adapters::open(&[spec(pipeline_file(), 0.25), spec(lora_fixture("lm-peft"), 1.0)]).unwrap();
    let recipes: Vec<_> = adapters.iter().map(|a| a.recipe()).collect();
    assert_eq!(recipes[0].name, "pytorch_lora_weights.safetensors");
    assert_eq!(recipes[0].scale, 0.25);
    assert_eq!(recipes[1].name, "lm-peft");
    for r in &recipes {
        assert_eq!(r.sha256.len(), 64, "{r:?}");
    }
    assert_ne!(recipes[0].sha256, recipes[1].sha256);
    let mut bound = Adapters::open(&[spec(pipeline_file(), 0.25), spec(lora_fixture("lm-peft"), 1.0)]).unwrap();
    bound.bind(&tiny_model_dir()).unwrap();
    let said: Vec<String> = bound.iter().map(|a| a.describe()).collect();
    assert_eq!(
        said,
        [
            "pytorch_lora_weights.safetensors (diffusers pipeline file, scale 0.25): 40 modules of the language model, \
         depth decoder and DiT",
            "lm-peft (PEFT folder, scale 1): 14 modules of the language model",
        ]
    );
    // The pipeline file's checksum is its bytes' (as `sha256sum` prints it).
    let again = Adapters::open(&[spec(pipeline_file(), 1.0)]).unwrap();
    assert_eq!(again.iter().next().unwrap().sha256, recipes[0].sha256);
}

/// An adapter on `lm_head`, which loads only the sampleable rows: those rows of the merged head
/// are the same rows of the whole merged head, bit for bit, and differ from the plain head's.
#[test]
fn an_lm_head_adapter_merges_into_the_rows_that_are_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("head-peft");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("adapter_config.json"), r#"{"peft_type": "LORA", "r": 2, "lora_alpha": 4}"#).unwrap();
    let (vocab, hidden, rank) = (448usize, 64usize, 2usize); // tests/fixtures/tiny-music3/language_model
    let wave = |n: usize, k: f32| (0..n).map(|i| ((i as f32 * k).sin()) * 0.2).collect::<Vec<f32>>();
    let tensors = vec![
        ("base_model.model.lm_head.lora_A.weight".to_string(), vec![rank, hidden], wave(rank * hidden, 0.37)),
        ("base_model.model.lm_head.lora_B.weight".to_string(), vec![vocab, rank], wave(vocab * rank, 0.11)),
    ];
    save_f32(&folder.join("adapter_model.safetensors"), &tensors).unwrap();

    let g = Golden::open("lm");
    let ids = g.ids("input_ids");
    let logits = |model: &ModelDir, rows: Option<std::ops::Range<u32>>| {
        let device = cpu();
        let lm = model.language_model(&device, rows, DType::BF16).unwrap();
        let mut cache = lm.new_cache(&device, 2, ids.len() / 2).unwrap();
        let hidden = lm.forward(&device, &lm.embed(&device, &ids).unwrap(), &mut cache).unwrap();
        (lm.head_rows(), lm.logits(&device, &hidden).unwrap().to_f32_vec())
    };
    let adapted_model = adapted(&tiny_model_dir(), &[spec(folder, 1.0)]);
    let (_, full) = logits(&adapted_model, Some(0..vocab as u32));
    let (rows, sliced) = logits(&adapted_model, None);
    let (_, plain) = logits(&ModelDir::open(&tiny_model_dir()).unwrap(), None);
    let n = rows.len();
    for b in 0..2 {
        assert_eq!(&sliced[b * n..(b + 1) * n], &full[b * vocab + rows.start as usize..][..n], "row {b}");
    }
    let d = distance(&sliced, &plain);
    assert!(d.rel > 1e-2, "the head adapter changed nothing: {d:?}");
}
