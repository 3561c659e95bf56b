//! The tools `songloom mcp` offers: make a song (progress as notifications), the library's songs
//! (list, search, get, export, delete), the devices and the models. A tool that fails answers
//! with `isError` and a line naming what to fix, as MCP asks, so the agent can correct itself.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use serde_json::{Value, json};
use songloom_engine::Device;
use songloom_engine::pipeline::{Event, Pipeline, Request};
use songloom_ui::contract::{DEFAULT_GUIDANCE, EngineEvent, Recipe};
use songloom_ui::progress::Progress;
use songloom_wire::notice::{INSTRUMENTAL_LYRICS, model_name};
use songloom_wire::{DeviceProbe, LibrarySong};

use super::protocol::RpcError;
use songloom_wire::EditRequest;

use super::{McpArgs, Outbox, SongCall};
use crate::library::{Library, Song};
use crate::song_job::{self, SongJob, SongSink};
use crate::wav::FileFormat;

/// What the worker makes: a new song, or an edit of a library song.
#[derive(Debug)]
pub enum SongAsk {
    New(NewSong),
    Edit { id: i64, edit: EditRequest },
}

/// What `edit_song` takes: the song's id and the edit, as `POST /api/songs/ID/edits` takes it.
#[derive(Debug, Deserialize)]
struct EditAsk {
    id: i64,
    #[serde(flatten)]
    edit: EditRequest,
}

/// What `generate_song` takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSong {
    description: String,
    #[serde(default)]
    lyrics: String,
    #[serde(default)]
    instrumental: bool,
    #[serde(default)]
    duration_s: Option<f64>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    steps: Option<usize>,
    #[serde(default)]
    guidance: Option<f32>,
}

/// What a tool call comes to: its result, or a song for the worker.
pub enum Called {
    Done(Value),
    Song(SongAsk),
}

/// The engine (loaded with the first song) and the library the tools work on.
pub struct Tools {
    args: McpArgs,
    library: PathBuf,
    pipeline: Mutex<Option<Loaded>>,
}

struct Loaded {
    pipeline: Pipeline,
    /// The recipe fields the server fixes: device, precision, model, weights, budget.
    base: Recipe,
}

/// The tools' names, descriptions and argument schemas, for `tools/list`.
pub fn list() -> Value {
    let id = json!({"type": "integer", "description": "The song's library id (list_songs gives them)."});
    json!([
        {
            "name": "generate_song",
            "title": "Make a song",
            "description": "Makes a song on this machine and keeps it in the library (44.1 kHz stereo WAV, the recipe in the \
                file). Takes as long as the device needs (progress comes as notifications when the call carries a \
                progressToken). Lyrics use structure tags on their own lines: [verse], [chorus], [bridge], [intro], \
                [outro]. Answers the song's library id, title, length and file.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "description": {"type": "string", "description": "The music: genre, mood, instruments, vocals, tempo, key."},
                    "lyrics": {"type": "string", "description": "Lyrics with [verse]/[chorus] tags, each tag on its own line. Leave out with instrumental."},
                    "instrumental": {"type": "boolean", "description": "A song without singing (the lyrics become [instrumental])."},
                    "duration_s": {"type": "number", "description": "Length in seconds, at most 360 (default 30; the model may end the song earlier)."},
                    "seed": {"type": "integer", "minimum": 0, "description": "The same seed and recipe make the same song (default: a new one each call, given in the answer)."},
                    "steps": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Flow-matching steps per window (default 30)."},
                    "guidance": {"type": "number", "description": "The DiT's guidance scale (default 1.7)."}
                },
                "required": ["description"]
            }
        },
        {
            "name": "edit_song",
            "title": "Edit a song",
            "description": "Makes a new version of a library song (the original stays): `kind` is extend (`seconds` \
                more, or until the model ends it without them), from (another path from `at_s`, optionally with a new \
                `description`), resing (lyrics from `line`, counting from 0, replaced by `lyrics`, sung again from \
                `at_s` or an estimate) or rerender (the audio between `from_s` and `to_s` drawn again). The audio \
                outside the change is the original's, sample for sample. `seed` is optional (extend keeps the \
                song's, the others draw a new one). Answers the new song and where its audio changed.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "id": id,
                    "kind": {"type": "string", "enum": ["extend", "from", "resing", "rerender"]},
                    "seconds": {"type": "number", "description": "extend: how much longer."},
                    "at_s": {"type": "number", "description": "from, resing: the time to change the song from."},
                    "description": {"type": "string", "description": "from: a new description from there on."},
                    "line": {"type": "integer", "minimum": 0, "description": "resing: the first lyrics line replaced (0 = the first line)."},
                    "lyrics": {"type": "string", "description": "resing: the new lyrics from that line on."},
                    "from_s": {"type": "number", "description": "rerender: the range's start."},
                    "to_s": {"type": "number", "description": "rerender: the range's end."},
                    "seed": {"type": "integer", "minimum": 0}
                },
                "required": ["id", "kind"]
            }
        },
        {
            "name": "list_songs",
            "title": "List the library",
            "description": "The library's songs, newest first: id, title, length, date and recipe.",
            "inputSchema": {"type": "object", "properties": {}}
        },
        {
            "name": "search_songs",
            "title": "Search the library",
            "description": "The library's songs whose title, description or lyrics contain the text.",
            "inputSchema": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "Text to look for."}},
                "required": ["query"]
            }
        },
        {
            "name": "get_song",
            "title": "A library song",
            "description": "One library song: its recipe, length, date, timings and the path of its WAV file.",
            "inputSchema": {"type": "object", "properties": {"id": id}, "required": ["id"]}
        },
        {
            "name": "export_song",
            "title": "Export a song",
            "description": "Writes a library song to a file: .wav (32-bit float, or pcm16) or .flac (24-bit), its title, recipe \
                and an AI-generated note in the tags. An existing file is never replaced.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "id": id,
                    "path": {"type": "string", "description": "The file to write, ending in .wav or .flac."},
                    "format": {"type": "string", "enum": ["f32", "pcm16", "flac"], "description": "Default: what the path's extension names (f32 for .wav)."}
                },
                "required": ["id", "path"]
            }
        },
        {
            "name": "delete_song",
            "title": "Delete a song",
            "description": "Removes a song and its file from the library.",
            "inputSchema": {"type": "object", "properties": {"id": id}, "required": ["id"]}
        },
        {
            "name": "list_devices",
            "title": "List the devices",
            "description": "Each compute backend (cuda, wgpu, cpu): whether it runs here and what it is, or why not.",
            "inputSchema": {"type": "object", "properties": {}}
        },
        {
            "name": "list_models",
            "title": "List the models",
            "description": "The model this server makes songs with, the built-in one, and the models downloaded into the models folder.",
            "inputSchema": {"type": "object", "properties": {}}
        }
    ])
}

impl Tools {
    pub fn new(args: McpArgs, library: PathBuf) -> Self {
        Tools { args, library, pipeline: Mutex::new(None) }
    }

    /// Runs tool `name` (but for a song, which it only checks and hands back for the worker).
    /// An unknown tool or arguments that do not parse are protocol errors; a tool that fails is
    /// a result with `isError`.
    pub fn call(&self, name: &str, arguments: &Value) -> Result<Called, RpcError> {
        let bad_arguments = |e: serde_json::Error| RpcError::invalid_params(format!("{name}: {e}"));
        let result = match name {
            "generate_song" => {
                let ask: NewSong = serde_json::from_value(arguments.clone()).map_err(bad_arguments)?;
                return match check(&ask) {
                    Ok(()) => Ok(Called::Song(SongAsk::New(ask))),
                    Err(e) => Ok(Called::Done(failed(&e))),
                };
            }
            "edit_song" => {
                let ask: EditAsk = serde_json::from_value(arguments.clone()).map_err(bad_arguments)?;
                return Ok(Called::Song(SongAsk::Edit { id: ask.id, edit: ask.edit }));
            }
            "list_songs" => self.songs(""),
            "search_songs" => {
                #[derive(Deserialize)]
                struct Search {
                    query: String,
                }
                let search: Search = serde_json::from_value(arguments.clone()).map_err(bad_arguments)?;
                self.songs(&search.query)
            }
            "get_song" => self.song(song_id(arguments).map_err(RpcError::invalid_params)?),
            "export_song" => {
                #[derive(Deserialize)]
                struct Export {
                    id: i64,
                    path: PathBuf,
                    format: Option<String>,
                }
                let export: Export = serde_json::from_value(arguments.clone()).map_err(bad_arguments)?;
                self.export(export.id, &export.path, export.format.as_deref())
            }
            "delete_song" => self.delete(song_id(arguments).map_err(RpcError::invalid_params)?),
            "list_devices" => Ok(devices()),
            "list_models" => Ok(self.models()),
            other => return Err(RpcError::invalid_params(format!("no tool `{other}` (tools/list names them)"))),
        };
        Ok(Called::Done(result.map_or_else(|e| failed(&e), |value| done(&value))))
    }

    fn open_library(&self) -> Result<Library> {
        Library::open(&self.library)
    }

    fn songs(&self, search: &str) -> Result<Value> {
        let songs: Vec<LibrarySong> = self.open_library()?.list(search)?.iter().map(library_song).collect();
        Ok(json!({"songs": songs}))
    }

    fn song(&self, id: i64) -> Result<Value> {
        let song = self.open_library()?.get(id)?.with_context(|| format!("no song {id} in the library"))?;
        Ok(json!({
            "song": library_song(&song),
            "wav": song.wav,
            "engine_version": song.engine_version,
            "total_s": song.timings.total_s,
        }))
    }

    fn export(&self, id: i64, path: &Path, format: Option<&str>) -> Result<Value> {
        let format = match format {
            Some(name) => <FileFormat as clap::ValueEnum>::from_str(name, true)
                .map_err(|_| anyhow::anyhow!("format must be f32, pcm16 or flac (got `{name}`)"))?,
            None => FileFormat::of_extension(path)?.unwrap_or(FileFormat::F32),
        };
        crate::stale::sweep_beside(path);
        let song = self.open_library()?.get(id)?.with_context(|| format!("no song {id} in the library"))?;
        let recipe = serde_json::to_string(&song.recipe)?;
        let written = crate::wav::export_as(&song.wav, path, format, &song.title, &recipe)?;
        Ok(json!({"id": id, "path": written, "format": format.name()}))
    }

    fn delete(&self, id: i64) -> Result<Value> {
        self.open_library()?.delete(id)?;
        Ok(json!({"id": id, "deleted": true}))
    }

    fn models(&self) -> Value {
        let installed: Vec<Value> = crate::model_download::installed()
            .iter()
            .map(|m| json!({"path": m.dir, "complete": m.complete.is_some(), "describe": m.describe(), "damaged": m.damaged}))
            .collect();
        let embedded = self.args.model.model.is_none();
        json!({
            "in_use": {
                "name": model_name(embedded),
                "path": self.args.model.model.as_ref().map_or_else(|| "built in".to_string(), |p| p.display().to_string()),
            },
            "models_folder": crate::model_download::models_dir(),
            "installed": installed,
        })
    }

    /// Makes the song `call` asks for (loading the model first, once) into the library; its
    /// progress goes out as notifications when the call carries a token.
    pub fn generate(&self, call: &SongCall, outbox: &Outbox) -> Value {
        match self.make(call, outbox) {
            Ok(value) => done(&value),
            Err(e) => failed(&e),
        }
    }

    fn make(&self, call: &SongCall, outbox: &Outbox) -> Result<Value> {
        let mut loaded = self.pipeline.lock().unwrap_or_else(|p| p.into_inner());
        if loaded.is_none() {
            *loaded = Some(self.load()?);
        }
        let Loaded { pipeline, base } = loaded.as_ref().expect("just loaded");
        let sink = ProgressSink::new(call.progress_token.clone(), outbox.clone());
        let ask = match &call.ask {
            SongAsk::New(ask) => ask,
            SongAsk::Edit { id, edit } => {
                let job = crate::edit_job::edit_job(pipeline, &self.library, *id, edit, base, None)?;
                let finished = song_job::run(pipeline, &job, &sink, &call.cancel)?;
                let song = finished.saved.context("the song was not kept")?;
                let changed = job.recipe.edit.as_deref();
                return Ok(json!({
                    "song": library_song(&song),
                    "wav": song.wav,
                    "seed": job.recipe.seed,
                    "changed_from_s": changed.map(|e| e.changed_from_s),
                    "changed_to_s": changed.and_then(|e| e.changed_to_s),
                }));
            }
        };
        let lyrics = lyrics_of(ask, self.args.model.model.is_none())?;
        let duration_s = ask.duration_s.unwrap_or(30.0);
        let seed = ask.seed.unwrap_or_else(new_seed);
        let request = Request {
            description: ask.description.clone(),
            lyrics,
            duration_s,
            seed,
            steps: ask.steps.unwrap_or(30),
            guidance: ask.guidance,
        };
        pipeline.max_frames(duration_s)?;
        pipeline.encode_prompt(&request.description, &request.lyrics)?;
        let recipe = Recipe {
            description: request.description.clone(),
            lyrics: request.lyrics.clone(),
            duration_s,
            seed,
            steps: request.steps,
            guidance: request.guidance.unwrap_or(DEFAULT_GUIDANCE),
            ..base.clone()
        };
        let job = SongJob { request, recipe, out: None, library: Some(self.library.clone()), edit: None };
        let finished = song_job::run(pipeline, &job, &sink, &call.cancel)?;
        let song = finished.saved.context("the song was not kept")?;
        Ok(json!({"song": library_song(&song), "wav": song.wav, "seed": seed}))
    }

    fn load(&self) -> Result<Loaded> {
        let args = &self.args;
        let adapters = args.adapters.open()?;
        let adapter_recipes = crate::engine_args::adapter_recipes(&adapters);
        let device = args.engine.open_device()?;
        let model = args.model.dir()?;
        let plan = Pipeline::plan(&model, &device, args.engine.memory_request(), None)?;
        let pipeline = Pipeline::load_adapted(&model, adapters, device, &plan, &|_| {})
            .with_context(|| format!("loading the model from {}", model.display()))?;
        let base = crate::engine_args::engine_recipe(&args.engine, &args.model, &plan, adapter_recipes);
        Ok(Loaded { pipeline, base })
    }
}

/// The checks made before a song is queued.
fn check(ask: &NewSong) -> Result<()> {
    if ask.description.trim().is_empty() {
        bail!("the description is empty: say what the music is (genre, mood, instruments, tempo)");
    }
    if let Some(d) = ask.duration_s
        && !(d.is_finite() && d > 0.0)
    {
        bail!("duration_s must be a positive number of seconds (got {d})");
    }
    if let Some(steps) = ask.steps
        && !(1..=1000).contains(&steps)
    {
        bail!("steps must be 1 to 1000 (got {steps})");
    }
    if ask.guidance.is_some_and(|g| !g.is_finite()) {
        bail!("guidance must be a finite number");
    }
    Ok(())
}

/// The lyrics a song is made with: `[instrumental]` when asked, or when none are given to the
/// built-in model, which cannot sing.
fn lyrics_of(ask: &NewSong, embedded: bool) -> Result<String> {
    let given = !ask.lyrics.trim().is_empty();
    match (ask.instrumental, given) {
        (true, true) if ask.lyrics.trim() != INSTRUMENTAL_LYRICS => {
            bail!("give lyrics or instrumental: true, not both")
        }
        (true, _) => Ok(INSTRUMENTAL_LYRICS.to_string()),
        (false, false) if embedded => Ok(INSTRUMENTAL_LYRICS.to_string()),
        (false, false) => {
            bail!("the lyrics are empty: give lyrics with [verse]/[chorus] tags, or instrumental: true for no singing")
        }
        (false, true) => Ok(ask.lyrics.clone()),
    }
}

/// A seed no earlier call chose, so each call makes a new song.
pub fn new_seed() -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    (nanos as u64 ^ (u64::from(std::process::id()) << 32)) % 1_000_000_000
}

fn song_id(arguments: &Value) -> Result<i64, String> {
    arguments
        .get("id")
        .and_then(Value::as_i64)
        .ok_or_else(|| "give the song's `id` (an integer from list_songs)".into())
}

fn library_song(song: &Song) -> LibrarySong {
    LibrarySong {
        id: song.id,
        title: song.title.clone(),
        seconds: song.seconds,
        created_unix: song.created_unix,
        recipe: song.recipe.clone(),
        parent: song.parent,
        edit_kind: song.edit_kind().map(String::from),
        not_editable: Library::editable(song).err(),
    }
}

fn devices() -> Value {
    let devices: Vec<DeviceProbe> =
        Device::probe_all().into_iter().map(|p| DeviceProbe::new(p.kind.name(), p.status)).collect();
    json!({"devices": devices})
}

/// A tool's result: the value as structured content, and as text for clients that read only that.
fn done(value: &Value) -> Value {
    json!({"content": [{"type": "text", "text": value.to_string()}], "structuredContent": value, "isError": false})
}

/// A tool's failure, in one line the agent can act on.
fn failed(e: &anyhow::Error) -> Value {
    let message = format!("{e:#}").lines().map(str::trim).collect::<Vec<_>>().join(" ");
    json!({"content": [{"type": "text", "text": message}], "isError": true})
}

/// A song's progress as `notifications/progress`: the share of the work done (the AR frames and
/// the denoising, as the window's bar), never going back, at most a few a second.
struct ProgressSink {
    token: Option<Value>,
    outbox: Outbox,
    state: Mutex<(Progress, Instant, f64, Option<Instant>)>,
}

impl ProgressSink {
    fn new(token: Option<Value>, outbox: Outbox) -> Self {
        let now = Instant::now();
        ProgressSink { token, outbox, state: Mutex::new((Progress::new(0.0), now, 0.0, None)) }
    }
}

impl SongSink for ProgressSink {
    fn event(&self, event: &Event) {
        let Some(token) = &self.token else { return };
        let Event::Stage { stage, done, total } = event else { return };
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (progress, started, sent, last) = &mut *state;
        progress.apply(
            &EngineEvent::Stage { job: 0, stage: *stage, done: *done, total: *total },
            started.elapsed().as_secs_f64(),
        );
        let fraction = progress.fraction().max(*sent);
        let due = last.is_none_or(|t| t.elapsed().as_secs_f64() >= 0.25);
        if fraction > *sent && due {
            *sent = fraction;
            *last = Some(Instant::now());
            let message = stage_words(stage, *done, *total);
            self.outbox.notify(
                "notifications/progress",
                json!({"progressToken": token, "progress": fraction, "total": 1.0, "message": message}),
            );
        }
    }
}

/// Where a song is, for a person.
fn stage_words(stage: &songloom_wire::Stage, done: usize, total: usize) -> String {
    use songloom_wire::Stage;
    match stage {
        Stage::Load { half } => format!("loading {} ({done} of {total} parts)", half.name()),
        Stage::Tokenize => "reading the description and lyrics".into(),
        Stage::ArFrames => format!("composing: frame {done} of up to {total}"),
        Stage::Dit { window, windows } => {
            format!("rendering part {} of {windows}: step {done} of {total}", window + 1)
        }
        Stage::Vocoder { window, windows } => format!("making the sound of part {} of {windows}", window + 1),
    }
}
