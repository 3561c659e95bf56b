"""Writes tests/fixtures/goldens/dit_fp8.safetensors: the tiny DiT's velocity (the inputs and flow
times of goldens/dit.safetensors) with every block matrix product run the way `--precision fp8`
runs it, simulated in f32: each weight row (output channel) and each activation row (token)
scaled so that its largest magnitude is 448, rounded to float8_e4m3fn (ties to even), the products
of the rounded values accumulated in f64 and scaled back. The other products stay f32, as in the
reference. Its distance to the f32 reference is what FP8's rounding costs the tiny model: the
control that calibrates the fp8 parity bound (tests/tests/parity.rs).

Run from the repository root:  python tools/oracle/fp8_goldens.py
"""

from pathlib import Path

import torch
from diffusers import MiniMaxMusic3Transformer1DModel
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
E4M3_MAX = 448.0

torch.set_num_threads(1)


def quantize_rows(x):
    """Rows of x rounded to e4m3 with a scale each, returned as (values the codes stand for, scales)."""
    max_abs = x.abs().amax(dim=-1, keepdim=True)
    scale = torch.where((max_abs > 0) & max_abs.isfinite(), max_abs / E4M3_MAX, torch.ones_like(max_abs))
    codes = (x / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return codes.float(), scale


def fp8_linear(linear):
    """`linear`'s forward as the FP8 product computes it."""
    w_codes, w_scales = quantize_rows(linear.weight.detach().float())

    def forward(x):
        shape = x.shape
        rows = x.reshape(-1, shape[-1]).float()
        x_codes, x_scales = quantize_rows(rows)
        y = (x_codes.double() @ w_codes.double().T).float() * x_scales * w_scales.T
        if linear.bias is not None:
            y = y + linear.bias.float()
        return y.reshape(*shape[:-1], -1)

    return forward


@torch.no_grad()
def main():
    dit = MiniMaxMusic3Transformer1DModel.from_pretrained(FIXTURES / "tiny-music3" / "transformer").float().eval()
    count = 0
    for block in dit.transformer_blocks:
        for linear in [block.attn.to_q, block.attn.to_k, block.attn.to_v, block.attn.to_out[0], block.ff_in, block.ff_out]:
            linear.forward = fp8_linear(linear)
            count += 1
    golden = load_file(FIXTURES / "goldens" / "dit.safetensors")
    latents, condition = golden["latents"][None], golden["condition"][None]
    velocity = torch.stack(
        [dit(latents, t.reshape(1), condition, return_dict=False)[0][0] for t in golden["timesteps"]]
    )
    out = FIXTURES / "goldens" / "dit_fp8.safetensors"
    save_file({"fp8_simulated": velocity.contiguous()}, out)
    reference = golden["reference"]
    rel = (velocity - reference).abs().max() / reference.abs().max()
    print(f"wrote {out.name}: {count} block products in FP8, rel {rel:.3e} from the f32 reference")


if __name__ == "__main__":
    main()
