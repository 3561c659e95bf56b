//! `songloom`: the command line of the Songloom engine.

mod advice;
mod bench;
mod bench_quant;
mod default_model;
mod desktop;
mod edit_cli;
mod edit_job;
mod engine_args;
mod estimate;
mod flac;
mod generate;
mod library;
mod mcp;
mod model_download;
mod model_info;
#[cfg(test)]
mod names_and_rules;
mod output;
mod player;
mod resample;
mod serve;
mod song_job;
mod stale;
#[cfg(test)]
mod test_home;
mod wav;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use songloom_engine::model_dir::ModelDir;
use songloom_engine::plan::WeightsChoice;
use songloom_engine::stage::{Stage, StageInputs, run_stage, stage_formats};
use songloom_engine::weights::save_f32;
use songloom_engine::{Device, DeviceChoice, Tensor};

use crate::output::say;

#[derive(Parser)]
#[command(
    name = "songloom",
    version,
    about = "Write songs on your own machine with MiniMax-Music3.",
    long_about = "Write songs on your own machine with MiniMax-Music3.\n\n\
        Without --model, the embedded default model is used: Songloom Mini, a small MiniMax-Music3 \
        the project trained on synthesized public-domain scores, which makes instrumental music from a \
        description of style, instruments, key and tempo (no vocals; SONGLOOM_MODEL names another \
        default folder). For songs with vocals, download the MiniMaxAI/MiniMax-Music3 checkpoint \
        (diffusers layout) and pass its directory with --model DIR."
)]
struct Cli {
    /// Without a command, the desktop window opens.
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Generates a song, plays it while it is made and writes a 44.1 kHz stereo WAV.
    // A later option wins over an earlier one, so `scripts/run.sh --duration 60` overrides its own.
    #[command(args_override_self = true)]
    Generate(generate::GenerateArgs),
    /// Makes a new version of a library song: extended, another path from a time, sung again from
    /// a lyrics line, or a range rendered again; the audio outside the change is kept as it was.
    Edit(edit_cli::EditArgs),
    /// Serves the HTTP API (and, later, the window in a browser): songs made one at a time on
    /// this machine's engine for clients on the network.
    Serve(serve::ServeArgs),
    /// Speaks the Model Context Protocol on standard input and output, for agents: tools to make a
    /// song (with progress), list, search, get, export and delete library songs, list devices and
    /// models.
    Mcp(mcp::McpArgs),
    /// Prints the assembled prompt and its token ids as JSON.
    Prompt {
        /// The music description.
        #[arg(long, visible_alias = "prompt", allow_hyphen_values = true)]
        description: String,
        /// The lyrics, with structure tags.
        #[arg(long, allow_hyphen_values = true)]
        lyrics: String,
        /// A model directory; the embedded model (Songloom Mini) without it.
        #[arg(long)]
        model: Option<PathBuf>,
    },
    /// The library of saved songs (`generate --save` adds to it).
    Library {
        #[command(subcommand)]
        command: LibraryCommand,
        /// The library folder (as `generate --library`); the user's data directory without it.
        #[arg(long, global = true)]
        library: Option<PathBuf>,
    },
    /// Models: download the real one, list and verify downloads, describe a model folder, make a
    /// quantized copy.
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// Runs one stage of a model on tensors from a safetensors file and writes its outputs.
    ///
    /// condition: frame_hiddens [F, 8*H] -> condition [L, out_dim];
    /// dit: latents [C, L], timestep [1], condition [L, cond_dim] -> velocity [C, L];
    /// vocoder: latents [C, L] -> waveform [2, L*hop];
    /// lm: input_ids [2, S] -> last_hidden [2, H];
    /// depth: last_hidden [2, H], codes [8] -> hiddens [7, H], logits [7, 2, audio_vocab].
    Stage {
        /// condition, dit, vocoder, lm or depth
        stage: String,
        /// The model directory (diffusers layout).
        #[arg(long)]
        model: PathBuf,
        /// The stage's input tensors.
        #[arg(long)]
        inputs: PathBuf,
        /// Where to write the outputs (safetensors, f32).
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = DeviceChoice::Auto, help = DeviceChoice::help())]
        device: DeviceChoice,
        #[arg(long, default_value_t = WeightsChoice::Auto, help = engine_args::weights_help())]
        weights: WeightsChoice,
        #[command(flatten)]
        adapters: engine_args::AdapterArgs,
    },
    /// Lists each compute backend and whether it can run here.
    Devices,
    /// Times the engine's kernels and stages with synthetic weights at the real geometry.
    Bench(bench::BenchArgs),
}

#[derive(Subcommand)]
enum ModelCommand {
    /// Fetches MiniMaxAI/MiniMax-Music3 (28.5 GB) from the Hugging Face hub, or the mirror in
    /// HF_ENDPOINT (HF_TOKEN for an account's access): resumes what an earlier run left, verifies
    /// every file against the hub's size and checksum, checks the free space first.
    Download {
        /// The folder to fill (default: the models folder of Songloom's data directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The hub's branch, tag or commit.
        #[arg(long, default_value = "main")]
        revision: String,
    },
    /// The models in Songloom's models folder, complete or not.
    List,
    /// Checks a downloaded model's files against the sizes and checksums the hub listed.
    Verify {
        /// The model folder (made by `songloom model download`).
        dir: PathBuf,
    },
    /// Components, geometry, parameter counts and dtypes of a model directory.
    Info {
        /// The model directory (diffusers layout).
        dir: PathBuf,
        /// The whole report (configs included) as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Writes a copy of a model with the language model's and depth decoder's matrices quantized
    /// (the layout is in engine/src/quantized_copy.rs); the copy loads with no quantizing and
    /// makes the same songs as quantizing the original at load.
    Quantize {
        /// The bf16 model directory to copy (diffusers layout).
        dir: PathBuf,
        #[arg(long, value_parser = engine_args::parse_quantized_weights, help = engine_args::quantized_weights_help())]
        weights: WeightsChoice,
        /// The new folder (default: DIR-8bit or DIR-4bit beside DIR); it must not exist.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum LibraryCommand {
    /// Saved songs, newest first, as JSON lines; `--search` matches titles, descriptions, lyrics.
    List {
        /// Only songs whose title or description contains this.
        #[arg(long, default_value = "")]
        search: String,
        /// One JSON object a line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Gives a saved song a new title.
    Rename {
        /// The song's id (`library list` shows it).
        id: i64,
        /// The new title.
        title: String,
    },
    /// Removes a saved song and its file.
    Delete {
        /// The song's id (`library list` shows it).
        id: i64,
    },
    /// Rebuilds the library's database from the song files and the recipes and scores they carry
    /// (after the database was damaged or lost); the old database is kept aside.
    Repair,
    /// Adds a WAV or FLAC written by Songloom (an export, a `generate --out` file): its recipe comes
    /// from the file's comment and its score, which edits need, from beside it.
    Import {
        /// The WAV or FLAC file.
        file: PathBuf,
        /// The song's title; the file's own without it.
        #[arg(long)]
        title: Option<String>,
        /// The new song as one JSON object (as `list --json` writes it) instead of a sentence.
        #[arg(long)]
        json: bool,
    },
    /// Writes a saved song to a WAV file, with its recipe in the file's comment.
    Export {
        /// The song's id (`library list` shows it).
        id: i64,
        /// The file to write (refused if it exists).
        #[arg(long)]
        out: PathBuf,
        /// f32 or pcm16 (WAV), or flac (24-bit).
        #[arg(long, value_enum, default_value = "f32")]
        format: wav::FileFormat,
    },
}

fn main() {
    ignore_file_size_signal();
    quiet_vulkan_layers_without_a_session();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => match hint_for(&e) {
            Some(hint) => {
                eprintln!("error: {hint}");
                std::process::exit(2);
            }
            None => e.exit(),
        },
    };
    let json = std::env::args().any(|a| a == "--json");
    let result = run(cli);
    if output::closed() {
        // The reader of standard output went away: end quietly, as a killed `cat` would.
        std::process::exit(141);
    }
    if let Err(e) = result {
        if matches!(e.downcast_ref::<songloom_engine::Error>(), Some(songloom_engine::Error::Cancelled)) {
            eprintln!("cancelled, nothing written");
            std::process::exit(130);
        }
        eprintln!("error: {e:#}");
        if json {
            say!("{}", songloom_wire::Event::Error { message: format!("{e:#}") }.to_line());
        }
        std::process::exit(1);
    }
}

/// A library song as one line of `library list --json`.
fn song_json(song: &library::Song) -> serde_json::Value {
    let mut line = serde_json::json!({
        "id": song.id, "title": song.title, "seconds": song.seconds,
        "description": song.recipe.description, "seed": song.recipe.seed,
        "wav": song.wav, "engine_version": song.engine_version,
        "total_s": song.timings.total_s,
    });
    // Only a version made by an edit has these, as in the API's library list.
    if let (Some(parent), Some(edit)) = (song.parent, song.edit_kind()) {
        line["parent"] = parent.into();
        line["edit_kind"] = edit.into();
        line["edit"] = serde_json::to_value(&song.recipe.edit).unwrap_or_default();
    }
    line
}

/// `text` cut to `width` characters, an ellipsis marking the cut.
fn clip(text: &str, width: usize) -> String {
    let one_line = text.replace('\n', " ");
    if one_line.chars().count() <= width {
        return one_line;
    }
    one_line.chars().take(width - 1).chain(['…']).collect()
}

/// One line instead of clap's several for mistakes people make: a value a flag's type refuses (its
/// message names what is expected), and the description given without `--description`.
fn hint_for(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() == ErrorKind::ValueValidation {
        let text = e.to_string();
        let first = text.lines().next().unwrap_or_default();
        return Some(first.strip_prefix("error: ").unwrap_or(first).to_string());
    }
    if e.kind() != ErrorKind::UnknownArgument || std::env::args().nth(1).as_deref() != Some("generate") {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else { return None };
    (!arg.starts_with('-')).then(|| {
        format!(
            "`{arg}` is not a flag: give the description as --description \"{arg}\" (or --prompt \"{arg}\") and the lyrics as --lyrics \"...\""
        )
    })
}

/// A file that outgrows the size limit (`ulimit -f`) gives a write error naming the file, as a
/// full disk does, instead of killing the process by a signal (which would leave its temporary).
fn ignore_file_size_signal() {
    // SAFETY: setting a signal's disposition to "ignore" at start, before any other thread runs.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// Without a desktop session (a server, CI), Mesa's device-selection layer, which the Vulkan
/// loader runs for every instance, would print an error about `XDG_RUNTIME_DIR` on each probe of
/// the wgpu backend; it only orders adapters for windows, which need a session anyway.
fn quiet_vulkan_layers_without_a_session() {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        // SAFETY: at start, before any other thread runs.
        unsafe { std::env::set_var("NODEVICE_SELECT", "1") };
    }
}

fn run(cli: Cli) -> Result<()> {
    let Some(command) = cli.command else {
        if cfg!(target_os = "linux")
            && ["DISPLAY", "WAYLAND_DISPLAY", "WAYLAND_SOCKET"]
                .iter()
                .all(|v| std::env::var_os(v).is_none_or(|x| x.is_empty()))
        {
            anyhow::bail!(
                "there is no display here (DISPLAY and WAYLAND_DISPLAY are unset), and the window needs one: make a song with `songloom generate --prompt ... --lyrics ...`, or run `songloom serve` and use its HTTP API"
            );
        }
        return desktop::run();
    };
    match command {
        Command::Generate(args) => generate::run(args),
        Command::Edit(args) => edit_cli::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Prompt { description, lyrics, model } => {
            let dir = match model {
                Some(d) => d,
                None => default_model::path()?,
            };
            let model = ModelDir::open(&dir)?;
            let encoder = songloom_engine::prompt::PromptEncoder::new(&model.component("tokenizer"), &model.constants)?;
            let lyrics = lyrics.replace("\\n", "\n");
            generate::warn_dropped_lyrics(&lyrics, false);
            let ids = encoder.encode(&description, &lyrics)?;
            say!("{}", serde_json::json!({"text": ids.text, "ids": ids.cond, "uncond_ids": ids.uncond}));
            Ok(())
        }
        Command::Model { command: ModelCommand::Info { dir, json } } => model_info::run(&dir, json),
        Command::Model { command: ModelCommand::Download { dir, revision } } => {
            model_download::download(dir, &revision).map(|_| ())
        }
        Command::Model { command: ModelCommand::List } => model_download::list(),
        Command::Model { command: ModelCommand::Verify { dir } } => {
            model_download::verify_dir(&dir)?;
            // The hub's checksums hold for a checkpoint published with NaN in it: named here too.
            songloom_engine::weights::check_model_finite(&dir)?;
            say!("{}: no NaN or infinite weights", dir.display());
            Ok(())
        }
        Command::Model { command: ModelCommand::Quantize { dir, weights, out } } => {
            let formats = weights.formats().context("a quantized copy names its weights")?;
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
            let out = out.unwrap_or_else(|| dir.with_file_name(format!("{name}-{weights}")));
            stale::sweep_beside(&out);
            songloom_engine::quantized_copy::write(&dir, &out, formats, &|file| say!("wrote {}", file.display()))?;
            say!("wrote a copy of {} with {} in {}", dir.display(), formats.describe(), out.display());
            Ok(())
        }
        Command::Library { command, library } => {
            let dir = library.unwrap_or_else(library::default_dir);
            if let LibraryCommand::Repair = command {
                let report = library::Library::repair(&dir)?;
                if let Some(old) = &report.old_database {
                    say!("the old database is kept as {}", old.display());
                }
                for (wav, why) in &report.skipped {
                    say!("skipped {}: {why}", wav.display());
                }
                for (_, why) in &report.damaged_scores {
                    say!("listed, but cannot be edited: {why}");
                }
                say!("rebuilt the library in {}: {} songs listed", dir.display(), report.restored);
                return Ok(());
            }
            let mut lib = library::Library::open(&dir)?;
            match command {
                LibraryCommand::List { search, json: false } => {
                    let songs = lib.list(&search)?;
                    if songs.is_empty() {
                        say!("no songs in the library in {}", dir.display());
                    } else {
                        say!("{:>4}  {:<28}  {:>7}  {:>6}  description", "id", "title", "length", "seed");
                    }
                    for song in songs {
                        let length = format!("{}:{:04.1}", (song.seconds / 60.0) as u64, song.seconds % 60.0);
                        let made_from = match (song.edit_kind(), song.parent) {
                            (Some(edit), Some(parent)) => format!(" ({edit} of {parent})"),
                            _ => String::new(),
                        };
                        say!(
                            "{:>4}  {:<28}  {:>7}  {:>6}  {}{made_from}",
                            song.id,
                            clip(&song.title, 28),
                            length,
                            song.recipe.seed,
                            clip(&song.recipe.description, 60)
                        );
                    }
                }
                LibraryCommand::List { search, json: true } => {
                    for song in lib.list(&search)? {
                        say!("{}", song_json(&song));
                    }
                }
                LibraryCommand::Import { file, title, json } => {
                    let imported = lib.import(&file, title.as_deref())?;
                    let id = imported.song.id;
                    if json {
                        let mut line = song_json(&imported.song);
                        line["editable"] = imported.editable.into();
                        say!("{line}");
                    } else {
                        say!("imported {} as song {id} (\"{}\")", file.display(), imported.song.title);
                        if !imported.editable {
                            say!("the file carries no score, so song {id} plays and exports but cannot be edited");
                        }
                    }
                }
                LibraryCommand::Rename { id, title } => {
                    lib.rename(id, &title)?;
                    say!("renamed song {id} to \"{title}\"");
                }
                LibraryCommand::Delete { id } => {
                    lib.delete(id)?;
                    say!("deleted song {id} and its file");
                }
                LibraryCommand::Repair => unreachable!("answered above"),
                LibraryCommand::Export { id, out, format } => {
                    stale::sweep_beside(&out);
                    let song = lib.get(id)?.with_context(|| format!("no song {id} in the library"))?;
                    let recipe = serde_json::to_string(&song.recipe)?;
                    let path = wav::export_as(&song.wav, &out, format, &song.title, &recipe)?;
                    say!("exported song {id} to {}", path.display());
                }
            }
            Ok(())
        }
        Command::Stage { stage, model, inputs, out, device, weights, adapters } => {
            let stage = Stage::parse(&stage)?;
            let device = Device::from_choice(device)?;
            let model = ModelDir::open(&model)?.with_adapters(adapters.open()?)?;
            let inputs = StageInputs::open(&inputs)?;
            let formats = stage_formats(&model, weights)?;
            let outputs = run_stage(stage, &model, &device, formats, &inputs)?;
            let tensors: Vec<(String, Vec<usize>, Vec<f32>)> = outputs
                .into_iter()
                .map(|(name, t): (String, Tensor)| (name, t.shape().to_vec(), t.to_f32_vec()))
                .collect();
            stale::sweep_beside(&out);
            save_f32(&out, &tensors)?;
            for (name, shape, _) in &tensors {
                say!("{name} {shape:?}");
            }
            Ok(())
        }
        Command::Devices => {
            for probe in Device::probe_all() {
                let name = probe.kind.name();
                match probe.status {
                    Ok(info) => {
                        say!("{name:5} available ({info})");
                        say!("      {}", advice::for_device(probe.kind));
                    }
                    Err(why) => say!("{name:5} unavailable: {why}"),
                }
            }
            Ok(())
        }
        Command::Bench(args) => bench::run(args),
    }
}

#[cfg(test)]
mod help_tests {
    use clap::CommandFactory;

    /// Every flag and argument of every command says what it is for.
    #[test]
    fn every_flag_and_argument_has_help() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if id != "help" && id != "version" && arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "songloom", &mut missing);
        assert!(missing.is_empty(), "without help: {missing:?}");
    }
}
