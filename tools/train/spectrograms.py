"""The README's pictures: spectrograms of three songs by the embedded model from held-out captions,
and of a song with section tags, each section's start marked where its tag asks for it, made with
the release binary.

    cargo build --release -p songloom && python tools/train/spectrograms.py [--binary B] [--model M]
"""

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import matplotlib
import numpy as np
import scipy.io.wavfile

import section_check
import sections
import synth

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PICKS = [0, 1, 3]  # an organ, a guitar and a string quartet caption
SECTION_PICKS = [0, 3]


def generate(arguments, wav: Path, binary: Path, model: Path | None, home: str):
    extra = ["--model", str(model)] if model else []
    subprocess.run(
        [str(binary), "generate"] + arguments + extra + ["--device", "cpu", "--no-play", "--out", str(wav)],
        check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": home},
    )
    rate, audio = scipy.io.wavfile.read(wav)
    return rate, audio.astype(np.float32).mean(axis=1)


def draw(ax, mono, rate, title: str):
    ax.specgram(mono, NFFT=2048, Fs=rate, noverlap=1536, cmap="magma", vmin=-120)
    ax.set_ylim(0, 6000)
    ax.set_title(title, fontsize=9)
    ax.set_ylabel("Hz")


def sections_figure(binary: Path, model: Path | None):
    """Two songs of `data/section-songs.json` (22 s, 20 steps, as the section test makes them), the
    start of each tag's section marked where the tags ask for it."""
    songs = json.loads((ROOT / "tools/train/data/section-songs.json").read_text())
    fig, axes = plt.subplots(len(SECTION_PICKS), 1, figsize=(10, 2.6 * len(SECTION_PICKS)))
    with tempfile.TemporaryDirectory() as tmp:
        for ax, index in zip(axes, SECTION_PICKS):
            song = songs[index]
            wav = Path(tmp) / f"{index}.wav"
            section_check.make_song(binary, model, song, song["lyrics"], 22, wav)
            mono = section_check.read_mono(wav)
            draw(ax, mono, synth.SAMPLE_RATE, song["description"])
            for kind, start, _ in section_check.planned(mono, sections.kinds_in(song["lyrics"]), song["tempo"]):
                ax.axvline(start, color="white", linewidth=1, linestyle="--")
                ax.text(start + 0.2, 5400, kind, color="white", fontsize=9)
    axes[-1].set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(ROOT / "docs/songloom-mini-sections.png", dpi=80)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", type=Path, default=ROOT / "target/release/songloom")
    parser.add_argument("--model", type=Path, help="a model folder instead of the binary's embedded one")
    args = parser.parse_args()
    sections_figure(args.binary, args.model)
    captions = json.loads((ROOT / "tests/fixtures/heldout-captions.json").read_text())
    fig, axes = plt.subplots(len(PICKS), 1, figsize=(10, 7.5))
    with tempfile.TemporaryDirectory() as tmp:
        for ax, index in zip(axes, PICKS):
            caption = captions[index]["caption"]
            arguments = ["--prompt", caption, "--lyrics", "[instrumental]", "--duration", "8", "--seed", str(index)]
            rate, mono = generate(arguments, Path(tmp) / f"{index}.wav", args.binary, args.model, tmp)
            draw(ax, mono, rate, caption)
    axes[-1].set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(ROOT / "docs/songloom-mini-spectrograms.png", dpi=80)


if __name__ == "__main__":
    main()
