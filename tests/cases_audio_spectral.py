"""Coverage cases of the speech features (penstock.operators.audio.spectral), and the references
tests/operators/audio/test_spectral.py shares: a numpy STFT cut by slicing, in float64.

Tolerances: spectra of signals of amplitude about 1 (values up to about 2e4) within 0.05 plus a
relative 1e-4 (float32 transforms against float64).
"""
from __future__ import annotations

import numpy as np
from operator_cases import Case, on_device

from penstock import fn

RATE = 16000


def tones(durations=(0.1, 0.137, 0.2), seed=0) -> list:
    """Sines plus noise at 16 kHz, float32, one signal per duration."""
    rng = np.random.default_rng(seed)
    signals = []
    for duration in durations:
        t = np.arange(int(duration * RATE)) / RATE
        tone = 0.6 * np.sin(2 * np.pi * 440 * t) + 0.3 * np.sin(2 * np.pi * 3100 * t + 1.0)
        signals.append((tone + 0.05 * rng.standard_normal(t.size)).astype(np.float32))
    return signals


def hann(length):
    return 0.5 * (1 - np.cos(2 * np.pi * (np.arange(length) + 0.5) / length))


def numpy_stft(signal, nfft=None, window_length=512, window_step=256, window=None, power=2, center=True,
               reflect=True, layout="ft"):
    """The STFT cut by slicing: the signal padded by half a window (mirrored without the edge, or
    zeros), windows every window_step, each zero-padded to nfft."""
    nfft = nfft or window_length
    window = hann(window_length) if window is None else np.asarray(window, np.float64)
    signal = signal.astype(np.float64)
    if center:
        half = window_length // 2
        padded = np.pad(signal, (half, window_length - half), mode="reflect" if reflect else "constant")
        count = len(signal) // window_step + 1
    else:
        padded, count = signal, (len(signal) - window_length) // window_step + 1
    frames = np.stack([padded[i * window_step:i * window_step + window_length] for i in range(count)]) * window
    magnitude = np.abs(np.fft.rfft(frames, n=nfft, axis=1))
    result = magnitude ** 2 if power == 2 else magnitude
    return result if layout == "tf" else result.T


def _spectrogram_reference(samples, _):
    return [numpy_stft(signal, window_length=400, window_step=160, nfft=512) for signal in samples]


CASES = {
    "spectrogram": Case(lambda: tones(), lambda node, device: fn.spectrogram(
        on_device(node, device), device=device, window_length=400, window_step=160, nfft=512),
        _spectrogram_reference, max_abs=0.05, rtol=1e-4),
}
