"""Operator coverage cases of the audio operators (signal).

References: preemphasis_filter against scipy.signal.lfilter in float64 (float32 output: within
1e-6, the signals' scale being 1); nonsilent_region against a float64 moving mean square by numpy's
convolution of the squares (begin and length exact, on signals whose windows lie far from the
threshold).
"""
from __future__ import annotations

import numpy as np
import scipy.signal
from operator_cases import Case, on_device

from penstock import fn

RATE = 16000


def signals():
    """Sines plus noise with silent stretches (a hundredth of the loud level), 0.1 to 0.3 s at 16 kHz."""
    made = []
    for seed, (length, begin, end) in enumerate([(1600, 300, 1100), (4800, 1500, 4000), (3200, 0, 2000)]):
        rng = np.random.default_rng(seed)
        t = np.arange(length) / RATE
        signal = 0.5 * np.sin(2 * np.pi * (300 + 100 * seed) * t) + 0.05 * rng.standard_normal(length)
        signal[:begin] *= 0.01
        signal[end:] *= 0.01
        made.append(signal.astype(np.float32))
    return made


def _preemphasis_reference(samples, _):
    coeff = np.float64(np.float32(0.9))
    return [scipy.signal.lfilter([1.0, -coeff], [1.0], s.astype(np.float64), zi=[-coeff * s[1]])[0]
            for s in samples]


WINDOW, CUTOFF = 256, -30.0


def _check_regions(samples, outputs):
    """Checks begin and length (int32 scalars) against the reference; returns None (two outputs)."""
    expected = []
    for signal in samples:
        power = np.convolve(signal.astype(np.float64) ** 2, np.ones(WINDOW))[:len(signal)] / WINDOW
        loud = np.flatnonzero(power >= power.max() * 10 ** (CUTOFF / 10))
        begin = max(loud[0] - WINDOW + 1, 0)
        expected.append((begin, loud[-1] + 1 - begin))
    begins, lengths = outputs
    assert all(value.dtype == np.int32 and value.shape == () for value in begins + lengths)
    assert [(int(b), int(n)) for b, n in zip(begins, lengths)] == expected
    assert any(begin > 0 for begin, _ in expected)  # silence cut at the start


CASES = {
    "preemphasis_filter": Case(signals, lambda node, device: fn.preemphasis_filter(
        on_device(node, device), device=device, preemph_coeff=0.9, border="reflect"), _preemphasis_reference,
        max_abs=1e-6),
    "nonsilent_region": Case(signals, lambda node, device: tuple(fn.nonsilent_region(
        on_device(node, device), device=device, cutoff_db=CUTOFF, window_length=WINDOW, reset_interval=1024)),
        _check_regions),
}
