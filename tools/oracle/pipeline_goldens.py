"""Goldens of the whole reference pipeline on the tiny checkpoint: the assembled prompts and their
ids, and complete runs of `MiniMaxMusic3Blocks` with every random draw recorded (the sampling
distributions and the codes drawn from them, the noise of each window), so the Rust pipeline can
replay the same draws and be compared value for value."""

import copy
import json
from contextlib import contextmanager

import torch
from diffusers import MiniMaxMusic3Blocks
from diffusers.modular_pipelines import SequentialPipelineBlocks
from diffusers.modular_pipelines.minimax_music3 import denoise, encoders
from diffusers.modular_pipelines.minimax_music3.decoders import MiniMaxMusic3VocoderDecodeStep
from diffusers.modular_pipelines.minimax_music3.modular_blocks_minimax_music3 import MiniMaxMusic3CoreDenoiseStep

import tiny_model

CAPTIONS = [
    "warm lo-fi piano",
    "# Dreamy synth-pop\nfemale vocals, 100 BPM",
    "## Heading\n- bullet one\n* bullet two\n+ bullet three",
    "**bold** and *italic* and ***both***",
    "<|genre synth pop|> <|mood|> <|tempo   100 bpm |>",
    "line with trailing spaces   \n\n\n\nnext",
    "---\nrule above\n***\n___\n - - -",
    "• bullet dot\n    indented four\n        eight",
    "CRLF\r\nline two\r\n\r\nend",
    "ünïcödé ✨ 音楽 🎵 café",
    "a**b**c *d* e**f",
    "   ### three spaces heading\n    #### four spaces",
    "*unbalanced emphasis",
    "tab\tseparated\tcaption\t",
    "unit\x1cseparator\u2028line separator\x85next line",
    "**nested **bold** text**",
    "text with <|only|> tag and <||> empty",
    "#hashtag not heading\n#   # odd",
    "  - indented bullet\n\t* tab bullet",
    "ends with newline\n",
]
LYRICS = [
    "[verse]\nla la la",
    "[Verse 1] text after the tag is dropped\nsecond line",
    "[chorus][bridge] sing it\nhello",
    "  [Intro]  \nwords ^ more words ^ end",
    "line one [inline tag] line two",
    "[VERSE]\r\nCRLF lyrics\r\n[CHORUS]\r\n",
    "\n\n[verse]\n\n\nblank lines",
    "[Ünïcode Tag]\nÜber alles",
    "no tags at all",
    "[unclosed tag\n]stray bracket",
    "[ΣΟΦΟΣ ΣΑΣ]\nfinal sigma",
    "[Pre-Chorus]\t[Hook] \ttext\n[outro]",
]


def prompt_cases():
    cases = []
    for i in range(30):
        cases.append((CAPTIONS[i % len(CAPTIONS)], LYRICS[i % len(LYRICS)]))
    cases.append(("a long caption " * 150, "[verse]\n" + "la la la love\n" * 120))
    return cases


def assemble(tokenizer, prompt, lyrics):
    text = (
        f"{encoders._IM_START}{encoders._CAPTION_START}{encoders._clean_caption(prompt)}{encoders._CAPTION_END}"
        f"{encoders._LYRICS_START}{encoders._normalize_lyrics(lyrics)}{encoders._LYRICS_END}"
        f"{encoders._IM_END}{encoders._AUDIO_START}"
    )
    return text, tokenizer(text, return_tensors="pt")["input_ids"]


@contextmanager
def tiny_constants():
    c = tiny_model.CONSTANTS
    saved = (encoders._AUDIO_END_TOKEN_ID, encoders._AUDIO_CFG_TOKEN_ID, encoders._AUDIO_CODE_OFFSET, encoders._SEMANTIC_VOCAB_SIZE)
    encoders._AUDIO_END_TOKEN_ID = c["audio_end_id"]
    encoders._AUDIO_CFG_TOKEN_ID = c["audio_cfg_id"]
    encoders._AUDIO_CODE_OFFSET = c["code_offset"]
    encoders._SEMANTIC_VOCAB_SIZE = c["semantic_vocab_size"]
    try:
        yield
    finally:
        (encoders._AUDIO_END_TOKEN_ID, encoders._AUDIO_CFG_TOKEN_ID, encoders._AUDIO_CODE_OFFSET, encoders._SEMANTIC_VOCAB_SIZE) = saved


def prompt_goldens(tokenizer, path):
    out = []
    for prompt, lyrics in prompt_cases():
        text, ids = assemble(tokenizer, prompt, lyrics)
        uncond = ids.clone()
        uncond[:, 1:-2] = tiny_model.CONSTANTS["audio_cfg_id"]
        out.append({"prompt": prompt, "lyrics": lyrics, "text": text, "ids": ids[0].tolist(), "uncond_ids": uncond[0].tolist()})
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {path.name}: {len(out)} cases")


@contextmanager
def recording(replay=None):
    """Records every `torch.multinomial` call (its distribution and draw) and every window's noise;
    with `replay`, returns the recorded draws instead of sampling."""
    record = {"probs": [], "draws": [], "noise": []}
    real_multinomial, real_randn = torch.multinomial, denoise.randn_tensor
    draws = list(replay["draws"]) if replay else None
    noises = list(replay["noise"]) if replay else None

    def multinomial(probs, n, generator=None):
        record["probs"].append(probs.detach().float().clone())
        result = torch.tensor([[draws.pop(0)]]) if draws is not None else real_multinomial(probs, n, generator=generator)
        record["draws"].append(int(result.reshape(-1)[0]))
        return result

    def randn_tensor(shape, generator=None, device=None, dtype=None, **kw):
        noise = noises.pop(0).to(dtype) if noises is not None else real_randn(shape, generator=generator, device=device, dtype=dtype, **kw)
        record["noise"].append(noise.clone())
        return noise

    torch.multinomial, denoise.randn_tensor = multinomial, randn_tensor
    try:
        yield record
    finally:
        torch.multinomial, denoise.randn_tensor = real_multinomial, real_randn


def components(models, ar_dtype):
    lm = copy.deepcopy(models["lm"]).to(ar_dtype)
    depth = copy.deepcopy(models["depth"]).to(ar_dtype)
    condition = copy.deepcopy(models["condition"]).to(torch.bfloat16).to(ar_dtype)
    return dict(
        tokenizer=models["tokenizer"],
        language_model=lm,
        rvq_depth_decoder=depth,
        condition_encoder=condition,
        transformer=models["dit"],
        vocoder=models["vocoder"],
        scheduler=copy.deepcopy(models["scheduler"]),
    )


@torch.no_grad()
def run_pipeline(models, ar_dtype, request, replay=None):
    pipe = MiniMaxMusic3Blocks().init_pipeline()
    pipe.update_components(**components(models, ar_dtype))
    with tiny_constants(), recording(replay) as record:
        out = pipe(
            prompt=request["prompt"],
            lyrics=request["lyrics"],
            audio_duration=request["duration"],
            num_inference_steps=request["steps"],
            generator=torch.Generator().manual_seed(request["seed"]),
            output=["audios", "frame_hiddens", "text_ids", "latent_chunks"],
        )
    return out, record


@torch.no_grad()
def run_windows(models, ar_dtype, frame_hiddens, request, noise):
    """Only the denoise and decode blocks, from given frame hiddens and noise."""
    blocks = SequentialPipelineBlocks.from_blocks_dict(
        {"denoise": MiniMaxMusic3CoreDenoiseStep(), "decode": MiniMaxMusic3VocoderDecodeStep()}
    )
    pipe = blocks.init_pipeline()
    comps = components(models, ar_dtype)
    pipe.update_components(**{k: comps[k] for k in ("condition_encoder", "transformer", "vocoder", "scheduler")})
    with recording({"draws": [], "noise": noise}):
        out = pipe(
            frame_hiddens=frame_hiddens.to(ar_dtype),
            num_inference_steps=request["steps"],
            generator=torch.Generator().manual_seed(0),
            output="audios",
        )
    return out


def pipeline_golden(models, name, request, save, goldens_dir):
    """A reference run (bf16 AR half) with its draws recorded, then two controls: the AR half in f32
    replaying the same draws (frame hiddens), and the windows with an f32 condition encoder on the
    reference's frame hiddens and noise (waveform)."""
    out, record = run_pipeline(models, torch.bfloat16, request)
    control_ar, control_record = run_pipeline(models, torch.float32, request, replay=record)
    control_wave = run_windows(models, torch.float32, out["frame_hiddens"], request, record["noise"])
    def split(probs):
        semantic = [p for p in probs if p.shape[-1] == tiny_model.LM["vocab_size"]]
        depth = [p for p in probs if p.shape[-1] == tiny_model.DEPTH["audio_vocab_size"]]
        assert len(semantic) + len(depth) == len(probs)
        return torch.cat(semantic), torch.cat(depth)

    semantic, depth = split(record["probs"])
    semantic_control, depth_control = split(control_record["probs"])
    tensors = {
        "semantic_probs_control": semantic_control,
        "depth_probs_control": depth_control,
        "text_ids": out["text_ids"],
        "draws": torch.tensor(record["draws"], dtype=torch.int64),
        "semantic_probs": semantic,
        "depth_probs": depth,
        "frame_hiddens": out["frame_hiddens"][0],
        "frame_hiddens_control": control_ar["frame_hiddens"][0],
        "waveform": torch.as_tensor(out["audios"])[0],
        "waveform_control": torch.as_tensor(control_wave)[0],
    }
    for i, n in enumerate(record["noise"]):
        tensors[f"noise_{i}"] = n[0]
    for i, l in enumerate(out["latent_chunks"]):
        tensors[f"latents_{i}"] = l[0]
    save(name, tensors)
    (goldens_dir / f"{name}.json").write_text(json.dumps(request, ensure_ascii=False, indent=1) + "\n")
