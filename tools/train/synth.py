"""The project's synthesizer: renders a piece's note list (`scores.py`) to 44.1 kHz stereo with one
of a handful of timbres, at a chosen tempo and transposition, and writes what each 25 Hz frame
holds (the codes of `codes.py`) and a caption from the piece's metadata.

Everything is numpy and seeded: the same piece, seed and index render the same samples anywhere,
so the GPU machine renders the training set itself and only the note lists travel.
"""

import functools
import math
from dataclasses import dataclass, field

import numpy as np

import sections

SAMPLE_RATE = 44100
FRAME_RATE = 25
FRAME_SAMPLES = SAMPLE_RATE // FRAME_RATE  # 1764
NOTE_NAMES = ["C", "C#", "D", "E-", "E", "F", "F#", "G", "A-", "A", "B-", "B"]
SPOKEN_NAMES = ["C", "C sharp", "D", "E flat", "E", "F", "F sharp", "G", "A flat", "A", "B flat", "B"]

# Timbres: the caption's word for each, and how they sound (see `voice`).
TIMBRES = ["piano", "organ", "strings", "guitar", "flute", "clarinet", "bass", "harp"]
PIANO, ORGAN, STRINGS, GUITAR, FLUTE, CLARINET, BASS, HARP = range(len(TIMBRES))

# Ensembles: (caption phrase, timbre of the top voice, timbre of the others, bass timbre or None).
ENSEMBLES = [
    ("solo piano", PIANO, PIANO, None),
    ("church organ", ORGAN, ORGAN, None),
    ("string quartet", STRINGS, STRINGS, None),
    ("acoustic guitar", GUITAR, GUITAR, None),
    ("flute and piano", FLUTE, PIANO, None),
    ("clarinet and strings", CLARINET, STRINGS, None),
    ("harp", HARP, HARP, None),
    ("flute with plucked bass", FLUTE, GUITAR, BASS),
    ("piano with bass", PIANO, PIANO, BASS),
    ("clarinet and guitar", CLARINET, GUITAR, None),
]


@dataclass
class Rendering:
    audio: np.ndarray  # [2, samples] float32 in [-1, 1]
    caption: str
    frames: int
    # Per frame: sounding pitches (sorted), onset pitches, top/other timbre, drum hit kind.
    sounding: list = field(default_factory=list)
    onsets: list = field(default_factory=list)
    drums: np.ndarray | None = None
    beat_phase: np.ndarray | None = None
    top_timbre: int = 0
    other_timbre: int = 0
    tempo: int = 120
    tonic: int = 0  # pitch class of the key's tonic, after transposition
    mode: str = "major"
    # The rest of what a description can say (captions.describe).
    style: str = "folk song"
    ensemble: int = 0  # index into ENSEMBLES
    meter: str = "4/4"
    drums_on: bool = False
    # (kind, start s, end s) of each section where the lyrics' tags gave the song sections (sections.py).
    sections: list = field(default_factory=list)


def pitch_class(name: str) -> int:
    name = name.replace("-", "b").replace("♭", "b")
    base = {"C": 0, "D": 2, "E": 4, "F": 5, "G": 7, "A": 9, "B": 11}[name[0].upper()]
    return (base + name.count("#") - name.count("b")) % 12


@functools.lru_cache(maxsize=4096)
def voice(timbre: int, midi: int, seconds: float) -> np.ndarray:
    """One note's samples, release included, peak about 1. Notes repeat, so they are cached;
    the vibrato's phase and the breath noise follow from the pitch."""
    rng = np.random.default_rng(timbre * 1000 + midi)
    freq = 440.0 * 2.0 ** ((midi - 69.0) / 12.0)
    release = {PIANO: 0.25, ORGAN: 0.06, STRINGS: 0.18, GUITAR: 0.3, FLUTE: 0.08, CLARINET: 0.08, BASS: 0.15, HARP: 0.4}[timbre]
    n = int((seconds + release) * SAMPLE_RATE)
    t = np.arange(n, dtype=np.float64) / SAMPLE_RATE
    held = np.clip((seconds + release - t) / release, 0.0, 1.0)  # linear release after the note ends
    vibrato = 0.0
    if timbre in (STRINGS, FLUTE, CLARINET):
        depth = {STRINGS: 0.004, FLUTE: 0.003, CLARINET: 0.0015}[timbre]
        vibrato = depth * np.sin(2 * math.pi * 5.5 * t + rng.uniform(0, 2 * math.pi)) * np.clip(t / 0.3, 0, 1)
    phase = 2 * math.pi * freq * (t + np.cumsum(vibrato) / SAMPLE_RATE)
    out = np.zeros(n)
    nyquist = SAMPLE_RATE / 2 * 0.9
    if timbre in (PIANO, GUITAR, HARP, BASS):
        # Struck or plucked: bright onset, upper partials die faster.
        decay = {PIANO: 1.6, GUITAR: 2.2, HARP: 1.2, BASS: 2.5}[timbre]
        partials = {PIANO: 10, GUITAR: 12, HARP: 6, BASS: 6}[timbre]
        slope = {PIANO: 1.4, GUITAR: 1.1, HARP: 1.8, BASS: 1.6}[timbre]
        for k in range(1, partials + 1):
            if k * freq > nyquist:
                break
            inharmonic = k * math.sqrt(1 + 0.0004 * k * k) if timbre == PIANO else k
            out += np.sin(phase * inharmonic) * np.exp(-t * decay * (1 + 0.6 * k) * (freq / 440) ** 0.3) / k**slope
        attack = np.clip(t / 0.004, 0, 1)
    else:
        if timbre == ORGAN:
            partials = {1: 1.0, 2: 0.6, 3: 0.35, 4: 0.3, 6: 0.15, 8: 0.12}
            attack_s = 0.02
        elif timbre == STRINGS:
            partials = {k: 1.0 / k for k in range(1, 14)}
            attack_s = 0.09
        elif timbre == FLUTE:
            partials = {1: 1.0, 2: 0.22, 3: 0.07}
            attack_s = 0.05
        else:  # clarinet: odd partials
            partials = {1: 1.0, 3: 0.5, 5: 0.3, 7: 0.15, 9: 0.08, 2: 0.05}
            attack_s = 0.04
        for k, amp in partials.items():
            if k * freq > nyquist:
                continue
            out += amp * np.sin(phase * k)
        if timbre == FLUTE:
            out += 0.04 * rng.standard_normal(n) * np.exp(-t / 0.08)
        attack = np.clip(t / attack_s, 0, 1)
    out *= attack * held
    peak = np.max(np.abs(out)) or 1.0
    return (out / peak).astype(np.float32)


def drum(kind: int, rng: np.random.Generator) -> np.ndarray:
    """1 kick, 2 snare, 3 hat."""
    n = int(0.25 * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    if kind == 1:
        freq = 50 + 70 * np.exp(-t / 0.03)
        hit = np.sin(2 * math.pi * np.cumsum(freq) / SAMPLE_RATE) * np.exp(-t / 0.12)
    elif kind == 2:
        hit = (0.7 * rng.standard_normal(n) + 0.5 * np.sin(2 * math.pi * 185 * t)) * np.exp(-t / 0.05)
    else:
        noise = rng.standard_normal(n)
        hit = np.diff(noise, prepend=0.0) * 0.5 * np.exp(-t / 0.015)
    return hit.astype(np.float32)


def accompaniment(melody: list, piece: dict, transpose: int, bar_seconds: float, timbre: int, bass_timbre) -> list:
    """Chords under a lone melody: for each bar the triad of the key (I, IV, V, vi; in minor i, iv,
    V, VI) that holds most of the bar's melody, as a held chord and a bass note on its root."""
    tonic = (pitch_class(piece["tonic"]) + transpose) % 12
    minor = piece["mode"] == "minor"
    degrees = [(0, 3, 7), (5, 8, 0), (7, 11, 2), (8, 0, 3)] if minor else [(0, 4, 7), (5, 9, 0), (7, 11, 2), (9, 0, 4)]
    triads = [tuple((tonic + d) % 12 for d in chord) for chord in degrees]
    last = max((n[0] + n[1] for n in melody), default=0.0)
    out = []
    bar = 0.0
    while bar < last:
        weight = [0.0] * len(triads)
        for start, seconds, pitch, *_ in melody:
            overlap = min(start + seconds, bar + bar_seconds) - max(start, bar)
            if overlap > 0:
                for i, triad in enumerate(triads):
                    weight[i] += overlap * (pitch % 12 in triad)
        chord = triads[max(range(len(triads)), key=lambda i: (weight[i], -i))]
        length = bar_seconds * 0.95
        for pc in chord:
            out.append((bar, length, 55 + (pc - 55) % 12, timbre, 0.35, 0.3))
        out.append((bar, length, 36 + (chord[0] - 36) % 12, bass_timbre if bass_timbre is not None else timbre, 0.5, -0.3))
        bar += bar_seconds
    return out


def caption_for(style: str, ensemble: str, tempo: int, tonic: int, mode: str, meter: str, drums: bool, template: int) -> str:
    key = f"{SPOKEN_NAMES[tonic]} {mode}"
    with_drums = " with drums" if drums else ""
    if template == 0:
        return f"{style}, {ensemble}{with_drums}, {key}, {tempo} BPM, {meter} time"
    if template == 1:
        return f"a {style} played on {ensemble}{with_drums} in {key} at {tempo} BPM"
    return f"{ensemble}{with_drums}. {style} in {key}, {meter}, tempo {tempo} BPM"


def render(piece: dict, seed: int, max_seconds: float = 24.0, params: dict | None = None) -> Rendering:
    """Renders a piece with random (seeded) tempo, transposition, ensemble and drums; `params`
    fixes any of them (`tempo`, `transpose`, `ensemble`, `drums`, `template`), and `sections` (a
    list of section kinds, `sections.py`) gives the piece a texture a section."""
    rng = np.random.default_rng(seed)
    params = dict(params or {})
    tempo = int(params.get("tempo", rng.integers(60, 161)))
    transpose = int(params.get("transpose", rng.integers(-5, 7)))
    ensemble_index = int(params.get("ensemble", rng.integers(len(ENSEMBLES))))
    melody_only = len(piece["voices"]) == 1
    drums_on = bool(params.get("drums", melody_only and rng.random() < 0.6 or rng.random() < 0.15))
    template = int(params.get("template", rng.integers(3)))
    phrase, top_timbre, other_timbre, bass_timbre = ENSEMBLES[ensemble_index]
    seconds_per_quarter = 60.0 / tempo
    numerator, denominator = (int(x) for x in piece["meter"].split("/")) if "/" in piece["meter"] else (4, 4)
    beat_quarters = 4.0 / denominator * (3 if denominator == 8 and numerator % 3 == 0 else 1)
    bar_quarters = numerator * 4.0 / denominator

    notes = []  # (start s, length s, midi, timbre, gain, pan)
    melody = []  # per note: whether it is the top voice's
    voices = piece["voices"]
    # Some scores open with bars of rest; the music starts at the first note.
    first_onset = min(part[0][0] for part in voices)
    for index, part in enumerate(voices):
        timbre = top_timbre if index == 0 else other_timbre
        if bass_timbre is not None and index == len(voices) - 1 and index > 0:
            timbre = bass_timbre
        pan = 0.0 if len(voices) == 1 else -0.6 + 1.2 * index / (len(voices) - 1)
        gain = 1.0 if index == 0 else 0.6
        for onset, duration, midi in part:
            start = (onset - first_onset) * seconds_per_quarter
            if start >= max_seconds:
                continue
            pitch = midi + transpose
            if timbre == BASS:
                while pitch > 52:
                    pitch -= 12
            pitch = min(max(pitch, 28), 100)
            notes.append((start, min(duration * seconds_per_quarter, max_seconds - start), pitch, timbre, gain, pan))
            melody.append(index == 0)
    kinds = params.get("sections")
    # Only a lone melody draws whether it gets chords, so a piece of several voices keeps its draws.
    chords = melody_only and (bool(params.get("chords", rng.random() < 0.75)) or bool(kinds))
    if chords:
        chord_notes = accompaniment(notes, piece, transpose, bar_quarters * seconds_per_quarter, other_timbre, bass_timbre)
        notes += chord_notes
        melody += [False] * len(chord_notes)
    length = min(max_seconds, max((n[0] + n[1] for n in notes), default=1.0) + 0.5)
    plan = sections.plan(kinds, seconds_per_quarter, length) if kinds else []

    def section_at(t: float):
        for kind, start, end in plan:
            if start <= t < end:
                return sections.texture(kind, (t - start) / max(end - start, 1e-9))
        return None

    if plan:
        textured = []
        for note, is_melody in zip(notes, melody):
            melody_on, others_on, gain, _, doubled = section_at(note[0])
            if melody_on if is_melody else others_on:
                textured.append(note[:4] + (note[4] * gain,) + note[5:])
            if is_melody and doubled:
                textured.append((note[0], note[1], min(note[2] + 12, 100), note[3], note[4] * gain * 0.5, note[5]))
        notes = textured
    frames = max(1, int(length * FRAME_RATE))
    samples = frames * FRAME_SAMPLES
    audio = np.zeros((2, samples + SAMPLE_RATE), dtype=np.float32)
    sounding = [set() for _ in range(frames)]
    onsets = [set() for _ in range(frames)]
    for start, seconds, pitch, timbre, gain, pan in notes:
        samples_of = voice(timbre, int(pitch), round(seconds, 2)) * (gain * 0.25)
        first = int(start * SAMPLE_RATE)
        end = min(first + len(samples_of), audio.shape[1])
        left, right = math.cos((pan + 1) * math.pi / 4), math.sin((pan + 1) * math.pi / 4)
        audio[0, first:end] += samples_of[: end - first] * left
        audio[1, first:end] += samples_of[: end - first] * right
        first_frame = int(start * FRAME_RATE)
        last_frame = min(frames, max(first_frame + 1, int((start + seconds) * FRAME_RATE)))
        for f in range(first_frame, last_frame):
            sounding[f].add(pitch)
        if first_frame < frames:
            onsets[first_frame].add(pitch)
    drum_kind = np.zeros(frames, dtype=np.int64)
    beat_phase = np.zeros(frames, dtype=np.int64)
    quarter_frames = seconds_per_quarter * FRAME_RATE
    for f in range(frames):
        beat_phase[f] = int(((f / quarter_frames) % beat_quarters) / beat_quarters * 4) % 4
    if drums_on:
        beat = 0.0
        while beat * seconds_per_quarter < length:
            in_bar = beat % bar_quarters
            kind = 1 if in_bar == 0 else (2 if abs(in_bar - bar_quarters / 2) < 1e-6 and numerator % 2 == 0 else 3)
            hit = drum(kind, rng) * (0.35 if kind != 3 else 0.15)
            if plan and not (section_at(beat * seconds_per_quarter) or (0, 0, 0, False, False))[3]:
                beat += beat_quarters
                continue
            first = int(beat * seconds_per_quarter * SAMPLE_RATE)
            end = min(first + len(hit), audio.shape[1])
            audio[:, first:end] += hit[: end - first]
            f = int(beat * seconds_per_quarter * FRAME_RATE)
            if f < frames:
                drum_kind[f] = kind if drum_kind[f] == 0 else min(drum_kind[f], kind)  # kick over snare over hat
            beat += beat_quarters
    audio = audio[:, :samples]
    peak = float(np.max(np.abs(audio))) or 1.0
    audio *= 0.9 / peak * float(rng.uniform(0.5, 1.0))
    tonic = (pitch_class(piece["tonic"]) + transpose) % 12
    caption = caption_for(piece["style"], phrase, tempo, tonic, piece["mode"], piece["meter"], drums_on, template)
    return Rendering(
        audio=audio,
        caption=caption,
        frames=frames,
        sounding=[sorted(s) for s in sounding],
        onsets=[sorted(s) for s in onsets],
        drums=drum_kind,
        beat_phase=beat_phase,
        top_timbre=top_timbre,
        other_timbre=other_timbre if bass_timbre is None else bass_timbre,
        tempo=tempo,
        tonic=tonic,
        mode=piece["mode"],
        style=piece["style"],
        ensemble=ensemble_index,
        meter=piece["meter"],
        drums_on=drums_on,
        sections=plan,
    )
