"""Runs the reference pipeline (diffusers 0.42.1's `MiniMaxMusic3Blocks`) on an exported bf16
checkpoint (`export.py`'s output, before the engine's q8 copy), in the reference dtype policy,
and writes its song: the export is a checkpoint the reference itself reads and runs.

    python tools/train/reference_check.py --model tools/train/runs/model-bf16 --out /tmp/reference.wav
"""

import argparse
import json
from pathlib import Path

import numpy as np
import scipy.io.wavfile
import torch
from diffusers import (
    FlowMatchEulerDiscreteScheduler,
    MiniMaxMusic3Blocks,
    MiniMaxMusic3ConditionEncoder,
    MiniMaxMusic3RVQDepthDecoder,
    MiniMaxMusic3Transformer1DModel,
    MiniMaxMusic3Vocoder,
)
from diffusers.modular_pipelines.minimax_music3 import encoders
from transformers import Qwen2Tokenizer, Qwen3ForCausalLM


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--prompt", default="a folk song played on acoustic guitar in D major at 132 BPM")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    m, bf16, f32 = args.model, torch.bfloat16, torch.float32
    # The small vocabulary's ids, where the reference keeps the real checkpoint's as constants.
    c = json.loads((m / "songloom.json").read_text())
    encoders._AUDIO_END_TOKEN_ID, encoders._AUDIO_CFG_TOKEN_ID = c["audio_end_id"], c["audio_cfg_id"]
    encoders._AUDIO_CODE_OFFSET, encoders._SEMANTIC_VOCAB_SIZE = c["code_offset"], c["semantic_vocab_size"]
    pipe = MiniMaxMusic3Blocks().init_pipeline()
    pipe.update_components(
        tokenizer=Qwen2Tokenizer.from_pretrained(m / "tokenizer"),
        language_model=Qwen3ForCausalLM.from_pretrained(m / "language_model", dtype=bf16).eval(),
        rvq_depth_decoder=MiniMaxMusic3RVQDepthDecoder.from_pretrained(m / "rvq_depth_decoder", torch_dtype=bf16).eval(),
        condition_encoder=MiniMaxMusic3ConditionEncoder.from_pretrained(m / "condition_encoder", torch_dtype=bf16).eval(),
        transformer=MiniMaxMusic3Transformer1DModel.from_pretrained(m / "transformer", torch_dtype=f32).eval(),
        vocoder=MiniMaxMusic3Vocoder.from_pretrained(m / "vocoder", torch_dtype=f32).eval(),
        scheduler=FlowMatchEulerDiscreteScheduler.from_pretrained(m / "scheduler"),
    )
    with torch.no_grad():
        out = pipe(
            prompt=args.prompt,
            lyrics="[instrumental]",
            audio_duration=args.seconds,
            num_inference_steps=args.steps,
            generator=torch.Generator().manual_seed(0),
            output="audios",
        )
    audio = np.asarray(out[0] if isinstance(out, (list, tuple)) else out, dtype=np.float32).reshape(2, -1)
    scipy.io.wavfile.write(args.out, 44100, audio.T)
    print(f"{args.out}: {audio.shape[1] / 44100:.2f} s, peak {np.abs(audio).max():.3f}, rms {np.sqrt((audio**2).mean()):.4f}")


if __name__ == "__main__":
    main()
