"""The README's picture: spectrograms of three songs by the embedded model from held-out captions,
made with the release binary.

    cargo build --release -p songloom && python tools/train/spectrograms.py
"""

import json
import subprocess
import tempfile
from pathlib import Path

import matplotlib
import numpy as np
import scipy.io.wavfile

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PICKS = [0, 1, 3]  # an organ, a guitar and a string quartet caption


def main():
    captions = json.loads((ROOT / "tests/fixtures/heldout-captions.json").read_text())
    fig, axes = plt.subplots(len(PICKS), 1, figsize=(10, 7.5))
    with tempfile.TemporaryDirectory() as tmp:
        for ax, index in zip(axes, PICKS):
            caption = captions[index]["caption"]
            wav = Path(tmp) / f"{index}.wav"
            subprocess.run(
                [str(ROOT / "target/release/songloom"), "generate", "--prompt", caption, "--lyrics", "[instrumental]"]
                + ["--duration", "8", "--seed", str(index), "--device", "cpu", "--no-play", "--out", str(wav)],
                check=True,
                env={"PATH": "/usr/bin:/bin", "HOME": tmp},
            )
            rate, audio = scipy.io.wavfile.read(wav)
            mono = audio.astype(np.float32).mean(axis=1)
            ax.specgram(mono, NFFT=2048, Fs=rate, noverlap=1536, cmap="magma", vmin=-120)
            ax.set_ylim(0, 6000)
            ax.set_title(caption, fontsize=9)
            ax.set_ylabel("Hz")
    axes[-1].set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(ROOT / "docs/songloom-mini-spectrograms.png", dpi=80)


if __name__ == "__main__":
    main()
