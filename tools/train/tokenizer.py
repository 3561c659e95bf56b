"""The tokenizer: Qwen's own byte-level BPE (the vocabulary MiniMax-Music3's Qwen2 tokenizer uses),
pruned to the tokens that spell the most frequent English words and every description the caption
grammar writes, with the prompt template's special tokens. Ordinary words keep their identity (one
or two tokens each, as in Qwen), so a word the grammar never used is not shattered into bytes.
Its size fixes the code offset and the LM's vocabulary.

`python tools/train/tokenizer.py --qwen qwen.tiktoken --words small_en.msgpack.gz` writes
`data/tokenizer.json` (committed): `qwen.tiktoken` is Qwen's vocabulary as the PyPI package
`dashscope` 2.0.2 ships it (`dashscope/resources/qwen.tiktoken`, 151,643 ranked tokens) and
`small_en.msgpack.gz` is the word list of the PyPI package `wordfreq` 3.1.1 (English words by
frequency in broad text: Wikipedia, subtitles, news, books, the web)."""

import argparse
import base64
import json
import sys
from pathlib import Path

import numpy as np

import captions
import sizes
import synth

# The prompt template's special tokens and Qwen2's split pattern, as the oracle's tiny model has them.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "oracle"))
from tiny_model import QWEN2_PATTERN, SPECIAL_TOKENS  # noqa: E402

PRUNED = Path(__file__).resolve().parent / "data" / "tokenizer.json"
ENGLISH_WORDS = 1200  # the most frequent words kept as Qwen spells them, lower case and capitalized
FILLER_WORDS = 20000  # the most frequent words the filler draws from (spelt with the kept tokens)
LYRICS = ["[instrumental]", "[intro]\n[verse]\n[chorus]\n[outro]", "[verse]\n[chorus]", "[start]", "[bridge]"]


def caption_corpus(pieces: list[dict], seed: int = 0, count: int = 20000, with_filler: bool = True) -> list[str]:
    """Descriptions the grammar writes of random facts (every style and meter of the pieces)."""
    rng = np.random.default_rng(seed)
    styles = sorted({p["style"] for p in pieces})
    meters = sorted({p["meter"] for p in pieces})
    out = []
    for _ in range(count):
        facts = dict(
            style=styles[rng.integers(len(styles))],
            ensemble=int(rng.integers(len(synth.ENSEMBLES))),
            tempo=int(rng.integers(60, 161)),
            tonic=int(rng.integers(12)),
            mode=["major", "minor"][rng.integers(2)],
            meter=meters[rng.integers(len(meters))],
            drums=bool(rng.integers(2)),
        )
        out.append(captions.describe(facts, rng, with_filler))
    return out + LYRICS * 100


def frequent_words(words: Path, count: int) -> list[str]:
    """The `count` most frequent alphabetic words of wordfreq's list, most frequent first."""
    import gzip

    import msgpack

    bins = msgpack.unpackb(gzip.open(words).read(), raw=False)[1:]  # [0] is the header
    return [w for b in bins for w in b if w.isalpha()][:count]


def _bpe(piece: bytes, ranks: dict[bytes, int], below: int | None = None) -> list[bytes]:
    """tiktoken's merge loop: the lowest-ranked adjacent pair first, only ranks under `below`."""
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best, at = None, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (below is None or r < below) and (best is None or r < best):
                best, at = r, i
        if best is None:
            break
        parts[at : at + 2] = [parts[at] + parts[at + 1]]
    return parts


def prune_qwen(qwen: Path, words: Path, corpus: list[str], english_words: int = ENGLISH_WORDS):
    """Qwen's tokens that spell `corpus` and the most frequent English words, with every token a
    kept one is merged from, in Qwen's rank order; and their merges. Tokenizing with the pruned
    merges gives Qwen's own tokens for every kept word."""
    import regex

    ranks = {}
    for line in qwen.read_text().splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    frequent = frequent_words(words, english_words)
    pattern = regex.compile(QWEN2_PATTERN)
    pieces = set()
    for text in corpus:
        pieces.update(pattern.findall(text))
    for w in frequent:
        pieces.update([" " + w, w.capitalize()])
    kept = {bytes([b]) for b in range(256)}
    for piece in pieces:
        kept.update(_bpe(piece.encode(), ranks))
    # Close under merging: each token's two halves are kept too.
    merges, todo = {}, [t for t in kept if len(t) > 1]
    while todo:
        token = todo.pop()
        halves = _bpe(token, ranks, below=ranks[token])
        assert len(halves) == 2, (token, halves)
        merges[token] = halves
        for h in halves:
            if h not in kept:
                kept.add(h)
                if len(h) > 1:
                    todo.append(h)
    ordered = sorted(kept, key=lambda t: ranks[t])
    return ordered, [merges[t] for t in ordered if len(t) > 1], len(frequent)


def write_pruned(qwen: Path, words: Path, pieces: list[dict], out: Path = PRUNED):
    from tokenizers import Tokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    write_filler(words)
    ordered, merges, count = prune_qwen(qwen, words, caption_corpus(pieces, with_filler=False))
    spell = bytes_to_unicode()
    text = lambda t: "".join(spell[b] for b in t)  # noqa: E731
    tok = _shell()
    model = json.loads(tok.to_str())
    model["model"]["vocab"] = {text(t): i for i, t in enumerate(ordered)}
    model["model"]["merges"] = [[text(a), text(b)] for a, b in merges]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(Tokenizer.from_str(json.dumps(model)).to_str())
    print(f"{len(ordered)} tokens ({len(merges)} merges) from {count} English words and the grammar -> {out}")


def write_filler(words: Path, out: Path = captions.FILLER):
    """The frequent English words the grammar does not use, for its filler phrases: words the
    model must learn to pass over."""
    frequent = [w for w in frequent_words(words, FILLER_WORDS * 2) if w.isascii() and len(w) > 1][:FILLER_WORDS]
    styles = [{"style": s, "meter": "4/4"} for s in captions.STYLE_WORDS]
    grammar = set(" ".join(caption_corpus(styles, with_filler=False)).lower().split())
    out.write_text("\n".join(w for w in frequent if w not in grammar and w not in captions.MEANINGFUL) + "\n")


def _shell():
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    return tok


def build(out: Path):
    """The committed pruned tokenizer with the special tokens, and the constants that follow from
    it, written to `out`."""
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_file(str(PRUNED))
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


if __name__ == "__main__":
    import dataset

    parser = argparse.ArgumentParser()
    parser.add_argument("--qwen", type=Path, required=True, help="dashscope 2.0.2's resources/qwen.tiktoken")
    parser.add_argument("--words", type=Path, required=True, help="wordfreq 3.1.1's data/small_en.msgpack.gz")
    args = parser.parse_args()
    write_pruned(args.qwen, args.words, dataset.read_pieces())
