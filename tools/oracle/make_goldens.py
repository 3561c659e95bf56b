"""Writes the tiny checkpoint and the per-stage goldens under tests/fixtures/.

Each golden file holds a stage's inputs, `reference` (the reference run in the dtype policy the
pipeline uses: bf16 for the LM, depth decoder and condition encoder, f32 for the DiT, scheduler and
vocoder) and `control` (the same run one precision up: f32 from the same bf16-valued weights, or
f64). The distance between the two calibrates each Rust test's bound.

Run from the repository root:  python tools/oracle/make_goldens.py
"""

import copy
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).parent))
import pipeline_goldens  # noqa: E402
import tiny_model  # noqa: E402
from diffusers.modular_pipelines.minimax_music3 import encoders  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
MODEL = FIXTURES / "tiny-music3"
GOLDENS = FIXTURES / "goldens"

torch.manual_seed(0)
torch.set_num_threads(1)  # thread count changes reduction order; keep the goldens reproducible


def rand(*shape, seed, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen) * scale


def save(name, tensors):
    GOLDENS.mkdir(parents=True, exist_ok=True)
    clean = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    for k, v in clean.items():
        if v.is_floating_point():
            clean[k] = v.float()
    save_file(clean, GOLDENS / f"{name}.safetensors")
    print(f"wrote {name}: " + ", ".join(f"{k}{list(v.shape)}" for k, v in clean.items()))


def bf16_values(t):
    return t.to(torch.bfloat16).float()


@torch.no_grad()
def lm_goldens(lm_bf16):
    """Prefill of a [2, S] CFG pair, then decode steps fed with frame-feedback embeddings."""
    c = tiny_model.CONSTANTS
    seq = 23
    gen = torch.Generator().manual_seed(11)
    ids = torch.randint(0, c["audio_cfg_id"], (1, seq), generator=gen)
    uncond = ids.clone()
    uncond[:, 1:-2] = c["audio_cfg_id"]
    text_ids = torch.cat((ids, uncond), dim=0)
    steps = 4
    feedback = bf16_values(rand(steps, 2, 1, tiny_model.LM["hidden_size"], seed=12))
    feedback[:, 1] = feedback[:, 0]  # both CFG rows get the same frame, as in the pipeline

    def run(model, dtype):
        embeds = model.model.embed_tokens(text_ids)
        out = model.model(inputs_embeds=embeds, use_cache=True)
        pkv = out.past_key_values
        hiddens = [out.last_hidden_state[:, -1]]
        for s in range(steps):
            out = model.model(inputs_embeds=feedback[s].to(dtype), past_key_values=pkv, use_cache=True)
            pkv = out.past_key_values
            hiddens.append(out.last_hidden_state[:, -1])
        logits = model.lm_head(hiddens[0]).float()
        return torch.stack(hiddens).float(), logits

    ref, ref_logits = run(lm_bf16, torch.bfloat16)
    control, control_logits = run(copy.deepcopy(lm_bf16).float(), torch.float32)
    save(
        "lm",
        dict(
            input_ids=text_ids,
            feedback=feedback[:, :, 0],
            reference=ref,
            control=control,
            reference_logits=ref_logits,
            control_logits=control_logits,
        ),
    )


@torch.no_grad()
def depth_goldens(lm_bf16, depth_bf16):
    """One frame of the depth decoder, teacher-forced: the reference's own `_generate_depth_codes`
    with its sampler replaced by the given codes; the heads' raw logits captured by hooks."""
    c = tiny_model.CONSTANTS
    hidden = tiny_model.DEPTH["hidden_size"]
    last_hidden = bf16_values(rand(2, hidden, seed=21))
    gen = torch.Generator().manual_seed(22)
    c0 = torch.randint(0, c["semantic_vocab_size"], (1,), generator=gen)
    rest = torch.randint(0, tiny_model.DEPTH["audio_vocab_size"], (7,), generator=gen)
    codes = torch.cat((c0, rest))

    def run(lm, depth, dtype):
        forced = list(rest)
        captured = []
        hooks = [h.register_forward_hook(lambda m, i, o: captured.append(o.float())) for h in depth.audio_heads]
        original_sampler, original_offset = encoders._sample_top_k, encoders._AUDIO_CODE_OFFSET
        encoders._sample_top_k = lambda logits, generator: forced.pop(0).reshape(1)
        encoders._AUDIO_CODE_OFFSET = c["code_offset"]
        try:
            frame_codes, hiddens = encoders._generate_depth_codes(
                lm, depth, last_hidden.to(dtype), c0.repeat(2), None
            )
        finally:
            encoders._sample_top_k, encoders._AUDIO_CODE_OFFSET = original_sampler, original_offset
            for h in hooks:
                h.remove()
        assert torch.equal(frame_codes[0], codes), (frame_codes, codes)
        return hiddens.float().reshape(7, hidden), torch.stack(captured)

    ref_h, ref_logits = run(lm_bf16, depth_bf16, torch.bfloat16)
    con_h, con_logits = run(copy.deepcopy(lm_bf16).float(), copy.deepcopy(depth_bf16).float(), torch.float32)
    save(
        "depth",
        dict(
            last_hidden=last_hidden,
            codes=codes,
            reference=ref_h,
            control=con_h,
            reference_logits=ref_logits,
            control_logits=con_logits,
        ),
    )


@torch.no_grad()
def condition_goldens(name, condition_f32, frames, seed):
    hidden = tiny_model.CONDITION["condition_hidden_dim"] * tiny_model.CONDITION["num_condition_layers"]
    frame_hiddens = bf16_values(rand(1, frames, hidden, seed=seed))
    reference = copy.deepcopy(condition_f32).to(torch.bfloat16)(frame_hiddens.to(torch.bfloat16))
    control = copy.deepcopy(condition_f32).to(torch.bfloat16).float()(frame_hiddens)
    save(name, dict(frame_hiddens=frame_hiddens[0], reference=reference[0], control=control[0]))


@torch.no_grad()
def dit_goldens(dit):
    cfg = tiny_model.DIT
    length = 24
    latents = rand(1, cfg["in_channels"], length, seed=31)
    condition = rand(1, length, cfg["condition_dim"], seed=32)
    times = torch.tensor([0.0, 0.37, 0.9])
    ref = torch.stack([dit(latents, t.reshape(1), condition, return_dict=False)[0][0] for t in times])
    dit64 = copy.deepcopy(dit).double()
    control = torch.stack(
        [dit64(latents.double(), t.reshape(1).double(), condition.double(), return_dict=False)[0][0] for t in times]
    )
    save("dit", dict(latents=latents[0], condition=condition[0], timesteps=times, reference=ref, control=control))


@torch.no_grad()
def scheduler_goldens(scheduler):
    tensors = {}
    for steps in (4, 30):
        sched = copy.deepcopy(scheduler)
        sigmas = np.linspace(1.0, 1.0 / steps, steps)
        sched.set_timesteps(sigmas=sigmas)
        tensors[f"timesteps_{steps}"] = sched.timesteps.clone()
        tensors[f"sigmas_{steps}"] = sched.sigmas.clone()
        sample = rand(8, 16, seed=40 + steps)
        velocity = rand(8, 16, seed=50 + steps)
        outs = []
        for t in sched.timesteps:
            sample = sched.step(velocity, t, sample, return_dict=False)[0]
            outs.append(sample)
        tensors[f"velocity_{steps}"] = velocity
        tensors[f"start_{steps}"] = rand(8, 16, seed=40 + steps)
        tensors[f"euler_{steps}"] = torch.stack(outs)
    save("scheduler", tensors)


@torch.no_grad()
def vocoder_goldens(vocoder):
    latents = rand(1, tiny_model.VOCODER["latent_channels"], 6, seed=61)
    ref = vocoder(latents)[0]
    control = copy.deepcopy(vocoder).double()(latents.double())[0]
    save("vocoder", dict(latents=latents[0], reference=ref, control=control))


def main():
    tiny_model.build(MODEL)
    models = tiny_model.load(MODEL)
    condition_down = tiny_model.build_condition_down(FIXTURES / "tiny-music3-down")
    lm_goldens(models["lm"])
    depth_goldens(models["lm"], models["depth"])
    condition_goldens("condition_up", models["condition"], frames=12, seed=71)
    condition_goldens("condition_down", condition_down, frames=7, seed=72)
    dit_goldens(models["dit"])
    scheduler_goldens(models["scheduler"])
    vocoder_goldens(models["vocoder"])

    pipeline_goldens.prompt_goldens(models["tokenizer"], GOLDENS / "prompts.json")
    short = dict(prompt="warm lo-fi piano", lyrics="[verse]\nla la la", duration=1.0, steps=2, seed=7)
    long = dict(prompt="# Dreamy synth-pop\n- female vocals", lyrics="[verse]\nla la la\n[chorus]\noh oh", duration=12.08, steps=2, seed=3)
    pipeline_goldens.pipeline_golden(models, "pipeline_short", short, save, GOLDENS)
    pipeline_goldens.pipeline_golden(models, "pipeline_long", long, save, GOLDENS)


if __name__ == "__main__":
    main()
