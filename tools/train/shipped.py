"""The shipped model's AR half as PyTorch modules: Songloom's q8 copy (`engine/src/quant.rs`: four
int8 weights a u32 word, an f16 scale per group of 32 along a row) dequantized to f32, so later
rounds can start from, or learn from, exactly what users run."""

import json
import struct
from pathlib import Path

import numpy as np
import torch

import semantic

DEFAULT = Path(__file__).resolve().parents[2] / "models" / "songloom-mini"
GROUP = 32


def read_dequantized(path: Path) -> dict[str, torch.Tensor]:
    """A safetensors file's tensors, q8 matrices dequantized, everything as f32."""
    raw = path.read_bytes()
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + size])
    formats = header.pop("__metadata__", {}) or {}
    body = raw[8 + size :]
    dtypes = {"F32": np.float32, "F16": np.float16, "U32": np.uint32, "BF16": np.uint16}

    def array(name):
        info = header[name]
        start, end = info["data_offsets"]
        a = np.frombuffer(body[start:end], dtype=dtypes[info["dtype"]]).reshape(info["shape"])
        if info["dtype"] == "BF16":
            return (a.astype(np.uint32) << 16).view(np.float32)
        return a

    out = {}
    for name in header:
        if name.endswith(".scales"):
            continue
        fmt = formats.get(f"{name}.format")
        if fmt is None:
            out[name] = torch.from_numpy(array(name).astype(np.float32))
            continue
        if fmt != "q8":
            raise ValueError(f"{path}: {name} is {fmt}; only q8 is read here")
        words = array(name)
        rows = words.shape[0]
        q = words.view(np.int8).reshape(rows, -1).astype(np.float32)  # little-endian: weight j in bits 8j..8j+8
        scales = array(f"{name}.scales").astype(np.float32)
        out[name] = torch.from_numpy((q.reshape(rows, -1, GROUP) * scales[:, :, None]).reshape(rows, -1))
    return out


def load_ar_half(model: Path = DEFAULT):
    """(language model, depth decoder, tokenizer, songloom.json constants) of `model`, in f32."""
    from tokenizers import Tokenizer

    constants = json.loads((model / "songloom.json").read_text())
    lm_state = read_dequantized(model / "language_model" / "model.safetensors")
    vocab_size = lm_state["model.embed_tokens.weight"].shape[0]
    lm, depth = semantic.build(vocab_size)
    lm.load_state_dict(lm_state)
    depth.load_state_dict(read_dequantized(model / "rvq_depth_decoder" / "diffusion_pytorch_model.safetensors"))
    tok = Tokenizer.from_file(str(model / "tokenizer" / "tokenizer.json"))
    return lm.float(), depth.float(), tok, constants
