"""Turns public-domain scores from the corpus that ships with music21 into compact note lists:
one JSON line per piece with its meter, key and up to four voices of (onset, duration, MIDI pitch)
in quarter notes. The renderer (`synth.py`) makes audio from these on the GPU machine, so only
this small file travels.

    python tools/train/scores.py --out tools/train/data/notes.jsonl.gz
"""

import argparse
import gzip
import json
import multiprocessing
import sys
import warnings
from pathlib import Path

# Where each piece comes from and what the captions call it.
SOURCES = {
    "bach": "chorale",
    "ryansMammoth": "fiddle tune",
    "oneills1850": "irish folk tune",
    "essenFolksong": "folk song",
    "nottingham-dataset": "folk dance",
    "airdsAirs": "scottish air",
    "miscFolk": "folk tune",
    "palestrina": "renaissance motet",
}
MAX_QUARTERS = 128.0
MAX_VOICES = 4
PALESTRINA_LIMIT = 150


def source_of(path: str) -> str | None:
    for name in SOURCES:
        if f"/corpus/{name}/" in path:
            return name
    return None


def voices_of(score) -> list[list[list[float]]]:
    """Up to four voices, highest part first, each a list of [onset, duration, midi]; chords in one
    part keep every pitch (they become several notes)."""
    voices = []
    for part in score.parts[:MAX_VOICES] if hasattr(score, "parts") and len(score.parts) else [score]:
        notes = []
        for element in part.flatten().notes:
            onset = float(element.offset)
            if onset >= MAX_QUARTERS:
                break
            duration = float(element.quarterLength)
            if duration <= 0:
                continue
            for pitch in element.pitches:
                notes.append([round(onset, 4), round(duration, 4), int(pitch.midi)])
        if notes:
            voices.append(notes)
    return voices


def meter_of(score) -> str:
    signatures = score.flatten().getElementsByClass("TimeSignature")
    return signatures[0].ratioString if signatures else "4/4"


def describe(score, source: str, ident: str) -> dict | None:
    voices = voices_of(score)
    if not voices or sum(len(v) for v in voices) < 16:
        return None
    key = score.analyze("key")
    title = (score.metadata.title if score.metadata and score.metadata.title else "") or ""
    return {
        "id": ident,
        "source": source,
        "style": SOURCES[source],
        "title": title[:80],
        "meter": meter_of(score),
        "tonic": key.tonic.name,
        "mode": key.mode,
        "voices": voices,
    }


def read(path: str) -> list[dict]:
    from music21 import converter, stream

    warnings.simplefilter("ignore")
    source = source_of(path)
    stem = Path(path).stem
    try:
        parsed = converter.parse(path)
    except Exception as e:  # a score music21 cannot read is skipped, and said
        print(f"skipped {path}: {e}", file=sys.stderr)
        return []
    pieces = list(parsed.scores) if isinstance(parsed, stream.Opus) else [parsed]
    out = []
    for i, score in enumerate(pieces):
        try:
            piece = describe(score, source, f"{source}/{stem}/{i}")
        except Exception as e:
            print(f"skipped {path}#{i}: {e}", file=sys.stderr)
            continue
        if piece:
            out.append(piece)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    from music21 import corpus

    paths = sorted(str(p) for p in corpus.getCorePaths() if source_of(str(p)))
    palestrina = [p for p in paths if "/palestrina/" in p][:PALESTRINA_LIMIT]
    paths = [p for p in paths if "/palestrina/" not in p] + palestrina
    args.out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with multiprocessing.Pool(args.jobs) as pool, gzip.open(args.out, "wt") as out:
        for pieces in pool.imap(read, paths, chunksize=4):
            for piece in pieces:
                out.write(json.dumps(piece, separators=(",", ":")) + "\n")
                count += 1
    print(f"{count} pieces from {len(paths)} files -> {args.out}")


if __name__ == "__main__":
    main()
