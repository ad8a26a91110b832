"""One Triton kernel for the image work of a GPU pipeline: resample through any per-sample
projective map (crop, resize, flip, rotation, affine and perspective warps, with an antialiased
filter), transform the colours (a per-sample matrix and offset: brightness, contrast, saturation,
hue, normalization), convert the type and the layout, in one pass over a ragged batch.

Every sample has its own source (a pointer in a table, so the decoder's separate allocations need
no gathering copy), its own 3x3 map, output size and colour transform; one launch covers the batch
with program ids over (tile of output pixels, sample). Output pixel (y, x) samples the source at
``map @ (x + 0.5, y + 0.5, 1) - 0.5`` (divided by its third coordinate for perspective maps),
through the filter widened by the sample's stretch (the map's scale when shrinking with
antialias). At the borders either the edge pixels repeat and outputs whose centre falls outside
the source take the fill value (crops that reach outside), or taps outside the source read a
constant border value (warps with a fill value, as OpenCV's BORDER_CONSTANT).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import triton
import triton.language as tl

from penstock import numeric, types
from penstock.batch import PackedBatch, back_to_back, hwc_facts, one_value
from penstock.kernels.triton_launch import INTERPRETED, launch

FILTER_NEAREST, FILTER_LINEAR, FILTER_CUBIC, FILTER_LANCZOS3 = 0, 1, 2, 3
FILTER_RADIUS = {FILTER_NEAREST: 0.5, FILTER_LINEAR: 1.0, FILTER_CUBIC: 2.0, FILTER_LANCZOS3: 3.0}

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
def round_half_to_even(value):
    rounded = tl.floor(value + 0.5)
    tie = (rounded - value) == 0.5
    odd = (rounded - 2.0 * tl.floor(rounded * 0.5)) != 0.0
    return tl.where(tie & odd, rounded - 1.0, rounded)


@triton.jit
def _accumulate(acc, weight, address, mask, border, table, BORDER: tl.constexpr, USE_TABLE: tl.constexpr):
    """acc + weight * the source value at ``address`` (looked up in the sample's 256-entry ``table``
    of this channel when there is one; the border value where ``mask`` is off and the border is
    constant)."""
    value = tl.load(address, mask=mask, other=0)
    if USE_TABLE:
        value = tl.load(table + value.to(tl.int32), mask=mask, other=0)
    value = value.to(tl.float32)
    if BORDER == 1:
        value = tl.where(mask, value, border)
    return acc + weight * value


@triton.jit
def _border_index(index, size, BORDER: tl.constexpr):
    """The source row or column that tap ``index`` reads under the border rule (clamped for the
    rules that repeat the edge or mask the outside)."""
    if BORDER == 3:  # reflect: cba|abcd|dcb
        period = 2 * size
        folded = ((index % period) + period) % period
        index = tl.where(folded >= size, period - 1 - folded, folded)
    elif BORDER == 4:  # reflect_101: dcb|abcd|cba
        period = tl.maximum(2 * size - 2, 1)
        folded = ((index % period) + period) % period
        index = tl.where(folded >= size, period - folded, folded)
    elif BORDER == 5:  # wrap: bcd|abcd|abc
        index = ((index % size) + size) % size
    return tl.minimum(tl.maximum(index, 0), size - 1)


@triton.jit
def resample_kernel(
    integers,  # int64 [N + 1, 9]: per sample source pointer, height, width, row stride, output offset,
               # output height, output width, canvas height, canvas width; then the filter taps per
               # axis for the widest sample (a runtime bound: no recompiling per batch)
    reals,  # float64 [N, REALS]: the 3x3 map from output to source coordinates (row-major), the
            # filter's stretch (y, x), the colour matrix [COLOR_CHANNELS, CHANNELS] and offsets
            # (out = matrix @ value + offset), the fill per colour channel, the border per source
            # channel, the canvas's fill per output channel
    output, count, tables,  # tables: uint8 [N, CHANNELS, 256] looked up on every source value (USE_TABLE)
    CHANNELS: tl.constexpr, COLOR_CHANNELS: tl.constexpr, OUT_CHANNELS: tl.constexpr, CHW: tl.constexpr,
    FILTER: tl.constexpr, PERSPECTIVE: tl.constexpr, DIAGONAL: tl.constexpr, BORDER: tl.constexpr,
    SOURCE_DTYPE: tl.constexpr, ROUND: tl.constexpr, OUT_MIN: tl.constexpr, OUT_MAX: tl.constexpr,
    USE_TABLE: tl.constexpr, CANVAS: tl.constexpr, BLOCK: tl.constexpr,
):
    # CANVAS: each output lies at the top left of a larger canvas (pad after the plan), the rest of
    # which takes the canvas fill: the padded batch is written in this one pass
    tile = tl.program_id(0)
    sample = tl.program_id(1)
    ints = integers + sample * 9
    floats = reals + sample * (11 + COLOR_CHANNELS * CHANNELS + 2 * COLOR_CHANNELS + CHANNELS + OUT_CHANNELS)
    out_height = tl.load(ints + 5).to(tl.int32)
    out_width = tl.load(ints + 6).to(tl.int32)
    pixels = tile * BLOCK + tl.arange(0, BLOCK)
    if CANVAS:
        canvas_height = tl.load(ints + 7).to(tl.int32)
        canvas_width = tl.load(ints + 8).to(tl.int32)
        active = pixels < canvas_height * canvas_width
        column_of = pixels % canvas_width
        row_of = pixels // canvas_width
        content = (column_of < out_width) & (row_of < out_height)
    else:
        canvas_height = out_height
        canvas_width = out_width
        active = pixels < out_height * out_width
        column_of = pixels % out_width
        row_of = pixels // out_width
        content = active
    # output pixel edges (centre + 0.5) in float64: a tie (4.5 * 40/30 = 6) is a tie, not 5.9999
    out_x = column_of.to(tl.float64) + 0.5
    out_y = row_of.to(tl.float64) + 0.5

    source = tl.load(ints).to(tl.pointer_type(SOURCE_DTYPE))
    height = tl.load(ints + 1).to(tl.int32)
    width = tl.load(ints + 2).to(tl.int32)
    row_stride = tl.load(ints + 3)
    edge_x = tl.load(floats) * out_x + tl.load(floats + 1) * out_y + tl.load(floats + 2)
    edge_y = tl.load(floats + 3) * out_x + tl.load(floats + 4) * out_y + tl.load(floats + 5)
    if PERSPECTIVE:
        depth = tl.load(floats + 6) * out_x + tl.load(floats + 7) * out_y + tl.load(floats + 8)
        depth = tl.where(depth == 0.0, 1e-30, depth)
        edge_x = edge_x / depth
        edge_y = edge_y / depth
    center_y = (edge_y - 0.5).to(tl.float32)
    center_x = (edge_x - 0.5).to(tl.float32)
    if BORDER == 0:  # taps repeat the edge pixels; pixels whose centre is outside the source take the fill
        inside = (center_y >= -0.5) & (center_y <= height.to(tl.float32) - 0.5) & \
                 (center_x >= -0.5) & (center_x <= width.to(tl.float32) - 0.5)
    else:  # taps outside the source read the border value (1), the edge pixels (2) or the
        inside = active  # reflected or wrapped image (3-5)
    if CANVAS:
        inside = inside & content
    stretch_y = tl.load(floats + 9).to(tl.float32)
    stretch_x = tl.load(floats + 10).to(tl.float32)
    if FILTER == 0:  # numeric.nearest_indices: a centre on a pixel boundary takes the later pixel
        first_y = tl.floor(edge_y + NEAREST_TIE_EPSILON).to(tl.int32)
        first_x = tl.floor(edge_x + NEAREST_TIE_EPSILON).to(tl.int32)
    else:
        radius = 1.0 if FILTER == 1 else (2.0 if FILTER == 2 else 3.0)
        first_y = tl.floor(center_y - radius * stretch_y).to(tl.int32) + 1
        first_x = tl.floor(center_x - radius * stretch_x).to(tl.int32) + 1

    border_values = floats + 11 + COLOR_CHANNELS * CHANNELS + 2 * COLOR_CHANNELS
    border0 = tl.load(border_values).to(tl.float32)
    border1 = tl.load(border_values + (1 if CHANNELS > 1 else 0)).to(tl.float32)
    border2 = tl.load(border_values + (2 if CHANNELS > 2 else 0)).to(tl.float32)
    border3 = tl.load(border_values + (3 if CHANNELS > 3 else 0)).to(tl.float32)
    table = tables + sample.to(tl.int64) * (CHANNELS * 256)
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
        row = _border_index(y, height, BORDER).to(tl.int64) * row_stride
        row_inside = (y >= 0) & (y < height)
        kx = 0
        while kx < taps_x:
            x = first_x + kx
            if FILTER == 0:
                weight = weight_y
            else:
                weight = weight_y * _filter_weight((x.to(tl.float32) - center_x) / stretch_x, FILTER)
            column = _border_index(x, width, BORDER).to(tl.int64) * CHANNELS
            mask = active & inside
            if BORDER == 1:
                mask = mask & row_inside & (x >= 0) & (x < width)
            address = source + row + column
            acc0 = _accumulate(acc0, weight, address, mask, border0, table + 0, BORDER, USE_TABLE)
            if CHANNELS > 1:
                acc1 = _accumulate(acc1, weight, address + 1, mask, border1, table + 256, BORDER, USE_TABLE)
            if CHANNELS > 2:
                acc2 = _accumulate(acc2, weight, address + 2, mask, border2, table + 512, BORDER, USE_TABLE)
            if CHANNELS > 3:
                acc3 = _accumulate(acc3, weight, address + 3, mask, border3, table + 768, BORDER, USE_TABLE)
            total += weight
            kx += 1
        ky += 1
    total = tl.where(total == 0.0, 1.0, total)
    acc0 = acc0 / total
    acc1 = acc1 / total
    acc2 = acc2 / total
    acc3 = acc3 / total

    matrix = floats + 11
    offsets = matrix + COLOR_CHANNELS * CHANNELS
    fills = offsets + COLOR_CHANNELS
    out_base = output + tl.load(ints + 4)
    canvas_fills = fills + COLOR_CHANNELS + CHANNELS
    plane = (canvas_height * canvas_width).to(tl.int64)
    for channel in tl.static_range(OUT_CHANNELS):
        if channel < COLOR_CHANNELS:
            row_of_matrix = matrix + channel * CHANNELS
            if DIAGONAL:  # one multiplier per channel (a NaN in one channel stays in it)
                if channel == 0:
                    value = acc0
                elif channel == 1:
                    value = acc1
                elif channel == 2:
                    value = acc2
                else:
                    value = acc3
                value = value * tl.load(row_of_matrix + channel).to(tl.float32)
            else:
                value = acc0 * tl.load(row_of_matrix).to(tl.float32)
                if CHANNELS > 1:
                    value += acc1 * tl.load(row_of_matrix + 1).to(tl.float32)
                if CHANNELS > 2:
                    value += acc2 * tl.load(row_of_matrix + 2).to(tl.float32)
                if CHANNELS > 3:
                    value += acc3 * tl.load(row_of_matrix + 3).to(tl.float32)
            value = value + tl.load(offsets + channel).to(tl.float32)
            value = tl.where(inside, value, tl.load(fills + channel).to(tl.float32))
        else:
            value = tl.zeros([BLOCK], dtype=tl.float32)
        if CANVAS:
            value = tl.where(content, value, tl.load(canvas_fills + channel).to(tl.float32))
        if ROUND:  # penstock.numeric's rule: to nearest, halves to even; NaN to 0; saturate
            value = round_half_to_even(tl.where(value == value, value, 0.0))
            value = tl.minimum(tl.maximum(value, OUT_MIN), OUT_MAX)
        if CHW:
            address = out_base + channel * plane + pixels
        else:
            address = out_base + pixels.to(tl.int64) * OUT_CHANNELS + channel
        tl.store(address, value.to(out_base.dtype.element_ty), mask=active)


# what samples outside the source give: the edge pixels repeated and the fill where the output's
# centre is outside (crops that reach outside), a constant, the edge pixels repeated everywhere, or
# the image reflected (edge pixel repeated, or not) or wrapped around
BORDER_FILL_OUTSIDE, BORDER_CONSTANT, BORDER_CLAMP, BORDER_REFLECT, BORDER_REFLECT_101, BORDER_WRAP = range(6)


@dataclass
class ResamplePlan:
    """What the kernel does to each sample; tensors on the device of the sources (tables on the
    same device). Per-sample fields are arrays with N rows."""

    sources: list  # tensors HWC (row stride may exceed width * channels)
    maps: np.ndarray  # [N, 3, 3]: output pixel edges (x + 0.5, y + 0.5, 1) -> source ones (homogeneous)
    output_sizes: list  # (height, width) per sample
    stretches: np.ndarray  # [N, 2]: the filter widened by (y, x) when shrinking with antialias, else 1
    color_matrices: np.ndarray  # [N, K, C]: out = matrix @ value + offset
    color_offsets: np.ndarray  # [N, K]
    fills: np.ndarray  # [N, K]: outputs whose centre falls outside the source (BORDER_FILL_OUTSIDE)
    borders: np.ndarray  # [N, C]: what taps outside the source read (BORDER_CONSTANT)
    filter: int = FILTER_LINEAR
    border: int = BORDER_FILL_OUTSIDE
    # [N, 4] (top, left, height, width): the part of each source that is sampled, its outside being
    # outside the source for the border rule (a crop before a warp); None: the whole sources
    bounds: np.ndarray | None = None
    # uint8 [N, C, 256] on the device: each source value v of channel c of sample i reads tables[i, c, v]
    # first (the value maps of automatic augmentation); None: values as they are
    tables: torch.Tensor | None = None
    out_dtype: torch.dtype = torch.float32
    chw: bool = False
    pad_channels: bool = False
    # (height, width) per sample: each output written at the top left of a canvas this large, the
    # rest of which takes ``canvas_fills`` ([N, output channels]); None: outputs as they are
    canvas_sizes: list | None = None
    canvas_fills: np.ndarray | None = None


def taps_for(filter_id: int, stretches) -> int:
    """Filter taps per axis covering the widest sample of the batch (``stretches``: each sample's
    stretch along that axis, 1 or more)."""
    if filter_id == FILTER_NEAREST:
        return 1
    widest = float(np.max(stretches)) if len(stretches) else 1.0
    return int(math.ceil(2 * FILTER_RADIUS[filter_id] * widest)) + 1


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


def run_resample(plan: ResamplePlan, output: torch.Tensor | None = None, block: int = 256, *, upload):
    """Runs the plan; returns its output, a PackedBatch (``output``: the flat buffer to write, else a
    new one). ``upload(device, arrays)``: the arrays as tensors on the device, without waiting for
    the work queued there (runtime.pinned.to_device)."""
    count = len(plan.sources)
    channels, dtype, device = hwc_facts(plan.sources)
    if isinstance(plan.sources, PackedBatch):  # one dtype and channel count by construction
        layouts = plan.sources.layouts()
    else:
        layouts = _layouts(plan.sources, channels, dtype)
    out_channels = plan.color_matrices.shape[1] + (1 if plan.pad_channels else 0)
    output_sizes = plan.output_sizes if plan.canvas_sizes is None else plan.canvas_sizes
    first = one_value(output_sizes)  # one output size (a fixed-size resize)
    uniform = first is not None
    if uniform:  # no loop per sample
        height, width = first
        shapes = [(out_channels, height, width) if plan.chw else (height, width, out_channels)] * count
        volume = height * width * out_channels
        offsets = back_to_back(count, volume)
        total, max_pixels = count * volume, height * width
    else:
        shapes = [((out_channels, h, w) if plan.chw else (h, w, out_channels)) for h, w in output_sizes]
        sizes = [h * w * out_channels for h, w in output_sizes]
        offsets = [0] * count
        for index in range(1, count):
            offsets[index] = offsets[index - 1] + sizes[index - 1]
        total = offsets[-1] + sizes[-1] if count else 0
        max_pixels = max(h * w for h, w in output_sizes) if count else 0
    if output is None:
        output = torch.empty(total, dtype=plan.out_dtype, device=device)
    if count == 0:
        return PackedBatch(output, offsets, shapes)

    # every per-sample number in two tables, sent in two copies from pinned memory: the launch
    # does not wait for the work already queued on the stream (such as the decoding of the sources)
    color_channels = plan.color_matrices.shape[1]
    integers = np.zeros((count + 1, 9), np.int64)
    integers[:count, :4] = layouts  # address, height, width, row stride
    maps = plan.maps
    if plan.bounds is not None:  # each source seen as its bounded part: a pointer into it, and the map moved
        bounds = np.asarray(plan.bounds, np.int64)
        integers[:count, 0] += (bounds[:, 0] * integers[:count, 3] + bounds[:, 1] * channels) * \
            torch.empty((), dtype=dtype).element_size()
        integers[:count, 1:3] = bounds[:, 2:4]
        shift = np.tile(np.eye(3), (count, 1, 1))
        shift[:, 0, 2] = -bounds[:, 1]
        shift[:, 1, 2] = -bounds[:, 0]
        maps = shift @ maps
    integers[:count, 4] = offsets
    integers[:count, 7:9] = first if uniform else output_sizes
    integers[:count, 5:7] = integers[:count, 7:9] if plan.canvas_sizes is None else plan.output_sizes
    canvas_fills = plan.canvas_fills if plan.canvas_fills is not None else np.zeros((count, out_channels))
    integers[count, :2] = (taps_for(plan.filter, plan.stretches[:, 0]), taps_for(plan.filter, plan.stretches[:, 1]))
    reals = np.concatenate([maps.reshape(count, 9), plan.stretches, plan.color_matrices.reshape(count, -1),
                            plan.color_offsets, plan.fills, plan.borders, canvas_fills],
                           axis=1).astype(np.float64, copy=False)
    integers, reals = upload(device, [integers, reals])
    bounds = None if plan.out_dtype.is_floating_point or plan.out_dtype == torch.bool else \
        numeric.integer_bounds(types.to_numpy_dtype(plan.out_dtype))
    if INTERPRETED:  # each program costs the interpreter the same, whatever its size: use few
        block = min(4096, triton.next_power_of_2(max_pixels))
    grid = (triton.cdiv(max_pixels, block), count)
    matrices = plan.color_matrices
    diagonal = color_channels == channels and not np.any(matrices - matrices * np.eye(channels))
    if plan.tables is not None and (dtype != torch.uint8 or tuple(plan.tables.shape) != (count, channels, 256)):
        raise ValueError("resample: value tables are for uint8 sources, one [channels, 256] table per sample")
    launch(resample_kernel, grid,
        integers, reals, output, count, plan.tables if plan.tables is not None else integers,
        CHANNELS=channels, COLOR_CHANNELS=color_channels, OUT_CHANNELS=out_channels, CHW=plan.chw,
        FILTER=plan.filter, PERSPECTIVE=bool(np.any(maps[:, 2] != (0.0, 0.0, 1.0))), DIAGONAL=bool(diagonal),
        BORDER=plan.border, SOURCE_DTYPE=_TORCH_TO_TRITON[dtype], ROUND=bounds is not None,
        OUT_MIN=bounds[0] if bounds else 0.0, OUT_MAX=bounds[1] if bounds else 0.0,
        USE_TABLE=plan.tables is not None, CANVAS=plan.canvas_sizes is not None, BLOCK=block)
    return PackedBatch(output, offsets, shapes)
