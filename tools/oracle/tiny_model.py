"""Builds the tiny MiniMax-Music3 checkpoint from the reference classes (diffusers 0.42.1 and
transformers' Qwen3), with deterministic name-seeded weights, and saves it in the real diffusers
layout: one directory per component, sharded safetensors with an index where the real one is
sharded, `config.json` per component, and `songloom.json` with the constants a tiny vocabulary
needs (the real checkpoint has none and the engine's defaults apply)."""

import hashlib
import json
import math
from pathlib import Path

import torch
from diffusers import (
    FlowMatchEulerDiscreteScheduler,
    MiniMaxMusic3ConditionEncoder,
    MiniMaxMusic3RVQDepthDecoder,
    MiniMaxMusic3Transformer1DModel,
    MiniMaxMusic3Vocoder,
)
from transformers import Qwen3Config, Qwen3ForCausalLM

# The special ids and code range of the tiny vocabulary (real: 151670 / 151654 / 151675 / 16384).
# `build_tokenizer` sets the ids from where its special tokens land; the semantic codes follow.
CONSTANTS = {
    "audio_end_id": 338,
    "audio_cfg_id": 339,
    "code_offset": 352,
    "semantic_vocab_size": 64,
}
SPECIAL_TOKENS = [
    "<|im_start|>",
    "<|im_end|>",
    "<|caption_start|>",
    "<|caption_end|>",
    "<|lyrics_start|>",
    "<|lyrics_end|>",
    "<|audio_start|>",
    "<|audio_end|>",
    "<|audio_cfg|>",
]
# Qwen2's pre-tokenizer split pattern.
QWEN2_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# Semantic-code rows of lm_head are scaled up and the end-token row zeroed, so that sampling almost
# never picks the end token and generation runs to the requested duration.
SEMANTIC_HEAD_GAIN = 8.0
LM = dict(
    vocab_size=448,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    rope_theta=1e6,
    rms_norm_eps=1e-6,
    max_position_embeddings=2048,
    tie_word_embeddings=False,
)
DEPTH = dict(
    hidden_size=64,
    num_layers=2,
    num_attention_heads=4,
    intermediate_size=96,
    audio_vocab_size=32,
    num_codebooks=8,
    max_position_embeddings=16,
)
CONDITION = dict(condition_hidden_dim=64, num_condition_layers=8, out_dim=32)
# The same encoder with a latent rate below the frame rate (downsampling).
CONDITION_DOWN = dict(CONDITION, output_hop_length=4096)
DIT = dict(
    in_channels=8,
    condition_dim=32,
    num_layers=2,
    num_attention_heads=4,
    attention_head_dim=16,
    ff_inner_dim=96,
    rotary_dim=8,
    fourier_embedding_dim=16,
)
VOCODER = dict(latent_channels=8, decoder_input_dim=32, decoder_hidden_dim=64, upsampling_ratios=(8, 8, 4, 2))


def name_seed(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little") & (2**63 - 1)


def fill_weights(module: torch.nn.Module, component: str) -> None:
    """Deterministic weights: each tensor drawn from a generator seeded by its full name, scaled so
    that activations stay O(1) through the tiny networks."""
    with torch.no_grad():
        for name, param in module.named_parameters():
            gen = torch.Generator().manual_seed(name_seed(f"{component}.{name}"))
            normal = torch.randn(param.shape, generator=gen, dtype=torch.float64)
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "alpha":
                value = 0.5 + normal.abs()
            elif leaf == "weight_g":  # row norms: keep each residual branch well below unit gain
                value = 0.25 + 0.25 * normal.abs()
            elif leaf == "layer_scale":
                value = 1.0 + 0.1 * normal
            elif param.ndim == 1 and ("norm" in name) and leaf == "weight":
                value = 1.0 + 0.1 * normal
            elif leaf == "bias" or param.ndim == 1:
                value = 0.1 * normal
            elif "embed" in name or "embedding" in name:
                value = normal
            elif name == "time_proj.weight":
                value = normal
            else:
                fan_in = math.prod(param.shape[1:]) if param.ndim > 1 else 1
                if "conv_t1" in name:  # ConvTranspose1d weights are [in, out, k]
                    fan_in = param.shape[0]
                value = normal / math.sqrt(fan_in)
            param.copy_(value.to(param.dtype))


def build_tokenizer(out: Path):
    """A small byte-level BPE in Qwen2's format (NFC, Qwen2's split pattern, byte-level), with the
    special tokens of the prompt template."""
    import json

    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    corpus = [
        "the quick brown fox jumps over the lazy dog",
        "la la la love you baby, hold me close tonight",
        "[verse] [chorus] [bridge] dreamy synth pop, female vocals, 100 BPM, warm lo-fi piano",
    ] * 10
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIAL_TOKENS])
    # The constants follow from where the tokenizer put its special tokens.
    CONSTANTS["audio_end_id"] = tok.token_to_id("<|audio_end|>")
    CONSTANTS["audio_cfg_id"] = tok.token_to_id("<|audio_cfg|>")
    CONSTANTS["code_offset"] = (tok.get_vocab_size() + 15) // 16 * 16
    LM["vocab_size"] = (CONSTANTS["code_offset"] + CONSTANTS["semantic_vocab_size"] + 31) // 32 * 32
    (out / "tokenizer").mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer" / "tokenizer.json"))
    config = {"tokenizer_class": "Qwen2Tokenizer", "model_max_length": 131072, "clean_up_tokenization_spaces": False}
    (out / "tokenizer" / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def build(out: Path):
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out)
    lm = Qwen3ForCausalLM(Qwen3Config(**LM)).eval()
    fill_weights(lm, "language_model")
    with torch.no_grad():
        start, end = CONSTANTS["code_offset"], CONSTANTS["code_offset"] + CONSTANTS["semantic_vocab_size"]
        lm.lm_head.weight[start:end] *= SEMANTIC_HEAD_GAIN
        lm.lm_head.weight[CONSTANTS["audio_end_id"]] = 0.0
    lm = lm.to(torch.bfloat16)
    lm.save_pretrained(out / "language_model", max_shard_size="60KB")

    depth = MiniMaxMusic3RVQDepthDecoder(**DEPTH).eval()
    fill_weights(depth, "rvq_depth_decoder")
    depth = depth.to(torch.bfloat16)
    depth.save_pretrained(out / "rvq_depth_decoder")

    condition = MiniMaxMusic3ConditionEncoder(**CONDITION).eval()
    fill_weights(condition, "condition_encoder")
    condition.save_pretrained(out / "condition_encoder")  # f32 on disk, like the real checkpoint

    dit = MiniMaxMusic3Transformer1DModel(**DIT).eval()
    fill_weights(dit, "transformer")
    dit.save_pretrained(out / "transformer", max_shard_size="200KB")

    vocoder = MiniMaxMusic3Vocoder(**VOCODER).eval()
    fill_weights(vocoder, "vocoder")
    vocoder.save_pretrained(out / "vocoder")

    scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1, shift=1.0, invert_sigmas=True)
    scheduler.save_pretrained(out / "scheduler")

    (out / "songloom.json").write_text(json.dumps(CONSTANTS, indent=2) + "\n")
    return dict(lm=lm, depth=depth, condition=condition, dit=dit, vocoder=vocoder, scheduler=scheduler)


def build_condition_down(out: Path):
    condition = MiniMaxMusic3ConditionEncoder(**CONDITION_DOWN).eval()
    fill_weights(condition, "condition_encoder")
    condition.save_pretrained(out / "condition_encoder")
    return condition


def load(out: Path):
    """Reloads the saved checkpoint the way the reference pipeline loads it (`from_pretrained` in
    the reference dtypes), so buffers such as the rotary `inv_freq` keep their own dtype."""
    bf16 = torch.bfloat16
    from transformers import Qwen2Tokenizer

    return dict(
        tokenizer=Qwen2Tokenizer.from_pretrained(out / "tokenizer"),
        lm=Qwen3ForCausalLM.from_pretrained(out / "language_model", dtype=bf16).eval(),
        depth=MiniMaxMusic3RVQDepthDecoder.from_pretrained(out / "rvq_depth_decoder", torch_dtype=bf16).eval(),
        condition=MiniMaxMusic3ConditionEncoder.from_pretrained(out / "condition_encoder").eval(),
        dit=MiniMaxMusic3Transformer1DModel.from_pretrained(out / "transformer").eval(),
        vocoder=MiniMaxMusic3Vocoder.from_pretrained(out / "vocoder").eval(),
        scheduler=FlowMatchEulerDiscreteScheduler.from_pretrained(out / "scheduler"),
    )
