"""DALI's audio resampler: a Hann-windowed sinc read from a lookup table, as
dali/kernels/signal/resampling.h and resampling_cpu.cc compute it.

The sinc's zero crossings are the input's sample spacing whatever the ratio (DALI does not widen
the filter when it downsamples, so content above the new Nyquist frequency aliases, as in DALI).
Output sample ``j`` sits at input position ``j * in_rate / out_rate``; DALI computes the positions
in blocks of 256 outputs, each block's start in float64 and the positions inside it by adding the
float32 step, and the window's taps are the inputs within ``lobes`` of the position. The positions
here are made the same way (``tap_positions``, numpy), so that the result follows DALI's to float
rounding; the filtering (``filter_taps``) is written once over numpy and torch, which the GPU form
runs over a whole ragged batch.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from penstock import numeric, types

# DALI's lookup table holds 64 entries per lobe of the sinc (lookup_size = lobes * 64 + 1)
ENTRIES_PER_LOBE = 64
POSITIONS_BLOCK = 256  # outputs whose input positions are accumulated in float32 from one float64 start


def lobes_for_quality(quality: float) -> int:
    """The sinc's lobes on each side for a quality in [0, 100] (DALI's ResamplingParams::FromQuality:
    3 at 0, 16 at 50, 64 at 100)."""
    if not 0.0 <= quality <= 100.0:
        raise ValueError(f"quality {quality} out of range: valid range is [0..100]")
    value = 0.007 * quality * quality - 0.09 * quality + 3
    return int(math.floor(value + 0.5))  # std::round: halves away from zero (the value is positive)


def resampled_length(in_length: int, in_rate: float, out_rate: float) -> int:
    """How many samples ``in_length`` samples at ``in_rate`` become at ``out_rate`` (rounded up)."""
    return int(math.ceil(in_length * float(out_rate) / float(in_rate)))


@functools.lru_cache(maxsize=16)
def window_table(lobes: int) -> np.ndarray:
    """The windowed sinc sampled at 1/32 of an input sample, with a zero before it and zeros after
    (DALI's windowed_sinc: the interpolation may read one entry past either end), float32."""
    coeffs = lobes * ENTRIES_PER_LOBE + 1
    step = np.float32(2.0 * lobes / (coeffs - 1))
    envelope_step = np.float32(2.0 / coeffs)
    center = (coeffs - 1) // 2
    offsets = (np.arange(coeffs) - center).astype(np.float32)
    x = offsets * step
    envelope = 0.5 * (1.0 + np.cos((offsets * envelope_step).astype(np.float64) * np.pi))
    scaled = (x.astype(np.float64) * np.pi).astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        sinc = np.where(np.abs(scaled) < 1e-5, np.float32(1) - scaled * scaled * np.float32(1 / 6),
                        np.sin(scaled) / scaled).astype(np.float32)
    table = np.zeros(coeffs + 5, np.float32)
    table[1:coeffs + 1] = (sinc.astype(np.float64) * envelope).astype(np.float32)
    return table


def table_center(lobes: int) -> float:
    """The table index of the window's middle (offset 0), the leading zero counted."""
    return float(lobes * ENTRIES_PER_LOBE // 2 + 1)


def tap_positions(out_length: int, in_rate: float, out_rate: float, lobes: int) -> tuple[np.ndarray, np.ndarray]:
    """(first, offset): for each output sample, the index of its first input tap (int64; taps
    ``first + k`` for k < 2 * lobes, some outside the signal) and that tap's distance from the
    output's position, in input samples (float32), as DALI's CPU kernel computes them."""
    scale = float(in_rate) / float(out_rate)
    blocks = -(-out_length // POSITIONS_BLOCK)
    block_starts = np.arange(blocks, dtype=np.float64) * POSITIONS_BLOCK * scale
    block_floors = np.floor(block_starts)
    steps = np.full((blocks, POSITIONS_BLOCK), np.float32(scale), np.float32)
    steps[:, 0] = (block_starts - block_floors).astype(np.float32)
    # float32 running sums, one addition after another, as the kernel's in_pos += step
    within = np.add.accumulate(steps, axis=1, dtype=np.float32).reshape(-1)[:out_length]
    rounded_up = np.ceil(within)
    first = np.repeat(block_floors.astype(np.int64), POSITIONS_BLOCK)[:out_length] + rounded_up.astype(np.int64) - lobes
    # exact in float32: both terms lie within a lobe count of each other
    offset = (rounded_up - np.float32(lobes)) - within
    return first, offset.astype(np.float32)


def filter_taps(xp, signal, first, offset, taps, table, center: float, length, base=0):
    """The resampled signal [outputs, channels] (float32) from ``signal`` [samples, channels] and
    ``tap_positions``' arrays; ``taps`` is arange(2 * lobes) in float32 and ``table`` the
    window_table, both arrays of ``xp`` (numpy or torch) on the signal's device. The input of each
    output starts at row ``base`` of ``signal`` and is ``length`` rows long (numbers, or arrays of
    one per output: a batch's signals one after another); taps outside it count 0. Every step is
    exact in float32 but the interpolation and the sum, as in DALI."""
    position = (offset[:, None] + taps[None, :]) * ENTRIES_PER_LOBE / 2 + center
    below = xp.floor(position)
    fraction = position - below
    index = _as_index(xp, below)
    lower = table[index]
    weights = lower + fraction * (table[index + 1] - lower)
    inputs = first[:, None] + _as_index(xp, taps)[None, :]
    length = length[:, None] if hasattr(length, "shape") else length
    base = base[:, None] if hasattr(base, "shape") else base
    inside = (inputs >= 0) & (inputs < length)
    weights = xp.where(inside, weights, xp.zeros_like(weights))
    gathered = signal[xp.where(inside, inputs, xp.zeros_like(inputs)) + base]  # [outputs, taps, channels]
    return (gathered * weights[:, :, None]).sum(axis=1)


def _as_index(xp, values):
    return values.astype(np.int64) if xp is np else values.long()


# outputs filtered at once on the CPU: bounds the [outputs, taps, channels] temporaries
CPU_CHUNK = 4096


def resample(signal: np.ndarray, in_rate: float, out_rate: float, quality: float = 50.0, *,
             out_length: int | None = None, dtype=np.float32, native=None) -> np.ndarray:
    """``signal`` [length] or [length, channels] (float32, in [-1, 1]; [0, 1] for unsigned
    ``dtype``) resampled from ``in_rate`` to ``out_rate``: ``resampled_length`` samples unless
    ``out_length`` says, converted to ``dtype`` as DALI converts (integer types: full scale,
    rounded and saturated). ``native``: a callable giving the C resampler's function
    (runtime.native.audio_resample) or None; with it DALI's loop runs in C, without the
    interpreter lock, its sums in DALI's order (about 20 times faster than filtering the taps
    with numpy, which is the path without it)."""
    signal = np.asarray(signal, np.float32)
    if signal.ndim not in (1, 2):
        raise ValueError(f"resample takes [length] or [length, channels] signals, got shape {signal.shape}")
    if not in_rate > 0 or not out_rate >= 0:
        raise ValueError(f"resample: the input rate must be positive and the output rate not negative, got "
                         f"{in_rate} and {out_rate}")
    lobes = lobes_for_quality(quality)
    length = len(signal)
    count = resampled_length(length, in_rate, out_rate) if out_length is None else int(out_length)
    planar = signal.reshape(length, signal.shape[1] if signal.ndim == 2 else 1)
    result = np.zeros((count, planar.shape[1]), np.float32)
    function = native() if native is not None else None
    if count and length and function is not None:
        planar = np.ascontiguousarray(planar)
        table = window_table(lobes)
        function(planar.ctypes.data, length, planar.shape[1], result.ctypes.data, 0, count, float(in_rate),
                 float(out_rate), table.ctypes.data, lobes, float(ENTRIES_PER_LOBE // 2), table_center(lobes))
    elif count and length:
        first, offset = tap_positions(count, in_rate, out_rate, lobes)
        taps, table = np.arange(2 * lobes, dtype=np.float32), window_table(lobes)
        for start in range(0, count, CPU_CHUNK):
            stop = min(start + CPU_CHUNK, count)
            result[start:stop] = filter_taps(np, planar, first[start:stop], offset[start:stop], taps, table,
                                             table_center(lobes), length)
    return to_output_type(np, result.reshape((count,) + signal.shape[1:]), dtype)


def to_output_type(xp, values, dtype):
    """float32 values in [-1, 1] (numpy or torch) as ``dtype`` (a numpy type): integer types scaled
    to full range (by the type's maximum, in float32), rounded and saturated (DALI's
    ConvertSatNorm; halves away from zero on the CPU, to even on the GPU, as DALI's); unsigned
    types take values already in [0, 1]."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return values.astype(dtype, copy=False) if xp is np else values.to(types.to_torch_dtype(dtype))
    scaled = values * float(np.float32(np.iinfo(dtype).max))
    if xp is np:
        return numeric.saturate(scaled.astype(np.float32, copy=False), dtype)
    return numeric.saturate_tensor(scaled, types.to_torch_dtype(dtype))
