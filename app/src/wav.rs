//! WAV export: written to a temporary file beside the target as audio arrives, renamed into place
//! only when the song is complete, and removed on any failure, so the target is never half-written.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WavFormat {
    /// 32-bit float (exactly what the model made).
    F32,
    /// 16-bit PCM.
    Pcm16,
}

pub struct WavFile {
    writer: Option<hound::WavWriter<BufWriter<File>>>,
    temp: PathBuf,
    target: PathBuf,
    format: WavFormat,
}

impl WavFile {
    /// Creates the temporary file now, so an unwritable target fails before any work is done.
    pub fn create(target: &Path, sample_rate: u32, format: WavFormat) -> Result<Self> {
        let dir = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = target.file_name().with_context(|| format!("{} is not a file path", target.display()))?;
        let temp = dir.join(format!(".{}.{}.partial", name.to_string_lossy(), std::process::id()));
        let spec = hound::WavSpec {
            channels: 2,
            sample_rate,
            bits_per_sample: if format == WavFormat::F32 { 32 } else { 16 },
            sample_format: if format == WavFormat::F32 { hound::SampleFormat::Float } else { hound::SampleFormat::Int },
        };
        let writer =
            hound::WavWriter::create(&temp, spec).with_context(|| format!("cannot write {}", target.display()))?;
        Ok(WavFile { writer: Some(writer), temp, target: target.to_path_buf(), format })
    }

    /// Appends interleaved stereo samples.
    pub fn write(&mut self, samples: &[f32]) -> Result<()> {
        let writer = self.writer.as_mut().expect("open until finished");
        for &s in samples {
            match self.format {
                WavFormat::F32 => writer.write_sample(s)?,
                WavFormat::Pcm16 => writer.write_sample((s.clamp(-1.0, 1.0) * 32767.0).round() as i16)?,
            }
        }
        Ok(())
    }

    /// Completes the file and moves it to the target path.
    pub fn finish(mut self) -> Result<PathBuf> {
        let writer = self.writer.take().expect("open until finished");
        writer.finalize().with_context(|| format!("writing {}", self.temp.display()))?;
        std::fs::rename(&self.temp, &self.target)
            .with_context(|| format!("moving the song to {}", self.target.display()))?;
        Ok(self.target.clone())
    }
}

impl Drop for WavFile {
    fn drop(&mut self) {
        // Not finished: an error or a cancel. Leave nothing behind.
        if self.writer.take().is_some() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}
