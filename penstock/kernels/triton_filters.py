"""Triton kernels of the filter and noise operators (penstock.operators.filters.convolution and .noise), each
one launch over a ragged batch.

``window_kernel`` slides a per-sample window over HWC images: a weighted sum (a correlation, as
DALI's filters compute: the weights are not flipped), or the minimum or maximum over the taps
whose weight is not 0 (erosion and dilation). Every sample has a row in a table of int64s (its
source pointer, sizes, anchor, window size and where its weights and output start) and its own
weights in one float32 table, so samples with different windows (a per-sample sigma) share the
launch. Taps outside the image read it reflected (reflect_101: dcb|abcd|cba, reflect_1001:
cba|abcd|dcb), wrapped around, clamped to the edge, or a per-sample constant.

``noise_kernel`` adds Gaussian noise, Poisson (shot) noise or salt and pepper to every element,
from Philox streams (tl.rand, tl.randn) seeded per sample by the operator's draw, so the result
depends on the seed alone.

Both write float32; the wrappers convert to the output type by penstock.numeric's rule (to
nearest, halves to even, saturated) in one pass over the batch's buffer.

``histogram_kernel`` counts the values of every channel of uint8 HWC images, the batch in one
launch: each program counts a block of one sample in registers (tl.histogram) and adds its
counts to the sample's with one atomic add per bin. What equalize, auto-contrast and contrast
read, without a temporary per pixel and without the wait for the GPU that torch.bincount makes
to learn its output's size.
"""
from __future__ import annotations


import numpy as np
import torch
import triton
import triton.language as tl

from penstock import numeric
from penstock.batch import PackedBatch
from penstock.kernels.triton_resample import round_half_to_even
from penstock.kernels.triton_launch import INTERPRETED, launch

BLOCK = 1024
HISTOGRAM_BLOCK = 8192  # values a program counts: one atomic add per bin for each

# what taps outside the image read; the names are the rules of penstock.operators.filters.rules
BORDER_CODES = {"reflect_101": 0, "reflect_1001": 1, "wrap": 2, "clamp": 3, "constant": 4}
OPERATIONS = {"sum": 0, "min": 1, "max": 2}
NOISES = {"gaussian": 0, "shot": 1, "salt_and_pepper": 2}
# above this mean, shot noise draws from the normal approximation of the Poisson distribution
# (its error in the variance is below 1/64 there); below it, by inversion, exactly
POISSON_NORMAL_FROM = tl.constexpr(64.0)

TRITON_TYPES = {torch.uint8: tl.uint8, torch.int8: tl.int8, torch.int16: tl.int16, torch.int32: tl.int32,
                 torch.float16: tl.float16, torch.float32: tl.float32, torch.bfloat16: tl.bfloat16}
_WINDOW_COLUMNS = 13
_NOISE_COLUMNS = 5


@triton.jit
def _fold(index, size, BORDER: tl.constexpr):
    """The row or column that tap ``index`` reads under the border rule (clamped for the
    constant border, whose outside taps are masked)."""
    if BORDER == 0:  # reflect_101
        period = tl.maximum(2 * size - 2, 1)
        folded = ((index % period) + period) % period
        index = tl.where(folded >= size, period - folded, folded)
    elif BORDER == 1:  # reflect_1001
        period = 2 * size
        folded = ((index % period) + period) % period
        index = tl.where(folded >= size, period - 1 - folded, folded)
    elif BORDER == 2:  # wrap
        index = ((index % size) + size) % size
    return tl.minimum(tl.maximum(index, 0), size - 1)


@triton.jit
def window_kernel(
    table,  # int64 [N, 13]: source pointer, height, width, channels, output offset, output height, output
            # width, anchor y, anchor x, window height, window width, weights offset, fill (float32 bits)
    weights, output,
    OPERATION: tl.constexpr, BORDER: tl.constexpr, SOURCE_DTYPE: tl.constexpr, BLOCK: tl.constexpr,
):
    tile = tl.program_id(0)
    row = table + tl.program_id(1) * 13
    source = tl.load(row).to(tl.pointer_type(SOURCE_DTYPE))
    height = tl.load(row + 1).to(tl.int32)
    width = tl.load(row + 2).to(tl.int32)
    channels = tl.load(row + 3).to(tl.int32)
    out_height = tl.load(row + 5).to(tl.int32)
    out_width = tl.load(row + 6).to(tl.int32)
    anchor_y = tl.load(row + 7).to(tl.int32)
    anchor_x = tl.load(row + 8).to(tl.int32)
    window_height = tl.load(row + 9).to(tl.int32)
    window_width = tl.load(row + 10).to(tl.int32)
    sample_weights = weights + tl.load(row + 11)
    fill = tl.load(row + 12).to(tl.int32).to(tl.float32, bitcast=True)

    elements = tile * BLOCK + tl.arange(0, BLOCK)
    active = elements < out_height * out_width * channels
    channel = elements % channels
    pixel = elements // channels
    x = pixel % out_width
    y = pixel // out_width
    if OPERATION == 0:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
    elif OPERATION == 1:
        acc = tl.full([BLOCK], float("inf"), tl.float32)
    else:
        acc = tl.full([BLOCK], float("-inf"), tl.float32)
    ky = 0
    while ky < window_height:  # runtime bounds: one compiled kernel for every window size
        source_y = y - anchor_y + ky
        inside_y = (source_y >= 0) & (source_y < height)
        row_start = _fold(source_y, height, BORDER).to(tl.int64) * width
        kx = 0
        while kx < window_width:
            weight = tl.load(sample_weights + ky * window_width + kx)
            source_x = x - anchor_x + kx
            address = (row_start + _fold(source_x, width, BORDER)) * channels + channel
            value = tl.load(source + address, mask=active, other=0).to(tl.float32)
            if BORDER == 4:
                value = tl.where(inside_y & (source_x >= 0) & (source_x < width), value, fill)
            if OPERATION == 0:
                acc += weight * value
            elif OPERATION == 1:
                acc = tl.where(weight != 0.0, tl.minimum(acc, value), acc)
            else:
                acc = tl.where(weight != 0.0, tl.maximum(acc, value), acc)
            kx += 1
        ky += 1
    tl.store(output + tl.load(row + 4) + elements, acc, mask=active)


@triton.jit
def noise_kernel(
    table,  # int64 [N, 5]: source pointer, element count, channels, output offset, seed
    parameters,  # float32 [N, 4]: gaussian (mean, stddev), shot (factor), salt and pepper (probability,
                 # salt_vs_pepper, salt, pepper)
    output,
    NOISE: tl.constexpr, PER_CHANNEL: tl.constexpr, SOURCE_DTYPE: tl.constexpr, BLOCK: tl.constexpr,
):
    tile = tl.program_id(0)
    sample = tl.program_id(1)
    row = table + sample * 5
    source = tl.load(row).to(tl.pointer_type(SOURCE_DTYPE))
    count = tl.load(row + 1)
    seed = tl.load(row + 4)
    elements = tile * BLOCK + tl.arange(0, BLOCK)
    active = elements < count
    value = tl.load(source + elements, mask=active, other=0).to(tl.float32)
    first = tl.load(parameters + sample * 4)
    second = tl.load(parameters + sample * 4 + 1)
    if NOISE == 0:
        result = value + first + second * tl.randn(seed, elements)
    elif NOISE == 1:
        factor = first
        mean = tl.maximum(value / tl.where(factor == 0.0, 1.0, factor), 0.0)
        # small means: the first count whose cumulative probability reaches a uniform draw
        uniform = tl.rand(seed, elements)
        probability = tl.exp(-mean)
        cumulative = probability
        events = tl.zeros([BLOCK], dtype=tl.float32)
        searching = active & (mean < POISSON_NORMAL_FROM) & (uniform > cumulative)
        while tl.max(searching.to(tl.int32), axis=0) > 0:
            events = tl.where(searching, events + 1.0, events)
            probability = tl.where(searching, probability * mean / tl.maximum(events, 1.0), probability)
            cumulative = tl.where(searching, cumulative + probability, cumulative)
            # the sum may round below a uniform draw close to 1: stop far in the tail
            searching = searching & (uniform > cumulative) & (events < 4.0 * POISSON_NORMAL_FROM)
        approximate = tl.maximum(tl.floor(mean + tl.sqrt(mean) * tl.randn(seed, elements) + 0.5), 0.0)
        events = tl.where(mean < POISSON_NORMAL_FROM, events, approximate)
        result = tl.where(factor == 0.0, value, events * factor)
    else:
        # one draw per element, or per pixel (every channel of a pixel the same)
        channels = tl.load(row + 2)
        draw_index = elements if PER_CHANNEL else elements // channels
        uniform = tl.rand(seed, draw_index)
        salt = tl.load(parameters + sample * 4 + 2)
        pepper = tl.load(parameters + sample * 4 + 3)
        result = tl.where(uniform < first * second, salt, tl.where(uniform < first, pepper, value))
    tl.store(output + tl.load(row + 3) + elements, result, mask=active)


@triton.jit
def histogram_kernel(
    table,  # int64 [N, 2]: source pointer (uint8), element count
    counts,  # int32 [N, CHANNELS, 256], zeroed
    CHANNELS: tl.constexpr, BINS: tl.constexpr, BLOCK: tl.constexpr,
):
    tile = tl.program_id(0)
    sample = tl.program_id(1)
    row = table + sample * 2
    source = tl.load(row).to(tl.pointer_type(tl.uint8))
    count = tl.load(row + 1)
    elements = tile * BLOCK + tl.arange(0, BLOCK)
    active = elements < count
    value = tl.load(source + elements, mask=active, other=0).to(tl.int32)
    keys = (elements % CHANNELS).to(tl.int32) * 256 + value  # every sample holds whole pixels
    found = tl.histogram(keys, BINS, mask=active)
    bins = tl.arange(0, BINS)
    tl.atomic_add(counts + sample * (CHANNELS * 256) + bins, found, mask=(bins < CHANNELS * 256) & (found > 0))


def run_histograms(sources, which: np.ndarray | None = None, *, upload) -> torch.Tensor:
    """int32 [N, C, 256]: how often each value occurs in each channel of uint8 HWC ``sources``
    (C channels each, a list of tensors or a PackedBatch), on their device; ``which`` takes the
    samples at those positions only. ``upload(device, arrays)``: the arrays as tensors on the
    device, without waiting for the work queued there (runtime.pinned.to_device; the same in
    every kernel here)."""
    if which is not None and not isinstance(sources, PackedBatch):
        sources = [sources[index] for index in which]
    if isinstance(sources, PackedBatch):
        layouts = sources.layouts()
        channels, _, device = sources.facts()
        if which is not None:
            layouts = layouts[which]
        table = np.stack([layouts[:, 0], layouts[:, 1] * layouts[:, 3]], axis=1)  # rows lie back to back
    else:
        sources = [source if source.is_contiguous() else source.contiguous() for source in sources]
        channels = sources[0].shape[2] if len(sources) else 1
        device = sources[0].device if len(sources) else torch.device("cpu")
        table = np.array([(source.data_ptr(), source.numel()) for source in sources], np.int64).reshape(-1, 2)
    count = len(table)
    counts = torch.zeros((count, channels, 256), dtype=torch.int32, device=device)
    if count == 0:
        return counts
    sizes = table[:, 1].tolist()
    table = upload(device, [table])[0]
    block = min(1 << 16, triton.next_power_of_2(max(max(sizes), 1))) if INTERPRETED else HISTOGRAM_BLOCK
    launch(histogram_kernel, (triton.cdiv(max(max(sizes), 1), block), count),
        table, counts, CHANNELS=channels, BINS=triton.next_power_of_2(channels * 256), BLOCK=block)
    return counts


# the tables statistic_tables_kernel makes, by code
STATISTIC_TABLES = {"equalize": 0, "auto_contrast": 1, "contrast": 2}


@triton.jit
def statistic_tables_kernel(
    counts,  # int32 [M, CHANNELS, 256]: each sample's histograms
    kinds,  # int32 [M]: STATISTIC_TABLES code of each
    parameters,  # float32 [M]: contrast's factor (read by contrast only)
    destinations,  # int64 [M]: the row of ``tables`` each sample's tables go to
    tables,  # uint8 [N, CHANNELS, 256]
    CHANNELS: tl.constexpr, CHANNEL_BLOCK: tl.constexpr,
):
    """A sample's 256-entry tables per channel, from its histograms: OpenCV's equalizeHist (float32,
    as OpenCV computes it), auto-contrast (each channel stretched from its lowest level present to
    its highest) or contrast (a blend with the mean of the luma, PIL's rule). Rounded to nearest,
    halves to even, as the torch form in penstock.operators.image.augment_step (divisions rounded as
    IEEE's: Triton's plain division of float32 is approximate on the GPU)."""
    sample = tl.program_id(0)
    channel = tl.arange(0, CHANNEL_BLOCK)[:, None]
    level = tl.arange(0, 256)[None, :]
    active = (channel < CHANNELS) & (level < 256)
    histogram = tl.load(counts + sample * (CHANNELS * 256) + channel * 256 + level, mask=active, other=0)
    levels = level.to(tl.float32)
    kind = tl.load(kinds + sample)
    parameter = tl.load(parameters + sample)
    # equalize: from the cumulative counts, less the count of the lowest level present
    cumulative = tl.cumsum(histogram, axis=1)
    pixels = tl.sum(histogram, axis=1)[:, None]
    first = tl.min(tl.where(cumulative > 0, cumulative, 2147483647), axis=1)[:, None]
    scale = tl.div_rn(tl.full(pixels.shape, 255.0, tl.float32), tl.maximum(pixels - first, 1).to(tl.float32))
    equalized = _clamp_level(round_half_to_even((cumulative - first).to(tl.float32) * scale))
    equalized = tl.where(first == pixels, levels, equalized)  # one level only: left as it is
    # auto-contrast
    present = histogram > 0
    low = tl.min(tl.where(present, level, 256), axis=1)[:, None]
    high = tl.max(tl.where(present, level, -1), axis=1)[:, None]
    flat = high <= low
    stretch = tl.div_rn(tl.full(low.shape, 255.0, tl.float32), tl.where(flat, 255.0, (high - low).to(tl.float32)))
    stretched = _clamp_level(round_half_to_even((levels - tl.where(flat, 0.0, low.to(tl.float32))) * stretch))
    # contrast: the mean of each channel exactly (int64 sums, float64 division), then the luma
    weighted = tl.sum(histogram.to(tl.int64) * level.to(tl.int64), axis=1)
    means = (weighted.to(tl.float64) / tl.maximum(tl.sum(histogram, axis=1), 1).to(tl.float64)).to(tl.float32)
    luma = tl.where(channel == 0, 0.299, tl.where(channel == 1, 0.587, tl.where(channel == 2, 0.114, 0.0)))
    center = tl.sum(means[:, None] * luma, axis=0)[None, :]
    blended = _clamp_level(round_half_to_even(center + (levels - center) * parameter))
    table = tl.where(kind == 0, equalized, tl.where(kind == 1, stretched, blended))
    destination = tl.load(destinations + sample)
    tl.store(tables + destination * (CHANNELS * 256) + channel * 256 + level, table.to(tl.uint8), mask=active)


@triton.jit
def _clamp_level(value):
    return tl.minimum(tl.maximum(value, 0.0), 255.0)


def run_statistic_tables(counts: torch.Tensor, kinds: list, parameters: np.ndarray, destinations: np.ndarray,
                         tables: torch.Tensor, *, upload) -> None:
    """Writes the tables of ``kinds`` (names of STATISTIC_TABLES, one per sample) made from
    ``counts`` (int32 [M, C, 256], run_histograms') into rows ``destinations`` of ``tables``
    (uint8 [N, C, 256] on the same device); ``parameters`` [M] are contrast's factors."""
    count, channels = counts.shape[0], counts.shape[1]
    if count == 0:
        return
    codes = np.array([STATISTIC_TABLES[kind] for kind in kinds], np.int32)
    codes, parameters, destinations = upload(counts.device, [
        codes, np.asarray(parameters, np.float32), np.asarray(destinations, np.int64)])
    # no fused multiply-adds: each product is rounded to float32 before it is rounded to a level,
    # as the torch tables (and OpenCV) compute it; a fused one moved a level at a tie
    launch(statistic_tables_kernel, (count,), counts.contiguous(), codes, parameters, destinations, tables,
                                      CHANNELS=channels, CHANNEL_BLOCK=triton.next_power_of_2(channels),
                                      enable_fp_fusion=False)


def common_source_type(tensors: list, op_name: str):
    dtypes = {tensor.dtype for tensor in tensors}
    if len(dtypes) > 1:
        raise ValueError(f"{op_name}: the batch's samples have different types {sorted(map(str, dtypes))}")
    dtype = dtypes.pop()
    if dtype not in TRITON_TYPES:
        allowed = ", ".join(str(t).replace("torch.", "") for t in TRITON_TYPES)
        raise TypeError(f"{op_name}: the GPU form takes {allowed} data, got {str(dtype).replace('torch.', '')}")
    return dtype


def _finish(output: torch.Tensor, offsets: list, shapes: list, out_dtype: torch.dtype) -> list:
    """The float32 results converted to ``out_dtype`` (one pass over the batch), one view per sample."""
    return list(PackedBatch(numeric.saturate_tensor(output, out_dtype), offsets, shapes))


def ragged_grid(sizes: list) -> tuple[int, int]:
    largest = max(max(sizes), 1)
    # each program costs the interpreter the same, whatever its size: use few
    block = min(1 << 16, triton.next_power_of_2(largest)) if INTERPRETED else BLOCK
    return block, triton.cdiv(largest, block)


def packed_offsets(sizes: list) -> list:
    return [int(offset) for offset in np.concatenate([[0], np.cumsum(sizes)[:-1]])] if sizes else []


def run_window(sources: list, windows: list, output_sizes: list, operation: str, border: str, fills: list,
               out_dtype: torch.dtype, op_name: str, *, upload) -> list:
    """Slides ``windows[i]`` (a 2-D float32 array of weights, with its anchor: (weights, (y, x)))
    over HWC tensor ``sources[i]``; returns the HWC results of ``output_sizes[i]`` (height, width)
    as ``out_dtype``. ``operation``: 'sum', 'min' or 'max'; ``fills``: what taps outside read
    under the 'constant' border."""
    count = len(sources)
    if count == 0:
        return []
    dtype = common_source_type(sources, op_name)
    device = sources[0].device
    sources = [source if source.is_contiguous() else source.contiguous() for source in sources]
    shapes = [(height, width, source.shape[2]) for source, (height, width) in zip(sources, output_sizes)]
    sizes = [height * width * channels for height, width, channels in shapes]
    offsets = packed_offsets(sizes)
    all_weights = np.concatenate([np.ravel(weights) for weights, _ in windows]).astype(np.float32)
    weight_offsets = packed_offsets([weights.size for weights, _ in windows])
    table = np.zeros((count, _WINDOW_COLUMNS), np.int64)
    for index, (source, (weights, (anchor_y, anchor_x))) in enumerate(zip(sources, windows)):
        table[index, :4] = (source.data_ptr(), *source.shape)
        table[index, 7:12] = (anchor_y, anchor_x, *weights.shape, weight_offsets[index])
    table[:, 4] = offsets
    table[:, 5:7] = output_sizes
    table[:, 12] = np.asarray(fills, np.float32).view(np.int32)
    table, all_weights = upload(device, [table, all_weights])
    output = torch.empty(max(sum(sizes), 1), dtype=torch.float32, device=device)
    block, tiles = ragged_grid(sizes)
    launch(window_kernel, (tiles, count), table, all_weights, output, OPERATION=OPERATIONS[operation],
                                  BORDER=BORDER_CODES[border], SOURCE_DTYPE=TRITON_TYPES[dtype], BLOCK=block)
    return _finish(output, offsets, shapes, out_dtype)


def run_noise(sources: list, noise: str, seeds: list, parameters: np.ndarray, channels: list, per_channel: bool,
              op_name: str, *, upload) -> list:
    """``noise`` ('gaussian', 'shot' or 'salt_and_pepper') over every sample, from ``seeds[i]`` and
    the float32 row ``parameters[i]`` (see noise_kernel); ``channels[i]``: the size of the sample's
    last axis when it holds channels (salt and pepper alike on every channel of a pixel unless
    ``per_channel``), else 1. The results have the sources' shapes and type."""
    count = len(sources)
    if count == 0:
        return []
    dtype = common_source_type(sources, op_name)
    device = sources[0].device
    sources = [source if source.is_contiguous() else source.contiguous() for source in sources]
    sizes = [source.numel() for source in sources]
    offsets = packed_offsets(sizes)
    table = np.zeros((count, _NOISE_COLUMNS), np.int64)
    for index, source in enumerate(sources):
        table[index, :3] = (source.data_ptr(), sizes[index], channels[index])
    table[:, 3] = offsets
    table[:, 4] = seeds
    table, parameters = upload(device, [table, np.ascontiguousarray(parameters, np.float32)])
    output = torch.empty(max(sum(sizes), 1), dtype=torch.float32, device=device)
    block, tiles = ragged_grid(sizes)
    launch(noise_kernel, (tiles, count), table, parameters, output, NOISE=NOISES[noise], PER_CHANNEL=per_channel,
                                 SOURCE_DTYPE=TRITON_TYPES[dtype], BLOCK=block)
    return _finish(output, offsets, [tuple(source.shape) for source in sources], dtype)
