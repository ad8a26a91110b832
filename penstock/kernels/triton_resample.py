"""One Triton kernel for the image work of a GPU pipeline: resample (crop + resize with an
antialiased filter), mirror, normalize, convert the type and the layout, in one pass over a ragged
batch.

Every sample has its own source (a pointer in a table, so the decoder's separate allocations need
no gathering copy), its own source window, output size and mirror flags; one launch covers the
batch with program ids over (tile of output pixels, sample). Output pixel (y, x) samples the
source at ``window_y + (y + 0.5) * scale_y - 0.5`` (and likewise for x), through the filter widened
by the scale when shrinking with antialias, with edge pixels repeated at the borders; pixels whose
centre falls outside the source take the fill value.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import torch
import triton
import triton.language as tl

from penstock import numeric, types
from penstock.batch import PackedBatch, hwc_facts
from penstock.kernels.pinned import upload_arrays

FILTER_NEAREST, FILTER_LINEAR, FILTER_CUBIC, FILTER_LANCZOS3 = 0, 1, 2, 3
FILTER_RADIUS = {FILTER_NEAREST: 0.5, FILTER_LINEAR: 1.0, FILTER_CUBIC: 2.0, FILTER_LANCZOS3: 3.0}

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
NEAREST_TIE_EPSILON = tl.constexpr(numeric.NEAREST_TIE_EPSILON)

_TORCH_TO_TRITON = {torch.uint8: tl.uint8, torch.float32: tl.float32, torch.float16: tl.float16,
                    torch.int16: tl.int16, torch.int32: tl.int32, torch.bfloat16: tl.bfloat16}


@triton.jit
def _filter_weight(distance, FILTER: tl.constexpr):
    d = tl.abs(distance)
    if FILTER == 1:
        weight = tl.maximum(1.0 - d, 0.0)
    elif FILTER == 2:  # Keys cubic, a = -0.5
        weight = tl.where(d < 1.0, (1.5 * d - 2.5) * d * d + 1.0,
                          tl.where(d < 2.0, ((-0.5 * d + 2.5) * d - 4.0) * d + 2.0, 0.0))
    elif FILTER == 3:  # Lanczos, a = 3
        pi_d = 3.141592653589793 * d
        safe = tl.where(d < 1e-6, 1.0, pi_d)
        weight = tl.where(d < 1e-6, 1.0, tl.where(d < 3.0, 3.0 * tl.sin(safe) * tl.sin(safe / 3.0) / (safe * safe), 0.0))
    else:
        weight = tl.where(d <= 0.5, 1.0, 0.0)
    return weight


@triton.jit
def _round_half_to_even(value):
    rounded = tl.floor(value + 0.5)
    tie = (rounded - value) == 0.5
    odd = (rounded - 2.0 * tl.floor(rounded * 0.5)) != 0.0
    return tl.where(tie & odd, rounded - 1.0, rounded)


@triton.jit
def resample_kernel(
    integers,  # int64 [N + 1, 9]: per sample source pointer, height, width, row stride, output offset,
               # output height, output width, vertical flip, horizontal flip; then the filter taps per
               # axis for the widest sample (a runtime bound: no recompiling per batch)
    reals,  # float64 [N, 4 + 3C]: window_y, window_x, scale_y, scale_x, then per channel the
            # multiplier and the addend (out = value * multiplier + addend) and the fill outside the source
    output, count,
    CHANNELS: tl.constexpr, OUT_CHANNELS: tl.constexpr, CHW: tl.constexpr, FILTER: tl.constexpr,
    ANTIALIAS: tl.constexpr, SOURCE_DTYPE: tl.constexpr, ROUND: tl.constexpr, OUT_MIN: tl.constexpr,
    OUT_MAX: tl.constexpr, BLOCK: tl.constexpr,
):
    tile = tl.program_id(0)
    sample = tl.program_id(1)
    ints = integers + sample * 9
    floats = reals + sample * (4 + 3 * CHANNELS)
    out_height = tl.load(ints + 5).to(tl.int32)
    out_width = tl.load(ints + 6).to(tl.int32)
    pixels = tile * BLOCK + tl.arange(0, BLOCK)
    active = pixels < out_height * out_width
    out_y = pixels // out_width
    out_x = pixels % out_width
    flip_y = tl.load(ints + 7)
    flip_x = tl.load(ints + 8)
    out_y_source = tl.where(flip_y != 0, out_height - 1 - out_y, out_y)
    out_x_source = tl.where(flip_x != 0, out_width - 1 - out_x, out_x)

    source = tl.load(ints).to(tl.pointer_type(SOURCE_DTYPE))
    height = tl.load(ints + 1).to(tl.int32)
    width = tl.load(ints + 2).to(tl.int32)
    row_stride = tl.load(ints + 3)
    window_y = tl.load(floats)
    window_x = tl.load(floats + 1)
    scale_y = tl.load(floats + 2)
    scale_x = tl.load(floats + 3)
    # positions in float64: a tie (4.5 * 40/30 = 6) is a tie, not 5.9999
    edge_y = window_y + (out_y_source.to(tl.float64) + 0.5) * scale_y
    edge_x = window_x + (out_x_source.to(tl.float64) + 0.5) * scale_x
    center_y = (edge_y - 0.5).to(tl.float32)
    center_x = (edge_x - 0.5).to(tl.float32)
    inside = (center_y >= -0.5) & (center_y <= height.to(tl.float32) - 0.5) & \
             (center_x >= -0.5) & (center_x <= width.to(tl.float32) - 0.5)

    if ANTIALIAS:
        stretch_y = tl.maximum(scale_y.to(tl.float32), 1.0)
        stretch_x = tl.maximum(scale_x.to(tl.float32), 1.0)
    else:
        stretch_y = 1.0
        stretch_x = 1.0
    if FILTER == 0:  # numeric.nearest_indices: a centre on a pixel boundary takes the later pixel
        first_y = tl.floor(edge_y + NEAREST_TIE_EPSILON).to(tl.int32)
        first_x = tl.floor(edge_x + NEAREST_TIE_EPSILON).to(tl.int32)
    else:
        radius = 1.0 if FILTER == 1 else (2.0 if FILTER == 2 else 3.0)
        first_y = tl.floor(center_y - radius * stretch_y).to(tl.int32) + 1
        first_x = tl.floor(center_x - radius * stretch_x).to(tl.int32) + 1

    acc0 = tl.zeros([BLOCK], dtype=tl.float32)
    acc1 = tl.zeros([BLOCK], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    acc3 = tl.zeros([BLOCK], dtype=tl.float32)
    total = tl.zeros([BLOCK], dtype=tl.float32)
    taps_y = tl.load(integers + count * 9).to(tl.int32)
    taps_x = tl.load(integers + count * 9 + 1).to(tl.int32)
    ky = 0
    while ky < taps_y:  # a runtime bound (a while loop, which Triton's interpreter also runs)
        y = first_y + ky
        if FILTER == 0:
            weight_y = tl.full([BLOCK], 1.0, tl.float32)
        else:
            weight_y = _filter_weight((y.to(tl.float32) - center_y) / stretch_y, FILTER)
        row = tl.minimum(tl.maximum(y, 0), height - 1).to(tl.int64) * row_stride
        kx = 0
        while kx < taps_x:
            x = first_x + kx
            if FILTER == 0:
                weight = weight_y
            else:
                weight = weight_y * _filter_weight((x.to(tl.float32) - center_x) / stretch_x, FILTER)
            column = tl.minimum(tl.maximum(x, 0), width - 1).to(tl.int64) * CHANNELS
            mask = active & inside
            address = source + row + column
            acc0 += weight * tl.load(address, mask=mask, other=0).to(tl.float32)
            if CHANNELS > 1:
                acc1 += weight * tl.load(address + 1, mask=mask, other=0).to(tl.float32)
            if CHANNELS > 2:
                acc2 += weight * tl.load(address + 2, mask=mask, other=0).to(tl.float32)
            if CHANNELS > 3:
                acc3 += weight * tl.load(address + 3, mask=mask, other=0).to(tl.float32)
            total += weight
            kx += 1
        ky += 1
    total = tl.where(total == 0.0, 1.0, total)

    out_base = output + tl.load(ints + 4)
    plane = (out_height * out_width).to(tl.int64)
    for channel in tl.static_range(OUT_CHANNELS):
        if channel < CHANNELS:
            if channel == 0:
                value = acc0 / total
            elif channel == 1:
                value = acc1 / total
            elif channel == 2:
                value = acc2 / total
            else:
                value = acc3 / total
            value = value * tl.load(floats + 4 + channel).to(tl.float32) + \
                tl.load(floats + 4 + CHANNELS + channel).to(tl.float32)
            value = tl.where(inside, value, tl.load(floats + 4 + 2 * CHANNELS + channel).to(tl.float32))
        else:
            value = tl.zeros([BLOCK], dtype=tl.float32)
        if ROUND:  # penstock.numeric's rule: to nearest, halves to even; NaN to 0; saturate
            value = _round_half_to_even(tl.where(value == value, value, 0.0))
            value = tl.minimum(tl.maximum(value, OUT_MIN), OUT_MAX)
        if CHW:
            address = out_base + channel * plane + pixels
        else:
            address = out_base + pixels.to(tl.int64) * OUT_CHANNELS + channel
        tl.store(address, value.to(out_base.dtype.element_ty), mask=active)


@dataclass
class ResamplePlan:
    """What the kernel does to each sample; tensors on the device of the sources (tables on the
    same device). All per-sample fields are sequences of length N."""

    sources: list  # tensors HWC (row stride may exceed width * channels)
    windows: list  # (window_y, window_x, scale_y, scale_x) per sample
    output_sizes: list  # (height, width) per sample
    flips: list  # (vertical, horizontal) per sample
    multipliers: list  # per sample, C values
    addends: list  # per sample, C values
    fills: list  # per sample, C values
    filter: int = FILTER_LINEAR
    antialias: bool = True
    out_dtype: torch.dtype = torch.float32
    chw: bool = False
    pad_channels: bool = False


def taps_for(filter_id: int, antialias: bool, scales) -> int:
    """Filter taps per axis covering the widest sample of the batch."""
    if filter_id == FILTER_NEAREST:
        return 1
    radius = FILTER_RADIUS[filter_id]
    widest = max([max(scale, 1.0) if antialias else 1.0 for scale in scales] or [1.0])
    return int(math.ceil(2 * radius * widest)) + 1


def _layouts(sources: list, channels: int, dtype) -> list:
    """Per source: (address, height, width, row stride in elements), in one pass with few calls
    each: this runs for every sample of every batch."""
    layouts = []
    for source in sources:
        height, width, source_channels = source.shape
        row_stride, pixel_stride, channel_stride = source.stride()
        if source_channels != channels or channel_stride != 1 or pixel_stride != channels:
            raise ValueError("resample: every source must be HWC with the same number of channels and "
                             "contiguous pixels")
        if source.dtype != dtype:
            raise ValueError("resample: every source must have the same dtype")
        layouts.append((source.data_ptr(), height, width, row_stride))
    return layouts


def run_resample(plan: ResamplePlan, output: torch.Tensor | None = None, block: int = 256):
    """Runs the plan; returns its output, a PackedBatch (``output``: the flat buffer to write, else a new one)."""
    count = len(plan.sources)
    channels, dtype, device = hwc_facts(plan.sources)
    if isinstance(plan.sources, PackedBatch):  # one dtype and channel count by construction
        layouts = plan.sources.layouts()
    else:
        layouts = _layouts(plan.sources, channels, dtype)
    out_channels = channels + (1 if plan.pad_channels else 0)
    shapes = [((out_channels, h, w) if plan.chw else (h, w, out_channels)) for h, w in plan.output_sizes]
    sizes = [h * w * out_channels for h, w in plan.output_sizes]
    offsets = [0] * count
    for index in range(1, count):
        offsets[index] = offsets[index - 1] + sizes[index - 1]
    total = offsets[-1] + sizes[-1] if count else 0
    if output is None:
        output = torch.empty(total, dtype=plan.out_dtype, device=device)
    if count == 0:
        return PackedBatch(output, offsets, shapes)

    # every per-sample number in two tables, sent in two copies from pinned memory: the launch
    # does not wait for the work already queued on the stream (such as the decoding of the sources)
    integers = np.zeros((count + 1, 9), np.int64)
    integers[:count, :4] = layouts  # address, height, width, row stride
    integers[:count, 4] = offsets
    integers[:count, 5:7] = plan.output_sizes
    integers[:count, 7:9] = plan.flips
    integers[count, :2] = (taps_for(plan.filter, plan.antialias, [w[2] for w in plan.windows]),
                           taps_for(plan.filter, plan.antialias, [w[3] for w in plan.windows]))
    reals = np.empty((count, 4 + 3 * channels), np.float64)
    reals[:, :4] = plan.windows
    reals[:, 4:4 + channels] = plan.multipliers
    reals[:, 4 + channels:4 + 2 * channels] = plan.addends
    reals[:, 4 + 2 * channels:] = plan.fills
    if device.type == "cuda":
        integers, reals = upload_arrays(device, [integers, reals])
    else:
        integers, reals = torch.from_numpy(integers), torch.from_numpy(reals)
    bounds = None if plan.out_dtype.is_floating_point or plan.out_dtype == torch.bool else \
        numeric.integer_bounds(types.to_numpy_dtype(plan.out_dtype))
    max_pixels = max(h * w for h, w in plan.output_sizes)
    if INTERPRETED:  # each program costs the interpreter the same, whatever its size: use few
        block = min(4096, triton.next_power_of_2(max_pixels))
    grid = (triton.cdiv(max_pixels, block), count)
    resample_kernel[grid](
        integers, reals, output, count,
        CHANNELS=channels, OUT_CHANNELS=out_channels, CHW=plan.chw, FILTER=plan.filter,
        ANTIALIAS=plan.antialias, SOURCE_DTYPE=_TORCH_TO_TRITON[dtype], ROUND=bounds is not None,
        OUT_MIN=bounds[0] if bounds else 0.0, OUT_MAX=bounds[1] if bounds else 0.0,
        BLOCK=block)
    return PackedBatch(output, offsets, shapes)
