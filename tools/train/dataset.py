"""The training set: every piece of the note lists rendered once (seeded by its index), with its
frame codes and caption. Pieces whose index is a multiple of HELD_OUT_EVERY are held out of
training; the evaluation's captions come from their renderings."""

import gzip
import json
import multiprocessing
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import codes
import sections
import synth

HELD_OUT_EVERY = 50
SECTIONS_STREAM = 34  # the random stream, beside a song's seed, that chooses its lyrics and sections
# SONGLOOM_NOTES names another note list (the smoke test uses a few pieces).
DEFAULT_NOTES = Path(os.environ.get("SONGLOOM_NOTES", Path(__file__).parent / "data" / "notes.jsonl.gz"))


@dataclass
class Song:
    index: int
    caption: str
    audio: np.ndarray | None  # [2, samples] float16, None where only the codes were wanted
    codes: np.ndarray  # [frames, 8] int16
    tempo: int
    tonic: int
    mode: str
    style: str = "folk song"
    ensemble: int = 0
    meter: str = "4/4"
    drums: bool = False
    # The lyrics whose structure tags gave the rendering its sections (sections.py); None for a
    # song in one texture, which any lyrics without section tags describe.
    lyrics: str | None = None
    section_starts: list | None = None  # each section's first frame, where the song has sections


def read_pieces(path: Path = DEFAULT_NOTES) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def render_one(job) -> Song:
    index, piece, max_seconds, keep_audio, seed, sectioned_share = job
    lyrics, params = None, None
    if sectioned_share > 0:
        # Its own stream: the song's other draws stay those of the same seed without sections.
        rng = np.random.default_rng([seed, SECTIONS_STREAM])
        if rng.random() < sectioned_share:
            lyrics, kinds = sections.lyrics_for(rng, sections.lyric_words())
            params = dict(sections=kinds)
    r = synth.render(piece, seed=seed, max_seconds=max_seconds, params=params)
    audio = r.audio.astype(np.float16) if keep_audio else None
    frame_codes = codes.frame_codes(r).astype(np.int16)
    # The frame a section's first notes sound in, as synth places them.
    starts = [int(start * synth.FRAME_RATE) for _, start, _ in r.sections] if r.sections else None
    return Song(
        index, r.caption, audio, frame_codes, r.tempo, r.tonic, r.mode, r.style, r.ensemble, r.meter, r.drums_on, lyrics, starts
    )


def render_set(
    limit: int,
    max_seconds: float,
    jobs: int,
    held_out: bool = False,
    keep_audio: bool = True,
    path: Path = DEFAULT_NOTES,
    seed_offset: int = 0,
    sectioned_share: float = 0.0,
) -> list[Song]:
    """Each piece rendered with seed index + seed_offset (another offset: other tempos,
    transpositions, ensembles and drums for the same pieces); `sectioned_share` of them with
    lyrics whose tags give them sections."""
    pieces = read_pieces(path)
    chosen = [
        (i, p, max_seconds, keep_audio, i + seed_offset, sectioned_share)
        for i, p in enumerate(pieces)
        if (i % HELD_OUT_EVERY == 0) == held_out
    ]
    # Sources in turn (the folk songs far outnumber the chorales), each in its own order.
    rank, seen = {}, {}
    for i, p, *_ in chosen:
        rank[i] = seen.get(p["source"], 0)
        seen[p["source"]] = rank[i] + 1
    chosen = sorted(chosen, key=lambda job: (rank[job[0]], job[0]))[:limit]
    with multiprocessing.Pool(jobs) as pool:
        return pool.map(render_one, chosen, chunksize=8)
