"""The numeric rules of the speech features, as DALI 2.4 computes them: window framing, the Hann
window, spectra, the mel filter bank, the DCT table with its liftering and the decibel scale.

The CPU operators call these with numpy, the GPU operators with torch (``xp``): framing is an index
table into the signal followed by one zero (so one gather frames a whole ragged batch), and the mel
filter bank and the DCT are matrices computed once per argument set (cached) and applied as one
matrix product over a batch's columns (``apply_along_axis``).

PyTorch and SciPy are imported where a function first needs them.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

PADDINGS = ("reflect", "zero", "none")  # centred windows mirror or zero-pad the signal; uncentred ones do not
MIN_NFFT = 3  # DALI's FFT (ffts) cannot plan transforms of 1 or 2 points


# ---- windows ------------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def hann_window(length: int) -> np.ndarray:
    """DALI's Hann window: 0.5 * (1 - cos(2 pi (t + 0.5) / N)), symmetric about the window's centre."""
    phase = 2 * math.pi / length * (np.arange(length, dtype=np.float64) + 0.5)
    window = (0.5 * (1.0 - np.cos(phase))).astype(np.float32)
    window.flags.writeable = False
    return window


@lru_cache(maxsize=64)
def window_function(length: int, samples: tuple | None) -> np.ndarray:
    """The window's ``samples`` as float32, or DALI's Hann window of ``length`` where none are given."""
    if samples is None:
        return hann_window(length)
    window = np.asarray(samples, np.float32)
    window.flags.writeable = False
    return window


def count_windows(length: int, window_length: int, step: int, centered: bool) -> int:
    """How many windows DALI takes from a signal: every multiple of ``step`` when centred, else the
    windows that start inside; the quotient truncates towards zero, as C's (so a signal a little
    shorter than the window still gives one window, zero-padded)."""
    span = length if centered else length - window_length
    return int(span / step) + 1 if span < 0 else span // step + 1


@lru_cache(maxsize=256)
def frame_indices(length: int, window_length: int, step: int, padding: str) -> np.ndarray:
    """(windows, window_length) indices into the signal with one zero appended (index ``length``
    reads that zero): window w covers [w * step - centre, ...) with the centre window_length // 2
    for centred windows (padding 'reflect' or 'zero') and 0 for 'none'; outside the signal
    'reflect' mirrors it without repeating the edge (DALI's reflect-101, again and again for
    short signals), the others read zeros."""
    centre = 0 if padding == "none" else window_length // 2
    count = count_windows(length, window_length, step, padding != "none")
    index = (np.arange(count, dtype=np.int64)[:, None] * step - centre) + np.arange(window_length, dtype=np.int64)
    # only the windows at either end reach outside the signal: the rule is applied to those rows
    starts = np.arange(count, dtype=np.int64) * step - centre
    edge = (starts < 0) | (starts + window_length > length)
    rows = index[edge]
    if padding == "reflect":
        if length == 1:
            rows = np.zeros_like(rows)
        else:
            period = 2 * (length - 1)
            rows = np.mod(rows, period)
            rows = np.where(rows >= length, period - rows, rows)
    else:
        rows = np.where((rows < 0) | (rows >= length), length, rows)
    index[edge] = rows
    index.flags.writeable = False
    return index


def framed(signal: np.ndarray, window_length: int, step: int, padding: str) -> np.ndarray:
    """The windows DALI takes from a 1-D signal, [windows, window_length], by ``frame_indices``'s
    rules: a strided view of the signal padded at its ends where one reflection (or zeros) covers
    what the windows reach outside it, else a gather through ``frame_indices``."""
    from numpy.lib.stride_tricks import sliding_window_view
    length = signal.shape[0]
    centre = 0 if padding == "none" else window_length // 2
    count = count_windows(length, window_length, step, padding != "none")
    after = max(0, (count - 1) * step + window_length - centre - length)
    if padding == "reflect" and max(centre, after) >= length:  # reflected again and again
        return np.append(signal, np.float32(0))[frame_indices(length, window_length, step, padding)]
    padded = np.pad(signal, (centre, after), mode="reflect" if padding == "reflect" else "constant")
    return sliding_window_view(padded, window_length)[::step][:count]


def spectrogram(signal: np.ndarray, window: np.ndarray, nfft: int, step: int, padding: str, power: int,
                time_major: bool) -> np.ndarray:
    """The spectrogram of a 1-D float32 signal on the CPU, [frequencies, windows] (or [windows,
    frequencies] when ``time_major``). The windows go transposed into zeroed transform columns (an
    FFT of rows shorter than its points pads them in a copy of its own, three times the time), and
    the transform runs down the columns, which gives the frequency-major layout without a transpose."""
    import scipy.fft
    frames = framed(signal, len(window), step, padding)
    if len(window) < nfft:
        columns = np.zeros((nfft, frames.shape[0]), np.float32)
        np.multiply(frames.T, window[:, None], out=columns[:len(window)])
    else:
        columns = frames.T * window[:, None]
    transform = scipy.fft.rfft(columns, n=nfft, axis=0, overwrite_x=True)
    spectra = np.abs(transform) if power == 1 else np.square(transform.real) + np.square(transform.imag)
    return np.ascontiguousarray(spectra.T) if time_major else spectra


def spectrum(xp, values, nfft: int, power: int, axis: int = -1):
    """The first nfft // 2 + 1 bins of the FFT of ``values`` along ``axis`` (zero-padded, or cut, to
    ``nfft`` points): |X|^2 for power 2, |X| for power 1, float32. DALI centres a shorter window in
    the transform's points; the magnitude does not depend on where the zeros go."""
    if xp is np:
        import scipy.fft
        transform = scipy.fft.rfft(values, n=nfft, axis=axis)
    else:
        transform = xp.fft.rfft(values, n=nfft, dim=axis)
    if power == 1:
        return xp.abs(transform)
    return transform.real * transform.real + transform.imag * transform.imag


# ---- matrices applied along an axis -------------------------------------------------------------
def apply_along_axis(xp, matrix, samples: list, axis: int) -> list:
    """``matrix`` (m x n) applied to each sample's ``axis`` (of extent n): the samples' other axes
    flattened into columns side by side and multiplied in one matrix product."""
    columns = [xp.moveaxis(sample, axis, 0).reshape(sample.shape[axis], math.prod(sample.shape) // sample.shape[axis]
                                                     if sample.shape[axis] else 0) for sample in samples]
    widths = [column.shape[1] for column in columns]
    if xp is np:
        product = matrix @ (columns[0] if len(columns) == 1 else np.concatenate(columns, axis=1))
        parts = np.split(product, np.cumsum(widths)[:-1], axis=1)
    else:
        product = matrix @ (columns[0] if len(columns) == 1 else xp.cat(columns, dim=1))
        parts = xp.split(product, widths, dim=1)
    results = []
    for part, sample in zip(parts, samples):
        rest = tuple(extent for dim, extent in enumerate(sample.shape) if dim != axis)
        result = xp.moveaxis(part.reshape((matrix.shape[0],) + rest), 0, axis)
        results.append(np.ascontiguousarray(result) if xp is np else result.contiguous())
    return results


def on_device(table: np.ndarray, device):
    """A cached table as a tensor on ``device`` (kept per device, copied once)."""
    return _on_device(_TableKey(table), device)


class _TableKey:
    """A cached (read-only, long-lived) table as a dict key, by identity."""

    __slots__ = ("table",)

    def __init__(self, table):
        self.table = table

    def __hash__(self):
        return id(self.table)

    def __eq__(self, other):
        return self.table is other.table


@lru_cache(maxsize=64)
def _on_device(key: _TableKey, device):
    import torch
    return torch.tensor(key.table, device=device)


# ---- mel filter bank ----------------------------------------------------------------------------
def _hz_to_mel(hz, formula: str):
    """DALI's conversions, in float32 as DALI's kernel (T = float) computes them."""
    hz = np.float32(hz)
    if formula == "htk":
        return np.float32(1127) * np.log(np.float32(1) + hz / np.float32(700))
    if hz >= _SLANEY_MIN_LOG_HZ:
        return _SLANEY_MIN_LOG_MEL + np.log(hz / _SLANEY_MIN_LOG_HZ) / _SLANEY_STEP_LOG
    return hz / _SLANEY_FSP


def _mel_to_hz(mel: np.ndarray, formula: str) -> np.ndarray:
    mel = np.asarray(mel).astype(np.float32)
    if formula == "htk":
        return np.float32(700) * (np.exp(mel / np.float32(1127)) - np.float32(1))
    return np.where(mel >= _SLANEY_MIN_LOG_MEL,
                    _SLANEY_MIN_LOG_HZ * np.exp(_SLANEY_STEP_LOG * (mel - _SLANEY_MIN_LOG_MEL)),
                    mel * _SLANEY_FSP).astype(np.float32)


# Slaney's scale (librosa's default): linear below 1 kHz, logarithmic above
_SLANEY_FSP = np.float32(200.0 / 3.0)
_SLANEY_MIN_LOG_HZ = np.float32(1000.0)
_SLANEY_MIN_LOG_MEL = np.float32(_SLANEY_MIN_LOG_HZ / _SLANEY_FSP)
_SLANEY_STEP_LOG = np.float32(0.068751777)  # log(6.4) / 27


@lru_cache(maxsize=64)
def mel_matrix(nfilter: int, nbins: int, sample_rate: float, freq_low: float, freq_high: float, normalize: bool,
               formula: str) -> np.ndarray:
    """(nfilter, nbins) float32 weights of DALI's triangular mel filters over the bins of an
    nfft = 2 * (nbins - 1) spectrum: filter m rises from mel point m to m + 1 and falls to m + 2,
    the nfilter + 2 points evenly spaced in mel from freq_low to freq_high (0: sample_rate / 2);
    only bins from ceil(freq_low / step) to ceil(freq_high / step) count. ``normalize`` divides each
    filter by half its width in Hz (Slaney's equal area), else its peak is 1."""
    sample_rate, freq_low = float(np.float32(sample_rate)), float(np.float32(freq_low))
    freq_high = float(np.float32(freq_high)) if freq_high > 0 else float(np.float32(0.5 * np.float32(sample_rate)))
    weights = np.zeros((nfilter, max(nbins, 0)), np.float32)
    nfft = 2 * (nbins - 1)
    if nfft > 0:
        mel_low, mel_high = float(_hz_to_mel(freq_low, formula)), float(_hz_to_mel(freq_high, formula))
        delta = (mel_high - mel_low) / (nfilter + 1)
        mels = mel_low + delta * np.arange(nfilter + 3, dtype=np.float64)
        edges = _mel_to_hz(np.append(mels[:nfilter + 1], mel_high), formula).astype(np.float64)
        hz_step = sample_rate / nfft
        start = math.ceil(freq_low * (1.0 / hz_step))
        end = min(math.ceil(freq_high * (1.0 / hz_step)), nfft // 2 + 1)
        bins = np.arange(start, max(end, start))
        frequency = bins * hz_step
        # the interval of each bin: the first i with f < edges[i + 1]; bins past the last edge take none
        interval = np.searchsorted(edges[1:], frequency, side="right")
        inside = interval <= nfilter
        bins, frequency, interval = bins[inside], frequency[inside], interval[inside]
        falling = ((edges[interval + 1] - frequency) / (edges[interval + 1] - edges[interval])).astype(np.float32)
        rising = np.float32(1) - falling
        down, up = interval - 1, interval
        keep_down, keep_up = down >= 0, up < nfilter
        weights[down[keep_down], bins[keep_down]] = falling[keep_down]
        weights[up[keep_up], bins[keep_up]] = rising[keep_up]
        if normalize:
            upper = _mel_to_hz(mels[2:nfilter + 2], formula).astype(np.float64)
            weights *= (2.0 / (upper - edges[:nfilter])).astype(np.float32)[:, None]
    weights.flags.writeable = False
    return weights


# ---- DCT (MFCC) ---------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def dct_matrix(length: int, ndct: int, dct_type: int, normalize: bool, lifter: float) -> np.ndarray:
    """(ndct, length) float32 table of DALI's DCT of ``dct_type`` (1 to 4; half the unnormalized
    sums scipy.fft.dct computes, the orthonormal basis with ``normalize``), each row k scaled by the
    liftering coefficient 1 + lifter / 2 * sin(pi (k + 1) / lifter) where lifter is not 0."""
    n = np.arange(length, dtype=np.float64)[None, :]
    k = np.arange(ndct, dtype=np.float64)[:, None]
    if dct_type == 1:
        table = np.cos(math.pi / (length - 1) * k * n)
        table[:, 0] = 0.5
        table[:, -1] = np.where(np.arange(ndct) % 2 == 0, 0.5, -0.5)
    elif dct_type == 2:
        table = np.cos(math.pi / length * (n + 0.5) * k)
        if normalize:
            table *= np.where(k == 0, 1.0 / math.sqrt(length), math.sqrt(2.0 / length))
    elif dct_type == 3:
        table = np.cos(math.pi / length * n * (k + 0.5))
        table[:, 0] = 1.0 / math.sqrt(length) if normalize else 0.5
        if normalize:
            table[:, 1:] *= math.sqrt(2.0 / length)
    else:
        table = np.cos(math.pi / length * (n + 0.5) * (k + 0.5)) * (math.sqrt(2.0 / length) if normalize else 1.0)
    table = table.astype(np.float32)
    if lifter != 0:
        half, phase = np.float32(lifter / 2), np.float32(math.pi) / np.float32(lifter)
        coefficients = np.float32(1) + half * np.sin(phase * np.arange(1, ndct + 1, dtype=np.float32))
        table = (table * coefficients[:, None]).astype(np.float32)
    table.flags.writeable = False
    return table


# ---- decibels -----------------------------------------------------------------------------------
def min_ratio(cutoff_db: float, multiplier: float) -> np.float32:
    """The smallest ratio to the reference: 10^(cutoff_db / multiplier) in float32, the smallest
    positive float where that is 0 (as DALI)."""
    ratio = np.float32(10.0) ** (np.float32(cutoff_db) / np.float32(multiplier))
    return ratio if ratio > 0 else np.nextafter(np.float32(0), np.float32(1))


def decibels(xp, values, inverse_reference, multiplier: float, smallest: np.float32):
    """multiplier * log10(max(smallest, values / reference)), in float32 as DALI: the logarithm in
    base 2 times multiplier * log10(2), and the ratio a product with 1 / reference
    (``inverse_reference``: a float32 scalar or, on a flattened batch, one value per element)."""
    scale = np.float32(np.float32(multiplier) * np.float32(0.3010299956639812))
    ratio = values * inverse_reference
    if xp is np:
        return (scale * np.log2(np.maximum(ratio, smallest))).astype(np.float32)
    return scale * xp.log2(xp.clamp_min(ratio, float(smallest)))

