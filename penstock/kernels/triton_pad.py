"""The Triton kernel of ``pad`` on the GPU (penstock.operators.tensor.batch_ops): one launch writes a
whole ragged batch into one buffer, each element copied from its sample or set to the sample's fill,
so the output is written once and no element is filled first and copied over after.

Each program writes one block of one row (the last axis) of one sample. A sample's axes are first
merged where the padding allows (an axis that is not padded and is contiguous with the one before
it joins that one), so an HWC image padded in H and W has rows of W x C elements.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from penstock.batch import PackedBatch
from penstock.kernels.triton_filters import TRITON_TYPES
from penstock.kernels.triton_launch import INTERPRETED, launch

DIMS = 4  # axes after merging; a sample with more goes the per-sample way
_COLUMNS = 2 + 3 * DIMS
_BLOCK = 1024


@triton.jit
def pad_kernel(
    table,  # int64 [N, 2 + 3 * DIMS]: source pointer, output offset, output shape, input shape, input strides
    fills,  # the samples' type [N]: each sample's fill
    output,
    SOURCE_DTYPE: tl.constexpr, DIMS: tl.constexpr, BLOCK: tl.constexpr,
):
    tile = tl.program_id(0)
    sample = tl.program_id(1)
    row = table + sample * (2 + 3 * DIMS)
    source = tl.load(row).to(tl.pointer_type(SOURCE_DTYPE))
    out_shape = row + 2
    in_shape = out_shape + DIMS
    in_strides = in_shape + DIMS
    width = tl.load(out_shape + DIMS - 1)
    blocks = tl.cdiv(width, BLOCK)
    rows = 1
    for axis in tl.static_range(DIMS - 1):
        rows *= tl.load(out_shape + axis)
    line = tile // blocks
    remaining = line
    inside = line < rows
    source_offset = 0
    for step in tl.static_range(DIMS - 1):  # the row's coordinates, innermost axis first
        axis = DIMS - 2 - step
        extent = tl.load(out_shape + axis)
        coordinate = remaining % extent
        remaining = remaining // extent
        inside = inside & (coordinate < tl.load(in_shape + axis))
        source_offset += coordinate * tl.load(in_strides + axis)
    columns = (tile % blocks) * BLOCK + tl.arange(0, BLOCK)
    active = (columns < width) & (line < rows)
    taken = active & inside & (columns < tl.load(in_shape + DIMS - 1))
    fill = tl.load(fills + sample)
    value = tl.load(source + source_offset + columns * tl.load(in_strides + DIMS - 1), mask=taken, other=0)
    tl.store(output + tl.load(row + 1) + line * width + columns, tl.where(taken, value, fill), mask=active)


def merged_axes(in_shape: tuple, in_strides: tuple, out_shape: tuple) -> tuple[list, list, list]:
    """(input shape, input strides, output shape) of a sample with each axis that is not padded
    and lies contiguously after the axis before it merged into that one."""
    shape, strides, padded = [in_shape[0]], [in_strides[0]], [out_shape[0]]
    for size, stride, extent in zip(in_shape[1:], in_strides[1:], out_shape[1:]):
        if size == extent and (strides[-1] == stride * size or size == 1):
            shape[-1] *= size
            padded[-1] *= size
            strides[-1] = stride if size != 1 else strides[-1]
        else:
            shape.append(size)
            strides.append(stride)
            padded.append(extent)
    return shape, strides, padded


def run_pad(samples: list, shapes: list, fills: list, *, upload) -> PackedBatch | None:
    """``samples`` (tensors of one type on one device) padded at the end of their axes to
    ``shapes``, with ``fills[i]`` (already of the samples' type) around sample i: one PackedBatch,
    or None where the kernel does not apply (a type it has no form for, or more than DIMS axes
    left after merging). ``upload(device, arrays)``: arrays as tensors on the device."""
    dtype = samples[0].dtype
    if dtype not in TRITON_TYPES:
        return None
    count = len(samples)
    volumes = [int(np.prod(shape)) for shape in shapes]
    offsets = np.concatenate([[0], np.cumsum(volumes)]).astype(np.int64)
    table = np.zeros((count, _COLUMNS), np.int64)
    widest = 1
    for index, (sample, shape) in enumerate(zip(samples, shapes)):
        if sample.dim() == 0:
            return None
        in_shape, in_strides, out_shape = merged_axes(tuple(sample.shape), tuple(sample.stride()), tuple(shape))
        if len(in_shape) > DIMS:
            return None
        lead = DIMS - len(in_shape)
        table[index, 0] = sample.data_ptr()
        table[index, 2:2 + DIMS] = [1] * lead + out_shape
        table[index, 2 + DIMS:2 + 2 * DIMS] = [1] * lead + in_shape
        table[index, 2 + 2 * DIMS:] = [0] * lead + in_strides
        widest = max(widest, out_shape[-1])
    table[:, 1] = offsets[:-1]
    # the interpreter pays per program, whatever its size
    block = min(1 << 16 if INTERPRETED else _BLOCK, triton.next_power_of_2(widest))
    out_shapes = table[:, 2:2 + DIMS]
    tiles = int((np.prod(out_shapes[:, :-1], axis=1) * -(-out_shapes[:, -1] // block)).max())
    numpy_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    table_on_device, fills_on_device = upload(samples[0].device, [table, np.asarray(fills, numpy_dtype)])
    buffer = torch.empty(max(int(offsets[-1]), 1), dtype=dtype, device=samples[0].device)
    if tiles:
        launch(pad_kernel, (tiles, count), table_on_device, fills_on_device, buffer,
               SOURCE_DTYPE=TRITON_TYPES[dtype], DIMS=DIMS, BLOCK=block)
    return PackedBatch(buffer[:int(offsets[-1])], offsets[:-1].tolist(), [tuple(shape) for shape in shapes])
