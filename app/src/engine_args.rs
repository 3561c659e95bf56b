//! The flags that say which engine to open and how much of the device it may use, one group
//! flattened into `generate`, `serve` and `bench` with the same defaults. Each choice is parsed by
//! clap through its type's `FromStr`, and its help text is made from the type's own list.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use songloom_engine::lora::{AdapterSpec, Adapters};
use songloom_engine::pipeline::MemoryRequest;
use songloom_engine::plan::{ModeChoice, WeightsChoice};
use songloom_engine::precision::names;
use songloom_engine::{Device, DeviceChoice, DeviceOptions, Precision};
use songloom_wire::AdapterRecipe;

/// Bytes in a GB, the unit of `--max-memory` and of the window's budget.
const BYTES_PER_GB: f64 = 1e9;

#[derive(Args)]
pub struct EngineArgs {
    #[arg(long, default_value_t = DeviceChoice::Auto, help = DeviceChoice::help())]
    pub device: DeviceChoice,
    #[arg(long, default_value_t = Precision::Reference, help = precision_help())]
    pub precision: Precision,
    #[arg(long, default_value_t = WeightsChoice::Auto, help = weights_help())]
    pub weights: WeightsChoice,
    /// The GPU memory the engine may use, in GB (default: what the device has free). The plan
    /// picks the weights and whether both halves fit at once; on the CPU nothing enforces it.
    #[arg(long = "max-memory", value_name = "GB", value_parser = parse_max_memory)]
    pub max_memory_bytes: Option<u64>,
    #[arg(long, default_value_t = ModeChoice::Auto, help = mode_help())]
    pub mode: ModeChoice,
}

/// `--lora`, for the commands that load a model's weights to make songs.
#[derive(Args)]
pub struct AdapterArgs {
    /// A LoRA adapter for the language model, depth decoder or DiT, merged into their weights at
    /// load (run beside a quantized copy's matrices): a PEFT folder (adapter_config.json and
    /// adapter_model.safetensors) or a diffusers pytorch_lora_weights.safetensors, with an optional
    /// :SCALE (1 without it). Repeatable.
    #[arg(long = "lora", value_name = "FILE[:SCALE]")]
    pub lora: Vec<AdapterSpec>,
}

impl AdapterArgs {
    /// Reads every adapter named (checked against the model when it loads).
    pub fn open(&self) -> Result<Adapters> {
        Ok(Adapters::open(&self.lora)?)
    }
}

/// The recipe fields the engine decides, as `generate`, `serve` and `mcp` record them: the device,
/// precision, model, the weights the plan took (so the recipe makes the same song again), the
/// budget and the adapters; the song's own fields at their defaults.
pub fn engine_recipe(
    engine: &EngineArgs,
    model: &ModelArg,
    plan: &songloom_engine::plan::Plan,
    adapters: Vec<AdapterRecipe>,
) -> songloom_wire::Recipe {
    songloom_wire::Recipe {
        device: engine.device.name().to_string(),
        precision: engine.precision.name().to_string(),
        model: model.recipe_model(),
        weights: WeightsChoice::of(plan.formats).name().to_string(),
        max_memory_gb: engine.max_memory_gb(),
        adapters,
        ..songloom_wire::Recipe::default()
    }
}

/// The adapters as a recipe records them.
pub fn adapter_recipes(adapters: &Adapters) -> Vec<AdapterRecipe> {
    adapters.iter().map(|a| a.recipe()).collect()
}

/// `--model`, for the commands that run a real model.
#[derive(Args)]
pub struct ModelArg {
    /// A MiniMax-Music3 model directory in the diffusers layout; the embedded model (Songloom Mini) without it.
    #[arg(long)]
    pub model: Option<PathBuf>,
}

impl EngineArgs {
    /// What the flags ask of memory.
    pub fn memory_request(&self) -> MemoryRequest {
        MemoryRequest { weights: self.weights, max_memory_bytes: self.max_memory_bytes, mode: self.mode.mode() }
    }

    /// The device the flags name, under their precision.
    pub fn open_device(&self) -> Result<Device> {
        Ok(Device::open(self.device, DeviceOptions { precision: self.precision, ..DeviceOptions::default() })?)
    }

    /// The budget as a recipe and the window show it.
    pub fn max_memory_gb(&self) -> Option<f64> {
        self.max_memory_bytes.map(|bytes| bytes as f64 / BYTES_PER_GB)
    }
}

impl ModelArg {
    /// The model directory: the one named, or the embedded default unpacked.
    pub fn dir(&self) -> Result<PathBuf> {
        match &self.model {
            Some(dir) => Ok(dir.clone()),
            None => crate::default_model::path(),
        }
    }

    /// The model as a recipe names it: its directory, or empty for the embedded one.
    pub fn recipe_model(&self) -> String {
        self.model.as_ref().map(|m| m.display().to_string()).unwrap_or_default()
    }
}

/// A budget in GB (the flag's and the window's unit) as bytes, refused unless above 0.
pub fn max_memory_bytes(gb: f64) -> Result<u64> {
    let bytes = (gb * BYTES_PER_GB).round();
    if !(gb.is_finite() && bytes >= 1.0) {
        anyhow::bail!("the memory budget must be a number of GB above 0 (got {gb})");
    }
    Ok(bytes as u64)
}

/// `--max-memory`'s text as bytes.
fn parse_max_memory(text: &str) -> Result<u64> {
    let gb: f64 =
        text.trim().parse().map_err(|_| anyhow::anyhow!("the memory budget must be a number of GB (got `{text}`)"))?;
    max_memory_bytes(gb)
}

/// `a (what a means), b or c`.
fn choices<T: Copy>(all: &[T], name: fn(T) -> &'static str, meaning: fn(T) -> &'static str) -> String {
    let items: Vec<String> = all.iter().map(|&c| format!("{} ({})", name(c), meaning(c))).collect();
    names(&items.iter().map(String::as_str).collect::<Vec<_>>())
}

fn precision_help() -> String {
    format!(
        "The DiT and vocoder products on a GPU: {}; distances to the reference in docs/BENCHMARKS.md",
        choices(&Precision::ALL, Precision::name, Precision::meaning)
    )
}

pub fn weights_help() -> String {
    format!(
        "The language model's and depth decoder's weights: {}",
        choices(&WeightsChoice::ALL, WeightsChoice::name, WeightsChoice::meaning)
    )
}

/// The weights a quantized copy can be written in, for `model quantize --weights`.
pub fn quantized_weights_help() -> String {
    choices(&WeightsChoice::QUANTIZED, WeightsChoice::name, WeightsChoice::meaning)
}

/// `model quantize --weights`: a quantized choice, named from the list.
pub fn parse_quantized_weights(text: &str) -> Result<WeightsChoice, String> {
    WeightsChoice::QUANTIZED.into_iter().find(|w| w.name() == text).ok_or_else(|| {
        let expected = names(&WeightsChoice::QUANTIZED.map(WeightsChoice::name));
        format!("unknown weights `{text}` for a quantized copy (expected {expected})")
    })
}

fn mode_help() -> String {
    format!("How the two halves share the device: {}", choices(&ModeChoice::ALL, ModeChoice::name, ModeChoice::meaning))
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use songloom_engine::Device;
    use songloom_engine::pipeline::Pipeline;
    use songloom_engine::plan::{PLANNED_SONG_FRAMES, PLANNED_SONG_PROMPT};

    use crate::{Cli, Command};

    fn engine_args(command: &[&str]) -> super::EngineArgs {
        let cli = Cli::try_parse_from(command).unwrap_or_else(|e| panic!("{command:?}: {e}"));
        match cli.command.expect("a command") {
            Command::Generate(args) => args.engine,
            Command::Serve(args) => args.engine,
            Command::Bench(args) => args.engine,
            _ => panic!("{command:?} takes no engine flags"),
        }
    }

    /// `bench`, `generate` and `serve` take the same flags with the same defaults, so the same
    /// budget makes the same plan (`bench --max-memory 12` once kept bf16 weights and was refused).
    #[test]
    fn bench_generate_and_serve_plan_the_same_under_the_same_flags() {
        let song = ["--description", "piano", "--lyrics", "[verse]\\nla"];
        let generate = [&["songloom", "generate"], &song[..], &["--max-memory", "12"]].concat();
        let requests = [
            engine_args(&["songloom", "bench", "--max-memory", "12"]).memory_request(),
            engine_args(&generate).memory_request(),
            engine_args(&["songloom", "serve", "--max-memory", "12"]).memory_request(),
        ];
        assert!(requests.iter().all(|r| *r == requests[0]), "{requests:?}");
        assert_eq!(requests[0].max_memory_bytes, Some(12_000_000_000));
        let plans: Vec<String> = requests
            .iter()
            .map(|r| {
                Pipeline::synthetic_plan(&Device::cpu(), *r, PLANNED_SONG_PROMPT, PLANNED_SONG_FRAMES)
                    .map(|p| p.describe())
                    .unwrap_or_else(|e| panic!("{r:?}: {e}"))
            })
            .collect();
        assert!(plans.iter().all(|p| *p == plans[0]) && plans[0].contains("12.0 GB budget"), "{plans:?}");
        // The defaults agree too.
        let defaults = [
            engine_args(&["songloom", "bench"]),
            engine_args(&["songloom", "serve"]),
            engine_args(&[&["songloom", "generate"], &song[..]].concat()),
        ];
        for d in &defaults {
            assert_eq!(
                (d.device, d.precision, d.memory_request()),
                (defaults[0].device, defaults[0].precision, defaults[0].memory_request())
            );
        }
    }

    /// `--help` says what `auto` takes in `Device::open`'s order, from the one list the engine
    /// tests against `Device::open`.
    #[test]
    fn device_help_describes_auto_as_device_open_does() {
        use clap::CommandFactory;
        let mut cli = Cli::command();
        for command in ["generate", "serve", "bench"] {
            let help = cli.find_subcommand_mut(command).expect("the command").render_help().to_string();
            let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
            let auto = songloom_engine::DeviceChoice::auto_meaning();
            assert!(flat.contains(&auto), "{command} --help does not say `{auto}`:\n{help}");
        }
    }

    #[test]
    fn max_memory_is_bytes_and_bad_budgets_are_named() {
        assert_eq!(super::parse_max_memory("12").unwrap(), 12_000_000_000);
        assert_eq!(super::parse_max_memory("0.001").unwrap(), 1_000_000);
        for bad in ["0", "-1", "1e-12", "nan", "inf", "twelve"] {
            let err = super::parse_max_memory(bad).unwrap_err().to_string();
            assert!(err.contains("must be a number of GB"), "{bad}: {err}");
        }
        let err = super::parse_quantized_weights("bf16").unwrap_err();
        assert!(err.contains("expected 8bit, 4bit or 4bit-all"), "{err}");
    }
}
