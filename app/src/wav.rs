//! WAV export: written to a temporary file beside the target as audio arrives, moved into place
//! only when the song is complete, and removed on any failure, so the target is never half-written.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use tempfile::NamedTempFile;

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

/// [`export_as`] at `sample_rate` (Hz), resampled when it is not the song's own.
pub fn export_at(
    source: &Path,
    target: &Path,
    format: FileFormat,
    sample_rate: Option<u32>,
    title: &str,
    recipe: &str,
) -> Result<PathBuf> {
    let (samples, song_rate) = read_song(source)?;
    match sample_rate.filter(|&rate| rate != song_rate) {
        Some(rate) => {
            let resampled = crate::resample::resample(&samples, song_rate, rate).map_err(anyhow::Error::msg)?;
            write_as(&resampled, rate, target, format, title, recipe)
        }
        None => write_as(&samples, song_rate, target, format, title, recipe),
    }
}

/// Writes interleaved stereo `samples` at `sample_rate` to `target` in `format`, with `title` and
/// `recipe` in its tags; the target appears only when complete, and must not exist yet.
pub fn write_as(
    samples: &[f32],
    sample_rate: u32,
    target: &Path,
    format: FileFormat,
    title: &str,
    recipe: &str,
) -> Result<PathBuf> {
    if format == FileFormat::Flac {
        return crate::flac::write(samples, sample_rate, target, title, recipe, IfTaken::Refuse);
    }
    let mut wav = WavFile::create(target, sample_rate, format.wav_format())?;
    wav.write(samples)?;
    wav.finish(title, recipe)?.persist_new(target)
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
/// comment `ICMT` and the AI-generated note as the subject `ISBJ`) and updates the RIFF size.
/// Players and `hound` skip chunks they do not know.
fn append_info(path: &Path, title: &str, comment: &str) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
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
    file.seek(SeekFrom::End(0))?;
    file.write_all(b"LIST")?;
    file.write_all(&(info.len() as u32).to_le_bytes())?;
    file.write_all(&info)?;
    let total = file.seek(SeekFrom::End(0))?;
    file.seek(SeekFrom::Start(4))?;
    file.write_all(&((total - 8) as u32).to_le_bytes())?;
    file.sync_all()
}

pub use songloom_wire::wav::WavInfo;

/// Reads the `INFO` tags of the WAV at `path`.
pub fn read_info(path: &Path) -> Result<WavInfo> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    songloom_wire::wav::read_info(&bytes).with_context(|| format!("{} is not a WAV file", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
