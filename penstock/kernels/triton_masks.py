"""The Triton kernel of ``erase`` and ``grid_mask`` (penstock.operators.image.erase_paste): one launch
over a ragged batch of HWC images, each element kept or replaced by a per-sample, per-channel fill.

An element is replaced when its pixel lies in one of its sample's rectangles (erase) or in a dark
square of its sample's grid (grid_mask). The grid test does DALI's float32 arithmetic in DALI's
order, as the CPU form does in numpy, so both devices mask the same pixels.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from penstock.batch import PackedBatch
from penstock.kernels.triton_filters import TRITON_TYPES, ragged_grid, packed_offsets, common_source_type
from penstock.kernels.triton_launch import launch

_COLUMNS = 8
_GRID_COLUMNS = 6


@triton.jit
def keep_or_fill_kernel(
    table,  # int64 [N, 8]: source pointer, height, width, channels, output offset, first region, regions, first fill
    regions,  # int64 [R, 4]: top, left, bottom, right (bottom and right excluded)
    grids,  # float32 [N, 6]: grid on (1) or off (0), ratio, cos / tile, sin / tile, shift_x / tile, shift_y / tile
    fills,  # the source type [F]: each sample's fill, one value per channel
    output,
    SOURCE_DTYPE: tl.constexpr, BLOCK: tl.constexpr,
):
    tile = tl.program_id(0)
    sample = tl.program_id(1)
    row = table + sample * 8
    source = tl.load(row).to(tl.pointer_type(SOURCE_DTYPE))
    width = tl.load(row + 2)
    channels = tl.load(row + 3)
    elements = tile * BLOCK + tl.arange(0, BLOCK)
    active = elements < tl.load(row + 1) * width * channels
    pixel = elements // channels
    y = pixel // width
    x = pixel % width
    covered = elements < 0
    first = tl.load(row + 5)
    last = first + tl.load(row + 6)
    while first < last:  # a while loop: Triton's interpreter takes no range() over a loaded count
        bounds = regions + first * 4
        covered = covered | ((y >= tl.load(bounds)) & (x >= tl.load(bounds + 1)) & (y < tl.load(bounds + 2))
                             & (x < tl.load(bounds + 3)))
        first += 1
    grid = grids + sample * 6
    if tl.load(grid) != 0.0:
        ratio = tl.load(grid + 1)
        cos = tl.load(grid + 2)
        sin = tl.load(grid + 3)
        row_f = y.to(tl.float32)
        column_f = x.to(tl.float32)
        grid_x = (-tl.load(grid + 4) + row_f * -sin) + column_f * cos
        grid_y = (-tl.load(grid + 5) + row_f * cos) + column_f * sin
        covered = covered | ((grid_x - tl.floor(grid_x) < ratio) & (grid_y - tl.floor(grid_y) < ratio))
    value = tl.load(source + elements, mask=active, other=0)
    fill = tl.load(fills + tl.load(row + 7) + elements % channels, mask=active, other=0)
    tl.store(output + tl.load(row + 4) + elements, tl.where(covered, fill, value), mask=active)


def run_keep_or_fill(sources: list, regions: list, grids: np.ndarray, fills: list, op_name: str, *, upload) -> list:
    """Each HWC tensor ``sources[i]`` with the pixels in ``regions[i]`` (a list of (top, left,
    bottom, right)) or in the dark squares of grid row ``grids[i]`` (see the kernel) replaced by
    ``fills[i]`` (one value per channel, already in the sources' type); same shapes and type.
    ``upload(device, arrays)``: the arrays as tensors on the device (runtime.pinned.to_device)."""
    count = len(sources)
    if count == 0:
        return []
    dtype = common_source_type(sources, op_name)
    device = sources[0].device
    sources = [source if source.is_contiguous() else source.contiguous() for source in sources]
    sizes = [source.numel() for source in sources]
    offsets = packed_offsets(sizes)
    table = np.zeros((count, _COLUMNS), np.int64)
    region_table = [np.zeros((0, 4), np.int64)]
    first_region, first_fill = 0, 0
    for index, source in enumerate(sources):
        table[index, :4] = (source.data_ptr(), *source.shape)
        table[index, 5:8] = (first_region, len(regions[index]), first_fill)
        if regions[index]:
            region_table.append(np.asarray(regions[index], np.int64).reshape(-1, 4))
        first_region += len(regions[index])
        first_fill += source.shape[2]
    table[:, 4] = offsets
    numpy_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    fill_table = np.concatenate([np.asarray(fill, numpy_dtype) for fill in fills])
    region_table = np.ascontiguousarray(np.concatenate(region_table))
    if not len(region_table):
        region_table = np.zeros((1, 4), np.int64)  # a valid pointer for a kernel that reads none
    table, region_table, grid_table, fill_table = upload(
        device, [table, region_table, np.ascontiguousarray(grids, np.float32).reshape(count, _GRID_COLUMNS), fill_table])
    output = torch.empty(max(sum(sizes), 1), dtype=dtype, device=device)
    block, tiles = ragged_grid(sizes)
    launch(keep_or_fill_kernel, (tiles, count), table, region_table, grid_table, fill_table, output,
                                        SOURCE_DTYPE=TRITON_TYPES[dtype], BLOCK=block)
    return list(PackedBatch(output, offsets, [tuple(source.shape) for source in sources]))
