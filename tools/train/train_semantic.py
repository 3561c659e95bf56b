"""Stage (c): the LM and the depth decoder on (caption, lyrics tags) -> frame codes, teacher-forced,
with the caption replaced by <|audio_cfg|> one time in ten (the reference's unconditional row), for
a wall-clock budget; resumes from its checkpoint. Half the songs of a batch are retimed to another
tempo (`codes.retimed`, the caption's BPM changed with them): each piece is rendered at one tempo,
and without this the LM sees too few tempos of a piece to learn what the number means (v1 did not).

    python tools/train/train_semantic.py --work runs/semantic --minutes 7
"""

import time
from pathlib import Path

import common  # noqa: F401
import numpy as np
import torch

import codes as frame_codes
import dataset
import semantic
import tokenizer
from common import Log, Schedule, device, jobs, load, optimize, resume, save, stage_arguments

UNCONDITIONAL_SHARE = 0.1
RETIMED_SHARE = 0.5
TEMPOS = (60, 160)  # the renderer's range
MAX_FRAMES = 600  # 24 s, the renderings' length


def left_padded(prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompts as one batch of ids, left-padded, and the padding mask."""
    width = max(len(p) for p in prompts)
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    mask = torch.zeros(len(prompts), width, dtype=torch.long)
    for row, p in enumerate(prompts):
        ids[row, width - len(p) :] = torch.tensor(p)
        mask[row, width - len(p) :] = 1
    return ids, mask


class Batches:
    """Songs as (prompt ids, codes with the priming frame first), batched with prompts left-padded."""

    def __init__(self, songs, tok, constants, dev, seed=0):
        self.rng = np.random.default_rng(seed)
        self.tok, self.constants, self.dev = tok, constants, dev
        self.songs = songs
        self.codes = [
            torch.cat([semantic.priming_frame(c), c]) for c in (torch.from_numpy(s.codes.astype(np.int64)) for s in songs)
        ]

    def prompt(self, caption: str, unconditional: bool) -> list[int]:
        lyrics = tokenizer.LYRICS[self.rng.integers(len(tokenizer.LYRICS))]
        ids = tokenizer.prompt_ids(self.tok, caption, lyrics)
        if unconditional:
            ids = ids[:1] + [self.constants["audio_cfg_id"]] * (len(ids) - 3) + ids[-2:]
        return ids

    def make(self, chosen, unconditional_share=UNCONDITIONAL_SHARE, retimed_share=0.0):
        captions, codes = [], []
        for i in chosen:
            caption, song_codes = self.songs[i].caption, self.codes[i]
            if self.rng.random() < retimed_share:
                caption, song_codes = self.retimed(i)
            captions.append(caption)
            codes.append(song_codes)
        prompts = [self.prompt(c, self.rng.random() < unconditional_share) for c in captions]
        ids, mask = left_padded(prompts)
        lengths = torch.tensor([len(c) for c in codes])
        batch = torch.zeros(len(chosen), int(lengths.max()), 8, dtype=torch.long)
        for row, c in enumerate(codes):
            batch[row, : lengths[row]] = c
        return ids.to(self.dev), mask.to(self.dev), batch.to(self.dev), lengths.to(self.dev)

    def retimed(self, i):
        """Song i at a random other tempo (at most twice or half its own): its caption and codes."""
        song = self.songs[i]
        tempo = int(self.rng.integers(max(TEMPOS[0], song.tempo // 2), min(TEMPOS[1], song.tempo * 2) + 1))
        caption = song.caption.replace(f"{song.tempo} BPM", f"{tempo} BPM")
        codes = frame_codes.retimed(self.codes[i][1:].numpy(), tempo / song.tempo, MAX_FRAMES)
        codes = torch.from_numpy(codes)
        return caption, torch.cat([self.codes[i][:1], codes])

    def sample(self, batch):
        return self.make(self.rng.integers(len(self.songs), size=batch), retimed_share=RETIMED_SHARE)


def main():
    parser = stage_arguments(songs=8000, batch=32)
    parser.add_argument("--init", type=Path, help="weights.pt to start from (an earlier round's)")
    args = parser.parse_args()
    dev = device()
    log = Log(args.work / "log.jsonl")
    began = time.time()
    tok, constants, vocab_size = tokenizer.build(args.work)
    songs = dataset.render_set(args.songs, 24.0, jobs(), keep_audio=False)
    held = dataset.render_set(32, 24.0, jobs(), held_out=True, keep_audio=False)
    log(
        stage="semantic",
        songs=len(songs),
        frames=int(sum(len(s.codes) for s in songs)),
        vocab=vocab_size,
        render_s=round(time.time() - began, 1),
    )
    offset, end_id = constants["code_offset"], constants["audio_end_id"]

    lm, depth = semantic.build(vocab_size)
    lm, depth = lm.to(dev), depth.to(dev)
    params = list(lm.parameters()) + list(depth.parameters())
    optimizer = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.95), weight_decay=0.01)
    if args.init:
        init = load(args.init)
        lm.load_state_dict({k: v.float() for k, v in init["lm"].items()})
        depth.load_state_dict({k: v.float() for k, v in init["depth"].items()})
        log(init=str(args.init))
    step = resume((args.state or args.work) / "checkpoint.pt", optimizer, log, lm=lm, depth=depth)
    batches = Batches(songs, tok, constants, dev, seed=step)
    held_batches = Batches(held, tok, constants, dev, seed=1)
    autocast = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")
    deadline = began + args.minutes * 60
    last_save = time.time()
    schedule = Schedule(1e-3, deadline)

    def save_state():
        state = dict(lm=lm.state_dict(), depth=depth.state_dict(), optimizer=optimizer.state_dict())
        save((args.state or args.work) / "checkpoint.pt", **state, step=step, vocab_size=vocab_size)

    def evaluate():
        lm.eval(), depth.eval()
        with torch.no_grad(), autocast:
            ids, mask, codes, lengths = held_batches.make(range(len(held)), unconditional_share=0.0)
            before, depth_hidden = semantic.forward(lm, depth, ids, mask, codes, offset)
            c0, rest = semantic.losses(lm, depth, before, depth_hidden, codes, lengths, offset, end_id)
        lm.train(), depth.train()
        return round(c0.item(), 4), round(rest.item(), 4)

    while time.time() < deadline and step < args.steps:
        ids, mask, codes, lengths = batches.sample(args.batch)
        with autocast:
            before, depth_hidden = semantic.forward(lm, depth, ids, mask, codes, offset)
            c0, rest = semantic.losses(lm, depth, before, depth_hidden, codes, lengths, offset, end_id)
        loss = c0 + rest
        optimize(optimizer, loss, params, schedule(step))
        step += 1
        if step % 100 == 0:
            log(step=step, c0=round(c0.item(), 4), depth=round(rest.item(), 4))
        if step % 1000 == 0:
            held_c0, held_depth = evaluate()
            log(step=step, held_c0=held_c0, held_depth=held_depth)
        if time.time() - last_save > 120:
            save_state()
            last_save = time.time()
    save_state()
    held_c0, held_depth = evaluate()
    # What the later stages and the export need, in the dtype the checkpoint stores.
    bf16 = {k: v.to(torch.bfloat16) for k, v in lm.state_dict().items()}
    save(
        args.work / "weights.pt",
        lm=bf16,
        depth={k: v.to(torch.bfloat16) for k, v in depth.state_dict().items()},
        vocab_size=vocab_size,
    )
    log(step=step, held_c0=held_c0, held_depth=held_depth, done=True)


if __name__ == "__main__":
    main()
