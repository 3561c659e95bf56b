"""Stage (a): the acoustic autoencoder. Its decoder is the Music3 vocoder (diffusers'
`MiniMaxMusic3Vocoder`, the class the engine runs); its encoder is ours, a mirror of the decoder.
Each audio channel is one stream of LATENT_CHANNELS / 2 latents per 512 samples, as the vocoder
folds stereo. Trained as a VAE with a small KL term (so latents sit near unit scale for the DiT)
on a multi-resolution spectral loss."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from diffusers import MiniMaxMusic3Vocoder
from torch.nn.utils.parametrizations import weight_norm

import sizes

STRIDES = (2, 4, 8, 8)  # the decoder's (8, 8, 4, 2) in reverse
ENCODER_WIDTH = 16


class Snake(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))

    def forward(self, x):
        return x + (self.alpha + 1e-9).reciprocal() * torch.sin(self.alpha * x).pow(2)


class ResidualUnit(nn.Module):
    def __init__(self, dim: int, dilation: int):
        super().__init__()
        self.block = nn.Sequential(
            Snake(dim),
            weight_norm(nn.Conv1d(dim, dim, 7, dilation=dilation, padding=3 * dilation)),
            Snake(dim),
            weight_norm(nn.Conv1d(dim, dim, 1)),
        )

    def forward(self, x):
        return x + self.block(x)


class Encoder(nn.Module):
    """Mono waveform [B, 1, T] -> mean and log-variance [B, Z, T / 512] each."""

    def __init__(self, latent: int):
        super().__init__()
        layers = [weight_norm(nn.Conv1d(1, ENCODER_WIDTH, 7, padding=3))]
        width = ENCODER_WIDTH
        for stride in STRIDES:
            layers += [ResidualUnit(width, 1), ResidualUnit(width, 3), ResidualUnit(width, 9), Snake(width)]
            layers.append(weight_norm(nn.Conv1d(width, width * 2, 2 * stride, stride=stride, padding=math.ceil(stride / 2))))
            width *= 2
        layers += [Snake(width), weight_norm(nn.Conv1d(width, 2 * latent, 3, padding=1))]
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        mean, log_var = self.net(x).chunk(2, dim=1)
        return mean, log_var.clamp(-12, 4)


class Autoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder(sizes.LATENT_CHANNELS // 2)
        self.decoder = MiniMaxMusic3Vocoder(**sizes.VOCODER)

    def encode(self, stereo: torch.Tensor, sample: bool = False):
        """[B, 2, T] -> latents [B, C, T/512] in the vocoder's layout (left's half first), and the KL."""
        b, _, t = stereo.shape
        mean, log_var = self.encoder(stereo.reshape(b * 2, 1, t))
        z = mean + torch.randn_like(mean) * (0.5 * log_var).exp() if sample else mean
        kl = 0.5 * (mean.pow(2) + log_var.exp() - 1 - log_var).mean()
        return z.reshape(b, -1, z.shape[-1]), kl

    def forward(self, stereo):
        z, kl = self.encode(stereo, sample=True)
        return self.decoder(z), kl


def spectral_loss(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Log-magnitude L1 plus spectral convergence over five resolutions."""
    p = predicted.reshape(-1, predicted.shape[-1]).float()
    t = target.reshape(-1, target.shape[-1]).float()
    total = 0.0
    for n_fft in (256, 512, 1024, 2048, 4096):
        window = torch.hann_window(n_fft, device=p.device)
        sp = torch.stft(p, n_fft, n_fft // 4, window=window, return_complex=True).abs()
        st = torch.stft(t, n_fft, n_fft // 4, window=window, return_complex=True).abs()
        total = total + F.l1_loss(torch.log(sp + 1e-5), torch.log(st + 1e-5))
        total = total + torch.linalg.norm(sp - st) / (torch.linalg.norm(st) + 1e-7)
    return total / 5
