"""The Triton kernel that turns an NV12 frame (what NVDEC writes: the luma plane, then the chroma
planes interleaved at half resolution) into RGB (or YCbCr) uint8 in one pass, with the CPU path's
arithmetic (kernels.video_codecs.frames_from_yuv420 after OpenCV's bilinear upsampling of chroma):
the same float32 steps, so both devices agree to a level (the GPU may fuse a multiply and an add).

No float temporaries are made: a frame of 1080p took about 100 MB of them through torch's calls,
on each decoding thread.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from penstock.kernels.triton_launch import INTERPRETED, launch

_LIMITED_LUMA, _LIMITED_CHROMA = float(np.float32(255 / 219)), float(np.float32(255 / 224))


@triton.jit
def _source_pixels(position, extent):
    """OpenCV's INTER_LINEAR source pixels and weight of output ``position`` for an exact 2x
    enlargement of ``extent`` pixels: (d + 0.5) / 2 - 0.5, the edges repeated."""
    source = position.to(tl.float32) * 0.5 - 0.25
    first = tl.floor(source)
    weight = source - first
    first = first.to(tl.int32)
    weight = tl.where((first < 0) | (first >= extent - 1), 0.0, weight)
    first = tl.minimum(tl.maximum(first, 0), extent - 1)
    return first, tl.minimum(first + 1, extent - 1), weight


@triton.jit
def _chroma_at(rows, pitch, y0, y1, fy, x0, x1, fx, CHANNEL: tl.constexpr):
    """One chroma plane's value at the output pixels: OpenCV's INTER_LINEAR, the row first."""
    top = tl.load(rows + y0 * pitch + 2 * x0 + CHANNEL).to(tl.float32) * (1.0 - fx) + \
        tl.load(rows + y0 * pitch + 2 * x1 + CHANNEL).to(tl.float32) * fx
    bottom = tl.load(rows + y1 * pitch + 2 * x0 + CHANNEL).to(tl.float32) * (1.0 - fx) + \
        tl.load(rows + y1 * pitch + 2 * x1 + CHANNEL).to(tl.float32) * fx
    return top * (1.0 - fy) + bottom * fy


@triton.jit
def _to_uint8(value, TRUNCATE: tl.constexpr):
    if not TRUNCATE:  # to the nearest, halves to even, as numpy and torch round
        nearest = tl.floor(value + 0.5)
        odd = (nearest * 0.5) != tl.floor(nearest * 0.5)
        value = tl.where((nearest - value == 0.5) & odd, nearest - 1.0, nearest)
    return tl.minimum(tl.maximum(value, 0.0), 255.0).to(tl.uint8)


@triton.jit
def nv12_kernel(planes, output, height, width, pitch, limited_luma, limited_chroma,
                FULL_RANGE: tl.constexpr, YCBCR: tl.constexpr, TRUNCATE: tl.constexpr, BLOCK: tl.constexpr):
    y = tl.program_id(0)
    x = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = x < width
    x0, x1, fx = _source_pixels(x, width // 2)
    y0, y1, fy = _source_pixels(y, height // 2)
    rows = planes + height * pitch
    x0 = tl.where(inside, x0, 0)
    x1 = tl.where(inside, x1, 0)
    luma = tl.load(planes + y * pitch + x, mask=inside, other=0).to(tl.float32)
    u = _chroma_at(rows, pitch, y0, y1, fy, x0, x1, fx, 0)
    v = _chroma_at(rows, pitch, y0, y1, fy, x0, x1, fx, 1)
    if YCBCR:
        first, second, third = luma, u, v
    else:
        if FULL_RANGE:
            u = u - 128.0
            v = v - 128.0
        else:
            luma = (luma - 16.0) * limited_luma
            u = (u - 128.0) * limited_chroma
            v = (v - 128.0) * limited_chroma
        first = luma + 1.402 * v
        second = luma - 0.344136 * u - 0.714136 * v
        third = luma + 1.772 * u
    out = output + (y * width + x) * 3
    tl.store(out, _to_uint8(first, TRUNCATE), mask=inside)
    tl.store(out + 1, _to_uint8(second, TRUNCATE), mask=inside)
    tl.store(out + 2, _to_uint8(third, TRUNCATE), mask=inside)


def nv12_to_rgb(planes: torch.Tensor, output: torch.Tensor, full_range: bool = False, image_type: str = "rgb",
                rounding: str = "nearest") -> torch.Tensor:
    """Writes the frame of ``planes`` (uint8 [3H/2, W], rows of any pitch; even H and W) into
    ``output`` (uint8 [H, W, 3], contiguous) and returns it."""
    height, width = output.shape[0], output.shape[1]
    block = min(triton.next_power_of_2(width), 4096 if INTERPRETED else 256)
    launch(nv12_kernel, (height, -(-width // block)), planes, output, height, width, planes.stride(0),
           _LIMITED_LUMA, _LIMITED_CHROMA, FULL_RANGE=full_range, YCBCR=image_type == "ycbcr",
           TRUNCATE=rounding == "truncate", BLOCK=block)
    return output
