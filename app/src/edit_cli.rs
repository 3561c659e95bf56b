//! `songloom edit ID ...`: a new version of a library song (extended, another path from a time,
//! sung again from a line, a range rendered again), made, played and kept like a generated song.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use songloom_engine::lora::AdapterSpec;
use songloom_engine::pipeline::{Cancel, Event, Pipeline};
use songloom_wire::{Edit, EditRequest};

use crate::engine_args::{AdapterArgs, EngineArgs, ModelArg, adapter_recipes};
use crate::generate::{Progress, Terminal, show_plan, summary, wire_event};
use crate::library::Library;
use crate::output::say;
use crate::player::Player;
use crate::song_job;

#[derive(Args)]
pub struct EditArgs {
    /// The song's library id (`songloom library list` shows them).
    id: i64,
    #[command(subcommand)]
    edit: EditCommand,
}

/// What every edit takes, after its own options.
#[derive(Args)]
struct Common {
    /// The seed of what the edit draws: the song's own for `extend`, a new one for the others.
    #[arg(long)]
    seed: Option<u64>,
    /// The library the song is in; the user's data directory without it.
    #[arg(long)]
    library: Option<PathBuf>,
    /// Also write the new version to this file (.wav, or .flac); it is kept in the library anyway.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Replace the --out file if it exists.
    #[arg(long)]
    force: bool,
    /// Do not play the new version.
    #[arg(long)]
    no_play: bool,
    /// Print events as JSON lines instead of progress bars.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: EngineArgs,
    /// The model: the one the song was made with (its recipe's) without it.
    #[command(flatten)]
    model: ModelArg,
    /// The adapters: the ones the song was made with (its recipe's) without any.
    #[command(flatten)]
    adapters: AdapterArgs,
}

#[derive(Subcommand)]
enum EditCommand {
    /// The song goes on: `--seconds` more, or until the model ends it.
    Extend {
        /// How much longer: seconds (30), 1:30 or 1m30s.
        #[arg(long)]
        seconds: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Back to a time and another path from there (the audio before the window boundary at or
    /// before it is kept).
    From {
        /// The time: seconds, 1:30 or 1m30s.
        #[arg(long)]
        at: String,
        /// A new description from there on.
        #[arg(long, allow_hyphen_values = true)]
        description: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// The lyrics from a line on replaced, and sung again from where that line starts.
    Resing {
        /// The first line replaced, counting from 1 (every line of the lyrics, tags included).
        #[arg(long)]
        line: usize,
        /// The new lyrics from that line on.
        #[arg(long, conflicts_with = "lyrics_file", allow_hyphen_values = true)]
        lyrics: Option<String>,
        /// Read the new lyrics from a file.
        #[arg(long)]
        lyrics_file: Option<PathBuf>,
        /// Where the line is sung (an estimate from its place in the lyrics without it).
        #[arg(long)]
        at: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// The same codes rendered again with a new seed between two times; the audio outside stays.
    Rerender {
        /// The range's start: seconds, 1:30 or 1m30s.
        #[arg(long)]
        from: String,
        /// The range's end.
        #[arg(long)]
        to: String,
        #[command(flatten)]
        common: Common,
    },
}

/// A time as `generate --duration` takes it.
fn seconds(text: &str, what: &str) -> Result<f64> {
    songloom_ui::duration::parse_duration(text).map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

impl EditCommand {
    fn common(&self) -> &Common {
        match self {
            EditCommand::Extend { common, .. }
            | EditCommand::From { common, .. }
            | EditCommand::Resing { common, .. }
            | EditCommand::Rerender { common, .. } => common,
        }
    }

    fn edit(&self) -> Result<Edit> {
        Ok(match self {
            EditCommand::Extend { seconds: s, .. } => {
                Edit::Extend { seconds: s.as_deref().map(|s| seconds(s, "--seconds")).transpose()? }
            }
            EditCommand::From { at, description, .. } => {
                Edit::From { at_s: seconds(at, "--at")?, description: description.clone() }
            }
            EditCommand::Resing { line, lyrics, lyrics_file, at, .. } => {
                if *line == 0 {
                    bail!("--line counts from 1 (the lyrics' first line)");
                }
                let lyrics = match (lyrics, lyrics_file) {
                    (Some(l), _) => l.replace("\\n", "\n"),
                    (None, Some(f)) => {
                        std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?
                    }
                    (None, None) => bail!("give the new lyrics: --lyrics or --lyrics-file"),
                };
                Edit::Resing { line: line - 1, lyrics, at_s: at.as_deref().map(|a| seconds(a, "--at")).transpose()? }
            }
            EditCommand::Rerender { from, to, .. } => {
                Edit::Rerender { from_s: seconds(from, "--from")?, to_s: seconds(to, "--to")? }
            }
        })
    }
}

/// The times and line asked for, against the song's length and lyrics, before a model is loaded
/// (the engine checks them again against the codes).
fn check_against(edit: &EditCommand, song: &crate::library::Song) -> Result<()> {
    let length = song.seconds;
    let within = |t: f64, flag: &str| {
        if !(0.0..length).contains(&t) {
            bail!("{flag} {t} s is not within song {} ({length:.2} s long)", song.id);
        }
        Ok(())
    };
    match edit.edit()? {
        Edit::Extend { .. } => {}
        Edit::From { at_s, .. } => within(at_s, "--at")?,
        Edit::Resing { line, at_s, .. } => {
            let lines = song.recipe.lyrics.lines().count();
            if line >= lines {
                bail!("song {} has {lines} lines of lyrics: there is no line {} to sing again from", song.id, line + 1);
            }
            if let Some(at_s) = at_s {
                within(at_s, "--at")?;
            }
        }
        Edit::Rerender { from_s, to_s } => {
            within(from_s, "--from")?;
            if !(to_s > from_s && to_s <= length + 1e-6) {
                bail!("--to {to_s} s must be after --from and within song {} ({length:.2} s long)", song.id);
            }
        }
    }
    Ok(())
}

pub fn run(args: EditArgs) -> Result<()> {
    let cancel = Cancel::default();
    let on_signal = cancel.clone();
    let _ = ctrlc::set_handler(move || on_signal.cancel());
    crate::output::cancel_on_close(&cancel);
    let id = args.id;
    let c = args.edit.common();
    let request = EditRequest { edit: args.edit.edit()?, seed: c.seed };
    let library_dir = c.library.clone().unwrap_or_else(crate::library::default_dir);
    let song = Library::open(&library_dir)?
        .get(id)?
        .with_context(|| format!("there is no song {} in the library in {}", id, library_dir.display()))?;
    check_against(&args.edit, &song)?;
    // The song's own model and adapters unless others are named.
    let model = ModelArg {
        model: c
            .model
            .model
            .clone()
            .or_else(|| (!song.recipe.model.is_empty()).then(|| song.recipe.model.clone().into())),
    };
    let specs: Vec<AdapterSpec> = if c.adapters.lora.is_empty() {
        song.recipe.adapters.iter().map(|a| AdapterSpec { path: a.path.clone().into(), scale: a.scale }).collect()
    } else {
        c.adapters.lora.clone()
    };
    let adapters = AdapterArgs { lora: specs }.open()?;
    // As generate's --out: a directory, or an extension that does not say a format, is refused.
    let out = c.out.as_deref().map(|path| crate::generate::out_file(Some(path), None, c.force)).transpose()?;
    let device = c.engine.open_device()?;
    let model_dir = model.dir()?;
    let plan = Pipeline::plan(&model_dir, &device, c.engine.memory_request(), None)?;
    let device_kind = device.kind();
    let loading = |event: Event| {
        if c.json
            && let Some(line) = wire_event(&event)
        {
            say!("{}", line.to_line());
        }
    };
    let engine = crate::engine_args::engine_recipe(&c.engine, &model, &plan, adapter_recipes(&adapters));
    let pipeline = Pipeline::load_adapted(&model_dir, adapters, device, &plan, &loading)
        .with_context(|| format!("loading the model from {}", model_dir.display()))?;
    let job = crate::edit_job::edit_job(&pipeline, &library_dir, id, &request, &engine, out)?;
    let prepared = song_job::prepare(&pipeline, &job)?;
    show_plan(&plan, device_kind, c.json);
    let changed = job.recipe.edit.as_deref().expect("an edit job records its edit");
    let max_frames = pipeline.max_frames(job.request.duration_s)?;
    if c.json {
        say!("{}", songloom_wire::Event::Start { device: device_kind.name().to_string(), max_frames }.to_line());
    } else {
        eprintln!(
            "{} of song {} (seed {}): new audio from {:.2} s{}",
            request.edit.name(),
            id,
            job.recipe.seed,
            changed.changed_from_s,
            changed.changed_to_s.map_or(String::new(), |to| format!(" to {to:.2} s"))
        );
    }
    let player = if c.no_play {
        None
    } else {
        match Player::open(pipeline.sample_rate()) {
            Ok(p) => Some(p),
            Err(why) => {
                eprintln!("not playing: {why}; the new version is still kept in the library");
                None
            }
        }
    };
    let terminal = Terminal {
        progress: Progress::new(c.json, max_frames, pipeline.constants.chunk_frames, pipeline.constants.chunk_hop),
        player,
    };
    let result = prepared.run(&terminal, &cancel);
    terminal.progress.clear();
    let finished = result?;
    let saved = finished.saved.as_ref().context("the new version was not kept")?;
    if let Some(path) = finished.out.as_deref() {
        summary(&finished.stats, path, c.json);
    }
    if c.json {
        say!("{}", songloom_wire::Event::Saved { library_id: saved.id, title: saved.title.clone() }.to_line());
    } else {
        let versions = Library::open(&library_dir)?.versions(saved.id)?.len();
        say!(
            "kept in the library as song {} (\"{}\"), a new version of song {id} ({versions} versions now)",
            saved.id,
            saved.title
        );
    }
    if let Some(p) = terminal.player {
        let seconds = finished.stats.samples as f64 / finished.stats.sample_rate as f64;
        p.finish(Duration::from_secs_f64(seconds + 2.0));
    }
    Ok(())
}
