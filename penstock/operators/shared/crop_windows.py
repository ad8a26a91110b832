"""Random crop windows by area and aspect ratio, as the random-crop decoders and random_resized_crop
draw them."""
from __future__ import annotations

import numpy as np

from penstock.schema import Arg, ArgError


F32 = np.float32


# The ranges of a random window, shared by random_crop_generator, decoders.image_random_crop and
# random_resized_crop (DALI's RandomCropAttr), documented once.
RANGE_ARGS = (
    Arg("random_area", "floats", (0.08, 1.0), "Range [min, max] of the window's share of the image's area "
        "(one value: that share).", length=(1, 2)),
    Arg("random_aspect_ratio", "floats", (3 / 4, 4 / 3), "Range [min, max] of the window's width / height "
        "(one value: that ratio), drawn uniformly on a log scale.", length=(1, 2), min=1e-30),
)


def ordered_ranges(static: dict, per_sample: frozenset) -> None:
    for name in ("random_area", "random_aspect_ratio"):
        low, high = value_range(static[name])
        if low > high:
            raise ArgError(f"argument '{name}': the range [{low}, {high}] is empty")


def value_range(values: tuple) -> tuple[float, float]:
    """One value stands for both ends (DALI's single-or-pair arguments)."""
    return (values[0], values[-1])


def crop_window(height: int, width: int, blocks, attempts: int, area_range, ratio_range) -> tuple[tuple, tuple]:
    """((y, x), (crop height, crop width)) for an image of (height, width); ``blocks``: per attempt,
    (area, log ratio, y, x) uniforms in [0, 1), at least one (the window's place, where there is no
    attempt)."""
    if height <= 0 or width <= 0:
        return (0, 0), (0, 0)
    blocks = list(blocks)
    min_ratio, max_ratio = F32(ratio_range[0]), F32(ratio_range[1])
    min_area, max_area = F32(area_range[0]), F32(area_range[1])
    log_low, log_high = np.log(min_ratio), np.log(max_ratio)
    smallest = F32(width * height) * min_area
    max_width = max(1, int(F32(height) * max_ratio))
    max_height = max(1, int(F32(width) * (F32(1) / min_ratio)))
    y_draw, x_draw = blocks[-1][2:]
    if height * max_width < smallest:  # too wide for a window of the smallest area
        shape = (height, max_width)
    elif width * max_height < smallest:  # too tall
        shape = (max_height, width)
    else:
        shape = None
        for area_draw, ratio_draw, y_draw, x_draw in blocks[:attempts]:
            target = (min_area + (max_area - min_area) * F32(area_draw)) * F32(height * width)
            ratio = np.exp(log_low + (log_high - log_low) * F32(ratio_draw))
            crop_width, crop_height = _side(target * ratio), _side(target / ratio)
            rounded = F32(crop_width) / F32(crop_height)
            if crop_width <= width and crop_height <= height and min_ratio <= rounded <= max_ratio:
                shape = (crop_height, crop_width)
                break
        if shape is None:
            image_ratio = F32(width) / F32(height)
            whole = (height, max_width) if image_ratio > max_ratio else (max_height, width) \
                if image_ratio < min_ratio else (height, width)
            scale = min(F32(1), max_area * F32(width) * F32(height) / F32(whole[0] * whole[1]))
            shape = tuple(max(1, int(F32(side) * np.sqrt(scale))) for side in whole)
    anchor = (_place(y_draw, height - shape[0]), _place(x_draw, width - shape[1]))
    return anchor, shape


def _side(square) -> int:
    """sqrt rounded half away from zero, at least 1 (DALI's windows of a negative area are 1 wide)."""
    return max(1, int(np.floor(np.sqrt(max(square, F32(0))) + F32(0.5))))


def _place(draw: float, room: int) -> int:
    """A uniform integer in [0, room]."""
    return min(int(draw * (room + 1)), room) if room > 0 else 0


RANDOM_CROP_ARGS = (
    *RANGE_ARGS,
    Arg("num_attempts", "int", 10, "Tries to find a window that fits before falling back to a "
        "centred crop of the image's shape clamped to the aspect range.", min=1),
)
