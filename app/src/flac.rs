//! FLAC export: a library song as 24-bit FLAC (the `flacenc` encoder, pure Rust) with its title,
//! the software and the recipe in a Vorbis comment and its score in an APPLICATION block, written
//! beside the target and moved into place only when complete, as the caller says where its name is
//! taken. Read back (`flacenc`'s decoder) for `library import`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use songloom_engine::pipeline::score::Score;

use crate::wav::{IfTaken, WavInfo};
use flacenc::component::{BitRepr, Decode, MetadataBlockData};
use flacenc::error::Verify;

/// FLAC's APPLICATION block type: a 4-byte application id, then the application's data.
const APPLICATION: u8 = 2;
/// FLAC's Vorbis comment block type.
const VORBIS_COMMENT: u8 = 4;
/// The application id of the block that carries a song's score ([`Score::to_bytes`]).
const SCORE_APPLICATION: &[u8; 4] = b"SLSC";
/// A metadata block's length is 24 bits.
const MAX_BLOCK_BYTES: usize = (1 << 24) - 1;
/// Full scale of a 24-bit sample.
const FULL_SCALE: f32 = 8_388_607.0;

/// Writes the song in `source` (a Songloom WAV) to `target` as FLAC, with `score`, if any, where
/// its name is taken as `if_taken` says; returns where it went.
pub fn export(
    source: &Path,
    target: &Path,
    title: &str,
    recipe: &str,
    score: Option<&Score>,
    if_taken: IfTaken,
) -> Result<PathBuf> {
    let (samples, sample_rate) = crate::wav::read_song(source)?;
    write(&samples, sample_rate, target, title, recipe, score, if_taken)
}

/// Writes interleaved stereo `samples` at `sample_rate` to `target` as FLAC, with `score`, if
/// any, where its name is taken as `if_taken` says; returns where it went.
pub fn write(
    samples: &[f32],
    sample_rate: u32,
    target: &Path,
    title: &str,
    recipe: &str,
    score: Option<&Score>,
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
    if let Some(score) = score {
        let mut block = SCORE_APPLICATION.to_vec();
        block.extend(score.to_bytes()?);
        if block.len() > MAX_BLOCK_BYTES {
            bail!("the song's score ({} bytes) does not fit a FLAC metadata block", block.len());
        }
        let block =
            MetadataBlockData::new_unknown(APPLICATION, &block).map_err(|e| anyhow!("the FLAC score: {e:?}"))?;
        stream.add_metadata_block(block);
    }
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

/// A metadata block of a FLAC: its type and its body.
struct MetadataBlock {
    kind: u8,
    body: Vec<u8>,
}

/// The metadata blocks at the head of the FLAC at `path`, read without the audio (a block cut
/// short by the file's end is what is there).
fn metadata_blocks(path: &Path) -> Result<Vec<MetadataBlock>> {
    let reading = || format!("reading {}", path.display());
    let mut file = std::io::BufReader::new(std::fs::File::open(path).with_context(reading)?);
    let mut magic = [0u8; 4];
    if file.read_exact(&mut magic).is_err() || &magic != b"fLaC" {
        bail!("{} is not a FLAC file (it does not start with fLaC)", path.display());
    }
    let mut blocks = Vec::new();
    let mut head = [0u8; 4];
    while file.read_exact(&mut head).is_ok() {
        let len = u32::from_be_bytes([0, head[1], head[2], head[3]]);
        let mut body = Vec::new();
        (&mut file).take(u64::from(len)).read_to_end(&mut body).with_context(reading)?;
        let whole = body.len() == len as usize;
        blocks.push(MetadataBlock { kind: head[0] & 0x7F, body });
        // The first bit marks the last block.
        if head[0] & 0x80 != 0 || !whole {
            break;
        }
    }
    Ok(blocks)
}

/// The score the FLAC at `path` carries; `None` for a file without one. A score that does not
/// read is an error: the song still plays, but it cannot be edited.
pub fn read_score(path: &Path) -> Result<Option<Score>> {
    let blocks = metadata_blocks(path)?;
    let score = blocks.iter().find_map(|block| {
        (block.kind == APPLICATION).then(|| block.body.strip_prefix(SCORE_APPLICATION.as_slice())).flatten()
    });
    score.map(|bytes| crate::wav::score_of(bytes, path)).transpose()
}

/// The tags of the FLAC at `path`'s Vorbis comment, as the WAV's: TITLE, ENCODER, COMMENT (the
/// recipe) and DESCRIPTION (the AI-generated note).
pub fn read_info(path: &Path) -> Result<WavInfo> {
    let mut info = WavInfo::default();
    for block in metadata_blocks(path)? {
        if block.kind == VORBIS_COMMENT {
            read_tags(&block.body, &mut info);
        }
    }
    Ok(info)
}

/// The fields of a Vorbis comment Songloom writes, into `info`; a malformed comment yields what
/// came before the damage.
fn read_tags(body: &[u8], info: &mut WavInfo) {
    fn field<'a>(body: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
        let len = u32::from_le_bytes(body.get(*at..*at + 4)?.try_into().ok()?) as usize;
        let text = body.get(*at + 4..(*at + 4).checked_add(len)?)?;
        *at += 4 + len;
        Some(text)
    }
    let mut at = 0;
    let Some(_vendor) = field(body, &mut at) else { return };
    let Some(count) = body.get(at..at + 4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))) else {
        return;
    };
    at += 4;
    for _ in 0..count {
        let Some(text) = field(body, &mut at) else { return };
        let text = String::from_utf8_lossy(text);
        let Some((key, value)) = text.split_once('=') else { continue };
        let slot = match key.to_ascii_uppercase().as_str() {
            "TITLE" => &mut info.title,
            "ENCODER" => &mut info.software,
            "COMMENT" => &mut info.comment,
            "DESCRIPTION" => &mut info.subject,
            _ => continue,
        };
        *slot = Some(value.to_string());
    }
}

/// The interleaved stereo samples and sample rate of the FLAC at `path`, in -1..=1 (the inverse of
/// [`write`]'s scaling, so a Songloom FLAC reads back within a 24-bit step of its floats).
pub fn read_song(path: &Path) -> Result<(Vec<f32>, u32)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let (_, stream) = flacenc::component::parser::stream::<()>(&bytes)
        .map_err(|_| anyhow!("{} is not a FLAC file Songloom reads (its audio does not decode)", path.display()))?;
    let info = stream.stream_info();
    if info.channels() != 2 {
        bail!("{} has {} channels; Songloom songs are stereo", path.display(), info.channels());
    }
    let full_scale = ((1i64 << (info.bits_per_sample() - 1)) - 1) as f32;
    let mut samples = Vec::with_capacity(info.total_samples() * 2);
    for n in 0..stream.frame_count() {
        let frame = stream.frame(n).expect("a frame below the count");
        samples.extend(frame.decode().into_iter().map(|s| s as f32 / full_scale));
    }
    if info.total_samples() > 0 {
        samples.truncate(info.total_samples() * 2);
    }
    Ok((samples, info.sample_rate() as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wav::tests::{assert_same_score, made_up_score};

    fn samples() -> Vec<f32> {
        (0..3000).map(|i| ((i as f32) * 0.013).sin() * if i % 2 == 0 { 0.9 } else { -0.4 }).collect()
    }

    /// The score, the tags and the audio (within a 24-bit step) read back from a written FLAC.
    #[test]
    fn a_flac_reads_back_with_its_tags_and_score() {
        let dir = tempfile::tempdir().unwrap();
        let score = made_up_score();
        let samples = samples();
        let target = dir.path().join("song.flac");
        write(&samples, 48_000, &target, "Flac title", r#"{"seed":8}"#, Some(&score), IfTaken::Refuse).unwrap();
        assert_same_score(read_score(&target).unwrap(), &score);
        let info = read_info(&target).unwrap();
        assert_eq!((info.title.as_deref(), info.comment.as_deref()), (Some("Flac title"), Some(r#"{"seed":8}"#)));
        assert!(info.software.unwrap().starts_with("Songloom "));
        let (back, rate) = read_song(&target).unwrap();
        assert_eq!((back.len(), rate), (samples.len(), 48_000));
        for (b, s) in back.iter().zip(&samples) {
            assert!((b - s).abs() <= 1.0 / FULL_SCALE, "{b} against {s}");
        }
    }

    #[test]
    fn a_flac_without_a_score_reads_as_none_and_a_damaged_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let bare = dir.path().join("bare.flac");
        write(&samples(), 44_100, &bare, "t", "{}", None, IfTaken::Refuse).unwrap();
        assert!(read_score(&bare).unwrap().is_none());

        let scored = dir.path().join("scored.flac");
        write(&samples(), 44_100, &scored, "t", "{}", Some(&made_up_score()), IfTaken::Refuse).unwrap();
        let mut bytes = std::fs::read(&scored).unwrap();
        let at = bytes.windows(8).position(|w| w == b"SLSCORE1").unwrap();
        bytes[at + 7] = b'9';
        std::fs::write(&scored, &bytes).unwrap();
        let err = format!("{:#}", read_score(&scored).unwrap_err());
        assert!(err.contains(&scored.display().to_string()) && err.contains("damaged"), "{err}");

        let wav = dir.path().join("song.wav");
        std::fs::write(&wav, b"RIFF....WAVE").unwrap();
        assert!(read_score(&wav).unwrap_err().to_string().contains("not a FLAC file"));
    }
}
