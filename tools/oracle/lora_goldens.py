"""Writes small LoRA adapters for the tiny checkpoint and the goldens of the stages they change.

The adapters come in the two formats people publish:
- PEFT folders (`adapter_config.json` + `adapter_model.safetensors`), one per component, made by
  `peft.get_peft_model(...).save_pretrained(...)`: `tests/fixtures/lora/{lm,depth,dit}-peft/`.
  The LM's uses `rank_pattern` and `alpha_pattern`, the depth decoder's `use_rslora`.
- A diffusers pipeline file, `tests/fixtures/lora/pytorch_lora_weights.safetensors`: keys prefixed
  by the component (`language_model.`, `rvq_depth_decoder.`, `transformer.`), PEFT's `lora_A` /
  `lora_B` names, a per-module `.alpha` for the depth decoder and the DiT (alpha / rank) and none
  for the language model (a factor of 1).

diffusers 0.42.1 has no LoRA loader for MiniMax-Music3's models (neither the DiT nor the depth
decoder mixes in `PeftAdapterMixin`), so the reference is what `load_lora_adapter` does inside:
PEFT's `inject_adapter_in_model` + `set_peft_model_state_dict`, with the `LoraConfig` that
diffusers' own `get_peft_kwargs` makes from the file's ranks and `.alpha` values. The PEFT folders
are loaded with `PeftModel.from_pretrained`. Adapters run unmerged, as PEFT runs them.

Each golden holds the stage's inputs (the same as `lm`, `depth` and `dit`), then per adapter format
`{peft,pipeline}_reference` (the reference dtype policy) and `{peft,pipeline}_control` (one
precision up). The pipeline file is applied at a user scale of PIPELINE_SCALE.

Run from the repository root, after make_goldens.py:  python tools/oracle/lora_goldens.py
"""

import copy
import json
import sys
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model, inject_adapter_in_model, set_peft_model_state_dict
from peft.tuners.lora import LoraLayer
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).parent))
import tiny_model  # noqa: E402
from diffusers.modular_pipelines.minimax_music3 import encoders  # noqa: E402
from diffusers.utils.peft_utils import get_peft_kwargs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
MODEL = FIXTURES / "tiny-music3"
GOLDENS = FIXTURES / "goldens"
LORA = FIXTURES / "lora"
PIPELINE_FILE = LORA / "pytorch_lora_weights.safetensors"
# The user's scale (`--lora FILE:SCALE`) the pipeline file's goldens are made at.
PIPELINE_SCALE = 0.5
# Each adapter's delta B @ A times its factor is about this fraction of the weight it changes, so
# that the adapter moves every output far beyond the parity bounds.
DELTA_GAIN = 0.3

torch.set_num_threads(1)

LM_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
DEPTH_TARGETS = ["to_q", "to_k", "to_v", "to_out", "gate_proj", "up_proj", "down_proj"]
DIT_TARGETS = ["to_q", "to_k", "to_v", "to_out.0", "ff_in", "ff_out"]


def golden_inputs(name):
    return load_file(GOLDENS / f"{name}.safetensors")


def fill_lora(model, seed, factor_of):
    """Seeded random A and B for every LoRA layer (PEFT zeroes B, which would change nothing)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, module in sorted(model.named_modules(), key=lambda m: m[0]):
            if not isinstance(module, LoraLayer):
                continue
            for adapter, a in module.lora_A.items():
                b = module.lora_B[adapter]
                rank, fan_in = a.weight.shape
                factor = factor_of(name, module, adapter)
                a.weight.copy_(torch.randn(a.weight.shape, generator=gen) / fan_in**0.5)
                b.weight.copy_(torch.randn(b.weight.shape, generator=gen) * DELTA_GAIN / (rank**0.5 * factor))


def peft_factor(name, module, adapter):
    return module.scaling[adapter]


def scale_lora(model, scale):
    for module in model.modules():
        if isinstance(module, LoraLayer):
            module.scale_layer(scale)


# ---------------------------------------------------------------- running the stages


@torch.no_grad()
def lm_outputs(lm, dtype, g):
    """The `lm` golden's run: prefill of the CFG pair, then the feedback steps."""
    base = lm.get_base_model() if isinstance(lm, PeftModel) else lm
    text_ids = g["input_ids"]
    out = base.model(inputs_embeds=base.model.embed_tokens(text_ids), use_cache=True)
    pkv, hiddens = out.past_key_values, [out.last_hidden_state[:, -1]]
    for step in g["feedback"]:
        out = base.model(inputs_embeds=step[:, None].to(dtype), past_key_values=pkv, use_cache=True)
        pkv = out.past_key_values
        hiddens.append(out.last_hidden_state[:, -1])
    return torch.stack(hiddens).float()


@torch.no_grad()
def depth_outputs(lm, depth, dtype, g):
    """The `depth` golden's teacher-forced frame through the reference's `_generate_depth_codes`."""
    constants = json.loads((MODEL / "songloom.json").read_text())
    depth = depth.get_base_model() if isinstance(depth, PeftModel) else depth
    codes = g["codes"].long()
    forced = list(codes[1:])
    original_sampler, original_offset = encoders._sample_top_k, encoders._AUDIO_CODE_OFFSET
    encoders._sample_top_k = lambda logits, generator: forced.pop(0).reshape(1)
    encoders._AUDIO_CODE_OFFSET = constants["code_offset"]
    try:
        frame_codes, hiddens = encoders._generate_depth_codes(
            lm, depth, g["last_hidden"].to(dtype), codes[:1].repeat(2), None
        )
    finally:
        encoders._sample_top_k, encoders._AUDIO_CODE_OFFSET = original_sampler, original_offset
    assert torch.equal(frame_codes[0], codes), (frame_codes, codes)
    return hiddens.float().reshape(7, -1)


@torch.no_grad()
def dit_outputs(dit, dtype, g):
    dit = dit.get_base_model() if isinstance(dit, PeftModel) else dit
    latents, condition = g["latents"][None].to(dtype), g["condition"][None].to(dtype)
    return torch.stack(
        [dit(latents, t.reshape(1).to(dtype), condition, return_dict=False)[0][0] for t in g["timesteps"]]
    ).float()


# ---------------------------------------------------------------- the adapters


def make_peft_folder(base, config, seed, out):
    model = get_peft_model(copy.deepcopy(base), config)
    fill_lora(model, seed, peft_factor)
    model.save_pretrained(out)
    (out / "README.md").unlink()  # PEFT's model card template
    config_path = out / "adapter_config.json"
    config = json.loads(config_path.read_text())
    if config.get("base_model_name_or_path"):  # an absolute path on the machine that made it
        config["base_model_name_or_path"] = str(Path(config["base_model_name_or_path"]).relative_to(FIXTURES))
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return out


def pipeline_tensors(models):
    """The pipeline file's tensors: each component's adapter as PEFT names, prefixed; `.alpha` for
    the depth decoder and the DiT, varied per module; the LM's in bf16, none with an alpha."""
    tensors = {}
    plan = [
        ("language_model", models["lm"], LM_TARGETS, 4, None, torch.bfloat16, 51),
        ("rvq_depth_decoder", models["depth"], DEPTH_TARGETS, 4, 8.0, torch.float32, 52),
        ("transformer", models["dit"], DIT_TARGETS, 2, 4.0, torch.float32, 53),
    ]
    for prefix, base, targets, rank, alpha, dtype, seed in plan:
        model = inject_adapter_in_model(LoraConfig(r=rank, lora_alpha=rank, target_modules=targets), copy.deepcopy(base))
        gen = torch.Generator().manual_seed(seed)
        names = sorted(n for n, m in model.named_modules() if isinstance(m, LoraLayer))
        for i, name in enumerate(names):
            module = model.get_submodule(name)
            a, b = module.lora_A["default"].weight, module.lora_B["default"].weight
            module_alpha = None if alpha is None else alpha * (1 + i % 2)
            factor = 1.0 if module_alpha is None else module_alpha / rank
            tensors[f"{prefix}.{name}.lora_A.weight"] = (torch.randn(a.shape, generator=gen) / a.shape[1] ** 0.5).to(dtype)
            b_std = DELTA_GAIN / (rank**0.5 * factor)
            tensors[f"{prefix}.{name}.lora_B.weight"] = (torch.randn(b.shape, generator=gen) * b_std).to(dtype)
            if module_alpha is not None:
                tensors[f"{prefix}.{name}.alpha"] = torch.tensor(module_alpha)
    return tensors


def load_pipeline_lora(base, tensors, prefix):
    """diffusers' `load_lora_adapter` for a model that lacks it: the prefix's keys, `.alpha`
    values as network alphas, the config from diffusers' `get_peft_kwargs`, then PEFT."""
    state = {k.removeprefix(f"{prefix}."): v for k, v in tensors.items() if k.startswith(f"{prefix}.")}
    alphas = {k: float(v) for k, v in state.items() if k.endswith(".alpha")}
    state = {k: v for k, v in state.items() if not k.endswith(".alpha")}
    ranks = {f"^{k}": v.shape[1] for k, v in state.items() if "lora_B" in k}
    kwargs = get_peft_kwargs(ranks, network_alpha_dict=alphas or None, peft_state_dict=state)
    model = inject_adapter_in_model(LoraConfig(**kwargs), copy.deepcopy(base))
    result = set_peft_model_state_dict(model, state)
    assert not [k for k in result.unexpected_keys if "lora" in k], result.unexpected_keys
    return model


def save(name, tensors):
    clean = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    save_file({k: v.float() if v.is_floating_point() else v for k, v in clean.items()}, GOLDENS / f"{name}.safetensors")
    (GOLDENS / f"{name}.safetensors").chmod(0o644)
    print(f"wrote {name}: " + ", ".join(f"{k}{list(v.shape)}" for k, v in clean.items()))


def main():
    models = tiny_model.load(MODEL)
    LORA.mkdir(parents=True, exist_ok=True)
    lm_cfg = LoraConfig(
        r=4,
        lora_alpha=8,
        target_modules=LM_TARGETS,
        rank_pattern={"down_proj": 2},
        alpha_pattern={"o_proj": 2},
    )
    depth_cfg = LoraConfig(r=4, lora_alpha=6, use_rslora=True, target_modules=DEPTH_TARGETS)
    dit_cfg = LoraConfig(r=4, lora_alpha=4, target_modules=DIT_TARGETS)
    make_peft_folder(models["lm"], lm_cfg, 41, LORA / "lm-peft")
    make_peft_folder(models["depth"], depth_cfg, 42, LORA / "depth-peft")
    make_peft_folder(models["dit"], dit_cfg, 43, LORA / "dit-peft")
    pipeline = pipeline_tensors(models)
    save_file(pipeline, PIPELINE_FILE)
    print(f"wrote {PIPELINE_FILE.relative_to(ROOT)}: {len(pipeline)} tensors")
    for path in LORA.rglob("*.safetensors"):
        path.chmod(0o644)  # safetensors writes files private

    bf16 = torch.bfloat16

    def peft(base, folder):
        return PeftModel.from_pretrained(copy.deepcopy(base), LORA / folder).eval()

    def pipe(base, prefix):
        model = load_pipeline_lora(base, pipeline, prefix).eval()
        scale_lora(model, PIPELINE_SCALE)
        return model

    # Language model.
    g = golden_inputs("lm")
    out = dict(input_ids=g["input_ids"], feedback=g["feedback"])
    for kind, model in [("peft", peft(models["lm"], "lm-peft")), ("pipeline", pipe(models["lm"], "language_model"))]:
        out[f"{kind}_reference"] = lm_outputs(model, bf16, g)
        out[f"{kind}_control"] = lm_outputs(copy.deepcopy(model).float(), torch.float32, g)
    save("lora_lm", out)

    # Depth decoder (the LM without an adapter: only its embedding table is used).
    g = golden_inputs("depth")
    out = dict(last_hidden=g["last_hidden"], codes=g["codes"])
    lm = models["lm"]
    for kind, model in [
        ("peft", peft(models["depth"], "depth-peft")),
        ("pipeline", pipe(models["depth"], "rvq_depth_decoder")),
    ]:
        out[f"{kind}_reference"] = depth_outputs(lm, model, bf16, g)
        out[f"{kind}_control"] = depth_outputs(copy.deepcopy(lm).float(), copy.deepcopy(model).float(), torch.float32, g)
    save("lora_depth", out)

    # DiT (f32 reference, f64 control).
    g = golden_inputs("dit")
    out = dict(latents=g["latents"], condition=g["condition"], timesteps=g["timesteps"])
    for kind, model in [("peft", peft(models["dit"], "dit-peft")), ("pipeline", pipe(models["dit"], "transformer"))]:
        out[f"{kind}_reference"] = dit_outputs(model, torch.float32, g)
        out[f"{kind}_control"] = dit_outputs(copy.deepcopy(model).double(), torch.float64, g)
    save("lora_dit", out)


if __name__ == "__main__":
    main()
