"""A byte-level BPE in Qwen2's format, learned from the captions the synthesizer writes, with the
prompt template's special tokens. Its size fixes the code offset and the LM's vocabulary."""

import json
import sys
from pathlib import Path

import numpy as np

import sizes
import synth

# The prompt template's special tokens and Qwen2's split pattern, as the oracle's tiny model has them.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "oracle"))
from tiny_model import QWEN2_PATTERN, SPECIAL_TOKENS  # noqa: E402

VOCAB = 1024
LYRICS = ["[instrumental]", "[intro]\n[verse]\n[chorus]\n[outro]", "[verse]\n[chorus]", "[start]", "[bridge]"]


def caption_corpus(pieces: list[dict], seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    styles = sorted({p["style"] for p in pieces})
    meters = sorted({p["meter"] for p in pieces})
    out = []
    for _ in range(20000):
        out.append(
            synth.caption_for(
                styles[rng.integers(len(styles))],
                synth.ENSEMBLES[rng.integers(len(synth.ENSEMBLES))][0],
                int(rng.integers(60, 161)),
                int(rng.integers(12)),
                ["major", "minor"][rng.integers(2)],
                meters[rng.integers(len(meters))],
                bool(rng.integers(2)),
                int(rng.integers(3)),
            )
        )
    return out + LYRICS * 100


def build(pieces: list[dict], out: Path):
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
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(caption_corpus(pieces), trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIAL_TOKENS])
    constants = dict(sizes.CONSTANTS)
    constants["audio_end_id"] = tok.token_to_id("<|audio_end|>")
    constants["audio_cfg_id"] = tok.token_to_id("<|audio_cfg|>")
    constants["code_offset"] = (tok.get_vocab_size() + 15) // 16 * 16
    vocab_size = (constants["code_offset"] + constants["semantic_vocab_size"] + 31) // 32 * 32
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    (out / "songloom.json").write_text(json.dumps(constants, indent=2) + "\n")
    return tok, constants, vocab_size


def write_config(folder: Path):
    """The tokenizer folder's `tokenizer_config.json` beside its `tokenizer.json`."""
    config = {"tokenizer_class": "Qwen2Tokenizer", "model_max_length": 131072, "clean_up_tokenization_spaces": False}
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def prompt_ids(tok, caption: str, lyrics: str) -> list[int]:
    """The reference's prompt, built by its own helpers (byte-exact with the engine's)."""
    from diffusers.modular_pipelines.minimax_music3.encoders import _clean_caption, _normalize_lyrics

    text = (
        f"<|im_start|><|caption_start|>{_clean_caption(caption)}<|caption_end|>"
        f"<|lyrics_start|>{_normalize_lyrics(lyrics)}<|lyrics_end|><|im_end|><|audio_start|>"
    )
    return tok.encode(text).ids
