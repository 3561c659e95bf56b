//! The HTTP API of `songloom serve` (documented in the README): songs as jobs, their events as
//! Server-Sent Events, their audio as a raw stream while they are made and as a WAV once done,
//! the library, the devices and the model. Every error is a 4xx with a one-line JSON body.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, State};
use axum::http::{Method, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{MethodRouter, get, patch, post};
use futures_util::stream::{self, Stream};
use serde::de::DeserializeOwned;
use songloom_engine::pipeline::{Pipeline, Request};
use songloom_engine::{Device, Precision};
use songloom_ui::contract::{DEFAULT_GUIDANCE, Recipe};
use songloom_wire::notice::INSTRUMENTAL_LYRICS;
use songloom_wire::{
    Deleted, DeviceProbe, Devices, EditRequest, ErrorBody, LibraryList, LibrarySong, Rename, Renamed, ServedModel,
    SongCreated, SongLength, SongList, SongRequest, SongState, SongStatus,
};

use super::jobs::{Jobs, State as JobState};
use crate::library::Library;
pub use routes::MUSIC_GENERATION;
use routes::ROUTES;

pub mod minimax;
mod routes;

/// The largest request body taken (a description and lyrics are a few kilobytes).
pub const BODY_LIMIT: usize = 64 * 1024;

/// What the handlers share.
pub struct Server {
    pub jobs: Arc<Jobs>,
    pub pipeline: Arc<Pipeline>,
    pub library: PathBuf,
    /// The recipe fields the server fixes: device, precision, model, weights, budget.
    pub base: Recipe,
    pub precision: Precision,
    pub model: ServedModel,
    /// The length MiniMax-shaped requests (which name none) ask for: the longest the song may be,
    /// which the model may end earlier.
    pub cloud_duration_s: f64,
}

type Shared = State<Arc<Server>>;

/// An API error: a status and one line.
pub struct ApiError(StatusCode, String);

impl ApiError {
    fn bad(message: impl Into<String>) -> Self {
        ApiError(StatusCode::BAD_REQUEST, message.into())
    }

    fn not_found(what: &str) -> Self {
        ApiError(StatusCode::NOT_FOUND, format!("no {what}"))
    }
}

impl IntoResponse for ApiError {
    /// The error as one line (a message of several lines, such as a library's, is joined).
    fn into_response(self) -> Response {
        let lines: Vec<&str> = self.1.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        let error =
            if lines.is_empty() { self.0.canonical_reason().unwrap_or("error").to_string() } else { lines.join(" ") };
        (self.0, Json(ErrorBody { error })).into_response()
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> Self {
        ApiError(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}"))
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// The API and the page (the checks of names, origins, the token and the body's time are layered
/// around it by [`serve`](super)). Every route of [`ROUTES`]; an unknown path is a 404, a method a route does not take a 405 with
/// an `Allow` header (axum's), both with the one-line JSON error.
pub fn router(server: Arc<Server>) -> Router {
    ROUTES
        .iter()
        .fold(Router::new(), |router, &(path, takes)| {
            let refuse = move |method: Method| async move {
                let takes = takes.join(", ");
                ApiError(StatusCode::METHOD_NOT_ALLOWED, format!("{path} takes {takes}, not {method}"))
            };
            router.route(path, handlers(path).fallback(refuse))
        })
        .fallback(|| async { ApiError::not_found("such endpoint (see the README's API section)") })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(server)
}

/// The handlers of a path of [`ROUTES`], one for each method it lists there.
fn handlers(path: &str) -> MethodRouter<Arc<Server>> {
    match path {
        "/api/songs" => get(songs).post(create_song),
        "/api/songs/{id}" => get(song).delete(cancel_song),
        "/api/songs/{id}/events" => get(events),
        "/api/songs/{id}/stream.pcm" => get(pcm),
        "/api/songs/{id}/audio.wav" => get(wav),
        "/api/songs/{id}/edits" => post(create_edit),
        "/api/library" => get(library),
        "/api/library/{id}" => patch(rename).delete(delete),
        "/api/library/{id}/{file}" => get(library_file),
        "/api/devices" => get(devices),
        "/api/model" => get(model),
        MUSIC_GENERATION => post(minimax::music_generation),
        "/" => get(super::page::index),
        "/pkg/songloom_web.js" => get(super::page::script),
        "/pkg/songloom_web_bg.wasm" => get(super::page::wasm),
        // A path listed without handlers takes no method: every request to it is a 405, which
        // the walk of app/tests/serve_errors.rs reports.
        _ => MethodRouter::new(),
    }
}

/// The parts of the address (`{id}`) as `T`, like axum's `Path`, but one that cannot be read (a
/// percent-encoded byte that is not UTF-8, say) is a one-line JSON error.
struct PathParts<T>(T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PathParts<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, ApiError> {
        use axum::extract::path::ErrorKind;
        use axum::extract::rejection::PathRejection;
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(PathParts(value)),
            Err(PathRejection::FailedToDeserializePathParams(e)) => match e.kind() {
                ErrorKind::InvalidUtf8InPathParam { key } => Err(ApiError::bad(format!(
                    "the address's `{key}` is not UTF-8 text once percent-decoded ({})",
                    parts.uri.path()
                ))),
                _ => Err(ApiError(e.status(), e.body_text())),
            },
            Err(e) => Err(ApiError(e.status(), e.body_text())),
        }
    }
}

fn parse_id(id: &str) -> ApiResult<u64> {
    id.parse().map_err(|_| ApiError::bad(format!("`{id}` is not a song id")))
}

/// A request body the API reads, and the start of the one-line error for one it cannot.
trait RequestBody: DeserializeOwned {
    const REFUSED: &'static str;
}

impl RequestBody for EditRequest {
    const REFUSED: &'static str = "the request is not an edit (kind extend, from, resing or rerender)";
}

impl RequestBody for SongRequest {
    const REFUSED: &'static str = "the request is not a song";
}

impl RequestBody for Rename {
    const REFUSED: &'static str = "expected {\"title\": ...}";
}

/// A request body read whole (declared JSON, which [`origin`](super::origin) checked) and parsed
/// as `T`; one unreadable or not a `T` is a one-line JSON error.
struct JsonBody<T>(T);

impl<S: Send + Sync, T: RequestBody> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        // Its size and time were held to their limits as it was read (`connections::body_in_time`).
        let bytes = Bytes::from_request(request, state).await.map_err(|e| ApiError(e.status(), e.body_text()))?;
        serde_json::from_slice(&bytes).map(JsonBody).map_err(|e| ApiError::bad(format!("{}: {e}", T::REFUSED)))
    }
}

async fn create_song(
    State(server): Shared,
    JsonBody(ask): JsonBody<SongRequest>,
) -> ApiResult<(StatusCode, Json<SongCreated>)> {
    if let Some(p) = &ask.precision
        && Precision::parse(p).ok() != Some(server.precision)
    {
        return Err(ApiError::bad(format!("this server runs the {} precision, not `{p}`", server.precision.name())));
    }
    let duration_s = match &ask.duration {
        None => 30.0,
        Some(SongLength::Seconds(seconds)) => *seconds,
        Some(SongLength::Text(text)) => songloom_ui::duration::parse_duration(text).map_err(ApiError::bad)?,
    };
    let lyrics = song_lyrics(&ask, server.model.embedded)?;
    let request = Request {
        description: ask.description.clone(),
        lyrics,
        duration_s,
        seed: ask.seed.unwrap_or(0),
        steps: ask.steps.unwrap_or(30),
        guidance: ask.guidance,
    };
    // The checks `generate` makes before it starts: length, the prompt's tokens, the steps.
    server.pipeline.max_frames(duration_s).map_err(|e| ApiError::bad(e.to_string()))?;
    server.pipeline.encode_prompt(&request.description, &request.lyrics).map_err(|e| ApiError::bad(e.to_string()))?;
    if !(1..=1000).contains(&request.steps) {
        return Err(ApiError::bad(format!("steps must be 1 to 1000 (got {})", request.steps)));
    }
    if request.guidance.is_some_and(|g| !g.is_finite()) {
        return Err(ApiError::bad("guidance must be a finite number"));
    }
    let recipe = Recipe {
        description: request.description.clone(),
        lyrics: request.lyrics.clone(),
        duration_s,
        seed: request.seed,
        steps: request.steps,
        guidance: request.guidance.unwrap_or(DEFAULT_GUIDANCE),
        ..server.base.clone()
    };
    let takes = ask.takes.unwrap_or(1);
    let most = songloom_wire::MAX_TAKES;
    if !(1..=most).contains(&takes) {
        return Err(ApiError::bad(format!("takes must be 1 to {most} (got {takes})")));
    }
    let warnings = songloom_ui::lyrics::dropped_text(&request.lyrics).iter().map(|d| d.message()).collect();
    // Queued one after another, they start together on a server that makes several at once.
    let queued: Vec<(u64, usize)> = (0..takes as u64)
        .map(|k| {
            let seed = request.seed.wrapping_add(k);
            server.jobs.add(Request { seed, ..request.clone() }, Recipe { seed, ..recipe.clone() })
        })
        .collect();
    let (id, place) = queued[0];
    let takes = if takes > 1 { queued.iter().map(|(id, _)| *id).collect() } else { Vec::new() };
    let created = SongCreated { id, state: SongState::Queued { place: Some(place) }, warnings, takes };
    Ok((StatusCode::CREATED, Json(created)))
}

/// `POST /api/songs/ID/edits`: a new version of library song ID, queued like a song. The edit is
/// checked against the song and the model before it is queued: no such song is a 404, a song
/// without codes a 409, an edit that does not fit the song (a time outside it, a line it has not)
/// a 400.
async fn create_edit(
    State(server): Shared,
    PathParts(id): PathParts<String>,
    JsonBody(ask): JsonBody<EditRequest>,
) -> ApiResult<(StatusCode, Json<SongCreated>)> {
    let library_id = library_id(&id)?;
    let shared = server.clone();
    let job = blocking(move || {
        let library = Library::open(&shared.library)?;
        let song = library
            .get(library_id)?
            .ok_or_else(|| ApiError::not_found(&format!("song {library_id} in the library")))?;
        if let Err(why) = Library::editable(&song) {
            return Err(ApiError(StatusCode::CONFLICT, format!("song {library_id} cannot be edited: {why}")));
        }
        crate::edit_job::edit_job(&shared.pipeline, &shared.library, library_id, &ask, &shared.base, None)
            .map_err(|e| ApiError::bad(format!("{e:#}")))
    })
    .await?;
    let (id, place) = server.jobs.add_job(job);
    Ok((
        StatusCode::CREATED,
        Json(SongCreated {
            id,
            state: SongState::Queued { place: Some(place) },
            warnings: Vec::new(),
            takes: Vec::new(),
        }),
    ))
}

/// The lyrics a request asks for: `[instrumental]` when it says `instrumental`, or gives none to a
/// server of the built-in model (which cannot sing), as `generate` does.
fn song_lyrics(ask: &SongRequest, embedded: bool) -> ApiResult<String> {
    let given = !ask.lyrics.trim().is_empty();
    match (ask.instrumental, given) {
        (true, true) if ask.lyrics.trim() != INSTRUMENTAL_LYRICS => {
            Err(ApiError::bad("give `lyrics` or `instrumental: true`, not both"))
        }
        (true, _) => Ok(INSTRUMENTAL_LYRICS.to_string()),
        (false, false) if embedded => Ok(INSTRUMENTAL_LYRICS.to_string()),
        (false, false) => Err(ApiError::bad(
            "the lyrics are empty: give `lyrics` with [verse]/[chorus] tags, or `instrumental: true` for a song without singing",
        )),
        (false, true) => Ok(ask.lyrics.clone()),
    }
}

/// A job's state, its place while it waits, what went wrong or where it was kept.
fn describe(server: &Server, id: u64) -> ApiResult<SongStatus> {
    let place = server.jobs.place(id);
    server
        .jobs
        .with(id, |job| {
            let (fraction, eta_s) = job.fraction_and_eta();
            SongStatus {
                id,
                state: match &job.state {
                    JobState::Queued => SongState::Queued { place },
                    JobState::Running => SongState::Running,
                    JobState::Finished { library_id } => SongState::Finished { library_id: *library_id },
                    JobState::Failed(why) => SongState::Failed { error: why.clone() },
                    JobState::Cancelled => SongState::Cancelled,
                },
                description: job.recipe.description.clone(),
                duration_s: job.recipe.duration_s,
                seed: job.recipe.seed,
                seconds_made: job.audio.len() as f64 / 2.0 / server.pipeline.sample_rate() as f64,
                fraction,
                eta_s,
            }
        })
        .ok_or_else(|| ApiError::not_found("such song"))
}

async fn songs(State(server): Shared) -> ApiResult<Json<SongList>> {
    let songs = server.jobs.ids().into_iter().filter_map(|id| describe(&server, id).ok()).collect();
    Ok(Json(SongList { songs }))
}

async fn song(State(server): Shared, PathParts(id): PathParts<String>) -> ApiResult<Json<SongStatus>> {
    Ok(Json(describe(&server, parse_id(&id)?)?))
}

async fn cancel_song(State(server): Shared, PathParts(id): PathParts<String>) -> ApiResult<Json<SongStatus>> {
    let id = parse_id(&id)?;
    server.jobs.cancel(id).ok_or_else(|| ApiError::not_found("such song"))?;
    Ok(Json(describe(&server, id)?))
}

/// What a stream of a job has to say next: new items from `seen` on, and whether the job is over.
fn next_items<T: Clone>(server: &Server, id: u64, seen: usize, items: fn(&super::jobs::Job) -> &[T]) -> (Vec<T>, bool) {
    server
        .jobs
        .with(id, |job| (items(job).get(seen..).unwrap_or_default().to_vec(), job.state.is_over()))
        .unwrap_or_default()
}

/// A job's items as they come: those so far, then each addition, until the job is over.
fn follow<T: Clone + Send + 'static>(
    server: Arc<Server>,
    id: u64,
    items: fn(&super::jobs::Job) -> &[T],
) -> ApiResult<impl Stream<Item = Vec<T>>> {
    let watch = server.jobs.with(id, |job| job.watch()).ok_or_else(|| ApiError::not_found("such song"))?;
    Ok(stream::unfold((server, watch, 0usize, false), move |(server, mut watch, seen, done)| async move {
        if done {
            return None;
        }
        loop {
            // Marked seen before reading, so a change after the read wakes the wait below.
            watch.borrow_and_update();
            let (new, over) = next_items(&server, id, seen, items);
            if !new.is_empty() || over {
                let seen = seen + new.len();
                return Some((new, (server, watch, seen, over)));
            }
            if watch.changed().await.is_err() {
                return None;
            }
        }
    }))
}

/// `GET /api/songs/ID/events`: every event as `event: NAME` and its JSON, from the first.
async fn events(State(server): Shared, PathParts(id): PathParts<String>) -> ApiResult<impl IntoResponse> {
    use futures_util::StreamExt;
    let stream = follow(server, parse_id(&id)?, |job| &job.events)?.flat_map(|batch| {
        stream::iter(batch.into_iter().map(|event: songloom_wire::Event| {
            Ok::<_, Infallible>(SseEvent::default().event(event.name()).data(event.to_line()))
        }))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// `GET /api/songs/ID/stream.pcm`: the song's interleaved stereo f32 samples (little-endian, at
/// the model's rate) from the first, as they are made; the body ends when the song does.
async fn pcm(State(server): Shared, PathParts(id): PathParts<String>) -> ApiResult<Response> {
    use futures_util::StreamExt;
    let id = parse_id(&id)?;
    if server.jobs.with(id, |job| job.audio_dropped) == Some(true) {
        return Err(ApiError(StatusCode::GONE, format!("song {id}'s stream is over; fetch /api/songs/{id}/audio.wav")));
    }
    let rate = server.pipeline.sample_rate();
    let stream = follow(server, id, |job| &job.audio)?
        .map(|samples: Vec<f32>| Ok::<_, Infallible>(Bytes::from(le_bytes(&samples))));
    Ok(Response::builder()
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header("x-sample-rate", rate)
        .header("x-channels", 2)
        .body(Body::from_stream(stream))
        .expect("a valid response"))
}

fn le_bytes(samples: &[f32]) -> Vec<u8> {
    samples.iter().flat_map(|s| s.to_le_bytes()).collect()
}

/// `GET /api/songs/ID/audio.wav`: the finished song's file.
async fn wav(State(server): Shared, PathParts(id): PathParts<String>) -> ApiResult<Response> {
    let id = parse_id(&id)?;
    let state = server.jobs.with(id, |job| job.state.clone()).ok_or_else(|| ApiError::not_found("such song"))?;
    let JobState::Finished { library_id } = state else {
        return Err(ApiError(StatusCode::CONFLICT, format!("the song is {}, not finished", state.name())));
    };
    wav_of(&server, library_id).await
}

fn wav_of(server: &Server, library_id: i64) -> impl Future<Output = ApiResult<Response>> + use<> {
    let library = server.library.clone();
    async move {
        let (file, length) = blocking(move || {
            let song = Library::open(&library)?
                .get(library_id)?
                .ok_or_else(|| ApiError::not_found("such song in the library (deleted?)"))?;
            Ok(open_sized(&song.wav)?)
        })
        .await?;
        Ok(file_response("audio/wav", file, length, ()))
    }
}

/// Runs `work` (files, the library's database, device probes) off the threads that serve
/// connections, so a slow export does not hold up every other answer.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> ApiResult<T> + Send + 'static) -> ApiResult<T> {
    tokio::task::spawn_blocking(work).await.map_err(|e| ApiError::from(anyhow::anyhow!("a task failed: {e}")))?
}

/// A file opened for sending, and its length.
fn open_sized(path: &std::path::Path) -> anyhow::Result<(std::fs::File, u64)> {
    let file = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    let length = file.metadata().map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?.len();
    Ok((file, length))
}

/// A file sent a chunk at a time as the client takes it (never read whole into memory); `keep`
/// lives as long as the sending (the folder of an exported copy).
fn file_response<K: Send + 'static>(kind: &'static str, file: std::fs::File, length: u64, keep: K) -> Response {
    const CHUNK_BYTES: usize = 256 * 1024;
    let chunks = stream::try_unfold((file, keep), |(mut file, keep)| async move {
        let (file, chunk) = tokio::task::spawn_blocking(move || {
            let mut chunk = vec![0u8; CHUNK_BYTES];
            let read = std::io::Read::read(&mut file, &mut chunk)?;
            chunk.truncate(read);
            Ok::<_, std::io::Error>((file, chunk))
        })
        .await
        .map_err(std::io::Error::other)??;
        Ok::<_, std::io::Error>((!chunk.is_empty()).then(|| (Bytes::from(chunk), (file, keep))))
    });
    let headers = [(header::CONTENT_TYPE, kind.to_string()), (header::CONTENT_LENGTH, length.to_string())];
    (headers, Body::from_stream(chunks)).into_response()
}

/// `GET /api/library/ID/audio.wav[?format=pcm16][&sample_rate=HZ][&download=1]` or
/// `.../audio.flac`: a library song's file, with its title and recipe in its tags, resampled to
/// one of the rates offered if asked.
async fn library_file(
    State(server): Shared,
    PathParts((id, file)): PathParts<(String, String)>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> ApiResult<Response> {
    let id = library_id(&id)?;
    let mut format = match file.as_str() {
        "audio.wav" => crate::wav::FileFormat::F32,
        "audio.flac" => crate::wav::FileFormat::Flac,
        _ => return Err(ApiError::not_found("such file of a song (audio.wav or audio.flac)")),
    };
    let mut download = false;
    let mut sample_rate = None;
    for pair in query.as_deref().unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=').unwrap_or((pair, "")) {
            ("format", _) if format == crate::wav::FileFormat::Flac => {
                return Err(ApiError::bad("format is for audio.wav (float32 or pcm16); audio.flac is 24-bit"));
            }
            ("format", "float32") => format = crate::wav::FileFormat::F32,
            ("format", "pcm16") => format = crate::wav::FileFormat::Pcm16,
            ("format", other) => return Err(ApiError::bad(format!("format must be float32 or pcm16, not `{other}`"))),
            ("sample_rate", rate) => match rate.parse() {
                Ok(rate) if crate::resample::OFFERED_RATES_HZ.contains(&rate) => sample_rate = Some(rate),
                _ => {
                    let offered: Vec<String> = crate::resample::OFFERED_RATES_HZ.iter().map(u32::to_string).collect();
                    return Err(ApiError::bad(format!(
                        "sample_rate must be {} (Hz), not `{rate}`",
                        offered.join(", ")
                    )));
                }
            },
            ("download", _) => download = true,
            ("token", _) => {}
            (other, _) => {
                return Err(ApiError::bad(format!("unknown parameter `{other}` (format, sample_rate, download)")));
            }
        }
    }
    let library = server.library.clone();
    let (title, file, length, dir) = blocking(move || {
        let song = Library::open(&library)?
            .get(id)?
            .ok_or_else(|| ApiError::not_found("such song in the library (deleted?)"))?;
        let recipe = serde_json::to_string(&song.recipe).map_err(anyhow::Error::from)?;
        let dir = tempfile::tempdir().map_err(anyhow::Error::from)?;
        let target = dir.path().join(format!("song.{}", format.extension()));
        let exported = crate::wav::export_at(&song.wav, &target, format, sample_rate, &song.title, &recipe)?;
        let (file, length) = open_sized(&exported)?;
        Ok((song.title, file, length, dir))
    })
    .await?;
    let kind = if format == crate::wav::FileFormat::Flac { "audio/flac" } else { "audio/wav" };
    let mut response = file_response(kind, file, length, dir);
    if download {
        let value = format!("attachment; filename=\"{}.{}\"", crate::wav::file_stem(&title), format.extension());
        if let Ok(value) = header::HeaderValue::from_str(&value) {
            response.headers_mut().insert(header::CONTENT_DISPOSITION, value);
        }
    }
    Ok(response)
}

async fn library(State(server): Shared) -> ApiResult<Json<LibraryList>> {
    let library = server.library.clone();
    let songs = blocking(move || Ok(Library::open(&library)?.list("")?)).await?;
    let songs = songs
        .into_iter()
        .map(|s| LibrarySong {
            edit_kind: s.edit_kind().map(String::from),
            not_editable: Library::editable(&s).err(),
            id: s.id,
            title: s.title,
            seconds: s.seconds,
            created_unix: s.created_unix,
            parent: s.parent,
            recipe: s.recipe,
        })
        .collect();
    Ok(Json(LibraryList { songs }))
}

fn library_id(id: &str) -> ApiResult<i64> {
    id.parse().map_err(|_| ApiError::bad(format!("`{id}` is not a library id")))
}

async fn rename(
    State(server): Shared,
    PathParts(id): PathParts<String>,
    JsonBody(ask): JsonBody<Rename>,
) -> ApiResult<Json<Renamed>> {
    let id = library_id(&id)?;
    let library = server.library.clone();
    let title = ask.title.clone();
    blocking(move || {
        let library = Library::open(&library)?;
        library.get(id)?.ok_or_else(|| ApiError::not_found("such song in the library"))?;
        library.rename(id, &title).map_err(|e| ApiError::bad(format!("{e:#}")))
    })
    .await?;
    Ok(Json(Renamed { id, title: ask.title }))
}

async fn delete(State(server): Shared, PathParts(id): PathParts<String>) -> ApiResult<Json<Deleted>> {
    let id = library_id(&id)?;
    let library = server.library.clone();
    blocking(move || {
        let library = Library::open(&library)?;
        library.get(id)?.ok_or_else(|| ApiError::not_found("such song in the library"))?;
        Ok(library.delete(id)?)
    })
    .await?;
    Ok(Json(Deleted { id, deleted: true }))
}

async fn devices(State(server): Shared) -> ApiResult<Json<Devices>> {
    let probes = blocking(|| Ok(Device::probe_all())).await?;
    let devices = probes.into_iter().map(|p| DeviceProbe::new(p.kind.name(), p.status)).collect();
    Ok(Json(Devices { devices, serving_on: server.pipeline.device.description() }))
}

async fn model(State(server): Shared) -> Json<ServedModel> {
    Json(server.model.clone())
}
