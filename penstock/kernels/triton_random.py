"""The Triton kernel of the random generators on the GPU where a sample's shape follows its data
(``fn.random.normal(audio)``, noise over an image): one launch draws the standard variates of a
whole ragged batch into one buffer, each sample from Philox keyed by the sample's own key at the
element's index, so a sample's numbers depend on its key alone, not on the batch around it.

Uniform variates are Triton's ``rand`` (float32 in [0, 1)); normal ones its ``randn`` (Box-Muller
on two uniforms), in float32.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from penstock.batch import PackedBatch
from penstock.kernels.triton_launch import INTERPRETED, launch

_BLOCK = 1024


@triton.jit
def variates_kernel(keys, offsets, sizes, output, NORMAL: tl.constexpr, BLOCK: tl.constexpr):
    tile = tl.program_id(0)
    sample = tl.program_id(1)
    index = tile * BLOCK + tl.arange(0, BLOCK)
    inside = index < tl.load(sizes + sample)
    seed = tl.load(keys + sample)
    if NORMAL:
        values = tl.randn(seed, index)
    else:
        values = tl.rand(seed, index)
    tl.store(output + tl.load(offsets + sample) + index, values, mask=inside)


def draw_variates(keys, shapes: list, normal: bool, device, *, upload) -> PackedBatch:
    """Standard variates (float32) of each shape in ``shapes``, sample i keyed by ``keys[i]`` (an
    int below 2**63): one PackedBatch. ``upload(device, arrays)``: arrays as tensors on the device."""
    sizes = np.array([int(np.prod(shape)) for shape in shapes], np.int64)
    if sizes.size and sizes.max() >= 2**31:
        raise ValueError(f"a sample of {int(sizes.max()):,} random values: at most 2**31 - 1 a sample")
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    buffer = torch.empty(max(int(offsets[-1]), 1), dtype=torch.float32, device=device)
    largest = int(sizes.max()) if sizes.size else 0
    if largest:
        # the interpreter pays per program, whatever its size
        block = min(1 << 16 if INTERPRETED else _BLOCK, triton.next_power_of_2(largest))
        table = upload(device, [np.asarray(keys, np.int64), offsets[:-1], sizes])
        launch(variates_kernel, (-(-largest // block), len(shapes)), *table, buffer, NORMAL=normal, BLOCK=block)
    return PackedBatch(buffer[:int(offsets[-1])], offsets[:-1].tolist(), [tuple(shape) for shape in shapes])
