"""Stage (a): trains the autoencoder on random 1.5 s crops of the rendered set, for a wall-clock
budget; resumes from its checkpoint.

    python tools/train/train_autoencoder.py --work runs/ae --minutes 7
"""

import time
from pathlib import Path

import common  # noqa: F401  (puts this folder on the path)
import numpy as np
import torch

import dataset
from autoencoder import Autoencoder, spectral_loss
from common import Log, Schedule, device, jobs, load, optimize, resume, save, stage_arguments

CROP = 65536  # 128 latents


def crops(audio: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor, batch: int, gen: torch.Generator):
    song = torch.randint(len(starts), (batch,), generator=gen)
    span = (ends[song] - starts[song] - CROP).clamp(min=1)
    offset = starts[song] + (torch.rand(batch, generator=gen) * span).long()
    index = offset[:, None] + torch.arange(CROP)[None]
    return audio[:, index.to(audio.device)].permute(1, 0, 2).float()  # [B, 2, CROP]


def main():
    parser = stage_arguments(songs=1200, batch=16)
    parser.add_argument("--kl", type=float, default=1e-3)
    parser.add_argument("--init", type=Path, help="weights.pt to start from (an earlier round's)")
    parser.add_argument("--freeze-encoder", action="store_true", help="train the decoder alone: the latents stay as they are")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (eager if that fails)")
    args = parser.parse_args()
    dev = device()
    log = Log(args.work / "log.jsonl")
    began = time.time()
    songs = [s for s in dataset.render_set(args.songs, 24.0, jobs()) if s.audio.shape[1] > CROP]
    lengths = torch.tensor([s.audio.shape[1] for s in songs])
    ends = lengths.cumsum(0)
    starts = ends - lengths
    audio = torch.from_numpy(np.concatenate([s.audio for s in songs], axis=1)).to(dev)
    log(
        stage="autoencoder",
        songs=len(songs),
        hours=round(float(lengths.sum()) / 44100 / 3600, 2),
        render_s=round(time.time() - began, 1),
    )

    model = Autoencoder()
    if args.init:
        model.load_state_dict(load(args.init)["model"])
        log(init=str(args.init))
    model = model.to(dev)
    if args.freeze_encoder:
        model.encoder.requires_grad_(False)
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=3e-4, betas=(0.8, 0.99))
    forward = torch.compile(model) if args.compile else model
    step = resume((args.state or args.work) / "checkpoint.pt", optimizer, log, model=model)
    gen = torch.Generator().manual_seed(1234 + step)
    deadline = began + args.minutes * 60
    autocast = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")
    last_save = time.time()
    schedule = Schedule(3e-4, deadline)
    while time.time() < deadline and step < args.steps:
        x = crops(audio, starts, ends, args.batch, gen)
        try:
            with autocast:
                y, kl = forward(x)
        except Exception as e:  # a compiler failure costs the speed, not the run
            if forward is model:
                raise
            log(compile_failed=str(e)[:300])
            forward = model
            with autocast:
                y, kl = forward(x)
        spectral = spectral_loss(y, x)
        waveform = (y.float() - x).abs().mean()
        loss = spectral + 0.1 * waveform + args.kl * kl
        optimize(optimizer, loss, trained, schedule(step))
        step += 1
        if step % 100 == 0:
            log(
                step=step,
                loss=round(loss.item(), 4),
                spectral=round(spectral.item(), 4),
                wave=round(waveform.item(), 5),
                kl=round(kl.item(), 4),
            )
        if time.time() - last_save > 120:
            save(
                (args.state or args.work) / "checkpoint.pt", model=model.state_dict(), optimizer=optimizer.state_dict(), step=step
            )
            last_save = time.time()
    save((args.state or args.work) / "checkpoint.pt", model=model.state_dict(), optimizer=optimizer.state_dict(), step=step)
    save(args.work / "weights.pt", model=model.state_dict())
    # Held-out reconstruction error, the number this stage is judged by.
    model.eval()
    held = dataset.render_set(8, 12.0, jobs(), held_out=True)
    with torch.no_grad():
        errors = []
        for s in held:
            n = s.audio.shape[1] // 512 * 512
            x = torch.from_numpy(s.audio[:, :n]).float()[None].to(dev)
            z, _ = model.encode(x)
            y = model.decoder(z)
            errors.append(spectral_loss(y, x).item())
            latent_std = z.std().item()
    log(step=step, held_out_spectral=round(float(np.mean(errors)), 4), latent_std=round(latent_std, 3), done=True)


if __name__ == "__main__":
    main()
