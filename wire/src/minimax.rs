//! MiniMax's cloud music API as `songloom serve` answers it (`POST /v1/music_generation`, the
//! README's "MiniMax's cloud API shape"): the cloud's request and answer bodies, field for field,
//! so a client written for the cloud works by changing only the address. The names are the
//! cloud's, units included (`music_duration` is milliseconds, `music_size` bytes).

use serde::{Deserialize, Serialize};

/// `POST /v1/music_generation`. Every field may be left out (the server says which one a song
/// needs), so a body that names one field can be read to find which field is malformed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MusicGenerationRequest {
    /// The cloud's model name ("music-2.6"); the server makes every song with the one model it
    /// loaded, so any name is taken.
    #[serde(default)]
    pub model: String,
    /// The music description: genre, mood, instruments, vocals, tempo.
    #[serde(default)]
    pub prompt: String,
    /// Lyrics with structure tags (`[verse]`, `[chorus]`), lines separated by `\n`.
    #[serde(default)]
    pub lyrics: String,
    /// A song without singing: the lyrics may be left out, and are replaced by `[instrumental]`.
    #[serde(default)]
    pub is_instrumental: bool,
    /// Answer as Server-Sent Events while the song is made (hex only).
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub output_format: OutputFormat,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_setting: Option<AudioSetting>,
    /// The cloud marks its audio as AI-made when true; taken and ignored here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aigc_watermark: Option<bool>,
    /// The cloud writes lyrics from the prompt when true; no lyrics writer runs locally.
    #[serde(default)]
    pub lyrics_optimizer: bool,
}

/// How the audio comes back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputFormat {
    /// The audio file's bytes as hexadecimal text in `data.audio`.
    #[default]
    Hex,
    /// An address to fetch the audio file from, in `data.audio`.
    Url,
}

/// `audio_setting`: the file the song is answered as.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AudioSetting {
    /// Hz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_rate: Option<u32>,
    /// Bits per second, for the cloud's MP3; lossless files have the bitrate they have (reported in
    /// `extra_info.bitrate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate: Option<u32>,
    /// "wav", "flac", or the cloud's "mp3" (which the server refuses, naming what it offers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

/// The answer, always with `base_resp`: `status_code` 0 with the song in `data` and `extra_info`,
/// else an error code and its message. As one JSON body, or, streamed, each Server-Sent Event's
/// `data:` line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MusicGenerationAnswer {
    pub data: Option<MusicAudio>,
    /// 32 hexadecimal digits naming this request.
    pub trace_id: String,
    pub extra_info: Option<MusicInfo>,
    /// Always null here (the cloud's analysis of the song).
    pub analysis_info: Option<serde_json::Value>,
    pub base_resp: BaseResp,
}

/// The song, or a piece of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MusicAudio {
    /// Hexadecimal bytes of the audio file (streamed: the next piece of it), or its address.
    pub audio: String,
    /// [`MusicAudio::MAKING`] or [`MusicAudio::DONE`].
    pub status: u8,
}

impl MusicAudio {
    /// A streamed piece while the song is being made.
    pub const MAKING: u8 = 1;
    /// The whole song, or the last streamed piece.
    pub const DONE: u8 = 2;
}

/// What the answered file is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MusicInfo {
    /// Milliseconds.
    pub music_duration: u64,
    /// Hz.
    pub music_sample_rate: u32,
    pub music_channel: u16,
    /// Bits per second of the file (the average, for FLAC).
    pub bitrate: u64,
    /// Bytes of the file.
    pub music_size: u64,
}

/// The outcome: 0 for success, else one of the cloud's error codes and a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaseResp {
    pub status_code: u32,
    pub status_msg: String,
}

impl BaseResp {
    pub const SUCCESS: u32 = 0;
    /// The song could not be made (the engine failed, or the server stopped).
    pub const UNKNOWN_ERROR: u32 = 1000;
    /// No token, or the wrong one.
    pub const AUTHENTICATION_FAILED: u32 = 1004;
    /// A field is missing or wrong; the message names it.
    pub const INVALID_PARAMS: u32 = 2013;

    pub fn success() -> BaseResp {
        BaseResp { status_code: BaseResp::SUCCESS, status_msg: "success".into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cloud's own example answer reads as the type, which writes it back field for field.
    #[test]
    fn the_clouds_answer_round_trips() {
        let cloud = serde_json::json!({
            "data": {"audio": "fffb", "status": 2},
            "trace_id": "04ede0ab069fb1ba8be5156a24b1e081",
            "extra_info": {"music_duration": 25364, "music_sample_rate": 44100, "music_channel": 2,
                           "bitrate": 256000, "music_size": 813651},
            "analysis_info": null,
            "base_resp": {"status_code": 0, "status_msg": "success"}
        });
        let answer: MusicGenerationAnswer = serde_json::from_value(cloud.clone()).unwrap();
        assert_eq!(answer.base_resp, BaseResp::success());
        assert_eq!(serde_json::to_value(&answer).unwrap(), cloud);
    }

    /// The cloud's example request reads, its output format the default; a field the cloud does
    /// not have is refused by name.
    #[test]
    fn the_clouds_request_reads_and_an_unknown_field_is_named() {
        let request: MusicGenerationRequest = serde_json::from_str(
            r#"{"model": "music-2.6", "prompt": "Indie folk", "lyrics": "[verse]\nla",
                "audio_setting": {"sample_rate": 44100, "bitrate": 256000, "format": "mp3"}}"#,
        )
        .unwrap();
        assert_eq!(request.output_format, OutputFormat::Hex);
        assert_eq!(request.audio_setting.unwrap().format.as_deref(), Some("mp3"));
        let error = serde_json::from_str::<MusicGenerationRequest>(r#"{"colour": 1}"#).unwrap_err().to_string();
        assert!(error.contains("colour"), "{error}");
        assert_eq!(serde_json::to_value(OutputFormat::Url).unwrap(), "url");
    }
}
