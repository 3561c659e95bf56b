//! `songloom model info DIR`: what a model directory holds, component by component.

use std::path::Path;

use anyhow::Result;
use serde_json::json;
use songloom_engine::model_dir::{ACOUSTIC_DTYPE, AR_DTYPE, ModelDir};
use songloom_engine::weights::Checkpoint;

const COMPONENTS: [(&str, bool); 5] = [
    ("language_model", true),
    ("rvq_depth_decoder", true),
    ("condition_encoder", true),
    ("transformer", false),
    ("vocoder", false),
];

pub fn run(dir: &Path) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(&report(dir)?)?);
    Ok(())
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
    Ok(format!("{} parameters: {}; {tokenizer}", human(total), parts.join(", ")))
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
        let entry = match Checkpoint::open(&path) {
            Ok(ckpt) => {
                let mut params = 0usize;
                let mut dtypes = std::collections::BTreeMap::<String, usize>::new();
                let names: Vec<String> = ckpt.tensor_names().map(str::to_string).collect();
                for n in &names {
                    let shape = ckpt.shape_of(n)?;
                    params += shape.iter().product::<usize>();
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
