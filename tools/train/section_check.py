"""What a section check can reach, and what a model reaches: the change of loudness and of
density at each section tag's place (`sections.py`) against the change the tags ask for (the
bands are those of `tests/src/music_checks.rs`, through `tempo_ceiling.band_powers`; the Rust
test `songloom_mini_follows_the_section_tags` measures the same).

For each song and each boundary between two sections: the loudness (RMS, dB) and the density (the
mean number of 24 log-spaced bands within 30 dB of a frame's loudest) of the section after, less
the section before, each section measured away from its edges; the tags' texture levels give the
change asked for. The score is the Pearson correlation, over every boundary of every song, of
the change measured with the change asked for. A generated song's sections are placed at the
asked tempo's quarter notes, as the renderings place them (its meter is the model's to choose).

    python tools/train/section_check.py                  # the synthesizer's renderings
    python tools/train/section_check.py --songs DIR [--generate target/release/songloom --model M]
        # songs made from data/section-songs.json's 6 descriptions and 4-tag lyrics, and with
        # their tags shuffled (the control); --seed-offset K makes them at each seed + K, --steps N
        # at N flow steps (20 by default; 8 measured the same), and --songs DIR DIR ... scores
        # several folders' songs together; the last line ("both") pools the true-tag and the
        # shuffled-tag songs, each against its own tags
    python tools/train/section_check.py --first-tag --songs DIR --generate target/release/songloom --model M
        # the first section alone: one-tag songs, [chorus] against [intro]
"""

import argparse
import json
from pathlib import Path

import numpy as np
import scipy.io.wavfile

import dataset
import sections
import synth
import tempo_ceiling

FLOOR_DB, EDGE_S = 30.0, 0.5


def density(mono: np.ndarray) -> float:
    bands = tempo_ceiling.band_powers(mono)
    top = bands.max(1, keepdims=True)
    sound = top[:, 0] > 1e-10
    if not sound.any():
        return 0.0
    return float((bands > top * 10 ** (-FLOOR_DB / 10)).sum(1)[sound].mean())


def loudness_db(mono: np.ndarray) -> float:
    return float(10 * np.log10(np.mean(mono**2) + 1e-12))


def planned(mono: np.ndarray, kinds: list[str], tempo: float):
    """The sections a song asked for at `tempo` (beats of a quarter note) should have."""
    return sections.plan(kinds, 60.0 / tempo, len(mono) / synth.SAMPLE_RATE)


def boundary_changes(mono: np.ndarray, plan):
    """(asked, loudness change, density change) at each boundary of `plan` ((kind, start s, end s))."""
    measured = []
    for kind, start, end in plan:
        part = mono[int((start + EDGE_S) * synth.SAMPLE_RATE) : int((end - EDGE_S) * synth.SAMPLE_RATE)]
        measured.append((kind, loudness_db(part), density(part)) if len(part) >= tempo_ceiling.FFT * 2 else None)
    out = []
    for before, after in zip(measured, measured[1:]):
        if before and after:
            asked = sections.TEXTURE_LEVEL[after[0]] - sections.TEXTURE_LEVEL[before[0]]
            out.append((asked, after[1] - before[1], after[2] - before[2]))
    return out


def score(changes) -> tuple[float, float]:
    a = np.array(changes, dtype=np.float64)
    return float(np.corrcoef(a[:, 0], a[:, 1])[0, 1]), float(np.corrcoef(a[:, 0], a[:, 2])[0, 1])


def generate(binary: Path, model: Path, specs: list[dict], folder: Path, seed_offset: int = 0, steps: int = 20):
    """Each spec's song from its lyrics and from its shuffled lyrics (`i.wav`, `i-shuffled.wav`),
    22 s on the CPU, as the trained-model tests make songs."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, spec in enumerate(specs):
        for suffix, lyrics in (("", spec["lyrics"]), ("-shuffled", spec["shuffled_lyrics"])):
            make_song(binary, model, spec, lyrics, 22, folder / f"{i}{suffix}.wav", seed_offset, steps)


def make_song(binary: Path, model: Path | None, spec: dict, lyrics: str, seconds: int, out: Path, seed_offset: int = 0,
              steps: int = 20):
    """`spec`'s description with `lyrics`, at its seed (+ `seed_offset`), on the CPU at `steps` flow
    steps, written to `out` (by the binary's embedded model where `model` is None)."""
    import subprocess

    models = ["--model", str(model)] if model else []
    subprocess.run(
        [str(binary), "generate", *models, "--description", spec["description"], "--lyrics", lyrics,
         "--duration", str(seconds), "--seed", str(spec["seed"] + seed_offset), "--steps", str(steps), "--device", "cpu",
         "--out", str(out), "--force", "--no-play"],
        check=True, stdout=subprocess.DEVNULL,
    )


def read_mono(path: Path) -> np.ndarray:
    _, audio = scipy.io.wavfile.read(path)
    return audio.astype(np.float64).mean(1) if audio.ndim == 2 else audio.astype(np.float64)


def first_tag(binary: Path, model: Path, specs: list[dict], folder: Path):
    """The first section alone, where no timing is needed: each description as an 8 s song under
    one tag, `[intro]` and `[chorus]` (the same seed and line), and the chorus's loudness and
    density less the intro's, measured after the first 0.5 s. Every rendering is normalized to
    its own peak, so a song of one tag is no louder for it: density is what the tag should move."""
    folder.mkdir(parents=True, exist_ok=True)
    changes = []
    for i, spec in enumerate(specs):
        measured = {}
        for tag in ("intro", "chorus"):
            out = folder / f"first-{i}-{tag}.wav"
            make_song(binary, model, spec, f"[{tag}]\nhold me close and don't let go", 8, out)
            mono = read_mono(out)[int(EDGE_S * synth.SAMPLE_RATE) :]
            measured[tag] = (loudness_db(mono), density(mono))
        changes.append([after - before for after, before in zip(measured["chorus"], measured["intro"])])
    a = np.array(changes)
    print(f"chorus less intro, one tag a song: loudness {a[:, 0].mean():.1f} dB (sd {a[:, 0].std():.1f}), "
          f"density {a[:, 1].mean():.1f} bands (sd {a[:, 1].std():.1f}), {len(a)} descriptions")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--songs", type=Path, nargs="+", help="folders of i.wav and i-shuffled.wav made from --specs")
    parser.add_argument("--seed-offset", type=int, default=0, help="with --generate: make each song at its seed + this")
    parser.add_argument("--specs", type=Path, default=Path(__file__).parent / "data" / "section-songs.json")
    parser.add_argument("--generate", type=Path, help="make the songs first with this songloom binary")
    parser.add_argument("--model", type=Path, help="the model --generate makes them with")
    parser.add_argument("--first-tag", action="store_true", help="with --generate: songs of one tag instead")
    parser.add_argument("--steps", type=int, default=20, help="with --generate: the flow steps of each song")
    args = parser.parse_args()
    if args.generate and not (args.songs and len(args.songs) == 1 and args.model):
        parser.error("--generate needs one --songs folder (where the songs go) and --model (the model that makes them)")
    if args.first_tag:
        if not args.generate:
            parser.error("--first-tag needs --generate, --songs and --model")
        first_tag(args.generate, args.model, json.loads(args.specs.read_text()), args.songs[0])
        return
    if args.songs:
        specs = json.loads(args.specs.read_text())
        if args.generate:
            generate(args.generate, args.model, specs, args.songs[0], args.seed_offset, args.steps)
        for folder in args.songs:
            if not any((folder / f"{i}.wav").exists() for i in range(len(specs))):
                parser.error(f"--songs {folder}: no 0.wav ... {len(specs) - 1}.wav there (make them with --generate)")
        runs = [("the true tags, scored against them", "", "sections"),
                ("shuffled tags, scored against the true ones (the control)", "-shuffled", "sections"),
                ("shuffled tags, scored against the shuffled ones", "-shuffled", "shuffled_sections")]
        by_run = {}
        for title, suffix, against in runs:
            changes = []
            for folder in args.songs:
                for i, spec in enumerate(specs):
                    path = folder / f"{i}{suffix}.wav"
                    if not path.exists():
                        continue
                    mono = read_mono(path)
                    changes += boundary_changes(mono, planned(mono, spec[against], spec["tempo"]))
            by_run[against, suffix] = changes
            if len(changes) > 2:
                loud, dense = score(changes)
                print(f"{title}: loudness r = {loud:.2f}, density r = {dense:.2f}, {len(changes)} boundaries")
        # The shuffled songs against their own tags are a second draw of the same measure, on other
        # tag orders: with 6 songs a folder one draw moves r by up to 0.4, so both together judge better.
        both = by_run["sections", ""] + by_run["shuffled_sections", "-shuffled"]
        if len(both) > 2:
            loud, dense = score(both)
            print(f"both, each against its own tags: loudness r = {loud:.2f}, density r = {dense:.2f}, "
                  f"{len(both)} boundaries")
        return
    # The renderings: held-out pieces, four random tags each.
    pieces = [p for i, p in enumerate(dataset.read_pieces()) if i % dataset.HELD_OUT_EVERY == 0]
    rng = np.random.default_rng(0)
    changes = []
    for n, piece in enumerate(pieces[:40]):
        kinds = [sections.KINDS[i] for i in rng.integers(len(sections.KINDS), size=4)]
        r = synth.render(piece, seed=n, max_seconds=22.0, params=dict(sections=kinds, transpose=0))
        changes += boundary_changes(r.audio.mean(0).astype(np.float64), r.sections)
    loud, dense = score(changes)
    print(f"renderings: loudness r = {loud:.2f}, density r = {dense:.2f}, {len(changes)} boundaries")


if __name__ == "__main__":
    main()
