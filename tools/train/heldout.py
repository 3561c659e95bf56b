"""The evaluation's 20 captions: four ensembles, five captions each, with the style, meter and key
of held-out pieces (never trained on) and tempos spread over the trained range. Written to
`tests/fixtures/heldout-captions.json`, which the trained model's test reads.

    python tools/train/heldout.py
"""

import json
from pathlib import Path

import numpy as np

import dataset
import synth

ENSEMBLES = ["church organ", "acoustic guitar", "flute with plucked bass", "string quartet"]
OUT = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "heldout-captions.json"


def held_out_pieces():
    """The 20 held-out pieces the captions come from, in caption order, and the generator that
    goes on to draw their tempos, keys and templates."""
    pieces = dataset.read_pieces()
    held = [p for i, p in enumerate(pieces) if i % dataset.HELD_OUT_EVERY == 0]
    rng = np.random.default_rng(2026)
    return [held[i] for i in rng.choice(len(held), size=20, replace=False)], rng


def main():
    chosen, rng = held_out_pieces()
    tempos = np.linspace(64, 156, 20).round().astype(int)
    rng.shuffle(tempos)
    out = []
    for n, piece in enumerate(chosen):
        ensemble = ENSEMBLES[n % 4]
        tonic = int(rng.integers(12))
        template = int(rng.integers(3))
        caption = synth.caption_for(
            piece["style"], ensemble, int(tempos[n]), tonic, piece["mode"], piece["meter"], False, template
        )
        out.append({"caption": caption, "ensemble": ensemble, "tempo": int(tempos[n]), "tonic": tonic, "mode": piece["mode"]})
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(out)} captions -> {OUT}")


if __name__ == "__main__":
    main()
