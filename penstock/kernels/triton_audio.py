"""The Triton kernel of ``spectrogram``'s framing on the GPU: one launch cuts every window of a whole
ragged batch of signals (by kernels.audio_spectral.frame_indices's rules: DALI's reflect-101 again
and again for short signals, or zeros outside), multiplies it by the window function and writes it
into its row of the transform's input, zero-padded to ``nfft`` points, so that one FFT transforms
the batch. No index table is made: each element's index is computed where it is read.

The rows are padded to a bucketed count (``bucketed_rows``), zero rows that are transformed and
dropped: the FFT's plan depends on the number of rows, and a plan per batch would be made again
for every batch of clips of new lengths.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from penstock.kernels.triton_launch import INTERPRETED, launch


@triton.jit
def windowed_frames_kernel(
    signals,  # float32: the batch's signals one after another
    starts, lengths, places,  # int64 [rows]: a window's first index (may be negative), its signal's length and place
    window,  # float32 [window_length]
    output,  # float32 [padded rows, nfft]
    rows, padded_rows, window_length, nfft,
    REFLECT: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr,
):
    row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    point = tl.arange(0, BLOCK)[None, :]
    real = row < rows
    start = tl.load(starts + row, mask=real, other=0)
    length = tl.load(lengths + row, mask=real, other=1)
    place = tl.load(places + row, mask=real, other=0)
    index = start + point
    taken = real & (point < window_length)
    if REFLECT:
        period = tl.maximum(2 * (length - 1), 1)
        index = index % period
        index = tl.where(index < 0, index + period, index)  # % keeps the dividend's sign
        index = tl.where(index >= length, period - index, index)
        index = tl.where(length == 1, 0, index)
    else:
        taken = taken & (index >= 0) & (index < length)
    value = tl.load(signals + place + index, mask=taken, other=0.0)
    weight = tl.load(window + point, mask=point < window_length, other=0.0)
    tl.store(output + row * nfft + point, value * weight, mask=(row < padded_rows) & (point < nfft))


def bucketed_rows(rows: int) -> int:
    """``rows`` rounded up to a multiple of an eighth of its power of two (at most 1/8 more)."""
    if rows <= 64:
        return 64
    grain = 1 << max(0, int(rows).bit_length() - 4)
    return -(-rows // grain) * grain


def windowed_frames(signals: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor, places: torch.Tensor,
                    window: torch.Tensor, nfft: int, reflect: bool) -> torch.Tensor:
    """[bucketed_rows(rows), nfft] float32: row r holds the window starting at ``starts[r]`` of
    the signal at ``places[r]`` in ``signals`` (``lengths[r]`` long), multiplied by ``window``,
    then zeros; the rows past ``len(starts)`` are zeros."""
    rows, window_length = int(starts.shape[0]), int(window.shape[0])
    padded = bucketed_rows(rows)
    output = torch.empty((padded, nfft), dtype=torch.float32, device=signals.device)
    block = triton.next_power_of_2(max(nfft, window_length, 16))
    per_program = max(1, min(256 if INTERPRETED else 4, 8192 // block))
    launch(windowed_frames_kernel, (-(-padded // per_program),), signals, starts, lengths, places, window, output,
           rows, padded, window_length, nfft, REFLECT=reflect, ROWS=per_program, BLOCK=block)
    return output


def window_table(signal_lengths, counts, window_length: int, step: int, centred: bool) -> np.ndarray:
    """int64 [3, rows]: each window's first index (negative before its signal), its signal's
    length and its signal's place among the signals joined end to end."""
    lengths = np.asarray(signal_lengths, np.int64)
    counts = np.asarray(counts, np.int64)
    places = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(first, counts)
    starts = within * step - (window_length // 2 if centred else 0)
    return np.stack([starts, np.repeat(lengths, counts), np.repeat(places, counts)])
