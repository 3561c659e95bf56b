//! The WAV reader on files made byte by byte: each sample format Songloom writes or meets, the
//! tags, and files it must refuse with a reason.

use songloom_wire::wav::{self, WavError, WavInfo};

/// A RIFF/WAVE file of the given chunks.
fn riff(chunks: &[(&[u8; 4], Vec<u8>)]) -> Vec<u8> {
    let mut body = b"WAVE".to_vec();
    for (id, data) in chunks {
        body.extend_from_slice(*id);
        body.extend((data.len() as u32).to_le_bytes());
        body.extend(data);
        if data.len() % 2 == 1 {
            body.push(0);
        }
    }
    let mut file = b"RIFF".to_vec();
    file.extend((body.len() as u32).to_le_bytes());
    file.extend(body);
    file
}

/// A plain `fmt ` chunk, or a `WAVE_FORMAT_EXTENSIBLE` one for `extensible`.
fn fmt(format: u16, channels: u16, rate: u32, bits: u16, extensible: bool) -> Vec<u8> {
    let block = channels * bits / 8;
    let tag = if extensible { 0xFFFE } else { format };
    let mut f = Vec::new();
    f.extend(tag.to_le_bytes());
    f.extend(channels.to_le_bytes());
    f.extend(rate.to_le_bytes());
    f.extend((rate * block as u32).to_le_bytes());
    f.extend(block.to_le_bytes());
    f.extend(bits.to_le_bytes());
    if extensible {
        f.extend(22u16.to_le_bytes());
        f.extend(bits.to_le_bytes());
        f.extend(3u32.to_le_bytes());
        f.extend(format.to_le_bytes());
        f.extend([0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71]);
    }
    f
}

fn tags(title: &str, comment: &str) -> Vec<u8> {
    let mut list = b"INFO".to_vec();
    for (id, text) in [(b"INAM", title), (b"ICMT", comment)] {
        let mut data = text.as_bytes().to_vec();
        data.push(0);
        list.extend_from_slice(id);
        list.extend((data.len() as u32).to_le_bytes());
        if data.len() % 2 == 1 {
            data.push(0);
        }
        list.extend(data);
    }
    list
}

#[test]
fn float_and_every_integer_depth_read_as_the_same_samples() {
    let want = [0.5f32, -0.5, 0.25, -1.0];
    let float: Vec<u8> = want.iter().flat_map(|s| s.to_le_bytes()).collect();
    let pcm8: Vec<u8> = want.iter().map(|s| (s * 128.0 + 128.0) as u8).collect();
    let pcm16: Vec<u8> = want.iter().flat_map(|s| ((s * 32768.0) as i16).to_le_bytes()).collect();
    let pcm24: Vec<u8> = want.iter().flat_map(|s| ((s * 8_388_608.0) as i32).to_le_bytes()[..3].to_vec()).collect();
    let pcm32: Vec<u8> = want.iter().flat_map(|s| ((*s as f64 * 2_147_483_648.0) as i32).to_le_bytes()).collect();
    for extensible in [false, true] {
        for (format, bits, data) in [(3, 32, &float), (1, 8, &pcm8), (1, 16, &pcm16), (1, 24, &pcm24), (1, 32, &pcm32)]
        {
            let file = riff(&[(b"fmt ", fmt(format, 2, 48_000, bits, extensible)), (b"data", data.clone())]);
            let read = wav::read(&file).unwrap_or_else(|e| panic!("format {format}, {bits} bits: {e}"));
            assert_eq!((read.channels, read.sample_rate), (2, 48_000));
            assert_eq!(read.samples, want, "format {format}, {bits} bits, extensible {extensible}");
            assert_eq!(read.info, WavInfo::default());
        }
    }
}

#[test]
fn tags_come_with_the_samples_or_alone() {
    let data: Vec<u8> = [0.1f32, 0.2].iter().flat_map(|s| s.to_le_bytes()).collect();
    let file = riff(&[
        (b"fmt ", fmt(3, 2, 44_100, 32, true)),
        (b"data", data),
        (b"LIST", tags("Warm piano", r#"{"seed":3}"#)),
    ]);
    let info = WavInfo {
        title: Some("Warm piano".into()),
        software: None,
        comment: Some(r#"{"seed":3}"#.into()),
        subject: None,
    };
    assert_eq!(wav::read(&file).unwrap().info, info);
    assert_eq!(wav::read_info(&file).unwrap(), info);
}

#[test]
fn mono_is_doubled_for_the_player_and_more_channels_are_refused() {
    let mono = wav::read(&riff(&[(b"fmt ", fmt(1, 1, 8_000, 16, false)), (b"data", vec![0, 64, 0, 192])])).unwrap();
    assert_eq!(mono.channels, 1);
    assert_eq!(mono.into_stereo().unwrap(), vec![0.5, 0.5, -0.5, -0.5]);
    let four = wav::read(&riff(&[(b"fmt ", fmt(1, 4, 8_000, 16, true)), (b"data", vec![0; 8])])).unwrap();
    assert_eq!(four.into_stereo(), Err(WavError::Channels(4)));
}

#[test]
fn what_is_not_a_readable_wav_says_why() {
    let data = (b"data", vec![0u8; 8]);
    assert_eq!(wav::read(b"ID3\x03 not a wav at all"), Err(WavError::NotWav));
    assert_eq!(wav::read(b""), Err(WavError::NotWav));
    assert_eq!(wav::read(&riff(std::slice::from_ref(&data))), Err(WavError::NoFormat));
    assert_eq!(wav::read(&riff(&[(b"fmt ", vec![1, 0, 2])])).unwrap_err(), WavError::NoData);
    assert_eq!(wav::read(&riff(&[(b"fmt ", vec![1, 0, 2]), data.clone()])), Err(WavError::NoFormat));
    let double = riff(&[(b"fmt ", fmt(3, 2, 44_100, 64, false)), data]);
    let err = wav::read(&double).unwrap_err();
    assert_eq!(err, WavError::Unsupported { format: 3, bits: 64 });
    assert!(err.to_string().contains("64 bits"), "{err}");
    // A file cut short keeps the whole samples it has; a chunk size past the end is no panic.
    let mut cut = riff(&[(b"fmt ", fmt(3, 2, 44_100, 32, false)), (b"data", vec![0; 16])]);
    cut.truncate(cut.len() - 6);
    assert_eq!(wav::read(&cut).unwrap().samples.len(), 2);
    let mut huge = riff(&[(b"fmt ", fmt(1, 2, 44_100, 16, false)), (b"LIST", tags("t", "c"))]);
    let at = huge.len() - 4;
    huge[at..].copy_from_slice(&[0xff; 4]);
    assert!(wav::read_info(&huge).is_ok());
}
