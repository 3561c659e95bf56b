"""The codes of each 25 Hz frame, defined by the project from the score and the rendered audio
(the real model's codes come from a learned quantizer; ours are features anyone can read):

  c0  (semantic, 4096): the chroma of the sounding notes, a 12-bit pitch-class set;
  c1  the highest sounding pitch (1..88 for MIDI 21..108, 0 for none), +128 where it starts here;
  c2  the lowest sounding pitch, the same way;
  c3  the second highest, c4 the second lowest, the same way (0 where fewer notes sound);
  c5  the frame's loudness (64 steps of 1.25 dB from -80 dB) x 4 + the drum hit (0 none, 1 kick,
      2 snare, 3 hat);
  c6  the top voice's timbre x 8 + the other voices' timbre, + 64 x the position in the beat (4 steps);
  c7  the spectral centroid (log steps from 50 Hz to 16 kHz).

The depth decoder's hidden states see c0..c6 of a frame, and they condition the DiT: what the audio
must do is in them. c7 only trains the depth decoder.
"""

import numpy as np

from synth import FRAME_SAMPLES, SAMPLE_RATE, Rendering

SEMANTIC_VOCAB = 4096
AUDIO_VOCAB = 256
CODEBOOKS = 8


def pitch_code(pitch: int | None, starts: bool) -> int:
    if pitch is None:
        return 0
    return min(max(pitch - 20, 1), 88) + (128 if starts else 0)


def frame_codes(r: Rendering) -> np.ndarray:
    codes = np.zeros((r.frames, CODEBOOKS), dtype=np.int64)
    mono = r.audio.mean(axis=0)
    window = np.hanning(FRAME_SAMPLES)
    freqs = np.fft.rfftfreq(FRAME_SAMPLES, 1.0 / SAMPLE_RATE)
    for f in range(r.frames):
        sounding = r.sounding[f]
        onsets = set(r.onsets[f])
        chroma = 0
        for p in sounding:
            chroma |= 1 << (p % 12)
        codes[f, 0] = chroma
        high = sounding[-1] if sounding else None
        low = sounding[0] if sounding else None
        second_high = sounding[-2] if len(sounding) >= 3 else None
        second_low = sounding[1] if len(sounding) >= 4 else None
        codes[f, 1] = pitch_code(high, high in onsets)
        codes[f, 2] = pitch_code(low, low in onsets)
        codes[f, 3] = pitch_code(second_high, second_high in onsets)
        codes[f, 4] = pitch_code(second_low, second_low in onsets)
        chunk = mono[f * FRAME_SAMPLES : (f + 1) * FRAME_SAMPLES]
        rms = float(np.sqrt(np.mean(chunk**2)) + 1e-9)
        loudness = int(np.clip((20 * np.log10(rms) + 80) / 1.25, 0, 63))
        codes[f, 5] = loudness * 4 + int(r.drums[f])
        codes[f, 6] = r.top_timbre * 8 + r.other_timbre + 64 * int(r.beat_phase[f])
        spectrum = np.abs(np.fft.rfft(chunk * window))
        centroid = float((spectrum * freqs).sum() / (spectrum.sum() + 1e-9))
        codes[f, 7] = int(np.clip(np.log(max(centroid, 50.0) / 50.0) / np.log(16000 / 50) * 255, 0, 255))
    return codes


def retimed(codes: np.ndarray, ratio: float, max_frames: int) -> np.ndarray:
    """The codes of the same performance played `ratio` times as fast, for teaching the AR half
    what the caption's tempo means without rendering the piece again: each new frame takes the
    codes of the musical moment it lands on, and keeps an onset flag or drum hit where any of the
    frames it covers had one (so speeding up drops no note starts and slowing down repeats none).
    Loudness and centroid follow musical time, where a rendering's note decays would follow the
    clock: a small error these codes' coarse steps mostly hide."""
    n = min(max_frames, max(1, int(len(codes) / ratio)))
    landed = np.minimum((np.arange(n) * ratio).astype(np.int64), len(codes) - 1)
    first = np.concatenate([[0], landed[:-1] + 1])  # each new frame covers source frames first..landed

    def any_in_span(marks: np.ndarray) -> np.ndarray:
        count = np.concatenate([[0], np.cumsum(marks)])
        return count[landed + 1] - count[first] > 0

    out = codes[landed].copy()
    for k in range(1, 5):
        pitch = out[:, k] % 128
        out[:, k] = pitch + 128 * (any_in_span(codes[:, k] >= 128) & (pitch > 0))
    drum = np.zeros(n, dtype=out.dtype)
    for kind in (3, 2, 1):  # kick over snare over hat, as the renderer marks them
        drum = np.where(any_in_span(codes[:, 5] % 4 == kind), kind, drum)
    out[:, 5] = out[:, 5] // 4 * 4 + drum
    return out


def transposed(codes: np.ndarray, semitones: int) -> np.ndarray:
    """The codes of the same performance `semitones` higher, for teaching the AR half what the
    caption's key means as `retimed` teaches the tempo: the chroma rotated, the four pitches moved
    (their onset flags kept), the spectral centroid moved by the same interval on its log scale."""
    k = semitones % 12
    out = codes.copy()
    chroma = codes[:, 0]
    out[:, 0] = ((chroma << k) | (chroma >> (12 - k))) & 0xFFF
    for c in range(1, 5):
        pitch = codes[:, c] % 128
        moved = np.clip(pitch + semitones, 1, 88)
        out[:, c] = np.where(pitch > 0, moved + codes[:, c] // 128 * 128, codes[:, c])
    step = 255 * np.log(2) / 12 / np.log(16000 / 50)
    out[:, 7] = np.clip(codes[:, 7] + round(semitones * step), 0, 255)
    return out
