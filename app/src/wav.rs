//! WAV export: written to a temporary file beside the target as audio arrives, moved into place
//! only when the song is complete, and removed on any failure, so the target is never half-written.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use songloom_engine::pipeline::score::Score;
use tempfile::NamedTempFile;

/// The RIFF chunk that carries a song's score ([`Score::to_bytes`]), the file's last chunk (after
/// `data` and `LIST`): players skip chunks they do not know, so the file still plays.
const SCORE_CHUNK: &[u8; 4] = b"slsc";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WavFormat {
    /// 32-bit float (exactly what the model made).
    F32,
    /// 16-bit PCM.
    Pcm16,
}

/// What an export writes: a WAV of 32-bit float or 16-bit PCM, or 24-bit FLAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FileFormat {
    /// WAV, 32-bit float (exactly what the model made).
    F32,
    /// WAV, 16-bit PCM.
    Pcm16,
    /// FLAC, 24-bit (the float samples rounded to 24 bits, then compressed without loss).
    Flac,
}

impl FileFormat {
    /// As `--format` takes it.
    pub fn name(self) -> &'static str {
        match self {
            FileFormat::F32 => "f32",
            FileFormat::Pcm16 => "pcm16",
            FileFormat::Flac => "flac",
        }
    }

    pub fn extension(self) -> &'static str {
        if self == FileFormat::Flac { "flac" } else { "wav" }
    }

    /// The WAV a song in this format is written as while it is made (a FLAC is encoded from the
    /// float WAV once the song is complete).
    pub fn wav_format(self) -> WavFormat {
        if self == FileFormat::Pcm16 { WavFormat::Pcm16 } else { WavFormat::F32 }
    }

    /// The format `path`'s extension names: `None` for a path without one.
    pub fn of_extension(path: &Path) -> Result<Option<FileFormat>> {
        let Some(extension) = path.extension() else { return Ok(None) };
        match extension.to_string_lossy().to_lowercase().as_str() {
            "wav" | "wave" => Ok(Some(FileFormat::F32)),
            "flac" => Ok(Some(FileFormat::Flac)),
            other => {
                bail!("Songloom writes .wav and .flac files, not .{other}: give --out a name ending in .wav or .flac")
            }
        }
    }
}

/// What a finished file does where its name is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfTaken {
    Replace,
    Refuse,
    /// Takes the first free of `name-2.ext`, `name-3.ext`... beside it.
    NextFreeName,
}

/// `path` for `n` = 1, else `path` with `-n` after its stem (`song.wav`, `song-2.wav`, ...).
pub fn numbered(path: &Path, n: usize) -> PathBuf {
    if n <= 1 {
        return path.to_path_buf();
    }
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match path.extension() {
        Some(extension) => format!("{stem}-{n}.{}", extension.to_string_lossy()),
        None => format!("{stem}-{n}"),
    };
    path.with_file_name(name)
}

/// Moves `temp` to `target` as `if_taken` says; returns where it went.
pub fn place(mut temp: NamedTempFile, target: &Path, if_taken: IfTaken) -> std::io::Result<PathBuf> {
    match if_taken {
        IfTaken::Replace => temp.persist(target).map(|_| target.to_path_buf()).map_err(|e| e.error),
        IfTaken::Refuse => temp.persist_noclobber(target).map(|_| target.to_path_buf()).map_err(|e| e.error),
        IfTaken::NextFreeName => {
            for n in 1..=10_000 {
                let candidate = numbered(target, n);
                match temp.persist_noclobber(&candidate) {
                    Ok(_) => return Ok(candidate),
                    Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => temp = e.file,
                    Err(e) => return Err(e.error),
                }
            }
            Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists, "no free numbered name beside it"))
        }
    }
}

/// A temporary file in `dir` that, once moved into place, has the permissions any file created
/// there has (read and write for all, less the user's umask), not a temporary's owner-only ones.
pub fn temp_file_in(dir: &Path, prefix: &str, suffix: &str) -> std::io::Result<NamedTempFile> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix).suffix(suffix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    builder.tempfile_in(dir)
}

/// A song's title made safe for a file name (at most 80 characters; `song` for none).
pub fn file_stem(title: &str) -> String {
    let safe: String =
        title.chars().map(|c| if c.is_alphanumeric() || " -_.,()".contains(c) { c } else { '_' }).collect();
    match safe.trim().trim_start_matches('.') {
        "" => "song".to_string(),
        s => s.chars().take(80).collect(),
    }
}

/// Writes the song in `source` to `target` in `format`, with `title` and `recipe` in its tags.
pub fn export_as(source: &Path, target: &Path, format: FileFormat, title: &str, recipe: &str) -> Result<PathBuf> {
    export_at(source, target, format, None, title, recipe)
}

/// [`export_as`] at `sample_rate` (Hz), resampled when it is not the song's own. The file carries
/// the source's score without its seams ([`Score::codes_only`]): small, and enough to edit it.
pub fn export_at(
    source: &Path,
    target: &Path,
    format: FileFormat,
    sample_rate: Option<u32>,
    title: &str,
    recipe: &str,
) -> Result<PathBuf> {
    let (samples, song_rate) = read_song(source)?;
    let codes = read_score(source)?.map(|score| score.codes_only());
    match sample_rate.filter(|&rate| rate != song_rate) {
        Some(rate) => {
            let resampled = crate::resample::resample(&samples, song_rate, rate).map_err(anyhow::Error::msg)?;
            write_as(&resampled, rate, target, format, title, recipe, codes.as_ref())
        }
        None => write_as(&samples, song_rate, target, format, title, recipe, codes.as_ref()),
    }
}

/// Writes interleaved stereo `samples` at `sample_rate` to `target` in `format`, with `title` and
/// `recipe` in its tags and `score`, if any, beside them; the target appears only when complete,
/// and must not exist yet.
pub fn write_as(
    samples: &[f32],
    sample_rate: u32,
    target: &Path,
    format: FileFormat,
    title: &str,
    recipe: &str,
    score: Option<&Score>,
) -> Result<PathBuf> {
    if format == FileFormat::Flac {
        return crate::flac::write(samples, sample_rate, target, title, recipe, score, IfTaken::Refuse);
    }
    let mut wav = WavFile::create(target, sample_rate, format.wav_format())?;
    wav.write(samples)?;
    let complete = wav.finish(title, recipe)?;
    if let Some(score) = score {
        complete.set_score(score)?;
    }
    complete.persist_new(target)
}

/// A sample as 16-bit PCM: clamped to -1..=1 and rounded to the nearest of 32767 steps.
pub fn pcm16(sample: f32) -> i16 {
    (sample.clamp(-1.0, 1.0) * 32767.0).round() as i16
}

/// The head of a stereo 16-bit WAV streamed before its length is known: the RIFF and data sizes
/// are 0xFFFFFFFF, the value readers take for "to the end of the stream" (ffmpeg, sox, browsers
/// and [`songloom_wire::wav::read`] do).
pub fn streaming_pcm16_head(sample_rate: u32) -> Vec<u8> {
    const UNKNOWN: u32 = u32::MAX;
    let (channels, bits) = (2u16, 16u16);
    let block_align = channels * bits / 8;
    let mut head = Vec::with_capacity(44);
    head.extend_from_slice(b"RIFF");
    head.extend_from_slice(&UNKNOWN.to_le_bytes());
    head.extend_from_slice(b"WAVEfmt ");
    head.extend_from_slice(&16u32.to_le_bytes());
    head.extend_from_slice(&1u16.to_le_bytes()); // integer PCM
    head.extend_from_slice(&channels.to_le_bytes());
    head.extend_from_slice(&sample_rate.to_le_bytes());
    head.extend_from_slice(&(sample_rate * u32::from(block_align)).to_le_bytes());
    head.extend_from_slice(&block_align.to_le_bytes());
    head.extend_from_slice(&bits.to_le_bytes());
    head.extend_from_slice(b"data");
    head.extend_from_slice(&UNKNOWN.to_le_bytes());
    head
}

/// A WAV being written: a temporary file that [`finish`](WavFile::finish) completes. Dropped
/// unfinished (an error, a cancel), the temporary is removed.
pub struct WavFile {
    writer: Option<hound::WavWriter<BufWriter<File>>>,
    temp: NamedTempFile,
    format: WavFormat,
    /// The file it becomes, or the folder it is written in: what an error names.
    target: PathBuf,
}

/// A complete WAV in its temporary file, to be moved where it belongs; dropped, it is removed.
pub struct CompleteWav(NamedTempFile);

impl WavFile {
    /// Starts the WAV that will become `target`, in a temporary file beside it, so a target that
    /// cannot be written fails before any work is done.
    pub fn create(target: &Path, sample_rate: u32, format: WavFormat) -> Result<Self> {
        if target.is_dir() {
            bail!("{} is a directory; give the path of a file to write", target.display());
        }
        let dir = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = target.file_name().with_context(|| format!("{} is not a file path", target.display()))?;
        if !dir.is_dir() {
            bail!("cannot write {}: the folder {} does not exist", target.display(), dir.display());
        }
        Self::open(dir, &name.to_string_lossy(), sample_rate, format, target)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {}", target.display(), plain(&e)))
    }

    /// Starts a WAV in a temporary file in `dir` whose name begins with `.{name}.`.
    pub fn create_in(dir: &Path, name: &str, sample_rate: u32, format: WavFormat) -> Result<Self> {
        Self::open(dir, name, sample_rate, format, dir)
            .map_err(|e| anyhow::anyhow!("cannot write a file in {}: {}", dir.display(), plain(&e)))
    }

    fn open(dir: &Path, name: &str, sample_rate: u32, format: WavFormat, target: &Path) -> std::io::Result<Self> {
        let (prefix, suffix) = songloom_engine::partial::affixes(name);
        let temp = temp_file_in(dir, &prefix, &suffix)?;
        let spec = hound::WavSpec {
            channels: 2,
            sample_rate,
            bits_per_sample: if format == WavFormat::F32 { 32 } else { 16 },
            sample_format: if format == WavFormat::F32 { hound::SampleFormat::Float } else { hound::SampleFormat::Int },
        };
        let file = temp.reopen()?;
        let writer = hound::WavWriter::new(BufWriter::new(file), spec).map_err(std::io::Error::other)?;
        Ok(WavFile { writer: Some(writer), temp, format, target: target.to_path_buf() })
    }

    /// Appends interleaved stereo samples.
    pub fn write(&mut self, samples: &[f32]) -> Result<()> {
        let writer = self.writer.as_mut().expect("open until finished");
        let written = samples.iter().try_for_each(|&s| match self.format {
            WavFormat::F32 => writer.write_sample(s),
            WavFormat::Pcm16 => writer.write_sample(pcm16(s)),
        });
        written.map_err(|e| anyhow::anyhow!("writing {}: {}", self.target.display(), hound_cause(&e)))
    }

    /// Completes the file, with `title` as its name tag and `recipe` (JSON) as its comment.
    pub fn finish(mut self, title: &str, recipe: &str) -> Result<CompleteWav> {
        let writer = self.writer.take().expect("open until finished");
        let failed = |cause: String| anyhow::anyhow!("writing {}: {cause}", self.target.display());
        writer.finalize().map_err(|e| failed(hound_cause(&e)))?;
        append_info(self.temp.path(), title, recipe).map_err(|e| failed(plain(&e)))?;
        Ok(CompleteWav(self.temp))
    }
}

impl CompleteWav {
    /// A copy of the finished WAV at `source`, in a temporary file in `dir`.
    pub fn copy_of(source: &Path, dir: &Path) -> Result<Self> {
        let (prefix, suffix) = songloom_engine::partial::affixes("copy.wav");
        let temp = temp_file_in(dir, &prefix, &suffix)
            .map_err(|e| anyhow::anyhow!("cannot write a file in {}: {}", dir.display(), plain(&e)))?;
        std::fs::copy(source, temp.path())
            .map_err(|e| anyhow::anyhow!("copying {} into {}: {}", source.display(), dir.display(), plain(&e)))?;
        Ok(CompleteWav(temp))
    }

    /// Writes `score` into the file as its last chunk, in place of the score it carries (a copy of
    /// an exported file carries the codes alone, and the library keeps the whole score).
    pub fn set_score(&self, score: &Score) -> Result<()> {
        let bytes = score.to_bytes()?;
        write_score_chunk(self.path(), &bytes).map_err(|e| anyhow::anyhow!("writing the song's score: {}", plain(&e)))
    }

    /// Where the finished WAV is until it is moved.
    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Moves the file to `target`, which must not exist yet.
    pub fn persist_new(self, target: &Path) -> Result<PathBuf> {
        self.place(target, IfTaken::Refuse)
    }

    /// Moves the file to `target` as `if_taken` says; returns where it went.
    pub fn place(self, target: &Path, if_taken: IfTaken) -> Result<PathBuf> {
        place(self.0, target, if_taken).with_context(|| format!("moving the song to {}", target.display()))
    }
}

/// A WAV writer's error in words, an I/O cause without the temporary's path.
fn hound_cause(e: &hound::Error) -> String {
    match e {
        hound::Error::IoError(io) => plain(io),
        other => other.to_string(),
    }
}

/// An I/O error's cause alone, without the temporary path `tempfile` adds to it.
fn plain(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::Other => e.to_string(),
        kind => std::io::Error::from(kind).to_string(),
    }
}

/// The interleaved stereo samples and sample rate of a WAV (float or integer PCM).
pub fn read_song(path: &Path) -> Result<(Vec<f32>, u32)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let wav = songloom_wire::wav::read(&bytes).with_context(|| format!("reading {}", path.display()))?;
    if wav.channels != 2 {
        anyhow::bail!("{} has {} channels; Songloom songs are stereo", path.display(), wav.channels);
    }
    Ok((wav.samples, wav.sample_rate))
}

/// Appends a RIFF `LIST`/`INFO` chunk (the title `INAM`, the software `ISFT`, the recipe as the
/// comment `ICMT` and the AI-generated note as the subject `ISBJ`).
fn append_info(path: &Path, title: &str, comment: &str) -> std::io::Result<()> {
    fn sub_chunk(id: &[u8; 4], text: &str) -> Vec<u8> {
        let mut data = text.as_bytes().to_vec();
        data.push(0);
        let mut chunk = id.to_vec();
        chunk.extend((data.len() as u32).to_le_bytes());
        if data.len() % 2 == 1 {
            data.push(0);
        }
        chunk.extend(data);
        chunk
    }
    let mut info = b"INFO".to_vec();
    info.extend(sub_chunk(b"INAM", title));
    info.extend(sub_chunk(b"ISFT", concat!("Songloom ", env!("CARGO_PKG_VERSION"))));
    info.extend(sub_chunk(b"ICMT", comment));
    info.extend(sub_chunk(b"ISBJ", &songloom_wire::notice::ai_generated_note(comment)));
    let mut file = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
    append_chunk(&mut file, b"LIST", &info)
}

/// Writes the score chunk at the end of the WAV at `path`, cutting off the one that ends it now.
fn write_score_chunk(path: &Path, score: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
    if let Some(last) = chunk_list(&mut file)?.pop().filter(|c| &c.id == SCORE_CHUNK) {
        file.set_len(last.head)?;
    }
    append_chunk(&mut file, SCORE_CHUNK, score)
}

/// Appends a RIFF chunk, padded to an even length as RIFF asks, and updates the RIFF size.
/// Players and `hound` skip chunks they do not know.
fn append_chunk(file: &mut File, id: &[u8; 4], body: &[u8]) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let too_big = || std::io::Error::other("the file would pass the 4 GiB a WAV can hold");
    let size = u32::try_from(body.len()).map_err(|_| too_big())?;
    let end = file.seek(SeekFrom::End(0))?;
    let total = end + 8 + u64::from(size) + u64::from(size % 2);
    let riff_size = u32::try_from(total - 8).map_err(|_| too_big())?;
    let mut chunk = Vec::with_capacity(body.len() + 9);
    chunk.extend_from_slice(id);
    chunk.extend_from_slice(&size.to_le_bytes());
    chunk.extend_from_slice(body);
    if size % 2 == 1 {
        chunk.push(0);
    }
    file.write_all(&chunk)?;
    file.seek(SeekFrom::Start(4))?;
    file.write_all(&riff_size.to_le_bytes())?;
    file.sync_all()
}

/// Where a RIFF chunk is: its id, the offset of its 8-byte head, and its body's size.
struct ChunkAt {
    id: [u8; 4],
    head: u64,
    size: u32,
}

/// The chunks of the WAV in `file`, read from their heads alone (the audio is not read); a chunk
/// whose body runs past the file's end is listed as its head says.
fn chunk_list(file: &mut File) -> std::io::Result<Vec<ChunkAt>> {
    use std::io::{Read, Seek, SeekFrom};
    let len = file.metadata()?.len();
    let mut head = [0u8; 12];
    file.seek(SeekFrom::Start(0))?;
    file.read_exact(&mut head).map_err(|_| not_wav())?;
    if &head[..4] != b"RIFF" || &head[8..] != b"WAVE" {
        return Err(not_wav());
    }
    let (mut chunks, mut at) = (Vec::new(), 12u64);
    while at + 8 <= len {
        let mut head = [0u8; 8];
        file.seek(SeekFrom::Start(at))?;
        file.read_exact(&mut head)?;
        let size = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
        chunks.push(ChunkAt { id: head[..4].try_into().expect("4 bytes"), head: at, size });
        at += 8 + u64::from(size) + u64::from(size % 2);
    }
    Ok(chunks)
}

fn not_wav() -> std::io::Error {
    std::io::Error::other("not a WAV file (no RIFF/WAVE header)")
}

/// The score the WAV at `path` carries; `None` for a file without one (a song made before scores
/// were kept, or not by Songloom). A score that does not read is an error: the song still plays,
/// but it cannot be edited.
pub fn read_score(path: &Path) -> Result<Option<Score>> {
    use std::io::{Read, Seek, SeekFrom};
    let read = || -> std::io::Result<Option<Vec<u8>>> {
        let mut file = File::open(path)?;
        let Some(chunk) = chunk_list(&mut file)?.into_iter().find(|c| &c.id == SCORE_CHUNK) else {
            return Ok(None);
        };
        // A chunk cut short by the file's end reads as what is there, and the score says it is cut.
        let mut body = Vec::new();
        file.seek(SeekFrom::Start(chunk.head + 8))?;
        file.take(u64::from(chunk.size)).read_to_end(&mut body)?;
        Ok(Some(body))
    };
    let bytes = read().map_err(|e| anyhow::anyhow!("reading {}: {}", path.display(), plain(&e)))?;
    bytes.map(|bytes| score_of(&bytes, path)).transpose()
}

/// Whether the WAV at `path` carries a score chunk (its headers alone are read: cheap enough for
/// every song of a list).
pub fn has_score(path: &Path) -> Result<bool> {
    let mut file = File::open(path).map_err(|e| anyhow::anyhow!("reading {}: {}", path.display(), plain(&e)))?;
    let chunks = chunk_list(&mut file).map_err(|e| anyhow::anyhow!("reading {}: {}", path.display(), plain(&e)))?;
    Ok(chunks.iter().any(|c| &c.id == SCORE_CHUNK))
}

/// The score in `bytes`, read from the file at `path`; an error names the file and says the song
/// cannot be edited.
pub fn score_of(bytes: &[u8], path: &Path) -> Result<Score> {
    Score::from_bytes(bytes).map_err(|e| {
        anyhow::anyhow!("{}: {e}; the song still plays, but with its codes damaged it cannot be edited", path.display())
    })
}

pub use songloom_wire::wav::WavInfo;

/// Reads the `INFO` tags of the WAV at `path`.
pub fn read_info(path: &Path) -> Result<WavInfo> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    songloom_wire::wav::read_info(&bytes).with_context(|| format!("{} is not a WAV file", path.display()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use songloom_engine::pipeline::ar::Codes;

    /// A made-up score whose byte form has an odd length (RIFF pads it), with seams of values a
    /// careless float path would change (-0.0, a subnormal, the largest code).
    pub(crate) fn made_up_score() -> Score {
        let score = Score {
            model: "made-up-7".into(),
            codes: Codes { frames: (0..40).map(|f| (0..8).map(|c| (f * 8 + c) * 199 % 65_536).collect()).collect() },
            seams: vec![vec![0.5, -0.0, f32::MIN_POSITIVE / 2.0, 1e30, -7.25, 3.0]; 3],
        };
        assert_eq!(score.to_bytes().unwrap().len() % 2, 1, "the test wants an odd length, to be padded");
        score
    }

    /// The same score, bit for bit: its byte forms are equal (a NaN seam would not compare equal).
    pub(crate) fn assert_same_score(read: Option<Score>, written: &Score) {
        let read = read.expect("the file carries a score");
        assert_eq!(read.to_bytes().unwrap(), written.to_bytes().unwrap());
    }

    /// A float WAV of `samples` at 44.1 kHz at `target`, with `score` if given.
    fn song_wav(target: &Path, samples: &[f32], score: Option<&Score>) {
        let mut wav = WavFile::create(target, 44100, WavFormat::F32).unwrap();
        wav.write(samples).unwrap();
        let complete = wav.finish("Scored", r#"{"seed":3}"#).unwrap();
        if let Some(score) = score {
            complete.set_score(score).unwrap();
        }
        complete.persist_new(target).unwrap();
    }

    #[test]
    fn the_score_travels_in_the_file_and_players_still_read_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("song.wav");
        let samples = [0.5, -0.5, 0.25, -1.5, 1e-8, 0.0];
        let score = made_up_score();
        song_wav(&target, &samples, Some(&score));
        assert_same_score(read_score(&target).unwrap(), &score);

        let bytes = std::fs::read(&target).unwrap();
        assert_eq!(u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize, bytes.len() - 8);
        assert_eq!(bytes.len() % 2, 0, "the odd chunk is padded");
        let mut reader = hound::WavReader::open(&target).unwrap();
        let heard: Vec<f32> = reader.samples::<f32>().map(Result::unwrap).collect();
        assert_eq!(heard, samples);
        assert_eq!(read_song(&target).unwrap(), (samples.to_vec(), 44100));
        let info = read_info(&target).unwrap();
        assert_eq!((info.title.as_deref(), info.comment.as_deref()), (Some("Scored"), Some(r#"{"seed":3}"#)));

        // A second score takes the first one's place: the file ends with one score chunk.
        let codes = score.codes_only();
        let complete = CompleteWav::copy_of(&target, dir.path()).unwrap();
        complete.set_score(&codes).unwrap();
        assert_same_score(read_score(complete.path()).unwrap(), &codes);
        let shorter = std::fs::read(complete.path()).unwrap();
        let padded = |score: &Score| score.to_bytes().unwrap().len().next_multiple_of(2);
        assert_eq!(shorter.len(), bytes.len() - padded(&score) + padded(&codes));
        assert_eq!(read_song(complete.path()).unwrap(), (samples.to_vec(), 44100));
    }

    #[test]
    fn a_file_without_a_score_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("song.wav");
        song_wav(&target, &[0.1, 0.2], None);
        assert!(read_score(&target).unwrap().is_none());
        let not_wav = dir.path().join("notes.wav");
        std::fs::write(&not_wav, b"not a song").unwrap();
        assert!(read_score(&not_wav).unwrap_err().to_string().contains("not a WAV file"));
    }

    /// A score cut short or overwritten is an error that names the file and says the song cannot be
    /// edited; its audio still reads.
    #[test]
    fn a_damaged_score_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("song.wav");
        song_wav(&target, &[0.1, 0.2], Some(&made_up_score()));
        let bytes = std::fs::read(&target).unwrap();
        let at = bytes.windows(8).position(|w| w == b"SLSCORE1").unwrap();
        for damaged in [bytes[..bytes.len() - 9].to_vec(), [&bytes[..at], b"SLSCORE2", &bytes[at + 8..]].concat()] {
            std::fs::write(&target, &damaged).unwrap();
            let err = format!("{:#}", read_score(&target).unwrap_err());
            assert!(err.contains(&target.display().to_string()), "{err}");
            assert!(err.contains("damaged") && err.contains("cannot be edited"), "{err}");
            assert_eq!(read_song(&target).unwrap().0, vec![0.1, 0.2]);
        }
    }

    /// An exported file carries the codes without the seams, as WAV (either depth) and as FLAC.
    #[test]
    fn an_export_carries_the_codes_alone() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("stored.wav");
        let score = made_up_score();
        song_wav(&source, &[0.5, -0.5, 0.25, -0.25], Some(&score));
        let codes = score.codes_only();
        for (name, format) in [("out.wav", FileFormat::F32), ("pcm.wav", FileFormat::Pcm16)] {
            let written = export_as(&source, &dir.path().join(name), format, "Kept", "{}").unwrap();
            assert_same_score(read_score(&written).unwrap(), &codes);
        }
        let flac = export_at(&source, &dir.path().join("out.flac"), FileFormat::Flac, Some(22050), "Kept", "{}");
        assert_same_score(crate::flac::read_score(&flac.unwrap()).unwrap(), &codes);
        // A song without a score exports without one.
        let bare = dir.path().join("bare.wav");
        song_wav(&bare, &[0.5, -0.5], None);
        let written = export_as(&bare, &dir.path().join("bare-out.wav"), FileFormat::F32, "", "{}").unwrap();
        assert!(read_score(&written).unwrap().is_none());
    }

    /// A file that takes the song's name while it is made keeps it; the song takes the next free
    /// numbered name, and a refused move loses neither.
    #[test]
    fn a_taken_name_is_replaced_refused_or_numbered_as_asked() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("song.wav");
        std::fs::write(&target, b"theirs").unwrap();
        std::fs::write(dir.path().join("song-2.wav"), b"also theirs").unwrap();
        let song = |text: &[u8]| {
            let mut temp = temp_file_in(dir.path(), ".song.", ".partial").unwrap();
            std::io::Write::write_all(&mut temp, text).unwrap();
            temp
        };
        let refused = place(song(b"mine"), &target, IfTaken::Refuse);
        assert_eq!(refused.unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(place(song(b"mine"), &target, IfTaken::NextFreeName).unwrap(), dir.path().join("song-3.wav"));
        assert_eq!(std::fs::read(&target).unwrap(), b"theirs");
        assert_eq!(std::fs::read(dir.path().join("song-3.wav")).unwrap(), b"mine");
        assert_eq!(place(song(b"new"), &target, IfTaken::Replace).unwrap(), target);
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert_eq!(numbered(Path::new("a/take"), 4), Path::new("a/take-4"));
    }

    #[test]
    fn the_recipe_travels_in_the_file_and_players_still_read_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("song.wav");
        let mut wav = WavFile::create(&target, 44100, WavFormat::Pcm16).unwrap();
        wav.write(&[0.5, -0.5, 0.25, -0.25]).unwrap();
        let recipe = r#"{"description":"warm lo-fi piano","seed":3}"#;
        wav.finish("Warm piano", recipe).unwrap().persist_new(&target).unwrap();
        let bytes = std::fs::read(&target).unwrap();
        let info = read_info(&target).unwrap();
        assert_eq!(info.comment.as_deref(), Some(recipe));
        assert_eq!(info.title.as_deref(), Some("Warm piano"));
        assert!(info.software.unwrap().starts_with("Songloom "));
        assert_eq!(u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize, bytes.len() - 8);
        let mut reader = hound::WavReader::open(&target).unwrap();
        let samples: Vec<i16> = reader.samples::<i16>().map(Result::unwrap).collect();
        assert_eq!(samples, vec![16384, -16384, 8192, -8192]);
    }

    #[test]
    fn export_converts_the_format_and_keeps_the_recipe() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("stored.wav");
        let mut wav = WavFile::create(&source, 44100, WavFormat::F32).unwrap();
        wav.write(&[0.5, -0.5, 0.25, -1.5]).unwrap();
        wav.finish("x", "{}").unwrap().persist_new(&source).unwrap();
        let target = dir.path().join("out.wav");
        export_as(&source, &target, FileFormat::Pcm16, "Kept", r#"{"seed":5}"#).unwrap();
        let info = read_info(&target).unwrap();
        assert_eq!((info.title.as_deref(), info.comment.as_deref()), (Some("Kept"), Some(r#"{"seed":5}"#)));
        let (samples, rate) = read_song(&target).unwrap();
        assert_eq!(rate, 44100);
        assert_eq!(samples, vec![16384.0 / 32768.0, -16384.0 / 32768.0, 8192.0 / 32768.0, -32767.0 / 32768.0]);
        assert!(
            export_as(&dir.path().join("missing.wav"), &dir.path().join("x.wav"), FileFormat::F32, "", "").is_err()
        );
        assert!(!dir.path().join("x.wav").exists());
    }

    #[test]
    fn an_unfinished_or_unmoved_file_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut wav = WavFile::create(&dir.path().join("song.wav"), 44100, WavFormat::F32).unwrap();
        wav.write(&[0.1, 0.2]).unwrap();
        drop(wav);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let complete = WavFile::create(&dir.path().join("song.wav"), 44100, WavFormat::F32).unwrap().finish("x", "{}");
        drop(complete);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

        /// What is written reads back: f32 bit for bit, 16-bit within its step; the tags as given.
        #[test]
        fn a_song_and_its_tags_survive_writing_and_reading(
            samples in proptest::collection::vec(-1.5f32..1.5, 0..600),
            pcm16 in proptest::bool::ANY,
            title in "[^\\x00]{0,40}",
            recipe in "[^\\x00]{0,200}",
            rate in 8_000u32..192_000,
        ) {
            let stereo: Vec<f32> = samples.iter().flat_map(|&s| [s, -s]).collect();
            let dir = tempfile::tempdir().unwrap();
            let target = dir.path().join("song.wav");
            let format = if pcm16 { WavFormat::Pcm16 } else { WavFormat::F32 };
            let mut wav = WavFile::create(&target, rate, format).unwrap();
            wav.write(&stereo).unwrap();
            wav.finish(&title, &recipe).unwrap().persist_new(&target).unwrap();
            let (back, back_rate) = read_song(&target).unwrap();
            proptest::prop_assert_eq!(back_rate, rate);
            proptest::prop_assert_eq!(back.len(), stereo.len());
            for (b, s) in back.iter().zip(&stereo) {
                // 16-bit clamps to [-1, 1] and rounds to its step (written against 32767, read
                // against 32768: within two steps); f32 keeps every bit.
                let (want, step) = if pcm16 { (s.clamp(-1.0, 1.0), 2.0 / 32767.0) } else { (*s, 0.0) };
                proptest::prop_assert!((b - want).abs() <= step, "{} against {}", b, s);
            }
            let info = read_info(&target).unwrap();
            proptest::prop_assert_eq!(info.title.as_deref(), Some(title.as_str()));
            proptest::prop_assert_eq!(info.comment.as_deref(), Some(recipe.as_str()));
        }
    }

    /// A WAV streamed with the unknown-length head reads as its samples, at its rate.
    #[test]
    fn a_streamed_wav_reads_to_its_end() {
        let mut bytes = streaming_pcm16_head(16_000);
        for s in [0.5f32, -0.5, 1.5, -1.0] {
            bytes.extend_from_slice(&pcm16(s).to_le_bytes());
        }
        let wav = songloom_wire::wav::read(&bytes).unwrap();
        assert_eq!((wav.channels, wav.sample_rate), (2, 16_000));
        assert_eq!(wav.samples, vec![16384.0 / 32768.0, -16384.0 / 32768.0, 32767.0 / 32768.0, -32767.0 / 32768.0]);
    }

    #[test]
    fn a_directory_is_refused_as_a_target_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let err = WavFile::create(dir.path(), 44100, WavFormat::F32).err().unwrap().to_string();
        assert!(err.contains("is a directory"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
