"""Writes v3: the shipped model with round 6's language model, tokenizer and constants in place of
v2's, as a bf16 checkpoint for `songloom model quantize` (the depth decoder dequantized to f32 so
that the quantizer reads it; copy the shipped q8 depth decoder over the quantized result after, so
its bytes stay v2's). A round-7 folder with a depth.pt (`train_sections.py --train-depth all|heads`) gives
its own depth decoder instead, quantized with the rest.

    python tools/train/export_captions.py --captions runs/captions --out runs/model-v3-bf16
"""

import argparse
import shutil
from pathlib import Path

import common  # noqa: F401
import torch
from safetensors.torch import save_file

import semantic
import shipped
import tokenizer
from common import load


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--captions", type=Path, required=True, help="round 6's output folder")
    parser.add_argument("--base", type=Path, default=shipped.DEFAULT, help="the model whose other parts are kept")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    out = args.out
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(args.base, out, ignore=shutil.ignore_patterns("language_model", "rvq_depth_decoder", "tokenizer"))
    (out / "tokenizer").mkdir()
    shutil.copy(args.captions / "tokenizer.json", out / "tokenizer" / "tokenizer.json")
    tokenizer.write_config(out / "tokenizer")
    shutil.copy(args.captions / "songloom.json", out / "songloom.json")

    tables, layers = load(args.captions / "lm_tables.pt"), load(args.captions / "lm_layers.pt")
    lm, _ = semantic.build(tables["vocab_size"])
    lm.load_state_dict({**tables["lm"], **layers["lm"]})
    lm.to(torch.bfloat16).save_pretrained(out / "language_model")

    depth = out / "rvq_depth_decoder"
    depth.mkdir()
    shutil.copy(args.base / "rvq_depth_decoder" / "config.json", depth / "config.json")
    if (args.captions / "depth.pt").exists():  # trained by train_sections.py --train-depth
        state = {k: v.float() for k, v in load(args.captions / "depth.pt")["depth"].items()}
    else:
        state = shipped.read_dequantized(args.base / "rvq_depth_decoder" / "diffusion_pytorch_model.safetensors")
    save_file({k: v.contiguous() for k, v in state.items()}, depth / "diffusion_pytorch_model.safetensors")
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{out}: {total / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
