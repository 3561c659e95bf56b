"""What every training stage shares: the device, a wall-clock budget, resumable checkpoints and a
log of JSON lines."""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))


def stage_arguments(songs: int, batch: int) -> argparse.ArgumentParser:
    """The options every stage takes; a stage adds its own."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path, required=True, help="where the log and weights.pt go")
    parser.add_argument("--state", type=Path, help="where the resumable checkpoint lives (default: --work)")
    parser.add_argument("--minutes", type=float, default=7.0, help="the budget, rendering included")
    parser.add_argument("--songs", type=int, default=songs)
    parser.add_argument("--batch", type=int, default=batch)
    parser.add_argument("--steps", type=int, default=10**9, help="a cap (the budget is --minutes)")
    return parser


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def jobs() -> int:
    return max(1, min(16, (os.cpu_count() or 2)))


class Log:
    """Prints and appends JSON lines to `path`; resumed runs append."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(path, "a")
        self.start = time.time()

    def __call__(self, **fields):
        fields = {"t": round(time.time() - self.start, 1), **fields}
        line = json.dumps(fields)
        print(line, flush=True)
        self.file.write(line + "\n")
        self.file.flush()


def save(path: Path, **state):
    """Written through a temporary, so a run killed mid-write leaves the previous checkpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    try:
        torch.save(state, partial)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def optimize(optimizer, loss, params, lr: float):
    """One step of the optimizer on `loss` at learning rate `lr`, gradients clipped to norm 1."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()


def resume(path: Path, optimizer, log, **modules) -> int:
    """Restores `modules` (by their names in the checkpoint) and the optimizer from `path` where it
    exists; the step to go on from."""
    state = load(path)
    if not state:
        return 0
    for name, module in modules.items():
        module.load_state_dict(state[name])
    optimizer.load_state_dict(state["optimizer"])
    log(resumed=state["step"])
    return state["step"]


def load(path: Path):
    return torch.load(path, map_location="cpu", weights_only=False) if path.exists() else None


class Schedule:
    """Linear warm-up, then a cosine to a tenth of the peak by the deadline: the runs are budgeted
    in minutes, not steps, so the decay follows the clock."""

    def __init__(self, peak: float, deadline: float, warmup: int = 200):
        self.peak, self.deadline, self.warmup = peak, deadline, warmup
        self.start = time.time()

    def __call__(self, step: int) -> float:
        import math

        if step < self.warmup:
            return self.peak * (step + 1) / self.warmup
        progress = min(1.0, (time.time() - self.start) / max(1.0, self.deadline - self.start))
        return self.peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
