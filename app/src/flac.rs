//! FLAC export: a library song as 24-bit FLAC (the `flacenc` encoder, pure Rust) with its title,
//! the software and the recipe in a Vorbis comment, written beside the target and moved into
//! place only when complete, as the caller says where its name is taken.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};

use crate::wav::IfTaken;
use flacenc::component::{BitRepr, MetadataBlockData};
use flacenc::error::Verify;

/// FLAC's Vorbis comment block type.
const VORBIS_COMMENT: u8 = 4;
/// Full scale of a 24-bit sample.
const FULL_SCALE: f32 = 8_388_607.0;

/// Writes the song in `source` (a Songloom WAV) to `target` as FLAC, where its name is taken as
/// `if_taken` says; returns where it went.
pub fn export(source: &Path, target: &Path, title: &str, recipe: &str, if_taken: IfTaken) -> Result<PathBuf> {
    let (samples, sample_rate) = crate::wav::read_song(source)?;
    write(&samples, sample_rate, target, title, recipe, if_taken)
}

/// Writes interleaved stereo `samples` at `sample_rate` to `target` as FLAC, where its name is
/// taken as `if_taken` says; returns where it went.
pub fn write(
    samples: &[f32],
    sample_rate: u32,
    target: &Path,
    title: &str,
    recipe: &str,
    if_taken: IfTaken,
) -> Result<PathBuf> {
    let ints: Vec<i32> = samples.iter().map(|&s| (s.clamp(-1.0, 1.0) * FULL_SCALE).round() as i32).collect();
    let config =
        flacenc::config::Encoder::default().into_verified().map_err(|(_, e)| anyhow!("FLAC settings: {e:?}"))?;
    let input = flacenc::source::MemSource::from_samples(&ints, 2, 24, sample_rate as usize);
    let mut stream = flacenc::encode_with_fixed_block_size(&config, input, config.block_size)
        .map_err(|e| anyhow!("encoding {}: {e:?}", target.display()))?;
    let comment = MetadataBlockData::new_unknown(VORBIS_COMMENT, &vorbis_comment(title, recipe))
        .map_err(|e| anyhow!("the FLAC tags: {e:?}"))?;
    stream.add_metadata_block(comment);
    let mut sink = flacenc::bitsink::ByteSink::new();
    stream.write(&mut sink).map_err(|e| anyhow!("encoding {}: {e:?}", target.display()))?;

    let dir = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut temp = crate::wav::temp_file_in(dir, ".songloom-export.", ".flac")
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    temp.write_all(sink.as_slice())
        .and_then(|_| temp.as_file().sync_all())
        .with_context(|| format!("writing {}", target.display()))?;
    crate::wav::place(temp, target, if_taken).map_err(|e| anyhow!("cannot write {}: {e}", target.display()))
}

/// A Vorbis comment: the vendor, then TITLE, ENCODER, COMMENT (the recipe) and DESCRIPTION (the
/// AI-generated note), each a length and UTF-8 bytes, lengths little-endian.
fn vorbis_comment(title: &str, recipe: &str) -> Vec<u8> {
    fn field(out: &mut Vec<u8>, text: &str) {
        out.extend((text.len() as u32).to_le_bytes());
        out.extend(text.as_bytes());
    }
    let software = concat!("Songloom ", env!("CARGO_PKG_VERSION"));
    let comments = [
        format!("TITLE={title}"),
        format!("ENCODER={software}"),
        format!("COMMENT={recipe}"),
        format!("DESCRIPTION={}", songloom_wire::notice::ai_generated_note(recipe)),
    ];
    let mut out = Vec::new();
    field(&mut out, software);
    out.extend((comments.len() as u32).to_le_bytes());
    for comment in &comments {
        field(&mut out, comment);
    }
    out
}
