//! `POST /v1/music_generation`: MiniMax's cloud music API, answered by this server (the README's
//! "MiniMax's cloud API shape"), so a client written for the cloud works by changing only the
//! address. The song goes through the same queue as `POST /api/songs` and is kept in the library;
//! the answer comes when it is done, as the cloud's does: the file in hex, or an address on this
//! server to fetch it from, or, streamed, Server-Sent Events of hex pieces as the song is made.
//!
//! As in the cloud, a request refused is an HTTP 200 whose `base_resp` has a non-zero
//! `status_code` (2013 with a message naming the field to fix), since cloud clients read
//! `base_resp`; a missing token is a 401 with `base_resp` 1004 (see `access`).

use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use futures_util::stream::{self, BoxStream, StreamExt};
use songloom_engine::pipeline::Request;
use songloom_ui::contract::Recipe;
use songloom_wire::minimax::{
    AudioSetting, BaseResp, MusicAudio, MusicGenerationAnswer, MusicGenerationRequest, MusicInfo, OutputFormat,
};

use super::{ApiError, ApiResult, Server, blocking, follow};
use crate::library::Library;
use crate::resample::{OFFERED_RATES_HZ, Resampler};
use crate::serve::jobs::State as JobState;
use crate::wav::FileFormat;

/// The files a song is answered as. The cloud's default, MP3, is not among them: no MP3 encoder on
/// crates.io is both pure Rust and settled (the README's "MiniMax's cloud API shape" says why).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SongFile {
    /// 16-bit PCM, which every player and audio library reads.
    Wav,
    /// 24-bit FLAC.
    Flac,
}

impl SongFile {
    /// What `audio_setting.format` may name, for the messages.
    const OFFERED: &'static str = "wav or flac";

    /// `audio_setting.format`; WAV when it is left out, the one file every client can decode.
    fn parse(format: Option<&str>) -> Result<SongFile, String> {
        match format.map(str::to_ascii_lowercase).as_deref() {
            None | Some("wav") => Ok(SongFile::Wav),
            Some("flac") => Ok(SongFile::Flac),
            Some("mp3") => Err(format!(
                "`audio_setting.format` mp3 is not offered by this server (it has no MP3 encoder): ask for {}",
                SongFile::OFFERED
            )),
            Some(other) => Err(format!("`audio_setting.format` must be {}, not `{other}`", SongFile::OFFERED)),
        }
    }

    fn file_format(self) -> FileFormat {
        match self {
            SongFile::Wav => FileFormat::Pcm16,
            SongFile::Flac => FileFormat::Flac,
        }
    }

    /// The library's address of the song in this file, less its query's `sample_rate`.
    fn library_file(self, library_id: i64) -> String {
        match self {
            SongFile::Wav => format!("/api/library/{library_id}/audio.wav?format=pcm16"),
            SongFile::Flac => format!("/api/library/{library_id}/audio.flac"),
        }
    }
}

/// A request found good: the song to make, and how to answer.
struct Asked {
    request: Request,
    recipe: Recipe,
    file: SongFile,
    /// Hz.
    sample_rate: u32,
    output: OutputFormat,
    stream: bool,
}

/// A cloud-shaped answer and the HTTP status it goes with.
struct Answer(StatusCode, MusicGenerationAnswer);

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        (self.0, Json(self.1)).into_response()
    }
}

/// An answer without a song: a cloud error code and its message.
fn failure(status_code: u32, message: impl Into<String>) -> MusicGenerationAnswer {
    MusicGenerationAnswer {
        data: None,
        trace_id: crate::serve::access::random_id(),
        extra_info: None,
        analysis_info: None,
        base_resp: BaseResp { status_code, status_msg: message.into() },
    }
}

fn invalid(message: impl std::fmt::Display) -> MusicGenerationAnswer {
    failure(BaseResp::INVALID_PARAMS, format!("invalid params: {message}"))
}

/// The answer to a request without the server's token, in the cloud's shape (its clients read
/// `base_resp`), with the 401 status kept.
pub fn unauthorized(message: &str) -> Response {
    Answer(StatusCode::UNAUTHORIZED, failure(BaseResp::AUTHENTICATION_FAILED, message)).into_response()
}

/// The answer to a body this route could not read (too large, too slow), in the cloud's shape
/// with the HTTP status kept.
pub fn unreadable_body(status: StatusCode, message: &str) -> Response {
    Answer(status, invalid(message)).into_response()
}

/// `POST /v1/music_generation`.
pub async fn music_generation(
    State(server): State<Arc<Server>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    // Its size and time were held to their limits as it was read (`connections::body_in_time`).
    let body = match body {
        Ok(body) => body,
        Err(e) => return Answer(e.status(), invalid(e.body_text())).into_response(),
    };
    let asked = match read(&body).and_then(|ask| check(&server, ask)) {
        Ok(asked) => asked,
        Err(message) => return Answer(StatusCode::OK, invalid(message)).into_response(),
    };
    // Queued with the native API's songs. A client that goes away leaves the song to finish into
    // the library: the job runs on the worker, not in this request.
    let (id, _) = server.jobs.add(asked.request.clone(), asked.recipe.clone());
    if asked.stream {
        let events = match asked.file {
            SongFile::Wav => wav_events(server, id, asked.sample_rate),
            SongFile::Flac => flac_events(server, id, asked.sample_rate),
        };
        return Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(Body::from_stream(events.map(Ok::<_, Infallible>)))
            .expect("a valid response");
    }
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).map(str::to_string);
    match whole(server, id, &asked, host).await {
        Whole::Answer(answer) => Answer(StatusCode::OK, answer).into_response(),
        Whole::Hex { answer, bytes } => hex_answer(answer, bytes),
    }
}

/// The body as the cloud's request; one it cannot take is a message naming the field.
fn read(body: &[u8]) -> Result<MusicGenerationRequest, String> {
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let serde_json::Value::Object(fields) = &value else {
        return Err("the body must be a JSON object of the cloud's fields (model, prompt, lyrics, ...)".into());
    };
    serde_json::from_value(value.clone()).map_err(|whole| {
        // Every field may be left out, so each alone shows whether it is the one at fault.
        fields
            .iter()
            .find_map(|(name, field)| {
                let alone = serde_json::Value::Object(std::iter::once((name.clone(), field.clone())).collect());
                serde_json::from_value::<MusicGenerationRequest>(alone).err().map(|e| format!("`{name}`: {e}"))
            })
            .unwrap_or_else(|| whole.to_string())
    })
}

/// The song a request asks for, or what to fix in it.
fn check(server: &Server, ask: MusicGenerationRequest) -> Result<Asked, String> {
    if ask.model.trim().is_empty() {
        return Err(
            "`model` is empty: name a model (any name: this server makes every song with the one it loaded)".into()
        );
    }
    if ask.prompt.trim().is_empty() {
        return Err("`prompt` is empty: describe the music (genre, mood, instruments, vocals, tempo)".into());
    }
    if ask.lyrics_optimizer {
        return Err("`lyrics_optimizer` must be false: this server has no lyrics writer; send `lyrics`, or \
                    `is_instrumental`: true for a song without singing"
            .into());
    }
    // An instrumental song's lyrics are the model's tag for none, whatever was sent.
    let lyrics = if ask.is_instrumental {
        songloom_wire::notice::INSTRUMENTAL_LYRICS.to_string()
    } else if ask.lyrics.trim().is_empty() {
        return Err("`lyrics` is empty: send lyrics, or `is_instrumental`: true for a song without singing".into());
    } else {
        ask.lyrics
    };
    let AudioSetting { sample_rate, bitrate: _, format } = ask.audio_setting.unwrap_or_default();
    let file = SongFile::parse(format.as_deref())?;
    let model_rate = server.pipeline.sample_rate();
    let sample_rate = match sample_rate {
        None => model_rate,
        Some(rate) if rate == model_rate || OFFERED_RATES_HZ.contains(&rate) => rate,
        Some(rate) => {
            let offered: Vec<String> = OFFERED_RATES_HZ.iter().map(u32::to_string).collect();
            return Err(format!("`audio_setting.sample_rate` must be {} (Hz), not {rate}", offered.join(", ")));
        }
    };
    if ask.stream && ask.output_format == OutputFormat::Url {
        return Err("`output_format` must be hex when `stream` is true (a streamed song comes as pieces of hex)".into());
    }
    let request = Request {
        description: ask.prompt,
        lyrics,
        duration_s: server.cloud_duration_s,
        seed: server.base.seed,
        steps: server.base.steps,
        guidance: None,
    };
    // The checks `generate` makes before it starts, on the prompt's and the lyrics' tokens.
    server
        .pipeline
        .encode_prompt(&request.description, &request.lyrics)
        .map_err(|e| format!("`prompt`, `lyrics`: {e}"))?;
    let recipe = Recipe {
        description: request.description.clone(),
        lyrics: request.lyrics.clone(),
        duration_s: request.duration_s,
        ..server.base.clone()
    };
    Ok(Asked { request, recipe, file, sample_rate, output: ask.output_format, stream: ask.stream })
}

/// The job's state once it is over (finished, failed or cancelled).
async fn until_over(server: &Server, id: u64) -> JobState {
    let gone = || JobState::Failed("the song is no longer known to the server".into());
    let Some(mut watch) = server.jobs.with(id, |job| job.watch()) else { return gone() };
    loop {
        // Marked seen before reading, so a change after the read wakes the wait below.
        watch.borrow_and_update();
        match server.jobs.with(id, |job| job.state.clone()) {
            Some(state) if state.is_over() => return state,
            None => return gone(),
            Some(_) => {}
        }
        if watch.changed().await.is_err() {
            return server.jobs.with(id, |job| job.state.clone()).unwrap_or_else(gone);
        }
    }
}

/// The library id of a finished job, or the cloud-shaped failure of one that did not finish.
async fn finished(server: &Server, id: u64) -> Result<i64, MusicGenerationAnswer> {
    match until_over(server, id).await {
        JobState::Finished { library_id } => Ok(library_id),
        JobState::Failed(why) => Err(failure(BaseResp::UNKNOWN_ERROR, format!("the song failed: {why}"))),
        JobState::Cancelled => Err(failure(
            BaseResp::UNKNOWN_ERROR,
            "the song was cancelled (the server is stopping, or it was cancelled through /api/songs)",
        )),
        other => Err(failure(BaseResp::UNKNOWN_ERROR, format!("the song is {}", other.name()))),
    }
}

/// What answers a request once its song is over.
enum Whole {
    /// A failure, or the song's address.
    Answer(MusicGenerationAnswer),
    /// The song in hex: `answer` with `data.audio` empty, and the file's bytes to write there.
    Hex { answer: MusicGenerationAnswer, bytes: Vec<u8> },
}

/// The answer once the song is done: its file in hex, or the address to fetch it from.
async fn whole(server: Arc<Server>, id: u64, asked: &Asked, host: Option<String>) -> Whole {
    let library_id = match finished(&server, id).await {
        Ok(library_id) => library_id,
        Err(answer) => return Whole::Answer(answer),
    };
    let (library, file, sample_rate) = (server.library.clone(), asked.file, asked.sample_rate);
    let encoded = match blocking(move || encode(&library, library_id, file, sample_rate)).await {
        Ok(encoded) => encoded,
        Err(ApiError(_, why)) => return Whole::Answer(failure(BaseResp::UNKNOWN_ERROR, why)),
    };
    let done = |audio: String| MusicGenerationAnswer {
        data: Some(MusicAudio { audio, status: MusicAudio::DONE }),
        trace_id: crate::serve::access::random_id(),
        extra_info: Some(encoded.info.clone()),
        analysis_info: None,
        base_resp: BaseResp::success(),
    };
    match asked.output {
        OutputFormat::Hex => Whole::Hex { answer: done(String::new()), bytes: encoded.bytes },
        OutputFormat::Url => {
            let Some(host) = host else {
                return Whole::Answer(failure(
                    BaseResp::UNKNOWN_ERROR,
                    "the request named no Host to build the song's address on",
                ));
            };
            let mut address = format!("http://{host}{}", file.library_file(library_id));
            if sample_rate != server.pipeline.sample_rate() {
                address.push(if address.contains('?') { '&' } else { '?' });
                address.push_str(&format!("sample_rate={sample_rate}"));
            }
            Whole::Answer(done(address))
        }
    }
}

/// `answer` (whose `data.audio` is empty) with the hex of `bytes` in `data.audio`, written a piece
/// at a time: the hex of a long song is twice its file (a 6-minute WAV's is 127 MB), and is never
/// held whole.
fn hex_answer(answer: MusicGenerationAnswer, bytes: Vec<u8>) -> Response {
    /// Bytes of the file written as hex at a time.
    const PIECE_BYTES: usize = 256 * 1024;
    let json = serde_json::to_string(&answer).expect("an answer is JSON");
    // The empty audio's closing quote: the hex goes before it.
    const EMPTY_AUDIO: &str = r#""audio":"""#;
    let Some(at) = json.find(EMPTY_AUDIO).map(|at| at + EMPTY_AUDIO.len() - 1) else {
        let audio = hex(&bytes);
        let data = answer.data.map(|data| MusicAudio { audio, ..data });
        return Answer(StatusCode::OK, MusicGenerationAnswer { data, ..answer }).into_response();
    };
    let (head, tail) = (Bytes::from(json[..at].to_string()), Bytes::from(json[at..].to_string()));
    let length = head.len() + 2 * bytes.len() + tail.len();
    let bytes = Bytes::from(bytes);
    let pieces = (0..bytes.len())
        .step_by(PIECE_BYTES)
        .map(move |start| Bytes::from(hex(&bytes[start..(start + PIECE_BYTES).min(bytes.len())])));
    let body = stream::once(async { head }).chain(stream::iter(pieces)).chain(stream::once(async { tail }));
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, length)
        .body(Body::from_stream(body.map(Ok::<_, Infallible>)))
        .expect("a valid response")
}

/// A song's file and what it is.
struct Encoded {
    bytes: Vec<u8>,
    info: MusicInfo,
}

/// Library song `library_id` as `file` at `sample_rate`: the bytes the library's address for it
/// gives (`GET /api/library/ID/...`, through the same export).
fn encode(library: &Path, library_id: i64, file: SongFile, sample_rate: u32) -> ApiResult<Encoded> {
    let song = Library::open(library)?
        .get(library_id)?
        .ok_or_else(|| ApiError::not_found("such song in the library (deleted?)"))?;
    let recipe = serde_json::to_string(&song.recipe).map_err(anyhow::Error::from)?;
    let (samples, song_rate) = crate::wav::read_song(&song.wav)?;
    let samples = if sample_rate == song_rate {
        samples
    } else {
        crate::resample::resample(&samples, song_rate, sample_rate).map_err(anyhow::Error::msg)?
    };
    let dir = tempfile::tempdir().map_err(anyhow::Error::from)?;
    let format = file.file_format();
    let target = dir.path().join(format!("song.{}", format.extension()));
    // As every export: the score's codes travel with the song, not its seams.
    let codes = crate::wav::read_score(&song.wav)?.map(|score| score.codes_only());
    let written = crate::wav::write_as(&samples, sample_rate, &target, format, &song.title, &recipe, codes.as_ref())?;
    let bytes = std::fs::read(&written).map_err(|e| anyhow::anyhow!("reading {}: {e}", written.display()))?;
    let info = music_info(file, (samples.len() / 2) as u64, sample_rate, bytes.len() as u64);
    Ok(Encoded { bytes, info })
}

/// `extra_info` of a file of `frames` stereo frames at `sample_rate`, `size_bytes` long.
fn music_info(file: SongFile, frames: u64, sample_rate: u32, size_bytes: u64) -> MusicInfo {
    let rate = u64::from(sample_rate);
    let bitrate = match file {
        SongFile::Wav => rate * 2 * 16,
        // The average over the song.
        SongFile::Flac => (size_bytes * 8 * rate).checked_div(frames).unwrap_or(0),
    };
    MusicInfo {
        music_duration: (frames * 1000 + rate / 2) / rate,
        music_sample_rate: sample_rate,
        music_channel: 2,
        bitrate,
        music_size: size_bytes,
    }
}

/// Bytes as lower-case hexadecimal, as the cloud sends audio.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(2 * bytes.len());
    for &b in bytes {
        text.push(DIGITS[usize::from(b >> 4)] as char);
        text.push(DIGITS[usize::from(b & 15)] as char);
    }
    text
}

/// One Server-Sent Event, as the cloud streams them: `data: {json}` and a blank line.
fn event(answer: &MusicGenerationAnswer) -> Bytes {
    let json = serde_json::to_string(answer).expect("an answer is JSON");
    Bytes::from(format!("data: {json}\n\n"))
}

/// The event of a piece of the file (`status` 1 while the song is made, 2 for the last).
fn piece(trace_id: &str, bytes: &[u8], status: u8, extra_info: Option<MusicInfo>) -> Bytes {
    event(&MusicGenerationAnswer {
        data: Some(MusicAudio { audio: hex(bytes), status }),
        trace_id: trace_id.to_string(),
        extra_info,
        analysis_info: None,
        base_resp: BaseResp::success(),
    })
}

/// A failure as the stream's last event.
fn failed_event(trace_id: &str, answer: MusicGenerationAnswer) -> Bytes {
    event(&MusicGenerationAnswer { trace_id: trace_id.to_string(), ..answer })
}

fn pcm16_bytes(samples: &[f32]) -> Vec<u8> {
    samples.iter().flat_map(|&s| crate::wav::pcm16(s).to_le_bytes()).collect()
}

/// Where a streamed WAV is.
struct WavStream {
    server: Arc<Server>,
    id: u64,
    trace_id: String,
    sample_rate: u32,
    audio: BoxStream<'static, Vec<f32>>,
    /// Taken for the last event.
    resampler: Option<Resampler>,
    head_sent: bool,
    frames: u64,
    size_bytes: u64,
}

/// A WAV streamed as the song is made: the head (with unknown-length sizes), then the samples as
/// 16-bit PCM as they come, each piece an event of status 1; the last, of status 2, has the
/// resampler's tail and `extra_info`, or the failure.
fn wav_events(server: Arc<Server>, id: u64, sample_rate: u32) -> BoxStream<'static, Bytes> {
    let trace_id = crate::serve::access::random_id();
    let resampler = match Resampler::new(server.pipeline.sample_rate(), sample_rate) {
        Ok(resampler) => resampler,
        Err(why) => return stream::once(async move { failed_event(&trace_id, invalid(why)) }).boxed(),
    };
    let audio = match follow(server.clone(), id, |job| &job.audio) {
        Ok(audio) => audio.boxed(),
        Err(ApiError(_, why)) => {
            return stream::once(async move { failed_event(&trace_id, failure(BaseResp::UNKNOWN_ERROR, why)) }).boxed();
        }
    };
    let start = WavStream {
        server,
        id,
        trace_id,
        sample_rate,
        audio,
        resampler: Some(resampler),
        head_sent: false,
        frames: 0,
        size_bytes: 0,
    };
    stream::unfold(start, |mut s| async move {
        if !s.head_sent {
            s.head_sent = true;
            let head = crate::wav::streaming_pcm16_head(s.sample_rate);
            s.size_bytes += head.len() as u64;
            return Some((piece(&s.trace_id, &head, MusicAudio::MAKING, None), s));
        }
        let resampler = s.resampler.as_mut()?;
        while let Some(samples) = s.audio.next().await {
            let out = resampler.push(&samples);
            if out.is_empty() {
                continue;
            }
            let bytes = pcm16_bytes(&out);
            s.frames += (out.len() / 2) as u64;
            s.size_bytes += bytes.len() as u64;
            return Some((piece(&s.trace_id, &bytes, MusicAudio::MAKING, None), s));
        }
        let resampler = s.resampler.take()?;
        let last = match finished(&s.server, s.id).await {
            Ok(_) => {
                let bytes = pcm16_bytes(&resampler.finish());
                s.frames += (bytes.len() / 4) as u64;
                s.size_bytes += bytes.len() as u64;
                let info = music_info(SongFile::Wav, s.frames, s.sample_rate, s.size_bytes);
                piece(&s.trace_id, &bytes, MusicAudio::DONE, Some(info))
            }
            Err(answer) => failed_event(&s.trace_id, answer),
        };
        Some((last, s))
    })
    .boxed()
}

/// A FLAC streamed once the song is done (FLAC's header holds the song's length and checksum, so
/// it is encoded whole first): pieces of the file as events of status 1, the last of status 2
/// with `extra_info`, or the failure.
fn flac_events(server: Arc<Server>, id: u64, sample_rate: u32) -> BoxStream<'static, Bytes> {
    /// Bytes of the file in one event.
    const PIECE_BYTES: usize = 256 * 1024;
    let trace_id = crate::serve::access::random_id();
    stream::once(async move {
        let library_id = match finished(&server, id).await {
            Ok(library_id) => library_id,
            Err(answer) => return vec![failed_event(&trace_id, answer)],
        };
        let library = server.library.clone();
        let encoded = match blocking(move || encode(&library, library_id, SongFile::Flac, sample_rate)).await {
            Ok(encoded) => encoded,
            Err(ApiError(_, why)) => return vec![failed_event(&trace_id, failure(BaseResp::UNKNOWN_ERROR, why))],
        };
        let pieces: Vec<&[u8]> = encoded.bytes.chunks(PIECE_BYTES).collect();
        let last = pieces.len().saturating_sub(1);
        let mut events: Vec<Bytes> =
            pieces.iter().take(last).map(|bytes| piece(&trace_id, bytes, MusicAudio::MAKING, None)).collect();
        let tail = pieces.get(last).copied().unwrap_or_default();
        events.push(piece(&trace_id, tail, MusicAudio::DONE, Some(encoded.info)));
        events
    })
    .flat_map(stream::iter)
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_lower_case_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(hex(&[]), "");
    }

    /// `extra_info` in the cloud's units: milliseconds, bits per second, bytes.
    #[test]
    fn extra_info_is_in_the_clouds_units() {
        let wav = music_info(SongFile::Wav, 44_100 * 25 + 16_053, 44_100, 4_481_000);
        assert_eq!((wav.music_duration, wav.bitrate, wav.music_channel), (25_364, 1_411_200, 2));
        let flac = music_info(SongFile::Flac, 32_000, 16_000, 100_000);
        assert_eq!((flac.music_duration, flac.bitrate, flac.music_size), (2_000, 400_000, 100_000));
    }

    /// MP3 and unknown formats are refused naming the field and what is offered; case is ignored.
    #[test]
    fn a_format_is_wav_or_flac() {
        assert_eq!(SongFile::parse(None), Ok(SongFile::Wav));
        assert_eq!(SongFile::parse(Some("FLAC")), Ok(SongFile::Flac));
        for refused in ["mp3", "ogg"] {
            let why = SongFile::parse(Some(refused)).unwrap_err();
            assert!(why.contains("`audio_setting.format`") && why.contains("wav or flac"), "{why}");
        }
    }

    /// A malformed field is named, however deep the fault.
    #[test]
    fn a_malformed_field_is_named() {
        for (body, field) in [
            (r#"{"model": "m", "is_instrumental": "yes"}"#, "`is_instrumental`"),
            (r#"{"prompt": "p", "audio_setting": {"sample_rate": "fast"}}"#, "`audio_setting`"),
            (r#"{"prompt": "p", "output_format": "mp4"}"#, "`output_format`"),
            (r#"{"prompt": "p", "voice": 1}"#, "`voice`"),
        ] {
            let why = read(body.as_bytes()).unwrap_err();
            assert!(why.starts_with(field), "{body}: {why}");
        }
        assert!(read(b"[1]").unwrap_err().contains("JSON object"));
        assert!(read(br#"{"prompt": "p", "stream": true}"#).is_ok());
    }
}
