//! The one WAV reader, from bytes: the CLI's library and exports, the desktop player and the
//! browser's player all read songs through it. It takes what Songloom writes (stereo 32-bit float
//! or 16-bit PCM, plain or `WAVE_FORMAT_EXTENSIBLE`, with a `LIST`/`INFO` chunk of tags) and the
//! other integer depths (8, 24 and 32 bits).

use std::fmt;

/// A WAV's samples and tags.
#[derive(Debug, Clone, PartialEq)]
pub struct Wav {
    pub channels: u16,
    pub sample_rate: u32,
    /// Interleaved, in -1..=1 for integer formats.
    pub samples: Vec<f32>,
    pub info: WavInfo,
}

/// The tags of a WAV's `LIST`/`INFO` chunk that Songloom writes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WavInfo {
    pub title: Option<String>,
    pub software: Option<String>,
    /// The recipe, as JSON, in a Songloom WAV.
    pub comment: Option<String>,
    /// The subject: in a Songloom WAV, the note that it is AI-generated and by which model.
    pub subject: Option<String>,
}

/// Why bytes are not a WAV this reader takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WavError {
    /// No `RIFF`/`WAVE` header.
    NotWav,
    /// No `fmt ` chunk, or one too short.
    NoFormat,
    NoData,
    /// A sample format other than integer PCM of 8, 16, 24 or 32 bits, or 32-bit float.
    Unsupported {
        format: u16,
        bits: u16,
    },
    /// `channels` stereo cannot be made of (the player takes mono or stereo).
    Channels(u16),
}

impl fmt::Display for WavError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            WavError::NotWav => f.write_str("not a WAV file (no RIFF/WAVE header)"),
            WavError::NoFormat => f.write_str("the WAV has no readable format chunk"),
            WavError::NoData => f.write_str("the WAV has no data chunk"),
            WavError::Unsupported { format, bits } => write!(
                f,
                "the WAV's samples are format {format} of {bits} bits (integer PCM of 8, 16, 24 or 32 bits, \
                 or 32-bit float, are read)"
            ),
            WavError::Channels(n) => write!(f, "the WAV has {n} channels (mono or stereo are played)"),
        }
    }
}

impl std::error::Error for WavError {}

const PCM: u16 = 1;
const FLOAT: u16 = 3;
const EXTENSIBLE: u16 = 0xFFFE;

/// The RIFF chunks of a WAV, by id and body (a body cut short by the file's end is what is there).
fn chunks(bytes: &[u8]) -> Result<impl Iterator<Item = (&[u8], &[u8])>, WavError> {
    if bytes.get(..4) != Some(b"RIFF") || bytes.get(8..12) != Some(b"WAVE") {
        return Err(WavError::NotWav);
    }
    let mut at = 12usize;
    Ok(std::iter::from_fn(move || {
        let id = bytes.get(at..at + 4)?;
        let size = u32::from_le_bytes(bytes.get(at + 4..at + 8)?.try_into().ok()?) as usize;
        let start = at + 8;
        let body = &bytes[start..start.saturating_add(size).min(bytes.len())];
        at = start.saturating_add(size).saturating_add(size % 2);
        Some((id, body))
    }))
}

fn u16_at(body: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(body.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(body: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(body.get(at..at + 4)?.try_into().ok()?))
}

/// Reads a whole WAV.
pub fn read(bytes: &[u8]) -> Result<Wav, WavError> {
    let (mut format, mut data, mut info) = (None, None, WavInfo::default());
    for (id, body) in chunks(bytes)? {
        match id {
            b"fmt " => format = Some(body),
            b"data" => data = Some(body),
            b"LIST" => read_tags(body, &mut info),
            _ => {}
        }
    }
    let format = format.ok_or(WavError::NoFormat)?;
    let data = data.ok_or(WavError::NoData)?;
    let (Some(mut kind), Some(channels), Some(sample_rate), Some(bits)) =
        (u16_at(format, 0), u16_at(format, 2), u32_at(format, 4), u16_at(format, 14))
    else {
        return Err(WavError::NoFormat);
    };
    if kind == EXTENSIBLE {
        // The sub-format GUID begins with the plain format's code.
        kind = u16_at(format, 24).ok_or(WavError::NoFormat)?;
    }
    let samples: Vec<f32> = match (kind, bits) {
        (FLOAT, 32) => data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        // 8-bit WAV samples are unsigned, centred on 128.
        (PCM, 8) => data.iter().map(|&b| (b as f32 - 128.0) / 128.0).collect(),
        (PCM, 16) => data.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]]) as f32 / 32768.0).collect(),
        (PCM, 24) => data
            .chunks_exact(3)
            .map(|b| (i32::from_le_bytes([0, b[0], b[1], b[2]]) >> 8) as f32 / 8_388_608.0)
            .collect(),
        (PCM, 32) => data
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32 / 2_147_483_648.0)
            .collect(),
        (format, bits) => return Err(WavError::Unsupported { format, bits }),
    };
    Ok(Wav { channels, sample_rate, samples, info })
}

/// Reads only a WAV's tags, without decoding its samples.
pub fn read_info(bytes: &[u8]) -> Result<WavInfo, WavError> {
    let mut info = WavInfo::default();
    for (id, body) in chunks(bytes)? {
        if id == b"LIST" {
            read_tags(body, &mut info);
        }
    }
    Ok(info)
}

/// The tags of a `LIST` chunk's body, if it is an `INFO` list.
fn read_tags(body: &[u8], info: &mut WavInfo) {
    if body.get(..4) != Some(b"INFO") {
        return;
    }
    let mut at = 4usize;
    while let (Some(tag), Some(len)) = (body.get(at..at + 4), u32_at(body, at + 4)) {
        let len = len as usize;
        let start = at + 8;
        let text = &body[start..start.saturating_add(len).min(body.len())];
        let text = String::from_utf8_lossy(text.strip_suffix(&[0]).unwrap_or(text)).into_owned();
        match tag {
            b"INAM" => info.title = Some(text),
            b"ISFT" => info.software = Some(text),
            b"ICMT" => info.comment = Some(text),
            b"ISBJ" => info.subject = Some(text),
            _ => {}
        }
        at = start.saturating_add(len).saturating_add(len % 2);
    }
}

impl Wav {
    /// The samples as interleaved stereo: mono doubled, stereo as it is.
    pub fn into_stereo(self) -> Result<Vec<f32>, WavError> {
        match self.channels {
            2 => Ok(self.samples),
            1 => Ok(self.samples.iter().flat_map(|&s| [s, s]).collect()),
            n => Err(WavError::Channels(n)),
        }
    }
}
