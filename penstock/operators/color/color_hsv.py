"""RGB <-> HSV, OpenCV's definition: V = max(R, G, B), S = (V - min) / V, H the hue angle in
degrees; uint8 images hold H / 2 (0..179), S and V times 255; float images hold H in 0..360 and
S, V in 0..1 (for RGB values in 0..1).

The CPU calls OpenCV (cv2.cvtColor); the GPU runs the same formulas as torch operations on each
sample's tensor (no copy to the host). uint8 results may differ from OpenCV's by one level where
OpenCV's fixed-point arithmetic rounds the other way.
"""
from __future__ import annotations

import cv2
import numpy as np


def _float_image(image: np.ndarray, op_name: str) -> tuple[np.ndarray, np.dtype]:
    if image.dtype == np.uint8 or image.dtype == np.float32:
        return np.ascontiguousarray(image), image.dtype
    if image.dtype.kind == "f":
        return np.ascontiguousarray(image, np.float32), image.dtype
    raise TypeError(f"{op_name}: HSV conversions take uint8 or float images, got {image.dtype}")


def _convert(image: np.ndarray, code: int, op_name: str) -> np.ndarray:
    """OpenCV's conversion of a channel-last sample (an image, or frames and slices as one tall image)."""
    values, dtype = _float_image(image, op_name)
    tall = values.reshape(-1, *values.shape[-2:])
    return cv2.cvtColor(tall, code).reshape(image.shape).astype(dtype, copy=False)


def rgb_to_hsv_image(image: np.ndarray, op_name: str = "color_space_conversion") -> np.ndarray:
    return _convert(image, cv2.COLOR_RGB2HSV, op_name)


def hsv_to_rgb_image(image: np.ndarray, op_name: str = "color_space_conversion") -> np.ndarray:
    return _convert(image, cv2.COLOR_HSV2RGB, op_name)


def _to_type(values, like):
    """Float results back to the input's type: uint8 rounded (halves to even) and saturated."""
    import torch
    if like.dtype == torch.uint8:
        return values.round().clamp(0, 255).to(torch.uint8)
    return values.to(like.dtype)


def rgb_to_hsv_tensor(sample):
    import torch
    integer = sample.dtype == torch.uint8
    rgb = sample.float() / 255.0 if integer else sample.float()
    red, green, blue = rgb.unbind(-1)
    value = rgb.amax(-1)
    spread = value - rgb.amin(-1)
    saturation = torch.where(value > 0, spread / value.clamp_min(1e-12), torch.zeros_like(value))
    safe = torch.where(spread > 0, spread, torch.ones_like(spread))
    hue = torch.where(value == red, 60.0 * (green - blue) / safe,
                      torch.where(value == green, 120.0 + 60.0 * (blue - red) / safe, 240.0 + 60.0 * (red - green) / safe))
    hue = torch.where(spread > 0, hue, torch.zeros_like(hue))
    hue = torch.where(hue < 0, hue + 360.0, hue)
    if not integer:
        return torch.stack([hue, saturation, value], dim=-1).to(sample.dtype)
    half_degrees = (hue / 2.0).round()
    half_degrees = torch.where(half_degrees >= 180.0, half_degrees - 180.0, half_degrees)  # 359.5 degrees is 0
    return _to_type(torch.stack([half_degrees, saturation * 255.0, value * 255.0], dim=-1), sample)


def hsv_to_rgb_tensor(sample):
    import torch
    integer = sample.dtype == torch.uint8
    values = sample.float()
    hue, saturation, value = values.unbind(-1)
    if integer:
        hue, saturation, value = hue * 2.0, saturation / 255.0, value / 255.0
    sixths = torch.remainder(hue / 60.0, 6.0)
    sector = sixths.floor().clamp(0, 5).long()
    fraction = sixths - sector
    low = value * (1.0 - saturation)
    falling = value * (1.0 - saturation * fraction)
    rising = value * (1.0 - saturation * (1.0 - fraction))
    candidates = torch.stack([value, falling, low, rising])
    table = _sector_table(torch, sample.device)
    channels = [candidates.gather(0, table[channel][sector][None])[0] for channel in range(3)]
    rgb = torch.stack(channels, dim=-1)
    return _to_type(rgb * 255.0, sample) if integer else rgb.to(sample.dtype)


_SECTOR_TABLES: dict = {}


def _sector_table(torch, device):
    """Per sector (0..5), which of value, falling, low, rising each of R, G, B takes: on each device
    once (a copy per image would wait for the GPU's queued work each time)."""
    table = _SECTOR_TABLES.get(device)
    if table is None:
        table = _SECTOR_TABLES[device] = torch.tensor([[0, 1, 2, 2, 3, 0], [3, 0, 0, 1, 2, 2], [2, 2, 3, 0, 0, 1]],
                                                      device=device)
    return table


__all__ = ["hsv_to_rgb_image", "hsv_to_rgb_tensor", "rgb_to_hsv_image", "rgb_to_hsv_tensor"]
