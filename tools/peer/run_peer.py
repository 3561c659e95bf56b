"""The peer: the diffusers 0.42.1 MiniMax-Music3 pipeline (the reference) on the same GPU, at the
real geometry with random weights made on the GPU, timed per stage the way `songloom bench --what
song` times Songloom: a 60 s request, 30 steps, the end token disabled so the song runs to length.

Usage (on the GPU machine, diffusers installed):  python3 tools/peer/run_peer.py [--duration 60]
"""

import argparse
import json
import time
from pathlib import Path

import torch
from diffusers import (
    FlowMatchEulerDiscreteScheduler,
    MiniMaxMusic3ConditionEncoder,
    MiniMaxMusic3RVQDepthDecoder,
    MiniMaxMusic3Transformer1DModel,
    MiniMaxMusic3Vocoder,
)
from diffusers.modular_pipelines import SequentialPipelineBlocks
from diffusers.modular_pipelines.minimax_music3 import encoders
from diffusers.modular_pipelines.minimax_music3.decoders import MiniMaxMusic3VocoderDecodeStep
from diffusers.modular_pipelines.minimax_music3.modular_blocks_minimax_music3 import (
    MiniMaxMusic3CoreDenoiseStep,
    MiniMaxMusic3SemanticGenerationStep,
)
from transformers import Qwen2Tokenizer, Qwen3Config, Qwen3ForCausalLM

ROOT = Path(__file__).resolve().parents[2]


def build(dtype, make):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("cuda"):
            return make().eval()
    finally:
        torch.set_default_dtype(previous)


def components():
    lm_config = Qwen3Config(
        vocab_size=200000, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, rope_theta=1e6, rms_norm_eps=1e-6, max_position_embeddings=10240,
        tie_word_embeddings=False,
    )
    bf16, f32 = torch.bfloat16, torch.float32
    return dict(
        # A test tokenizer: the prompt's token ids do not change the work per frame.
        tokenizer=Qwen2Tokenizer.from_pretrained(ROOT / "tests/fixtures/tiny-music3/tokenizer"),
        language_model=build(bf16, lambda: Qwen3ForCausalLM(lm_config)),
        rvq_depth_decoder=build(bf16, MiniMaxMusic3RVQDepthDecoder),
        condition_encoder=build(bf16, MiniMaxMusic3ConditionEncoder),
        transformer=build(f32, MiniMaxMusic3Transformer1DModel),
        vocoder=build(f32, MiniMaxMusic3Vocoder),
        scheduler=FlowMatchEulerDiscreteScheduler(num_train_timesteps=1, shift=1.0, invert_sigmas=True),
    )


def pipeline(blocks, comps, names):
    pipe = SequentialPipelineBlocks.from_blocks_dict(blocks).init_pipeline()
    pipe.update_components(**{k: comps[k] for k in names})
    return pipe


def timed(f):
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = f()
    torch.cuda.synchronize()
    return out, time.perf_counter() - start


@torch.no_grad()
def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    encoders._AUDIO_END_TOKEN_ID = -1  # the end token can never be drawn: the song runs to length
    comps, build_s = timed(components)
    semantic = pipeline({"semantic": MiniMaxMusic3SemanticGenerationStep()}, comps, ["tokenizer", "language_model", "rvq_depth_decoder"])
    denoise = pipeline({"denoise": MiniMaxMusic3CoreDenoiseStep()}, comps, ["condition_encoder", "transformer", "scheduler"])
    decode = pipeline({"decode": MiniMaxMusic3VocoderDecodeStep()}, comps, ["vocoder", "condition_encoder"])
    generator = torch.Generator().manual_seed(1)
    request = dict(prompt="warm lo-fi piano, soft drums, 80 BPM", lyrics="[verse]\nla la la\n[chorus]\noh oh oh")
    frames, ar_s = timed(lambda: semantic(**request, audio_duration=args.duration, generator=generator, output="frame_hiddens"))
    chunks, denoise_s = timed(lambda: denoise(frame_hiddens=frames, num_inference_steps=args.steps, generator=generator, output="latent_chunks"))
    audio, decode_s = timed(lambda: decode(latent_chunks=chunks, output="audios"))
    seconds = audio.shape[-1] / 44100
    total = ar_s + denoise_s + decode_s
    result = dict(
        audio_s=seconds, frames=int(frames.shape[1]), windows=len(chunks), steps=args.steps, build_s=build_s,
        ar_s=ar_s, denoise_s=denoise_s, vocoder_s=decode_s, total_s=total, realtime_factor=seconds / total,
        time_to_first_audio_s=total, gpu=torch.cuda.get_device_name(), torch=torch.__version__,
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
