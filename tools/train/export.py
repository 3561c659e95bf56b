"""Writes the trained stages as a MiniMax-Music3 checkpoint in the real diffusers layout (one folder
per component, `config.json` each, the scheduler, the tokenizer and `songloom.json`), loadable by
the reference pipeline and by the engine.

    python tools/train/export.py --autoencoder runs/ae --semantic runs/semantic \
        --acoustic runs/acoustic --out runs/model
"""

import argparse
import shutil
from pathlib import Path

import common  # noqa: F401
import torch
from diffusers import FlowMatchEulerDiscreteScheduler, MiniMaxMusic3ConditionEncoder, MiniMaxMusic3Transformer1DModel

import semantic
import sizes
import tokenizer
from autoencoder import Autoencoder
from common import load


def fold_normalization(vocoder, mean: torch.Tensor, std: torch.Tensor):
    """The DiT works on (z - mean) / std; the vocoder's first 1x1 convolution takes that instead
    of z: W' = W * std, b' = b + W @ mean (per stream channel)."""
    half = vocoder.config.latent_channels // 2
    mean, std = mean.flatten()[:half], std.flatten()[:half]
    conv = vocoder.dec_in_proj
    with torch.no_grad():
        weight = conv.weight[:, :, 0].clone()
        conv.bias += weight @ mean
        conv.weight[:, :, 0] = weight * std[None]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--autoencoder", type=Path, required=True)
    parser.add_argument("--semantic", type=Path, required=True)
    parser.add_argument("--acoustic", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    out = args.out
    if out.exists():
        shutil.rmtree(out)
    (out / "tokenizer").mkdir(parents=True)
    shutil.copy(args.semantic / "tokenizer.json", out / "tokenizer" / "tokenizer.json")
    tokenizer.write_config(out / "tokenizer")
    shutil.copy(args.semantic / "songloom.json", out / "songloom.json")

    state = load(args.semantic / "weights.pt")
    lm, depth = semantic.build(state["vocab_size"])
    lm.load_state_dict(state["lm"])
    depth.load_state_dict(state["depth"])
    lm.to(torch.bfloat16).save_pretrained(out / "language_model")
    depth.to(torch.bfloat16).save_pretrained(out / "rvq_depth_decoder")

    state = load(args.acoustic / "weights.pt")
    condition = MiniMaxMusic3ConditionEncoder(**sizes.CONDITION)
    condition.load_state_dict(state["condition"])
    condition.to(torch.bfloat16).save_pretrained(out / "condition_encoder")  # bf16 to keep the embedded model small
    dit = MiniMaxMusic3Transformer1DModel(**sizes.DIT)
    dit.load_state_dict(state["dit"])
    dit.to(torch.bfloat16).save_pretrained(out / "transformer")

    ae = Autoencoder()
    ae.load_state_dict(load(args.autoencoder / "weights.pt")["model"])
    vocoder = ae.decoder
    fold_normalization(vocoder, state["latent_mean"], state["latent_std"])
    vocoder.to(torch.bfloat16).save_pretrained(out / "vocoder")

    FlowMatchEulerDiscreteScheduler(num_train_timesteps=1, shift=1.0, invert_sigmas=True).save_pretrained(out / "scheduler")
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{out}: {total / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
