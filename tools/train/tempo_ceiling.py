"""What the tempo check can reach: the synthesizer's own renderings of the 20 held-out captions'
pieces (at the caption's tempo and ensemble, no drums), their onsets counted as the Rust check
counts them (`tests/src/music_checks.rs::onset_rate`, ported here), against the asked tempo and
against the true note starts. Optionally the same count on a folder of songs `0.wav`..`19.wav`.

    python tools/train/tempo_ceiling.py [--songs DIR]
"""

import argparse
import json
from pathlib import Path

import numpy as np
import scipy.io.wavfile

import heldout
import synth

FFT, HOP, BANDS, COMPRESSION, MARGIN = 4096, 1024, 24, 100.0, 0.6


def band_powers(mono: np.ndarray) -> np.ndarray:
    """Each Hann-windowed frame's power in 24 log-spaced bands from 80 Hz to 16 kHz [frames, 24]."""
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(FFT) / FFT)
    power = np.array([np.abs(np.fft.rfft(mono[s : s + FFT] * window)) ** 2 for s in range(0, len(mono) - FFT + 1, HOP)])
    freqs = np.arange(FFT // 2 + 1) * synth.SAMPLE_RATE / FFT
    edges = 80.0 * (16000.0 / 80.0) ** (np.arange(BANDS + 1) / BANDS)
    return np.stack([power[:, (freqs >= lo) & (freqs < hi)].sum(1) for lo, hi in zip(edges[:-1], edges[1:])], 1)


def onset_rate(mono: np.ndarray) -> float:
    bands = band_powers(mono)
    log = np.log1p(COMPRESSION * bands / max(bands.max(), 1e-12))
    flux = np.maximum(log[1:] - log[:-1], 0).sum(1)
    onsets = []
    for i in range(1, len(flux) - 1):
        local = flux[max(i - 8, 0) : min(i + 8, len(flux))].mean()
        if flux[i] > flux[i - 1] and flux[i] >= flux[i + 1] and flux[i] > local + MARGIN:
            if not onsets or i - onsets[-1] >= 3:
                onsets.append(i)
    return len(onsets) / (len(mono) / synth.SAMPLE_RATE)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--songs", type=Path, help="a folder of 0.wav..19.wav made from the held-out captions")
    args = parser.parse_args()
    captions = json.loads(heldout.OUT.read_text())
    tempos = [c["tempo"] for c in captions]
    pieces, _ = heldout.held_out_pieces()
    names = [e[0] for e in synth.ENSEMBLES]
    counted, true = [], []
    for n, c in enumerate(captions):
        params = dict(tempo=c["tempo"], ensemble=names.index(c["ensemble"]), drums=False, transpose=0)
        r = synth.render(pieces[n], seed=n, max_seconds=8.0, params=params)
        counted.append(onset_rate(r.audio.mean(0).astype(np.float64)))
        true.append(sum(1 for f in r.onsets if f) / 8.0)
    print(
        f"renderings: counted onsets vs tempo r = {np.corrcoef(counted, tempos)[0, 1]:.2f}, vs true note starts r = {np.corrcoef(counted, true)[0, 1]:.2f}"
    )
    if args.songs:
        rates = [onset_rate(scipy.io.wavfile.read(args.songs / f"{n}.wav")[1].astype(np.float64).mean(1)) for n in range(20)]
        print(f"{args.songs}: counted onsets vs tempo r = {np.corrcoef(rates, tempos)[0, 1]:.2f}")


if __name__ == "__main__":
    main()
