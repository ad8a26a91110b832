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

import torch
import triton
import triton.language as tl

FILTER_NEAREST, FILTER_LINEAR, FILTER_CUBIC, FILTER_LANCZOS3 = 0, 1, 2, 3
FILTER_RADIUS = {FILTER_NEAREST: 0.5, FILTER_LINEAR: 1.0, FILTER_CUBIC: 2.0, FILTER_LANCZOS3: 3.0}

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"

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
def resample_kernel(
    source_pointers, source_heights, source_widths, source_row_strides,
    windows,  # float64 [N, 4]: window_y, window_x, scale_y, scale_x
    output, output_offsets, output_heights, output_widths,
    flips,  # int32 [N, 2]: vertical, horizontal
    multipliers, addends, fills,  # float32 [N, C]: out = value * multiplier + addend; fill outside the source
    taps,  # int32 [2]: filter taps per axis, for the widest sample (a runtime bound: no recompiling per batch)
    CHANNELS: tl.constexpr, OUT_CHANNELS: tl.constexpr, CHW: tl.constexpr, FILTER: tl.constexpr,
    ANTIALIAS: tl.constexpr, SOURCE_DTYPE: tl.constexpr, ROUND: tl.constexpr, OUT_MIN: tl.constexpr,
    OUT_MAX: tl.constexpr, BLOCK: tl.constexpr,
):
    tile = tl.program_id(0)
    sample = tl.program_id(1)
    out_height = tl.load(output_heights + sample)
    out_width = tl.load(output_widths + sample)
    pixels = tile * BLOCK + tl.arange(0, BLOCK)
    active = pixels < out_height * out_width
    out_y = pixels // out_width
    out_x = pixels % out_width
    flip_y = tl.load(flips + sample * 2)
    flip_x = tl.load(flips + sample * 2 + 1)
    out_y_source = tl.where(flip_y != 0, out_height - 1 - out_y, out_y)
    out_x_source = tl.where(flip_x != 0, out_width - 1 - out_x, out_x)

    source = tl.load(source_pointers + sample).to(tl.pointer_type(SOURCE_DTYPE))
    height = tl.load(source_heights + sample)
    width = tl.load(source_widths + sample)
    row_stride = tl.load(source_row_strides + sample)
    window_y = tl.load(windows + sample * 4)
    window_x = tl.load(windows + sample * 4 + 1)
    scale_y = tl.load(windows + sample * 4 + 2)
    scale_x = tl.load(windows + sample * 4 + 3)
    # positions in float64: exact ties (4.5 * 40/30) then round as in OpenCV and PIL
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
    if FILTER == 0:  # exact ties (4.5 * 40/30 = 6) go to the lower pixel, as in OpenCV
        first_y = tl.floor(edge_y - 1e-6).to(tl.int32)
        first_x = tl.floor(edge_x - 1e-6).to(tl.int32)
    else:
        radius = 1.0 if FILTER == 1 else (2.0 if FILTER == 2 else 3.0)
        first_y = tl.floor(center_y - radius * stretch_y).to(tl.int32) + 1
        first_x = tl.floor(center_x - radius * stretch_x).to(tl.int32) + 1

    acc0 = tl.zeros([BLOCK], dtype=tl.float32)
    acc1 = tl.zeros([BLOCK], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    acc3 = tl.zeros([BLOCK], dtype=tl.float32)
    total = tl.zeros([BLOCK], dtype=tl.float32)
    taps_y = tl.load(taps)
    taps_x = tl.load(taps + 1)
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

    out_base = output + tl.load(output_offsets + sample)
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
            value = value * tl.load(multipliers + sample * CHANNELS + channel) + \
                tl.load(addends + sample * CHANNELS + channel)
            value = tl.where(inside, value, tl.load(fills + sample * CHANNELS + channel))
        else:
            value = tl.zeros([BLOCK], dtype=tl.float32)
        if ROUND:
            value = tl.minimum(tl.maximum(tl.floor(value + 0.5), OUT_MIN), OUT_MAX)
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


def run_resample(plan: ResamplePlan, output: torch.Tensor | None = None, block: int = 256):
    """Runs the plan; returns (flat output, per-sample offsets in elements, per-sample shapes)."""
    count = len(plan.sources)
    device = plan.sources[0].device
    channels = plan.sources[0].shape[2]
    for source in plan.sources:
        if source.shape[2] != channels or source.stride(2) != 1 or source.stride(1) != channels:
            raise ValueError("resample: every source must be HWC with the same number of channels and "
                             "contiguous pixels")
        if source.dtype != plan.sources[0].dtype:
            raise ValueError("resample: every source must have the same dtype")
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
        return output, offsets, shapes

    def table(values, dtype):
        return torch.tensor(values, dtype=dtype).to(device, non_blocking=True)

    pointers = table([source.data_ptr() for source in plan.sources], torch.int64)
    heights = table([source.shape[0] for source in plan.sources], torch.int32)
    widths = table([source.shape[1] for source in plan.sources], torch.int32)
    row_strides = table([source.stride(0) for source in plan.sources], torch.int64)
    windows = table([list(map(float, window)) for window in plan.windows], torch.float64)
    output_offsets = table(offsets, torch.int64)
    output_heights = table([h for h, _ in plan.output_sizes], torch.int32)
    output_widths = table([w for _, w in plan.output_sizes], torch.int32)
    flips = table([[int(v), int(h)] for v, h in plan.flips], torch.int32)
    multipliers = table([list(m) for m in plan.multipliers], torch.float32)
    addends = table([list(a) for a in plan.addends], torch.float32)
    fills = table([list(f) for f in plan.fills], torch.float32)
    tap_counts = table([taps_for(plan.filter, plan.antialias, [w[2] for w in plan.windows]),
                        taps_for(plan.filter, plan.antialias, [w[3] for w in plan.windows])], torch.int32)
    rounding = not plan.out_dtype.is_floating_point
    info = torch.iinfo(plan.out_dtype) if rounding else None
    max_pixels = max(h * w for h, w in plan.output_sizes)
    if INTERPRETED:  # each program costs the interpreter the same, whatever its size: use few
        block = min(4096, triton.next_power_of_2(max_pixels))
    grid = (triton.cdiv(max_pixels, block), count)
    resample_kernel[grid](
        pointers, heights, widths, row_strides, windows, output, output_offsets, output_heights,
        output_widths, flips, multipliers, addends, fills, tap_counts,
        CHANNELS=channels, OUT_CHANNELS=out_channels, CHW=plan.chw, FILTER=plan.filter,
        ANTIALIAS=plan.antialias, SOURCE_DTYPE=_TORCH_TO_TRITON[plan.sources[0].dtype], ROUND=rounding,
        OUT_MIN=float(info.min) if rounding else 0.0, OUT_MAX=float(info.max) if rounding else 0.0,
        BLOCK=block)
    return output, offsets, shapes
