"""Round 6 (v3): the language model learns to read descriptions as people write them
(`captions.py`) through the pruned Qwen vocabulary (`tokenizer.py`), without moving what the rest
of the model was trained on.

The teacher is the shipped v2 AR half (`models/songloom-mini`, its q8 weights dequantized), frozen.
The student is a language model with the new vocabulary, started from the teacher: its layers and
code embeddings copied, each text token's embedding the mean of the teacher's embeddings of the
same text. The depth decoder is the teacher's, frozen. Loss per batch of songs, teacher-forced:
- the codes' cross-entropy (c0 from the LM, c1..c7 from the frozen depth decoder on its hiddens);
- DISTILL x the mean squared distance between the student's frame hiddens on a fresh description
  and the teacher's on a v2 template caption of the same facts, for descriptions that say the key,
  the tempo and the ensemble. These hiddens are what the DiT was trained on, so v2's condition
  encoder, DiT and vocoder stay valid as they are; and the distance teaches that every phrasing
  of the same facts means the same music.

    python tools/train/train_captions.py --work runs/captions --minutes 8.5
"""

import time
from pathlib import Path

import common  # noqa: F401
import numpy as np
import torch

import captions
import codes as frame_codes
import dataset
import semantic
import shipped
import tokenizer
from common import Log, Schedule, device, jobs, optimize, save, stage_arguments
from train_semantic import MAX_FRAMES, RETIMED_SHARE, TEMPOS, UNCONDITIONAL_SHARE, left_padded

DISTILL = 10.0
TRANSPOSED_SHARE = 0.5
TRANSPOSE = (-5, 6)  # the renderer's range
MINOR_WEIGHT = 2.0  # a minor piece is sampled twice as often (a quarter of the scores are minor)


class Batches:
    """Each song with a fresh description for the student and a v2 template for the teacher, the
    same lyrics tags, the same unconditional choice; half retimed to another tempo, half
    transposed to another key (the description's facts changed with them)."""

    def __init__(self, songs, student_tok, teacher_tok, student_constants, teacher_constants, dev, seed=0):
        self.rng = np.random.default_rng(seed)
        self.songs, self.dev = songs, dev
        self.toks = (student_tok, teacher_tok)
        self.cfg_ids = (student_constants["audio_cfg_id"], teacher_constants["audio_cfg_id"])
        self.codes = [
            torch.cat([semantic.priming_frame(c), c]) for c in (torch.from_numpy(s.codes.astype(np.int64)) for s in songs)
        ]
        weights = np.array([MINOR_WEIGHT if s.mode == "minor" else 1.0 for s in songs])
        self.weights = weights / weights.sum()

    def _ids(self, which: int, caption: str, lyrics: str, unconditional: bool) -> list[int]:
        ids = tokenizer.prompt_ids(self.toks[which], caption, lyrics)
        if unconditional:
            ids = ids[:1] + [self.cfg_ids[which]] * (len(ids) - 3) + ids[-2:]
        return ids

    def _padded(self, prompts):
        ids, mask = left_padded(prompts)
        return ids.to(self.dev), mask.to(self.dev)

    def make(self, chosen, unconditional_share=UNCONDITIONAL_SHARE, retimed_share=0.0, kind="described", transposed_share=0.0):
        """kind: "described" (the grammar, with v2's templates among them) or "template" (v2's only)."""
        student, teacher, codes, complete = [], [], [], []
        for i in chosen:
            facts, song_codes = captions.facts_of(self.songs[i]), self.codes[i]
            if self.retimable(i) and self.rng.random() < retimed_share:
                facts, song_codes = self.retimed(i, facts)
            if self.rng.random() < transposed_share:
                facts, song_codes = self.transposed(facts, song_codes)
            if kind == "template":
                text, says_all = captions.template(facts, self.rng), True
            else:
                text, says_all = captions.describe_saying(facts, self.rng)
            lyrics = self.lyrics_of(i)
            unconditional = bool(self.rng.random() < unconditional_share)
            student.append(self._ids(0, text, lyrics, unconditional))
            teacher.append(self._ids(1, captions.template(facts, self.rng), lyrics, unconditional))
            codes.append(song_codes)
            complete.append(says_all or unconditional)
        lengths = torch.tensor([len(c) for c in codes])
        batch = torch.zeros(len(chosen), int(lengths.max()), 8, dtype=torch.long)
        for row, c in enumerate(codes):
            batch[row, : lengths[row]] = c
        return (
            self._padded(student),
            self._padded(teacher),
            batch.to(self.dev),
            lengths.to(self.dev),
            torch.tensor(complete, device=self.dev),
        )

    def retimable(self, i) -> bool:
        """Whether song `i` may be retimed to another tempo."""
        return True

    def lyrics_of(self, i) -> str:
        """The lyrics song `i` is given this time."""
        return tokenizer.LYRICS[self.rng.integers(len(tokenizer.LYRICS))]

    def retimed(self, i, facts):
        song = self.songs[i]
        tempo = int(self.rng.integers(max(TEMPOS[0], song.tempo // 2), min(TEMPOS[1], song.tempo * 2) + 1))
        codes = frame_codes.retimed(self.codes[i][1:].numpy(), tempo / song.tempo, MAX_FRAMES)
        return dict(facts, tempo=tempo), torch.cat([self.codes[i][:1], torch.from_numpy(codes)])

    def transposed(self, facts, song_codes):
        k = int(self.rng.integers(TRANSPOSE[0], TRANSPOSE[1]))
        k = k if k != 0 else TRANSPOSE[1]
        moved = frame_codes.transposed(song_codes[1:].numpy(), k)
        return dict(facts, tonic=(facts["tonic"] + k) % 12), torch.cat([song_codes[:1], torch.from_numpy(moved)])

    def sample(self, batch):
        chosen = self.rng.choice(len(self.songs), size=batch, p=self.weights)
        return self.make(chosen, retimed_share=RETIMED_SHARE, transposed_share=TRANSPOSED_SHARE)


def student_from(teacher_lm, teacher_tok, teacher_constants, student_tok, student_constants, vocab_size):
    """A language model with the student's vocabulary, started from the teacher (module doc)."""
    lm, _ = semantic.build(vocab_size)
    state = {k: v for k, v in teacher_lm.state_dict().items() if "embed_tokens" not in k and "lm_head" not in k}
    lm.load_state_dict(state, strict=False)
    old_embed = teacher_lm.model.embed_tokens.weight.detach().float()
    old_head = teacher_lm.lm_head.weight.detach().float()
    t_offset, s_offset = teacher_constants["code_offset"], student_constants["code_offset"]
    semantic_size = student_constants["semantic_vocab_size"]
    text_rows = old_embed[:t_offset]
    with torch.no_grad():
        embed, head = lm.model.embed_tokens.weight, lm.lm_head.weight
        embed.copy_(text_rows.mean(0, keepdim=True).expand_as(embed))
        head.copy_(old_head[:t_offset].mean(0, keepdim=True).expand_as(head))
        vocab = student_tok.get_vocab()
        specials = set(tokenizer.SPECIAL_TOKENS)
        for token, sid in vocab.items():
            if sid >= s_offset:
                continue
            if token in specials:
                embed[sid] = old_embed[teacher_tok.token_to_id(token)]
                head[sid] = old_head[teacher_tok.token_to_id(token)]
                continue
            text = student_tok.decode([sid])
            pieces = [t for t in teacher_tok.encode(text, add_special_tokens=False).ids if t < t_offset]
            if pieces:
                embed[sid] = old_embed[pieces].mean(0)
        embed[s_offset : s_offset + semantic_size] = old_embed[t_offset : t_offset + semantic_size]
        head[s_offset : s_offset + semantic_size] = old_head[t_offset : t_offset + semantic_size]
        end_s, end_t = student_constants["audio_end_id"], teacher_constants["audio_end_id"]
        head[end_s] = old_head[end_t]
    return lm


def main():
    parser = stage_arguments(songs=5000, batch=32)
    parser.add_argument("--teacher", type=Path, default=shipped.DEFAULT)
    parser.add_argument("--seed-offset", type=int, default=0, help="render the pieces with other seeds than v2 saw")
    args = parser.parse_args()
    dev = device()
    log = Log(args.work / "log.jsonl")
    began = time.time()
    teacher_lm, depth, teacher_tok, teacher_constants = shipped.load_ar_half(args.teacher)
    student_tok, student_constants, vocab_size = tokenizer.build(args.work)
    songs = dataset.render_set(args.songs, 24.0, jobs(), keep_audio=False, seed_offset=args.seed_offset)
    held = dataset.render_set(32, 24.0, jobs(), held_out=True, keep_audio=False)
    log(stage="captions", songs=len(songs), vocab=vocab_size, seed_offset=args.seed_offset,
        render_s=round(time.time() - began, 1))

    lm = student_from(teacher_lm, teacher_tok, teacher_constants, student_tok, student_constants, vocab_size)
    lm, teacher_lm, depth = lm.to(dev), teacher_lm.to(dev).eval(), depth.to(dev).eval()
    for p in list(teacher_lm.parameters()) + list(depth.parameters()):
        p.requires_grad_(False)
    params = list(lm.parameters())
    optimizer = torch.optim.AdamW(params, lr=5e-4, betas=(0.9, 0.95), weight_decay=0.01)
    batches = Batches(songs, student_tok, teacher_tok, student_constants, teacher_constants, dev, seed=0)
    held_batches = Batches(held, student_tok, teacher_tok, student_constants, teacher_constants, dev, seed=1)
    autocast = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")
    s_offset, s_end = student_constants["code_offset"], student_constants["audio_end_id"]
    t_offset, t_end = teacher_constants["code_offset"], teacher_constants["audio_end_id"]

    def losses(batch):
        (ids, mask), (t_ids, t_mask), codes, lengths, complete = batch
        before, depth_hidden = semantic.forward(lm, depth, ids, mask, codes, s_offset)
        c0, rest = semantic.losses(lm, depth, before, depth_hidden, codes, lengths, s_offset, s_end)
        with torch.no_grad():
            t_before, t_depth = semantic.forward(teacher_lm, depth, t_ids, t_mask, codes, t_offset)
        n = codes.shape[1]
        valid = (torch.arange(n, device=codes.device)[None] < lengths[:, None]) & complete[:, None]
        return c0, rest, semantic.hidden_distance(before, depth_hidden, t_before, t_depth, valid)

    def evaluate():
        lm.eval()
        out = {}
        with torch.no_grad(), autocast:
            for kind in ("template", "described"):
                held_batches.rng = np.random.default_rng(1)
                c0, rest, distance = losses(held_batches.make(range(len(held)), unconditional_share=0.0, kind=kind))
                out[kind] = dict(c0=round(c0.item(), 4), depth=round(rest.item(), 4), distance=round(distance.item(), 4))
            # The teacher's own c0 on its templates: the floor the student starts from.
            held_batches.rng = np.random.default_rng(1)
            _, (t_ids, t_mask), codes, lengths, _ = held_batches.make(range(len(held)), unconditional_share=0.0, kind="template")
            t_before, t_depth = semantic.forward(teacher_lm, depth, t_ids, t_mask, codes, t_offset)
            t_c0, t_rest = semantic.losses(teacher_lm, depth, t_before, t_depth, codes, lengths, t_offset, t_end)
            out["teacher"] = dict(c0=round(t_c0.item(), 4), depth=round(t_rest.item(), 4))
        lm.train()
        return out

    log(step=0, held=evaluate())
    deadline = began + args.minutes * 60
    schedule = Schedule(5e-4, deadline)
    step = 0
    while time.time() < deadline and step < args.steps:
        with autocast:
            c0, rest, distance = losses(batches.sample(args.batch))
        optimize(optimizer, c0 + rest + DISTILL * distance, params, schedule(step))
        step += 1
        if step % 100 == 0:
            log(step=step, c0=round(c0.item(), 4), depth=round(rest.item(), 4), distance=round(distance.item(), 4))
        if step % 1000 == 0:
            log(step=step, held=evaluate())
    log(step=step, held=evaluate(), done=True)
    # The tables and the layers apart: each file stays under the GPU machine's 16 MiB a file.
    state = {k: v.to(torch.bfloat16) for k, v in lm.state_dict().items()}
    tables = {k: v for k, v in state.items() if "embed_tokens" in k or "lm_head" in k}
    save(args.work / "lm_tables.pt", lm=tables, vocab_size=vocab_size)
    save(args.work / "lm_layers.pt", lm={k: v for k, v in state.items() if k not in tables})


if __name__ == "__main__":
    main()
