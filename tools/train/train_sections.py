"""Round 7 (v4): the language model learns what the lyrics' structure tags mean (`sections.py`):
the song takes the texture of each tag's section in turn.

Teacher and starting point are the shipped v3 AR half (`models/songloom-mini`, q8 dequantized); the
depth decoder stays frozen unless `--train-depth all` or `--train-depth heads` (then it is saved
as depth.pt, which `export_captions.py` exports in place of the shipped one). Half the songs are
rendered with sections from lyrics that name them (a common song form or tags in any order, with
lines of words between), the other half in one texture with lyrics that name no section. The loss
is round 6's: the codes' cross-entropy, and the distance of the student's frame hiddens (fresh
description and the song's lyrics) to the teacher's (a v2 template of the same facts, the same
lyrics, teacher-forced on the same codes), so the condition encoder, DiT and vocoder the shipped
model carries stay valid; beside it, a probe of the song's form (`FormProbe`, saved as probe.pt
and not exported). A song with sections is never retimed: its sections last SECTION_SECONDS
whatever the tempo.

The held-out evaluation also reports `tags_c0`, `tags_depth` and `tags_level` (c5, the loudness):
the cross-entropies at section starts of songs with sections when their lyrics' tags are shuffled,
less with the true tags: the nats a frame the model draws from reading the tags (0 for a model
that ignores them).

    python tools/train/train_sections.py --work runs/sections --minutes 8 [--init runs/sections-before]
"""

import copy
import shutil
import time
from pathlib import Path

import common  # noqa: F401
import numpy as np
import torch
import torch.nn.functional as F

import captions
import dataset
import sections
import semantic
import shipped
import sizes
import tokenizer
from common import Log, Schedule, device, jobs, load, save, stage_arguments
from train_captions import DISTILL, Batches

SECTIONED_SHARE = 0.5
# Teacher-forced, a section's texture is plain from its own first frames on, so only the frames
# where a section begins carry what the tags say; they weigh BOUNDARY_WEIGHT times a frame.
BOUNDARY_FRAMES = 12
BOUNDARY_WEIGHT = 20.0
# That leaves the model one frame a section to learn when a section ends and which tag comes next.
# A probe (a linear layer on the LM's last hidden, dropped at export) is taught at every frame the
# section it is in, the next one and how far off that is, so the hidden carries the song's place in
# its form and the boundary frames have only to read it.
PROBE_WEIGHT = 0.2
# A section's loudness is c5's to carry (`codes.py`), drawn by the depth decoder, and it holds from
# frame to frame: unless the first frames of a louder section draw a louder c5, the section stays
# at the level before it. 7e's songs followed the tags' density and not their loudness, so c5 at
# the frames where sections begin is taught LEVEL_WEIGHT more. The frozen depth decoder sees the
# frame's drawn texture (c0..c4) but learnt in songs of one level to carry the level on; with
# `--train-depth all` it can learn that a fuller texture under a louder tag is louder, but its
# hiddens, which the DiT reads, then drift from the teacher's (7f: distance 0.041 -> 0.072, and the
# songs lost their density). `--train-depth heads` trains only its output heads: which codes it
# draws can change while its hiddens stay the teacher's function of the codes.
LEVEL_WEIGHT = 2.0
LEVEL_CODEBOOK = 5
# A probe that starts from scratch sends noise back into the hidden: it learns alone this long.
PROBE_ALONE_STEPS = 300
NO_SECTION = len(sections.KINDS)  # a song in one texture, or past its last boundary
AHEAD_FRAMES = 160  # how far ahead the probe is told a boundary is, at most


def shuffled_tags(lyrics: str, rng: np.random.Generator) -> str:
    """The same lyrics with their section tags in another order (the lines stay where they are)."""
    lines = lyrics.split("\n")
    tagged = [i for i, line in enumerate(lines) if sections.kinds_in(line)]
    order = rng.permutation(len(tagged))
    if len(tagged) > 1 and all(sections.kinds_in(lines[tagged[o]]) == sections.kinds_in(lines[t]) for o, t in zip(order, tagged)):
        order = np.roll(np.arange(len(tagged)), 1)
    out = list(lines)
    for target, source in zip(tagged, order):
        out[target] = lines[tagged[source]]
    return "\n".join(out)


class SectionBatches(Batches):
    """Round 6's batches, with each song's own lyrics: those that gave it sections, or lyrics that
    name none. Only songs in one texture are retimed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.shuffle_tags = False

    def plain_lyrics(self) -> str:
        if self.rng.random() < 0.2:
            words = sections.lyric_words()
            return "\n".join(" ".join(words[i] for i in self.rng.integers(len(words), size=5)) for _ in range(3))
        return sections.PLAIN_LYRICS[self.rng.integers(len(sections.PLAIN_LYRICS))]

    def retimable(self, i) -> bool:
        return self.songs[i].lyrics is None

    def lyrics_of(self, i) -> str:
        lyrics = self.songs[i].lyrics
        if lyrics is None:
            return self.plain_lyrics()
        # A song's own shuffle, so that the batch's other draws match the unshuffled pass's.
        return shuffled_tags(lyrics, np.random.default_rng([i, 1])) if self.shuffle_tags else lyrics

    def make(self, chosen, **options):
        """Round 6's batch, where each song's sections begin [B, N+1] (the first BOUNDARY_FRAMES
        positions of each), and the probe's targets (`place_in_form`)."""
        batch = super().make(chosen, **options)
        codes, lengths = batch[2], batch[3].tolist()
        # Position j of the codes (the priming frame is 0) is frame j - 1 of the song.
        boundary = torch.zeros(len(chosen), codes.shape[1] + 1, dtype=torch.bool)
        for row, i in enumerate(chosen):
            for f in self.songs[i].section_starts or []:
                boundary[row, f + 1 : min(f + 1 + BOUNDARY_FRAMES, lengths[row])] = True
        places = [place_in_form(self.songs[i], codes.shape[1]) for i in chosen]
        place = tuple(torch.stack(p).to(self.dev) for p in zip(*places))
        return (*batch, boundary.to(self.dev), place)


def tag_rows(tok, songs, rng: np.random.Generator) -> list[int]:
    """The tokens the section tags are written in that no description of `songs` (the grammar's,
    and v2's templates) uses: the embedding rows `--tag-rows` lets learn."""
    plain = set(tokenizer.prompt_ids(tok, "", ""))
    tagged = set()
    for spelling in (s for spellings in sections.SPELLINGS.values() for s in spellings):
        tagged |= set(tokenizer.prompt_ids(tok, "", f"[{spelling}]")) - plain
    described = set()
    for song in songs:
        facts = captions.facts_of(song)
        for text in (captions.describe_saying(facts, rng)[0], captions.template(facts, rng)):
            described |= set(tokenizer.prompt_ids(tok, text, ""))
    return sorted(tagged - described)


def place_in_form(song, positions: int):
    """What the probe is taught at each position j < `positions` (it predicts the song's frame
    j - 1): the kind of that frame's section, of the next section (NO_SECTION for none) and the
    frames to the next boundary over AHEAD_FRAMES (1 for none that near)."""
    current = torch.full((positions,), NO_SECTION, dtype=torch.long)
    following = torch.full((positions,), NO_SECTION, dtype=torch.long)
    ahead = torch.ones(positions)
    starts = song.section_starts or []
    kinds = [sections.KINDS.index(k) for k in sections.kinds_in(song.lyrics or "")][: len(starts)]
    frame = (torch.arange(positions) - 1).clamp(min=0)
    for k, (start, kind) in enumerate(zip(starts, kinds)):
        inside = frame >= start
        current[inside] = kind
        following[inside] = kinds[k + 1] if k + 1 < len(kinds) else NO_SECTION
        if k + 1 < len(starts):
            ahead[inside] = ((starts[k + 1] - frame[inside]).clamp(max=AHEAD_FRAMES) / AHEAD_FRAMES).float()
        else:
            ahead[inside] = 1.0
    return current, following, ahead


class FormProbe(torch.nn.Module):
    """Reads the section, the next section and the frames to the boundary off a hidden."""

    def __init__(self, hidden: int):
        super().__init__()
        self.layer = torch.nn.Linear(hidden, 2 * (NO_SECTION + 1) + 1)

    def forward(self, hidden):
        out = self.layer(hidden.float())
        return out[..., : NO_SECTION + 1], out[..., NO_SECTION + 1 : -1], torch.sigmoid(out[..., -1])

    def losses(self, hidden, place, real):
        """(loss, current kind accuracy, next kind accuracy, mean error of frames ahead) over
        the `real` positions."""
        current, following, ahead = place
        p_current, p_following, p_ahead = self(hidden)
        loss = (
            F.cross_entropy(p_current[real], current[real])
            + F.cross_entropy(p_following[real], following[real])
            + 10 * F.mse_loss(p_ahead[real], ahead[real])
        )
        with torch.no_grad():
            accuracy = (p_current[real].argmax(-1) == current[real]).float().mean()
            next_accuracy = (p_following[real].argmax(-1) == following[real]).float().mean()
            frames_off = (p_ahead[real] - ahead[real]).abs().mean() * AHEAD_FRAMES
        return loss, accuracy, next_accuracy, frames_off


def frame_losses(lm, depth, before, depth_hidden, codes, lengths, offset: int, end_id: int):
    """`semantic.losses` frame by frame: c0's cross-entropy at each position [B, N+1] (the last
    predicts <|audio_end|>), the depth codes' mean over c1..c7 at each frame [B, N], c5's (the
    loudness) at each frame [B, N], and which positions are real [B, N+1]."""
    n = codes.shape[1]
    semantic_size = sizes.CONSTANTS["semantic_vocab_size"]
    head = lm.lm_head.weight
    rows = torch.cat([head[offset : offset + semantic_size], head[end_id : end_id + 1]])
    logits = before @ rows.T
    target = torch.cat([codes[..., 0], torch.zeros_like(codes[:, :1, 0])], 1)
    positions = torch.arange(n + 1, device=codes.device)[None]
    target = torch.where(positions == lengths[:, None], semantic_size, target)
    valid = positions <= lengths[:, None]
    c0 = F.cross_entropy(logits.float().flatten(0, 1), target.flatten(), reduction="none").view(target.shape)
    per_codebook = []
    for k in range(7):
        logits_k = depth.audio_heads[k](depth_hidden[:, :, k]).float()
        per_codebook.append(F.cross_entropy(logits_k.flatten(0, 1), codes[..., k + 1].flatten(), reduction="none").view(codes.shape[:2]))
    return c0, sum(per_codebook) / 7, per_codebook[LEVEL_CODEBOOK - 1], valid


def finite_step(optimizer, loss, params, lr: float) -> bool:
    """`common.optimize`, except that a step whose loss or gradients are not finite is skipped
    (and says so), so one bad batch cannot spoil the weights."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)
    if not torch.isfinite(loss):
        return False
    loss.backward()
    if not torch.isfinite(torch.nn.utils.clip_grad_norm_(params, 1.0)):
        optimizer.zero_grad(set_to_none=True)
        return False
    optimizer.step()
    return True


def main():
    parser = stage_arguments(songs=5000, batch=32)
    parser.add_argument("--teacher", type=Path, default=shipped.DEFAULT)
    parser.add_argument("--seed-offset", type=int, default=2000000, help="render the pieces with other seeds than v2 and v3 saw")
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--init", type=Path,
                        help="start from an earlier run's language model (its lm_tables.pt, lm_layers.pt), probe (probe.pt) and "
                             "depth decoder (depth.pt), the last two where it has them")
    parser.add_argument("--distill", type=float, default=DISTILL,
                        help="the weight of the distance to the teacher's hiddens: the further the language model "
                             "drifts from them, the less its songs follow what the descriptions ask for")
    parser.add_argument("--frozen-layers", type=int,
                        help="put the teacher's token embeddings and its N lowest layers (N may be 0) in place "
                             "of --init's and freeze them: they read the description, so the songs keep following "
                             "it while the rest learns the tags")
    parser.add_argument("--tag-rows", action="store_true",
                        help="with --frozen-layers, the embedding rows of the tokens that only the section tags "
                             "use keep --init's and still learn, so the tags are read through their own rows")
    parser.add_argument("--teacher-depth", action="store_true",
                        help="start from the teacher's depth decoder even where --init has a depth.pt")
    parser.add_argument("--train-depth", choices=["all", "heads"],
                        help="train the depth decoder too, all of it or only its output heads (saved as depth.pt)")
    args = parser.parse_args()
    init_files = [args.init / "lm_tables.pt", args.init / "lm_layers.pt"] if args.init else []
    if not all(f.exists() for f in init_files):
        parser.error(f"--init {args.init}: needs lm_tables.pt and lm_layers.pt (a train_sections.py --work folder)")
    dev = device()
    log = Log(args.work / "log.jsonl")
    began = time.time()
    teacher_lm, depth, tok, constants = shipped.load_ar_half(args.teacher)
    freezing = args.frozen_layers is not None
    if freezing and not 0 <= args.frozen_layers <= len(teacher_lm.model.layers):
        parser.error(f"--frozen-layers {args.frozen_layers}: the language model has {len(teacher_lm.model.layers)} layers")
    if args.tag_rows and not freezing:
        parser.error("--tag-rows: needs --frozen-layers (without it every embedding row learns)")
    if freezing and teacher_lm.lm_head.weight is teacher_lm.model.embed_tokens.weight:
        parser.error("--frozen-layers: the embeddings are tied to the output head, which must learn")
    args.work.mkdir(parents=True, exist_ok=True)
    shutil.copy(args.teacher / "tokenizer" / "tokenizer.json", args.work / "tokenizer.json")
    shutil.copy(args.teacher / "songloom.json", args.work / "songloom.json")
    songs = dataset.render_set(
        args.songs, 24.0, jobs(), keep_audio=False, seed_offset=args.seed_offset, sectioned_share=SECTIONED_SHARE
    )
    held = dataset.render_set(32, 24.0, jobs(), held_out=True, keep_audio=False, sectioned_share=SECTIONED_SHARE)
    log(stage="sections", songs=len(songs), sectioned=sum(s.lyrics is not None for s in songs), held=len(held),
        seed_offset=args.seed_offset, render_s=round(time.time() - began, 1))

    lm = copy.deepcopy(teacher_lm)
    if args.init:
        tables, layers = (load(f) for f in init_files)
        lm.load_state_dict({**tables["lm"], **layers["lm"]})
    # Frozen, an earlier run's drifted embeddings and lower layers would keep what the descriptions
    # lost to them (7i moved the median embedding row by 0.94 of its norm, most in the words of the
    # lyrics' filler lines, which descriptions use too); the teacher's read the description as v3
    # does, and the rest learns the tags on top of them.
    for student, teacher in zip(lm.model.layers[: args.frozen_layers or 0], teacher_lm.model.layers):
        student.load_state_dict(teacher.state_dict())
    embeddings = lm.model.embed_tokens.weight
    learnt_rows = []
    if freezing:
        own = embeddings.detach().clone()
        lm.model.embed_tokens.load_state_dict(teacher_lm.model.embed_tokens.state_dict())
        if args.tag_rows:
            # Only the tags read these rows, so --init's carry over whatever it learnt of them.
            learnt_rows = tag_rows(tok, songs + held, np.random.default_rng(2))
            log(tag_rows=[tok.id_to_token(i) for i in learnt_rows])
            with torch.no_grad():
                embeddings[learnt_rows] = own[learnt_rows]
    # Lyrics make prompts of very different lengths, so rows carry long left padding, whose fully
    # masked rows the fused attention kernels turn NaN on the GPU; the plain softmax keeps them finite.
    for model in (lm, teacher_lm):
        model.set_attn_implementation("eager")
    # The teacher's hiddens come from the shipped depth decoder, whatever the student's becomes.
    teacher_depth = copy.deepcopy(depth)
    if args.init and (args.init / "depth.pt").exists() and not args.teacher_depth:
        depth.load_state_dict(load(args.init / "depth.pt")["depth"])
    lm, teacher_lm = lm.to(dev), teacher_lm.to(dev).eval()
    depth, teacher_depth = depth.to(dev).train(args.train_depth == "all"), teacher_depth.to(dev).eval()
    trained_depth = {"all": list(depth.parameters()), "heads": list(depth.audio_heads.parameters())}.get(args.train_depth, [])
    trained_ids = {id(p) for p in trained_depth}
    frozen = list(teacher_lm.parameters()) + list(teacher_depth.parameters())
    frozen += [p for p in depth.parameters() if id(p) not in trained_ids]
    if freezing:
        frozen += [p for layer in lm.model.layers[: args.frozen_layers] for p in layer.parameters()]
    if args.tag_rows:
        learning = torch.zeros(embeddings.shape[0], 1, device=dev)
        learning[learnt_rows] = 1.0
        embeddings.register_hook(lambda grad: grad * learning)
    elif freezing:
        frozen += [embeddings]
    for p in frozen:
        p.requires_grad_(False)
    probe = FormProbe(lm.config.hidden_size)
    fresh_probe = not (args.init and (args.init / "probe.pt").exists())
    if not fresh_probe:
        probe.load_state_dict(load(args.init / "probe.pt")["probe"])
    probe = probe.to(dev)
    params = [p for p in lm.parameters() if p.requires_grad] + list(probe.parameters()) + trained_depth
    # Weight decay would shrink the rows no gradient reaches too: with --tag-rows the embeddings get none.
    groups = [{"params": params}]
    if args.tag_rows:
        groups = [{"params": [p for p in params if p is not embeddings]}, {"params": [embeddings], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    batches = SectionBatches(songs, tok, tok, constants, constants, dev, seed=0)
    held_batches = SectionBatches(held, tok, tok, constants, constants, dev, seed=1)
    sectioned_held = [i for i, s in enumerate(held) if s.lyrics is not None]
    autocast = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")
    offset, end = constants["code_offset"], constants["audio_end_id"]

    def losses(batch, weighted=True, probe_alone=False):
        """(c0, depth, distance, c0 at section starts, depth at section starts, c5 at section
        starts, the probe's (loss, accuracy, next accuracy, frames off)). Weighted, the frames
        where sections begin count BOUNDARY_WEIGHT times, and the sums are still divided by the
        frames (so songs with sections weigh more in a batch, against --distill too); unweighted,
        the cross-entropies are round 6's, to compare with. `probe_alone`, the probe's loss
        reaches the probe only."""
        (ids, mask), (t_ids, t_mask), codes, lengths, complete, boundary, place = batch
        before, depth_hidden = semantic.forward(lm, depth, ids, mask, codes, offset)
        c0_frames, depth_frames, level_frames, valid = frame_losses(lm, depth, before, depth_hidden, codes, lengths, offset, end)
        weight = 1.0 + (BOUNDARY_WEIGHT - 1.0) * boundary.float() * weighted
        c0 = (c0_frames * weight)[valid].mean()
        n = codes.shape[1]
        real_frames = torch.arange(n, device=codes.device)[None] < lengths[:, None]
        rest = (depth_frames * weight[:, :n])[real_frames].mean()
        at_starts = boundary & valid
        c0_starts = c0_frames[at_starts].mean() if at_starts.any() else c0 * 0
        rest_starts = depth_frames[at_starts[:, :n]].mean() if at_starts[:, :n].any() else rest * 0
        level_starts = level_frames[at_starts[:, :n]].mean() if at_starts[:, :n].any() else rest * 0
        with torch.no_grad():
            t_before, t_depth = semantic.forward(teacher_lm, teacher_depth, t_ids, t_mask, codes, offset)
        frames_valid = real_frames & complete[:, None] & ~(boundary[:, :n] & weighted)
        distance = semantic.hidden_distance(before, depth_hidden, t_before, t_depth, frames_valid)
        probed = probe.losses(before[:, :n].detach() if probe_alone else before[:, :n], place, real_frames)
        return c0, rest, distance, c0_starts, rest_starts, level_starts, probed

    def evaluate():
        lm.eval()
        depth.eval()
        out = {}
        with torch.no_grad(), autocast:
            for kind in ("template", "described"):
                held_batches.rng = np.random.default_rng(1)
                batch = held_batches.make(range(len(held)), unconditional_share=0.0, kind=kind)
                c0, rest, distance, *_ = losses(batch, weighted=False)
                out[kind] = dict(c0=round(c0.item(), 4), depth=round(rest.item(), 4), distance=round(distance.item(), 4))
            if sectioned_held:
                measured = []
                for shuffle in (False, True):
                    held_batches.rng, held_batches.shuffle_tags = np.random.default_rng(1), shuffle
                    _, _, _, c0, rest, level, probed = losses(held_batches.make(sectioned_held, unconditional_share=0.0))
                    measured.append((c0.item(), rest.item(), level.item()))
                    if not shuffle:
                        _, accuracy, next_accuracy, frames_off = (x.item() for x in probed)
                        out["probe"] = dict(kind=round(accuracy, 3), next=round(next_accuracy, 3), frames_off=round(frames_off, 1))
                held_batches.shuffle_tags = False
                (c0, rest, level), (c0_shuffled, rest_shuffled, level_shuffled) = measured
                out["section_starts"] = dict(c0=round(c0, 4), depth=round(rest, 4), level=round(level, 4),
                                             tags_c0=round(c0_shuffled - c0, 4), tags_depth=round(rest_shuffled - rest, 4),
                                             tags_level=round(level_shuffled - level, 4))
        lm.train()
        depth.train(args.train_depth == "all")
        return out

    def save_weights():
        """The tables and the layers apart: each file stays under the GPU machine's 16 MiB a file."""
        state = {k: v.to(torch.bfloat16) for k, v in lm.state_dict().items()}
        tables = {k: v for k, v in state.items() if "embed_tokens" in k or "lm_head" in k}
        save(args.work / "lm_tables.pt", lm=tables, vocab_size=lm.model.embed_tokens.weight.shape[0])
        save(args.work / "lm_layers.pt", lm={k: v for k, v in state.items() if k not in tables})
        save(args.work / "probe.pt", probe=probe.state_dict())
        if args.train_depth:
            save(args.work / "depth.pt", depth={k: v.to(torch.bfloat16) for k, v in depth.state_dict().items()})

    log(step=0, held=evaluate())
    deadline = began + args.minutes * 60
    schedule = Schedule(args.lr, deadline)
    step, skipped = 0, 0
    while time.time() < deadline and step < args.steps:
        with autocast:
            probe_alone = fresh_probe and step < PROBE_ALONE_STEPS
            c0, rest, distance, _, _, level_starts, (probe_loss, *_) = losses(batches.sample(args.batch), probe_alone=probe_alone)
        if probe_alone:
            loss = PROBE_WEIGHT * probe_loss
        else:
            loss = c0 + rest + args.distill * distance + PROBE_WEIGHT * probe_loss + LEVEL_WEIGHT * level_starts
        if not finite_step(optimizer, loss, params, schedule(step)):
            skipped += 1
        step += 1
        if step % 100 == 0:
            log(step=step, c0=round(c0.item(), 4), depth=round(rest.item(), 4), distance=round(distance.item(), 4),
                level_starts=round(level_starts.item(), 4), probe=round(probe_loss.item(), 4), skipped=skipped)
        if step % 1000 == 0:
            log(step=step, held=evaluate())
            save_weights()  # a call cut off at its time limit still brings weights back
    log(step=step, held=evaluate(), done=True)
    save_weights()


if __name__ == "__main__":
    main()
