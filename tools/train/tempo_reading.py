"""Does an AR half read the tempo its caption asks for? Teacher-forced, no sampling: held-out
songs' codes retimed (`codes.retimed`) to each tempo of GRID, scored (c0 cross-entropy, first 8 s)
under captions saying each tempo of GRID, the rest of the caption the song's facts. A model that
reads the tempo scores the codes best under the caption of their own tempo. Written for issue 34
(v3 follows the template captions' tempo at r = 0.27 in the Rust test, v2 was measured at 0.63).

    python tools/train/tempo_reading.py --model v2=DIR --model v3=models/songloom-mini [--songs 12]

Kinds of caption: v2's three templates, and the grammar's descriptions (`captions.compose`, all
fields said, no filler) with ", T BPM" added where the grammar said the tempo as a word.
"""

import argparse
from pathlib import Path

import common  # noqa: F401
import numpy as np
import torch

import captions
import codes as frame_codes
import dataset
import semantic
import shipped
import synth
import tokenizer
from train_semantic import left_padded

FRAMES = 200
GRID = [64, 84, 104, 124, 144]
KINDS = ["template0", "template1", "template2", "grammar-number"]


def c0_ce(model, texts, code_list):
    lm, depth, tok, const = model
    ids, mask = left_padded([tokenizer.prompt_ids(tok, t, "[instrumental]") for t in texts])
    lengths = torch.tensor([len(c) for c in code_list])
    batch = torch.zeros(len(code_list), int(lengths.max()), 8, dtype=torch.long)
    for r, c in enumerate(code_list):
        batch[r, : len(c)] = c
    with torch.no_grad():
        before, _ = semantic.forward(lm, depth, ids, mask, batch, const["code_offset"])
        head = lm.lm_head.weight[const["code_offset"] : const["code_offset"] + 4096]
        lp = torch.log_softmax((before[:, :-1] @ head.T).float(), -1).gather(-1, batch[..., :1]).squeeze(-1)
        return np.array([-lp[r, 1 : lengths[r]].mean().item() for r in range(len(code_list))])  # priming frame skipped


def caption(kind, facts, rng):
    if kind.startswith("template"):
        f = facts
        return synth.caption_for(f["style"], synth.ENSEMBLES[f["ensemble"]][0], f["tempo"], f["tonic"], f["mode"],
                                 f["meter"], f["drums"], int(kind[-1]))
    text = captions.compose(facts, rng, True, False, True, True, False)
    return text if str(facts["tempo"]) in text else text + f", {facts['tempo']} BPM"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", action="append", required=True, help="NAME=DIR, a model folder (q8 AR half)")
    parser.add_argument("--songs", type=int, default=12)
    args = parser.parse_args()
    torch.set_num_threads(2)
    models = {m.split("=")[0]: shipped.load_ar_half(Path(m.split("=", 1)[1])) for m in args.model}
    songs = dataset.render_set(args.songs, 12.0, 2, held_out=True, keep_audio=False)
    res = {m: {k: np.zeros((len(songs), len(GRID), len(GRID))) for k in KINDS} for m in models}
    for si, s in enumerate(songs):
        prime = semantic.priming_frame(torch.from_numpy(s.codes.astype(np.int64)))
        retimed = [frame_codes.retimed(s.codes.astype(np.int64), t / s.tempo, FRAMES) for t in GRID]
        code_list = [torch.cat([prime, torch.from_numpy(c)]) for c in retimed]
        for kind in KINDS:
            texts, codes_in = [], []
            for a in range(len(GRID)):
                for t in GRID:
                    rng = np.random.default_rng(si * 100 + a)  # the same wording for every caption tempo
                    texts.append(caption(kind, dict(captions.facts_of(s), tempo=t), rng))
                    codes_in.append(code_list[a])
            for m, model in models.items():
                res[m][kind][si] = c0_ce(model, texts, codes_in).reshape(len(GRID), len(GRID))
        print(si, s.tempo, texts[-1], flush=True)
    truth = np.arange(len(GRID))
    for m in models:
        for kind in KINDS:
            r = res[m][kind]
            right = np.mean(r.argmin(-1) == truth[None])
            gap = np.mean([r[:, a, b] - r[:, a, a] for a in truth for b in truth if a != b])
            preferred = np.array(GRID)[r.argmin(-1)].ravel()
            corr = np.corrcoef(preferred, np.tile(GRID, len(songs)))[0, 1]
            print(f"{m} {kind:15s} own tempo preferred {right:.2f} (chance {1 / len(GRID):.2f}), "
                  f"CE gap wrong-right {gap * 1000:.1f} mnat, r(preferred, true) {corr:.2f}, "
                  f"mean c0 CE {r[:, truth, truth].mean():.3f}")


if __name__ == "__main__":
    main()
