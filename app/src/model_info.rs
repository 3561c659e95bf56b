//! `songloom model info DIR`: what a model directory holds, component by component.

use std::path::Path;

use anyhow::Result;
use serde_json::json;
use songloom_engine::model_dir::{ACOUSTIC_DTYPE, AR_DTYPE, ModelDir};
use songloom_engine::plan::{ArFormats, Mode, Workload, size};
use songloom_engine::weights::Checkpoint;
use songloom_engine::{DType, Precision};

use crate::output::say;

const COMPONENTS: [(&str, bool); 5] = [
    ("language_model", true),
    ("rvq_depth_decoder", true),
    ("condition_encoder", true),
    ("transformer", false),
    ("vocoder", false),
];

/// Prints the report; fails (after printing what it could read) when a component is broken or
/// the tokenizer is missing.
pub fn run(dir: &Path, as_json: bool) -> Result<()> {
    let report = report(dir)?;
    if as_json {
        say!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    let mut broken: Vec<String> = COMPONENTS
        .iter()
        .filter_map(|(name, _)| report["components"][name]["error"].as_str().map(|why| format!("{name}: {why}")))
        .collect();
    if report["tokenizer"].as_bool() != Some(true) {
        broken.push(format!("tokenizer: {} is missing", dir.join("tokenizer/tokenizer.json").display()));
    }
    if !broken.is_empty() {
        anyhow::bail!("{} is not a usable model: {}", dir.display(), broken.join("; "));
    }
    Ok(())
}

/// The report as a person reads it: a line per component, then the tokenizer.
fn print_table(report: &serde_json::Value) {
    say!("model {}", report["path"].as_str().unwrap_or("?"));
    say!("  {:<20} {:>16} {:>8}  {:<16} runs in", "component", "parameters", "tensors", "stored as");
    for (name, _) in COMPONENTS {
        let c = &report["components"][name];
        if let Some(why) = c["error"].as_str() {
            say!("  {name:<20} unusable: {why}");
            continue;
        }
        let stored: Vec<String> = c["stored_dtypes"]
            .as_object()
            .map(|m| m.iter().map(|(dtype, n)| format!("{dtype} ({n})")).collect())
            .unwrap_or_default();
        say!(
            "  {name:<20} {:>16} {:>8}  {:<16} {}",
            group_digits(c["parameters"].as_u64().unwrap_or(0)),
            c["tensors"].as_u64().unwrap_or(0),
            stored.join(", "),
            c["runs_in"].as_str().unwrap_or("?")
        );
    }
    let tokenizer = if report["tokenizer"].as_bool() == Some(true) { "present" } else { "missing" };
    say!("  {:<20} {tokenizer}", "tokenizer");
}

/// 8584475648 as 8,584,475,648.
fn group_digits(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One line for the window: parameters per component and the tokenizer, or what is wrong.
pub fn summary(dir: &Path) -> Result<String> {
    let report = report(dir)?;
    let mut parts = Vec::new();
    let mut total = 0u64;
    for (name, _) in COMPONENTS {
        let c = &report["components"][name];
        match c["parameters"].as_u64() {
            Some(p) => {
                total += p;
                parts.push(format!("{name} {}", human(p)));
            }
            None => parts.push(format!("{name}: {}", c["error"].as_str().unwrap_or("unreadable"))),
        }
    }
    let tokenizer = if report["tokenizer"].as_bool() == Some(true) { "tokenizer" } else { "no tokenizer" };
    let needs = needs(dir).unwrap_or_else(|e| format!("what it needs is unknown: {e}"));
    Ok(format!("{} parameters: {}; {tokenizer}. {needs}", human(total), parts.join(", ")))
}

/// What the model needs: its size on disk, and the GPU memory a 60 s song's plans predict
/// (`--precision bf16`), from the most exact format it holds down to the smallest, phase by phase.
fn needs(dir: &Path) -> Result<String> {
    let model = ModelDir::open(dir)?;
    let geometry = model.geometry()?;
    let work = Workload::planned_song_on_gpu(Precision::Bf16);
    let choices: Vec<ArFormats> = match model.stored_formats()? {
        Some(stored) => vec![stored],
        None => ArFormats::ALL.to_vec(),
    };
    let largest = geometry.plan(choices[0], Mode::Streamed, &work);
    let smallest = geometry.plan(*choices.last().expect("one at least"), Mode::Phased, &work);
    Ok(format!(
        "Needs {} on disk; a 60 s song on a GPU: {} ({}, streamed) down to {} ({}, phase by phase)",
        size(disk_bytes(dir)),
        size(largest.peak_bytes),
        largest.formats.describe(),
        size(smallest.peak_bytes),
        smallest.formats.describe()
    ))
}

/// Bytes of the files under `dir`.
fn disk_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => disk_bytes(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

/// The component's config read as the engine reads it (the file there, its fields of the right
/// types, their values in range).
fn check_config(component: &str, dir: &Path) -> songloom_engine::Result<()> {
    use songloom_engine::config::{self, ConditionConfig, DepthConfig, DitConfig, LmConfig, VocoderConfig};
    let file = "config.json";
    match component {
        "language_model" => config::read_config::<LmConfig>(dir, file).map(drop),
        "rvq_depth_decoder" => config::read_config::<DepthConfig>(dir, file).map(drop),
        "condition_encoder" => config::read_config::<ConditionConfig>(dir, file).map(drop),
        "transformer" => config::read_config::<DitConfig>(dir, file).map(drop),
        _ => config::read_config::<VocoderConfig>(dir, file).map(drop),
    }
}

fn human(parameters: u64) -> String {
    match parameters {
        p if p >= 1_000_000_000 => format!("{:.2} B", p as f64 / 1e9),
        p if p >= 1_000_000 => format!("{:.1} M", p as f64 / 1e6),
        p => format!("{:.1} k", p as f64 / 1e3),
    }
}

/// What `model info` prints, as JSON.
pub fn report(dir: &Path) -> Result<serde_json::Value> {
    let model = ModelDir::open(dir)?;
    let mut components = serde_json::Map::new();
    for (name, ar) in COMPONENTS {
        let path = model.component(name);
        let entry = match check_config(name, &path).and_then(|()| Checkpoint::open(&path)) {
            Ok(ckpt) => {
                let mut params = 0usize;
                let mut dtypes = std::collections::BTreeMap::<String, usize>::new();
                let names: Vec<String> = ckpt.tensor_names().map(str::to_string).collect();
                for n in &names {
                    let base = n.strip_suffix(".scales").or_else(|| n.strip_suffix(".offsets"));
                    if base.is_some_and(|b| matches!(ckpt.stored_format(b), Some(DType::Q8 | DType::Q4))) {
                        continue; // a quantized matrix's scales and offsets are not parameters
                    }
                    // A quantized matrix packs 32-bit words: 4 weights each in q8, 8 in q4.
                    let per_element = match ckpt.stored_format(n) {
                        Some(DType::Q8) => 4,
                        Some(DType::Q4) => 8,
                        _ => 1,
                    };
                    params += ckpt.shape_of(n)?.iter().product::<usize>() * per_element;
                    *dtypes
                        .entry(
                            ckpt.read_rows(n, Some((0, 0)))
                                .map(|t| t.dtype().to_string())
                                .unwrap_or_else(|_| "other".into()),
                        )
                        .or_default() += 1;
                }
                let config: serde_json::Value = std::fs::read_to_string(path.join("config.json"))
                    .ok()
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .unwrap_or(serde_json::Value::Null);
                json!({
                    "tensors": names.len(), "parameters": params, "stored_dtypes": dtypes,
                    "runs_in": if ar { AR_DTYPE.to_string() } else { ACOUSTIC_DTYPE.to_string() },
                    "config": config,
                })
            }
            Err(e) => json!({"error": e.to_string()}),
        };
        components.insert(name.to_string(), entry);
    }
    let c = &model.constants;
    Ok(json!({
        "path": dir,
        "tokenizer": model.component("tokenizer").join("tokenizer.json").is_file(),
        "constants": {
            "audio_end_id": c.audio_end_id, "audio_cfg_id": c.audio_cfg_id, "code_offset": c.code_offset,
            "semantic_vocab_size": c.semantic_vocab_size,
        },
        "components": components,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name)
    }

    #[test]
    fn the_summary_says_what_the_model_needs() {
        let tiny = summary(&model("tests/fixtures/tiny-music3")).unwrap();
        assert!(tiny.contains("Needs ") && tiny.contains(" on disk; a 60 s song on a GPU: "), "{tiny}");
        assert!(tiny.contains("(bf16 AR weights, streamed) down to"), "{tiny}");
        // A quantized copy holds one format: its plans are that format's.
        let mini = summary(&model("models/songloom-mini")).unwrap();
        // Its q8 matrices count as the weights they pack (the card's 19.1 M), not as words.
        assert!(mini.starts_with("19.1 M parameters: language_model 8.3 M"), "{mini}");
        assert!(mini.contains("(q8 AR weights, streamed) down to"), "{mini}");
        assert!(mini.contains("(q8 AR weights, phase by phase)"), "{mini}");
    }
}
