"""Stage (d): the condition encoder and the DiT, by flow matching on the autoencoder's latents,
conditioned on the trained AR half's frame hiddens (teacher-forced on each song's own codes, the
conditional row, as the reference's generation loop would emit them). The condition is zeroed one
time in ten (the reference's unconditional branch). Latents are normalized per channel; the
normalization is folded into the vocoder's first 1x1 convolution at export.

    python tools/train/train_acoustic.py --work runs/acoustic --autoencoder runs/ae \
        --semantic runs/semantic --minutes 7
"""

import time
from pathlib import Path

import common  # noqa: F401
import numpy as np
import torch
from diffusers import MiniMaxMusic3ConditionEncoder, MiniMaxMusic3Transformer1DModel

import dataset
import semantic
import sizes
from autoencoder import Autoencoder
from common import Log, Schedule, device, jobs, load, optimize, resume, save, stage_arguments
from train_semantic import Batches

UNCONDITIONAL_SHARE = 0.1
LATENTS_PER_FRAME = 44100 / 24000 * 960 / 512


def latent_length(frames: int) -> int:
    return max(1, int(frames * 44100 / 24000 * 960 / 512))


@torch.no_grad()
def encode_songs(ae, songs, dev):
    latents = []
    for s in songs:
        n = (s.audio.shape[1] + 511) // 512 * 512
        x = np.zeros((2, n), dtype=np.float32)
        x[:, : s.audio.shape[1]] = s.audio
        z, _ = ae.encode(torch.from_numpy(x)[None].to(dev))
        latents.append(z[0].float())
    return latents


@torch.no_grad()
def song_hiddens(lm, depth, songs, tok, constants, dev, autocast):
    """Each song's frame hiddens [F, 8H] in bf16, the priming frame's dropped."""
    batches = Batches(songs, tok, constants, dev, seed=7)
    out = [None] * len(songs)
    order = sorted(range(len(songs)), key=lambda i: len(songs[i].codes))
    for start in range(0, len(order), 32):
        chosen = order[start : start + 32]
        ids, mask, codes, lengths = batches.make(chosen, unconditional_share=0.0)
        with autocast:
            before, depth_hidden = semantic.forward(lm, depth, ids, mask, codes, constants["code_offset"])
        hiddens = semantic.frame_hiddens(before, depth_hidden).to(torch.bfloat16)
        for row, i in enumerate(chosen):
            out[i] = hiddens[row, 1 : int(lengths[row])]
    return out


def main():
    parser = stage_arguments(songs=2400, batch=32)
    parser.add_argument("--autoencoder", type=Path, required=True)
    parser.add_argument("--semantic", type=Path, required=True)
    args = parser.parse_args()
    dev = device()
    log = Log(args.work / "log.jsonl")
    began = time.time()
    autocast = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")

    ae = Autoencoder()
    ae.load_state_dict(load(args.autoencoder / "weights.pt")["model"])
    ae = ae.to(dev).eval()
    semantic_state = load(args.semantic / "weights.pt")
    lm, depth = semantic.build(semantic_state["vocab_size"])
    lm.load_state_dict(semantic_state["lm"])
    depth.load_state_dict(semantic_state["depth"])
    # The engine runs the AR half in bf16: the DiT learns from hiddens of the same precision.
    lm, depth = lm.to(dev, torch.bfloat16).eval(), depth.to(dev, torch.bfloat16).eval()
    from tokenizers import Tokenizer
    import json

    tok = Tokenizer.from_file(str(args.semantic / "tokenizer.json"))
    constants = json.loads((args.semantic / "songloom.json").read_text())

    songs = dataset.render_set(args.songs, 24.0, jobs())
    latents = encode_songs(ae, songs, dev)
    # One mean and scale per latent channel of a stream, pooled over left and right: the vocoder
    # decodes both streams with the same first convolution, where the scale is folded.
    stacked = torch.cat(latents, 1)
    half = stacked.shape[0] // 2
    pooled = torch.cat([stacked[:half], stacked[half:]], 1)
    mean = pooled.mean(1, keepdim=True).repeat(2, 1)
    std = pooled.std(1, keepdim=True).clamp(min=1e-3).repeat(2, 1)
    latents = [((z - mean) / std).to(torch.bfloat16) for z in latents]
    hiddens = song_hiddens(lm, depth, songs, tok, constants, dev, autocast)
    del lm, depth, ae
    torch.cuda.empty_cache() if dev.type == "cuda" else None
    frames = torch.tensor([len(s.codes) for s in songs])
    log(
        stage="acoustic",
        songs=len(songs),
        latent_std_before=[round(float(std.min()), 3), round(float(std.max()), 3)],
        prep_s=round(time.time() - began, 1),
    )

    condition = MiniMaxMusic3ConditionEncoder(**sizes.CONDITION).to(dev)
    dit = MiniMaxMusic3Transformer1DModel(**sizes.DIT).to(dev)
    params = list(condition.parameters()) + list(dit.parameters())
    optimizer = torch.optim.AdamW(params, lr=4e-4, betas=(0.9, 0.99), weight_decay=0.01)
    step = resume((args.state or args.work) / "checkpoint.pt", optimizer, log, condition=condition, dit=dit)
    rng = np.random.default_rng(step)
    deadline = began + args.minutes * 60
    last_save = time.time()
    schedule = Schedule(4e-4, deadline)

    def batch_of(window: int, count: int):
        eligible = torch.nonzero(frames >= window).flatten().numpy()
        chosen = rng.choice(eligible, size=count)
        length = latent_length(window)
        h, z = [], []
        for i in chosen:
            s = int(rng.integers(0, int(frames[i]) - window + 1))
            m0 = min(int(round(s * LATENTS_PER_FRAME)), latents[i].shape[1] - length)
            h.append(hiddens[i][s : s + window])
            z.append(latents[i][:, m0 : m0 + length])
        return torch.stack(h), torch.stack(z).float()

    def save_state():
        save(
            (args.state or args.work) / "checkpoint.pt",
            condition=condition.state_dict(),
            dit=dit.state_dict(),
            optimizer=optimizer.state_dict(),
            step=step,
            latent_mean=mean.cpu(),
            latent_std=std.cpu(),
        )

    while time.time() < deadline and step < args.steps:
        window = sizes.WINDOW_FRAMES if rng.random() < 0.75 else int(rng.integers(25, sizes.WINDOW_FRAMES))
        h, z = batch_of(window, args.batch)
        noise = torch.randn_like(z)
        t = torch.sigmoid(torch.randn(len(z), device=dev)) if rng.random() < 0.5 else torch.rand(len(z), device=dev)
        x = (1 - t[:, None, None]) * noise + t[:, None, None] * z
        with autocast:
            # Hiddens are kept in bf16; the encoder is f32 (autocast narrows it again on the GPU).
            cond = condition(h.float())
            keep = (torch.rand(len(z), device=dev) >= UNCONDITIONAL_SHARE).to(cond.dtype)
            cond = cond * keep[:, None, None]
            v = dit(x, t, cond, return_dict=False)[0]
        loss = (v.float() - (z - noise)).pow(2).mean()
        optimize(optimizer, loss, params, schedule(step))
        step += 1
        if step % 100 == 0:
            log(step=step, loss=round(loss.item(), 4), window=window)
        if time.time() - last_save > 120:
            save_state()
            last_save = time.time()
    save_state()
    save(
        args.work / "weights.pt",
        condition=condition.state_dict(),
        dit={k: v.to(torch.bfloat16) for k, v in dit.state_dict().items()},
        latent_mean=mean.cpu(),
        latent_std=std.cpu(),
    )
    log(step=step, done=True)


if __name__ == "__main__":
    main()
