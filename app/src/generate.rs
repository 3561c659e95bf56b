//! `songloom generate`: a song from a description and lyrics, with progress on the terminal (or
//! JSON lines), played while it is generated, and written to a WAV or FLAC file.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use songloom_engine::DeviceKind;
use songloom_engine::pipeline::{Cancel, Event, Pipeline, Request, Stage, Stats};
use songloom_engine::plan::Plan;
use songloom_ui::contract::Recipe;
use songloom_wire::notice::INSTRUMENTAL_LYRICS;

use crate::engine_args::{AdapterArgs, EngineArgs, ModelArg, adapter_recipes};
use crate::output::say;
use crate::player::Player;
use crate::song_job::{self, BatchJob, FinishedSong, OutFile, SongJob, SongSink};
use crate::wav::FileFormat;

#[derive(Args)]
pub struct GenerateArgs {
    /// The music description: genre, mood, instruments, vocals, tempo (it may start with `-`, as a
    /// Markdown list does).
    #[arg(long, visible_alias = "prompt", allow_hyphen_values = true)]
    description: String,
    /// Lyrics with structure tags ([verse], [chorus], ...), each tag on its own line; `[instrumental]`
    /// for none. Without lyrics, the embedded model (which cannot sing) makes an instrumental song.
    #[arg(long, conflicts_with_all = ["lyrics_file", "instrumental"], allow_hyphen_values = true)]
    lyrics: Option<String>,
    /// Read the lyrics from a file.
    #[arg(long, conflicts_with = "instrumental")]
    lyrics_file: Option<PathBuf>,
    /// A song without singing (the lyrics `[instrumental]`).
    #[arg(long)]
    instrumental: bool,
    /// Length: seconds (90), minutes and seconds (1:30) or 1m30s; at most 6 minutes (the model
    /// may end the song earlier).
    #[arg(long, default_value = "30", allow_hyphen_values = true)]
    duration: String,
    /// The seed of the sampling and the noise: the same seed and recipe make the same song.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Flow-matching steps per window (the reference uses 30).
    #[arg(long, default_value_t = 30)]
    steps: usize,
    /// The DiT's classifier-free guidance scale (default: the model's, 1.7).
    #[arg(long)]
    guidance: Option<f32>,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    model: ModelArg,
    #[command(flatten)]
    adapters: AdapterArgs,
    /// The file to write: .wav, or .flac for 24-bit FLAC (written under a temporary name and moved
    /// there when complete). Without it: song.wav here, or song-2.wav, song-3.wav... when taken.
    #[arg(long)]
    out: Option<PathBuf>,
    /// f32 or pcm16 (WAV) or flac (24-bit); by default what --out's extension names (f32 for .wav).
    #[arg(long, value_enum)]
    format: Option<FileFormat>,
    /// Replace the --out file if it exists (without it, an existing file is refused).
    #[arg(long)]
    force: bool,
    /// Do not play the song.
    #[arg(long)]
    no_play: bool,
    /// Print events as JSON lines instead of progress bars.
    #[arg(long)]
    json: bool,
    /// Also keep the song, with its recipe, in the library.
    #[arg(long)]
    save: bool,
    /// Make this many takes at once, seeds --seed, --seed + 1, ...: NAME-1.wav, NAME-2.wav, ...
    /// (NAME from --out, else "takes", or "takes-2" ... when taken); the first is played. They run
    /// as one batch, each the song its seed makes alone.
    #[arg(long, default_value_t = 1)]
    takes: usize,
    /// The library directory for `--save`; the user's data directory without it.
    #[arg(long)]
    library: Option<PathBuf>,
}

pub fn run(args: GenerateArgs) -> Result<()> {
    // Ctrl-C, SIGTERM and SIGHUP cancel between frames and steps, as does a closed standard output;
    // the partial file is then removed. Installed before the file exists, so an early interrupt
    // cannot leave it behind.
    let cancel = Cancel::default();
    let on_signal = cancel.clone();
    let _ = ctrlc::set_handler(move || on_signal.cancel());
    crate::output::cancel_on_close(&cancel);
    let mut outs = if args.takes == 1 {
        vec![out_file(args.out.as_deref(), args.format, args.force)?]
    } else {
        take_files(args.out.as_deref(), args.format, args.force, args.takes)?
    };
    for out in &outs {
        crate::stale::sweep_beside(&out.path);
    }
    let lyrics = match (&args.lyrics, &args.lyrics_file) {
        (Some(l), _) => l.replace("\\n", "\n"),
        (None, Some(f)) => std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
        (None, None) if args.instrumental || args.model.model.is_none() => INSTRUMENTAL_LYRICS.to_string(),
        (None, None) => bail!("give --lyrics, --lyrics-file, or --instrumental for a song without singing"),
    };
    warn_dropped_lyrics(&lyrics, args.json);
    let duration_s = songloom_ui::duration::parse_duration(&args.duration).map_err(anyhow::Error::msg)?;
    let request = Request {
        description: args.description.clone(),
        lyrics,
        duration_s,
        seed: args.seed,
        steps: args.steps,
        guidance: args.guidance,
    };
    let adapters = args.adapters.open()?;
    let device = args.engine.open_device()?;
    let model = args.model.dir()?;
    // The plan comes before any weight is read: a budget too small is refused with nothing loaded.
    let plan = Pipeline::plan(&model, &device, args.engine.memory_request(), Some(&request))?;
    let device_kind = device.kind();
    let loading = |event: Event| {
        if args.json {
            if let Some(line) = wire_event(&event) {
                say!("{}", line.to_line());
            }
        } else if let Event::Stage { stage: Stage::Load { half }, done: 0, total } = event
            && std::io::stderr().is_terminal()
        {
            eprintln!("loading {} ({total} parts)", half.name());
        }
    };
    let adapter_recipes = adapter_recipes(&adapters);
    let pipeline = Pipeline::load_adapted(&model, adapters, device, &plan, &loading)
        .with_context(|| format!("loading the model from {}", model.display()))?;
    // Check the request before touching the output file or the sound device.
    let max_frames = pipeline.max_frames(request.duration_s)?;
    pipeline.encode_prompt(&request.description, &request.lyrics)?;
    let recipe = Recipe {
        description: args.description.clone(),
        lyrics: request.lyrics.clone(),
        duration_s,
        seed: args.seed,
        steps: args.steps,
        guidance: args.guidance.unwrap_or(songloom_ui::contract::DEFAULT_GUIDANCE),
        ..crate::engine_args::engine_recipe(&args.engine, &args.model, &plan, adapter_recipes)
    };
    let library = args.save.then(|| args.library.clone().unwrap_or_else(crate::library::default_dir));
    if args.takes > 1 {
        let takes = Takes { request, recipe, outs, library, max_frames };
        return run_takes(&args, &pipeline, &plan, device_kind, takes, &cancel);
    }
    let out = outs.remove(0);
    let out_path = out.path.clone();
    let job = SongJob { request, recipe, out: Some(out), library, edit: None };
    let prepared = song_job::prepare(&pipeline, &job)?;
    // Shown once the request is known to be good, so a bad one is one line.
    show_plan(&plan, device_kind, args.json);
    if !args.json {
        for adapter in pipeline.adapters().into_iter().flat_map(|a| a.iter()) {
            eprintln!("LoRA {}", adapter.describe());
        }
    }
    let player = if args.no_play {
        None
    } else {
        match Player::open(pipeline.sample_rate()) {
            Ok(p) => Some(p),
            Err(why) => {
                eprintln!("not playing: {why}; the song is still written to {}", out_path.display());
                None
            }
        }
    };
    let device = pipeline.device.kind();
    if args.json {
        say!("{}", songloom_wire::Event::Start { device: device.name().to_string(), max_frames }.to_line());
    } else {
        eprintln!("generating up to {duration_s:.1} s on {device} ({max_frames} frames)");
    }
    let terminal = Terminal {
        progress: Progress::new(args.json, max_frames, pipeline.constants.chunk_frames, pipeline.constants.chunk_hop),
        player,
    };
    let result = prepared.run(&terminal, &cancel);
    terminal.progress.clear();
    let finished = result?;
    let path = finished.out.as_deref().expect("the job names an output file");
    summary(&finished.stats, path, args.json);
    if let Some(song) = &finished.saved {
        if args.json {
            say!("{}", songloom_wire::Event::Saved { library_id: song.id, title: song.title.clone() }.to_line());
        } else {
            say!("kept in the library as song {} (\"{}\")", song.id, song.title);
        }
    }
    if let Some(p) = terminal.player {
        let seconds = finished.stats.samples as f64 / finished.stats.sample_rate as f64;
        let underruns = p.finish(Duration::from_secs_f64(seconds + 2.0));
        if underruns > 0 && !args.json {
            eprintln!("playback ran ahead of generation {underruns} times (the rest played after a pause)");
        }
    }
    Ok(())
}

/// The most takes made at once (the wire's, so the server and the window say the same).
pub use songloom_wire::MAX_TAKES;

/// The files of `takes` takes: NAME-1.EXT, NAME-2.EXT, ... beside `out` (NAME and EXT its own),
/// each free unless `force`; without `out`, the first set of takes-1.wav ..., takes-2-1.wav ... (or
/// .flac) whose files are all free here, apart from the song.wav, song-2.wav ... of single songs.
pub fn take_files(out: Option<&Path>, format: Option<FileFormat>, force: bool, takes: usize) -> Result<Vec<OutFile>> {
    if !(1..=MAX_TAKES).contains(&takes) {
        bail!("--takes must be between 1 and {MAX_TAKES}, got {takes}");
    }
    let extension = format.map_or("wav", |f| f.extension());
    let named = |base: &Path, k: usize| {
        let stem = base.file_stem().map_or_else(|| "takes".into(), |s| s.to_string_lossy().into_owned());
        let extension = base.extension().map_or_else(|| extension.into(), |e| e.to_string_lossy().into_owned());
        base.with_file_name(format!("{stem}-{k}.{extension}"))
    };
    let Some(base) = out else {
        let first = PathBuf::from(format!("takes.{extension}"));
        let base = (1..)
            .map(|n| crate::wav::numbered(&first, n))
            .find(|base| (1..=takes).all(|k| !named(base, k).exists()))
            .expect("a free name");
        return (1..=takes).map(|k| out_file(Some(&named(&base, k)), format, false)).collect();
    };
    (1..=takes).map(|k| out_file(Some(&named(base, k)), format, force)).collect()
}

/// What a `--takes` run makes: the first take's request and recipe (the others differ by seed),
/// a file each, and the library to keep them in.
struct Takes {
    request: Request,
    recipe: Recipe,
    outs: Vec<OutFile>,
    library: Option<PathBuf>,
    max_frames: usize,
}

/// `--takes N`: the takes as one batch, each with its progress, file and summary; the first
/// played. A take that fails leaves the others; the run fails if any did.
fn run_takes(
    args: &GenerateArgs,
    pipeline: &Pipeline,
    plan: &Plan,
    device_kind: DeviceKind,
    takes: Takes,
    cancel: &Cancel,
) -> Result<()> {
    let Takes { request, recipe, outs, library, max_frames } = takes;
    let jobs: Vec<SongJob> = outs
        .into_iter()
        .enumerate()
        .map(|(k, out)| {
            let seed = request.seed.wrapping_add(k as u64);
            SongJob {
                request: Request { seed, ..request.clone() },
                recipe: Recipe { seed, ..recipe.clone() },
                out: Some(out),
                library: library.clone(),
                edit: None,
            }
        })
        .collect();
    pipeline.check_batch(&jobs.iter().map(|j| j.request.clone()).collect::<Vec<_>>())?;
    let takes = jobs.len();
    show_plan(plan, device_kind, args.json);
    let mut player = if args.no_play { None } else { Player::open(pipeline.sample_rate()).ok() };
    let c = &pipeline.constants;
    let multi = MultiProgress::new();
    let terminals: Vec<Terminal> = (1..=takes)
        .map(|k| Terminal {
            progress: Progress::for_take(args.json, max_frames, c.chunk_frames, c.chunk_hop, Some((k, &multi))),
            player: if k == 1 { player.take() } else { None },
        })
        .collect();
    if !args.json {
        eprintln!(
            "generating {takes} takes of up to {:.1} s on {} (seeds {}..={}), playing the first",
            request.duration_s,
            pipeline.device.kind(),
            request.seed,
            request.seed.wrapping_add(takes as u64 - 1)
        );
    }
    let slots: Vec<std::sync::Mutex<Option<Result<FinishedSong>>>> =
        jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let batch = jobs
        .into_iter()
        .zip(&terminals)
        .zip(&slots)
        .map(|((job, terminal), slot)| BatchJob {
            job,
            sink: Box::new(terminal),
            cancel: cancel.child(),
            finished: Box::new(move |result| *slot.lock().expect("not poisoned") = Some(result)),
        })
        .collect();
    song_job::run_batch(pipeline, batch)?;
    let results: Vec<Result<FinishedSong>> = slots
        .into_iter()
        .map(|slot| slot.into_inner().expect("not poisoned").unwrap_or_else(|| Err(anyhow::anyhow!("not made"))))
        .collect();
    let _ = multi.clear();
    let mut failed = 0;
    for (k, result) in results.iter().enumerate() {
        match result {
            Ok(finished) => {
                let path = finished.out.as_deref().expect("a take names its output file");
                summary(&finished.stats, path, args.json);
                match &finished.saved {
                    Some(song) if args.json => {
                        let event = songloom_wire::Event::Saved { library_id: song.id, title: song.title.clone() };
                        say!("{}", with_take(event.to_line(), Some(k + 1)));
                    }
                    Some(song) => say!("take {} kept in the library as song {} (\"{}\")", k + 1, song.id, song.title),
                    None => {}
                }
            }
            Err(e) => {
                failed += 1;
                eprintln!("take {} failed: {e:#}", k + 1);
            }
        }
    }
    if let Some(p) = terminals.into_iter().next().and_then(|t| t.player)
        && let Some(Ok(first)) = results.first()
    {
        p.finish(Duration::from_secs_f64(first.stats.samples as f64 / first.stats.sample_rate as f64 + 2.0));
    }
    if failed > 0 {
        bail!("{failed} of {} takes failed", results.len());
    }
    Ok(())
}

/// Where the song goes and in what format: `--format`, or what `out`'s extension names; without
/// `out`, the first of song.wav, song-2.wav, ... (or .flac) not taken here.
pub fn out_file(out: Option<&Path>, format: Option<FileFormat>, force: bool) -> Result<OutFile> {
    let Some(path) = out else {
        let format = format.unwrap_or(FileFormat::F32);
        let extension = format.extension();
        let first = PathBuf::from(format!("song.{extension}"));
        let path = (1..).map(|n| crate::wav::numbered(&first, n)).find(|p| !p.exists()).expect("a free name");
        return Ok(OutFile { path, format, replace: false });
    };
    let named = FileFormat::of_extension(path)?;
    let format = match (format, named) {
        (Some(f), Some(n)) if (f == FileFormat::Flac) != (n == FileFormat::Flac) => bail!(
            "--format {} does not match {}: name a .{} file, or leave --format out",
            f.name(),
            path.display(),
            f.extension()
        ),
        (Some(f), _) => f,
        (None, Some(n)) => n,
        (None, None) => FileFormat::F32,
    };
    let out = OutFile { path: path.to_path_buf(), format, replace: force };
    if path.is_dir() {
        bail!("{} is a directory; give the path of a file to write", path.display());
    }
    // Before the model loads: an existing file is one line, with nothing done.
    out.check_free()?;
    Ok(out)
}

/// The window's lyrics warning, on standard error (and as an event with `--json`): text after a
/// tag on its line, which the model drops.
pub fn warn_dropped_lyrics(lyrics: &str, json: bool) {
    for dropped in songloom_ui::lyrics::dropped_text(lyrics) {
        let message = dropped.message();
        eprintln!("warning: {message}");
        if json {
            say!("{}", songloom_wire::Event::Warning { message: message.to_string() }.to_line());
        }
    }
}

/// Prints the plan: one line, and its parts on a terminal.
pub fn show_plan(plan: &Plan, device: DeviceKind, json: bool) {
    if json {
        let event = songloom_wire::Event::Plan {
            weights: plan.formats.describe(),
            mode: plan.mode.name().to_string(),
            peak_bytes: plan.peak_bytes,
            budget_bytes: plan.budget_bytes,
        };
        say!("{}", event.to_line());
        return;
    }
    let enforced =
        if device == DeviceKind::Cpu && plan.budget_bytes.is_some() { " (not enforced on the CPU)" } else { "" };
    eprintln!("plan: {}{enforced}", plan.describe());
    if std::io::stderr().is_terminal() {
        eprintln!("{}", plan.table());
    }
}

/// The terminal's side of a song: progress bars (or JSON lines) and the player.
pub struct Terminal {
    pub progress: Progress,
    pub player: Option<Player>,
}

impl SongSink for Terminal {
    fn event(&self, event: &Event) {
        if let (Event::Audio { samples, .. }, Some(player)) = (event, &self.player) {
            player.push(samples);
        }
        self.progress.show(event);
    }
}

pub fn summary(stats: &Stats, path: &std::path::Path, json: bool) {
    let seconds = stats.samples as f64 / stats.sample_rate.max(1) as f64;
    if json {
        let event = songloom_wire::Event::Written {
            path: path.to_string_lossy().into_owned(),
            seconds,
            frames: stats.frames,
            windows: stats.windows,
            samples: stats.samples,
            sample_rate: stats.sample_rate,
        };
        say!("{}", event.to_line());
    } else {
        say!(
            "wrote {} ({seconds:.2} s, {} frames, {} windows) in {:.1} s; first audio after {:.1} s",
            path.display(),
            stats.frames,
            stats.windows,
            stats.total_s,
            stats.time_to_first_audio_s.unwrap_or(stats.total_s)
        );
    }
}

/// Progress bars on a terminal, JSON lines with `--json`, nothing otherwise.
pub struct Progress {
    json: bool,
    /// The take these events are of, when there are several.
    take: Option<usize>,
    bars: Option<(MultiProgress, ProgressBar, ProgressBar)>,
}

impl Progress {
    pub fn new(json: bool, max_frames: usize, chunk: usize, hop: usize) -> Self {
        Self::for_take(json, max_frames, chunk, hop, None)
    }

    /// The progress of take `take` (1-based) of several, its bars among the others' in `multi`,
    /// its JSON lines marked with the take.
    pub fn for_take(
        json: bool,
        max_frames: usize,
        chunk: usize,
        hop: usize,
        take: Option<(usize, &MultiProgress)>,
    ) -> Self {
        let bars = (!json && std::io::stderr().is_terminal()).then(|| {
            let multi = take.map_or_else(MultiProgress::new, |(_, multi)| multi.clone());
            let style = ProgressStyle::with_template("{prefix:>15} [{wide_bar}] {pos}/{len} {msg} eta {eta}")
                .expect("valid template")
                .progress_chars("=> ");
            let label = |what: &str| take.map_or(what.to_string(), |(k, _)| format!("take {k} {what}"));
            let frames =
                multi.add(ProgressBar::new(max_frames as u64).with_style(style.clone()).with_prefix(label("frames")));
            let windows = if max_frames <= chunk { 1 } else { (max_frames - hop).div_ceil(hop) };
            let denoise = multi.add(ProgressBar::new(windows as u64).with_style(style).with_prefix(label("windows")));
            (multi, frames, denoise)
        });
        Progress { json, take: take.map(|(k, _)| k), bars }
    }

    fn show(&self, event: &Event) {
        if self.json {
            if let Some(line) = wire_event(event) {
                say!("{}", with_take(line.to_line(), self.take));
            }
            return;
        }
        let Some((_, frames, windows)) = &self.bars else { return };
        match event {
            Event::Stage { stage: Stage::ArFrames, done, .. } => frames.set_position(*done as u64),
            Event::Stage { stage: Stage::Dit { window, .. }, done, total } => {
                windows.set_message(format!("window {} step {done}/{total}", window + 1));
            }
            Event::Stage { stage: Stage::Vocoder { window, .. }, .. } => windows.set_position(*window as u64 + 1),
            _ => {}
        }
    }

    pub fn clear(&self) {
        if let Some((multi, _, _)) = &self.bars {
            let _ = multi.clear();
        }
    }
}

/// A JSON line with `"take": k` added, when it is of one take of several.
pub fn with_take(line: String, take: Option<usize>) -> String {
    let Some(take) = take else { return line };
    match serde_json::from_str::<serde_json::Value>(&line) {
        Ok(serde_json::Value::Object(mut fields)) => {
            fields.insert("take".into(), take.into());
            serde_json::Value::Object(fields).to_string()
        }
        _ => line,
    }
}

/// An engine event as the wire writes it (the CLI's `--json` lines, the server's events): the
/// audio's samples stay off it, their count on it; the score is kept with the song, not sent.
pub fn wire_event(event: &Event) -> Option<songloom_wire::Event> {
    Some(match event {
        Event::Stage { stage, done, total } => {
            songloom_wire::Event::Stage { stage: *stage, done: *done, total: *total }
        }
        Event::Audio { first_sample, samples, sample_rate } => songloom_wire::Event::Audio {
            first_sample: *first_sample,
            frames: samples.len() / 2,
            sample_rate: *sample_rate,
        },
        Event::Finished { stats } => songloom_wire::Event::Finished(stats.clone()),
        Event::Score(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use proptest::prelude::*;

    use crate::{Cli, Command};

    fn parsed(args: &[&str]) -> Option<super::GenerateArgs> {
        let mut full = vec!["songloom", "generate"];
        full.extend(args);
        match Cli::try_parse_from(full).ok()?.command? {
            Command::Generate(args) => Some(args),
            _ => None,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

        /// Whatever a description or lyrics hold (a Markdown `- ` list, `--`, any Unicode), they
        /// arrive as typed.
        #[test]
        fn any_description_and_lyrics_arrive_as_typed(prompt in "(- |--|-)?\\PC{1,30}", lyrics in "(-|\\[verse\\] )?\\PC{1,30}") {
            let args = parsed(&["--prompt", &prompt, "--lyrics", &lyrics, "--duration", "1:30"]);
            let args = args.expect("parses");
            prop_assert_eq!(&args.description, &prompt);
            prop_assert_eq!(args.lyrics.as_deref(), Some(lyrics.as_str()));
            prop_assert_eq!(songloom_ui::duration::parse_duration(&args.duration), Ok(90.0));
        }

        /// Any duration text parses as a flag; what it means is checked with a message later.
        #[test]
        fn any_duration_text_is_taken_by_the_flag(duration in "-?\\PC{1,12}") {
            let args = parsed(&["--prompt", "p", "--lyrics", "l", "--duration", &duration]);
            prop_assert_eq!(args.expect("parses").duration, duration);
        }
    }
}
