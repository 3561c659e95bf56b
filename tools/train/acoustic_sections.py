"""Can the acoustic half render what the tags ask for, given the codes? The true codes of
renderings with sections (held-out pieces) -> the shipped language model's frame hiddens
(teacher-forced, as the DiT was trained) -> the reference's denoise and decode blocks (diffusers
0.42.1) -> `section_check`'s loudness and density change at each boundary, beside the renderings'
own, and against the tags rotated by one section (the control). If the acoustic half follows
here, a model whose songs miss a change misses it in its codes.

    python tools/train/acoustic_sections.py --model M-bf16 [--songs 16]
        # M-bf16: a bf16 export (export_captions.py's output); its acoustic half is used
"""

import argparse
from pathlib import Path

import common  # noqa: F401
import numpy as np
import torch
from diffusers import (
    FlowMatchEulerDiscreteScheduler,
    MiniMaxMusic3ConditionEncoder,
    MiniMaxMusic3Transformer1DModel,
    MiniMaxMusic3Vocoder,
)
from diffusers.modular_pipelines import SequentialPipelineBlocks
from diffusers.modular_pipelines.minimax_music3.decoders import MiniMaxMusic3VocoderDecodeStep
from diffusers.modular_pipelines.minimax_music3.modular_blocks_minimax_music3 import MiniMaxMusic3CoreDenoiseStep

import dataset
import section_check
import sections
import shipped
import synth
from common import jobs
from train_acoustic import song_hiddens


def acoustic_pipeline(model: Path):
    blocks = SequentialPipelineBlocks.from_blocks_dict(
        {"denoise": MiniMaxMusic3CoreDenoiseStep(), "decode": MiniMaxMusic3VocoderDecodeStep()}
    )
    pipe = blocks.init_pipeline()
    bf16, f32 = torch.bfloat16, torch.float32
    pipe.update_components(
        condition_encoder=MiniMaxMusic3ConditionEncoder.from_pretrained(model / "condition_encoder", torch_dtype=bf16).eval(),
        transformer=MiniMaxMusic3Transformer1DModel.from_pretrained(model / "transformer", torch_dtype=f32).eval(),
        vocoder=MiniMaxMusic3Vocoder.from_pretrained(model / "vocoder", torch_dtype=f32).eval(),
        scheduler=FlowMatchEulerDiscreteScheduler.from_pretrained(model / "scheduler"),
    )
    return pipe


def section_plan(song, seconds: float, rotated: bool = False):
    """(kind, start s, end s) of each section the song was rendered with; `rotated`, each
    section given the next one's kind (the control: the right times, the wrong tags)."""
    kinds = sections.kinds_in(song.lyrics)[: len(song.section_starts)]
    if rotated:
        kinds = kinds[1:] + kinds[:1]
    starts = [f / synth.FRAME_RATE for f in song.section_starts]
    ends = starts[1:] + [seconds]
    return [(kinds[i], start, min(end, seconds)) for i, (start, end) in enumerate(zip(starts, ends))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True, help="a bf16 export whose acoustic half is checked")
    parser.add_argument("--songs", type=int, default=16, help="held-out pieces rendered with sections")
    args = parser.parse_args()
    songs = [s for s in dataset.render_set(args.songs, 22.0, jobs(), held_out=True, sectioned_share=1.0) if s.lyrics]
    lm, depth, tok, constants = shipped.load_ar_half(shipped.DEFAULT)
    hiddens = song_hiddens(lm, depth, songs, tok, constants, torch.device("cpu"), torch.autocast("cpu", enabled=False))
    pipe = acoustic_pipeline(args.model)
    rendered, made, control = [], [], []
    for k, (song, hidden) in enumerate(zip(songs, hiddens)):
        with torch.no_grad():
            out = pipe(frame_hiddens=hidden[None], num_inference_steps=20, generator=torch.Generator().manual_seed(k),
                       output="audios")
        audio = np.asarray(out[0] if isinstance(out, (list, tuple)) else out, dtype=np.float32).reshape(2, -1)
        mono = audio.mean(0).astype(np.float64)
        truth = song.audio.mean(0).astype(np.float64)
        seconds = min(len(mono), len(truth)) / synth.SAMPLE_RATE
        made += section_check.boundary_changes(mono, section_plan(song, seconds))
        rendered += section_check.boundary_changes(truth, section_plan(song, seconds))
        control += section_check.boundary_changes(mono, section_plan(song, seconds, rotated=True))
    for title, changes in (("the renderings", rendered), ("the acoustic half from their codes", made),
                           ("the same, scored against the tags rotated (the control)", control)):
        loud, dense = section_check.score(changes)
        print(f"{title}: loudness r = {loud:.2f}, density r = {dense:.2f}, {len(changes)} boundaries")


if __name__ == "__main__":
    main()
