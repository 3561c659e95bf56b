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

/// A WAV being written: a temporary file that [`finish`](WavFile::finish) completes. Dropped
/// unfinished (an error, a cancel), the temporary is removed.
pub struct WavFile {
    writer: Option<hound::WavWriter<BufWriter<File>>>,
    temp: NamedTempFile,
    format: WavFormat,
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
        Self::open(dir, &name.to_string_lossy(), sample_rate, format)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {}", target.display(), plain(&e)))
    }

    /// Starts a WAV in a temporary file in `dir` whose name begins with `.{name}.`.
    pub fn create_in(dir: &Path, name: &str, sample_rate: u32, format: WavFormat) -> Result<Self> {
        Self::open(dir, name, sample_rate, format)
            .map_err(|e| anyhow::anyhow!("cannot write a file in {}: {}", dir.display(), plain(&e)))
    }

    fn open(dir: &Path, name: &str, sample_rate: u32, format: WavFormat) -> std::io::Result<Self> {
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(&format!(".{}.partial", std::process::id()))
            .tempfile_in(dir)?;
        let spec = hound::WavSpec {
            channels: 2,
            sample_rate,
            bits_per_sample: if format == WavFormat::F32 { 32 } else { 16 },
            sample_format: if format == WavFormat::F32 { hound::SampleFormat::Float } else { hound::SampleFormat::Int },
        };
        let file = temp.reopen()?;
        let writer = hound::WavWriter::new(BufWriter::new(file), spec).map_err(std::io::Error::other)?;
        Ok(WavFile { writer: Some(writer), temp, format })
    }

    /// Appends interleaved stereo samples.
    pub fn write(&mut self, samples: &[f32]) -> Result<()> {
        let writer = self.writer.as_mut().expect("open until finished");
        let written = samples.iter().try_for_each(|&s| match self.format {
            WavFormat::F32 => writer.write_sample(s),
            WavFormat::Pcm16 => writer.write_sample((s.clamp(-1.0, 1.0) * 32767.0).round() as i16),
        });
        written.with_context(|| format!("writing {}", self.temp.path().display()))
    }

    /// Completes the file, with `recipe` (JSON) as its comment.
    pub fn finish(mut self, recipe: &str) -> Result<CompleteWav> {
        let path = self.temp.path().to_path_buf();
        let writer = self.writer.take().expect("open until finished");
        writer.finalize().with_context(|| format!("writing {}", path.display()))?;
        append_info(&path, recipe).with_context(|| format!("writing {}", path.display()))?;
        Ok(CompleteWav(self.temp))
    }
}

impl CompleteWav {
    /// A copy of the finished WAV at `source`, in a temporary file in `dir`.
    pub fn copy_of(source: &Path, dir: &Path) -> Result<Self> {
        let temp = tempfile::Builder::new()
            .prefix(".copy.")
            .suffix(&format!(".{}.partial", std::process::id()))
            .tempfile_in(dir)
            .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
        std::fs::copy(source, temp.path())
            .with_context(|| format!("copying {} to {}", source.display(), temp.path().display()))?;
        Ok(CompleteWav(temp))
    }

    /// Moves the file to `target`, replacing what is there.
    pub fn persist(self, target: &Path) -> Result<PathBuf> {
        self.0
            .persist(target)
            .map_err(|e| e.error)
            .with_context(|| format!("moving the song to {}", target.display()))?;
        Ok(target.to_path_buf())
    }

    /// Moves the file to `target`, which must not exist yet.
    pub fn persist_new(self, target: &Path) -> Result<PathBuf> {
        self.0
            .persist_noclobber(target)
            .map_err(|e| e.error)
            .with_context(|| format!("moving the song to {}", target.display()))?;
        Ok(target.to_path_buf())
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
    let mut reader = hound::WavReader::open(path).with_context(|| format!("reading {}", path.display()))?;
    let spec = reader.spec();
    if spec.channels != 2 {
        anyhow::bail!("{} has {} channels; Songloom songs are stereo", path.display(), spec.channels);
    }
    let samples = match spec.sample_format {
        hound::SampleFormat::Float => reader.samples::<f32>().collect::<Result<Vec<_>, _>>(),
        hound::SampleFormat::Int => {
            let scale = 1.0 / (1u64 << (spec.bits_per_sample - 1)) as f32;
            reader.samples::<i32>().map(|s| s.map(|v| v as f32 * scale)).collect()
        }
    }
    .with_context(|| format!("reading {}", path.display()))?;
    Ok((samples, spec.sample_rate))
}

/// Writes the song in `source` to `target` in `format`, with `recipe` as its comment; the target
/// appears only when complete.
pub fn export(source: &Path, target: &Path, format: WavFormat, recipe: &str) -> Result<PathBuf> {
    let (samples, sample_rate) = read_song(source)?;
    let mut wav = WavFile::create(target, sample_rate, format)?;
    wav.write(&samples)?;
    wav.finish(recipe)?.persist(target)
}

/// Appends a RIFF `LIST`/`INFO` chunk (software name, and the recipe as the comment `ICMT`) and
/// updates the RIFF size. Players and `hound` skip chunks they do not know.
fn append_info(path: &Path, comment: &str) -> std::io::Result<()> {
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
    info.extend(sub_chunk(b"ISFT", concat!("Songloom ", env!("CARGO_PKG_VERSION"))));
    info.extend(sub_chunk(b"ICMT", comment));
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

/// The recipe comment (`ICMT`) of a WAV written by Songloom, if any.
#[cfg(test)]
pub fn read_comment(bytes: &[u8]) -> Option<String> {
    let at = bytes.windows(4).rposition(|w| w == b"ICMT")?;
    let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().ok()?) as usize;
    let text = &bytes[at + 8..at + 8 + len];
    Some(String::from_utf8_lossy(text.strip_suffix(&[0]).unwrap_or(text)).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recipe_travels_in_the_file_and_players_still_read_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("song.wav");
        let mut wav = WavFile::create(&target, 44100, WavFormat::Pcm16).unwrap();
        wav.write(&[0.5, -0.5, 0.25, -0.25]).unwrap();
        let recipe = r#"{"description":"warm lo-fi piano","seed":3}"#;
        wav.finish(recipe).unwrap().persist(&target).unwrap();
        let bytes = std::fs::read(&target).unwrap();
        assert_eq!(read_comment(&bytes).as_deref(), Some(recipe));
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
        wav.finish("{}").unwrap().persist(&source).unwrap();
        let target = dir.path().join("out.wav");
        export(&source, &target, WavFormat::Pcm16, r#"{"seed":5}"#).unwrap();
        assert_eq!(read_comment(&std::fs::read(&target).unwrap()).as_deref(), Some(r#"{"seed":5}"#));
        let (samples, rate) = read_song(&target).unwrap();
        assert_eq!(rate, 44100);
        assert_eq!(samples, vec![16384.0 / 32768.0, -16384.0 / 32768.0, 8192.0 / 32768.0, -32767.0 / 32768.0]);
        assert!(export(&dir.path().join("missing.wav"), &dir.path().join("x.wav"), WavFormat::F32, "").is_err());
        assert!(!dir.path().join("x.wav").exists());
    }

    #[test]
    fn an_unfinished_or_unmoved_file_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut wav = WavFile::create(&dir.path().join("song.wav"), 44100, WavFormat::F32).unwrap();
        wav.write(&[0.1, 0.2]).unwrap();
        drop(wav);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let complete = WavFile::create(&dir.path().join("song.wav"), 44100, WavFormat::F32).unwrap().finish("{}");
        drop(complete);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_directory_is_refused_as_a_target_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let err = WavFile::create(dir.path(), 44100, WavFormat::F32).err().unwrap().to_string();
        assert!(err.contains("is a directory"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
