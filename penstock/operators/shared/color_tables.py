"""The colour operators' linear maps, as DALI defines them: per sample a matrix [K', K] and an
offset [K'] (values become matrix @ value + offset), built for a whole batch with numpy.

Both devices use these functions: the CPU applies the map to each sample and rounds, the GPU
folds it into the batch's image plan. Sources, in DALI's tree:

- hue, saturation, value, brightness and contrast of ``hue`` / ``saturation`` / ``hsv`` /
  ``color_twist``: dali/operators/image/color/color_twist.h (``Rgb2Yiq``, ``Yiq2Rgb``, ``hue_mat``,
  ``sat_mat``; hsv.h's ``val_mat``): brightness * contrast * Yiq2Rgb @ hue @ sat @ value @ Rgb2Yiq,
  offset (half_range - half_range * contrast) * brightness;
- ``brightness`` / ``contrast`` / ``brightness_contrast``:
  dali/operators/image/color/brightness_contrast.h (``OpArgsToKernelArgs``, ``FullRange``,
  ``HalfRange``);
- ``color_space_conversion``:
  dali/kernels/imgproc/color_manipulation/color_space_conversion_impl.h (ITU-R BT.601 YCbCr with
  Y in 16..235, gray as JPEG's luma 0.299 R + 0.587 G + 0.114 B).
"""
from __future__ import annotations

import numpy as np

from penstock import types
from penstock.columns import BatchArgs

# RGB -> YIQ to three decimals, and back by its inverse, as DALI (color_twist.h)
RGB_TO_YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
YIQ_TO_RGB = np.linalg.inv(RGB_TO_YIQ)
RGB_BGR = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])  # swaps R and B; its own inverse

LUMA = np.array([0.299, 0.587, 0.114])  # RGB -> GRAY
# DALI's ITU-R BT.601 coefficients, to its digits (rounded ones move values by a level)
YCBCR_FROM_RGB = np.array([[0.25678823529, 0.50412941176, 0.09790588235],
                           [-0.14822289945, -0.29099278682, 0.43921568627],
                           [0.43921568627, -0.36778831435, -0.07142737192]])
Y_SCALE = 219 / 255  # Y of a grey pixel, over its grey level
RGB_FROM_YCBCR = np.array([[1 / Y_SCALE, 0.0, 1.5960267848], [1 / Y_SCALE, -0.39176228842, -0.81296764538],
                           [1 / Y_SCALE, 2.0172321417, 0.0]])  # of (Y-16, Cb-128, Cr-128)


def full_range(dtype: np.dtype) -> float:
    """What 1.0 of brightness_shift means: the type's highest value, or 1 for floats."""
    dtype = np.dtype(dtype)
    return float(np.iinfo(dtype).max) if dtype.kind in "iu" else 1.0


def half_range(dtype: np.dtype) -> float:
    """DALI's default contrast centre: half the type's positive range (128 for uint8), 0.5 for floats."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        return 0.5
    return float(1 << (8 * dtype.itemsize - (1 if dtype.kind == "i" else 0) - 1))


def batch_values(args, defaults: dict) -> dict[str, np.ndarray]:
    """Float arrays of the named arguments (the default where the operator has no such argument):
    one row when no argument differs between samples (the batch's arguments are the same), else
    one per sample. The builders below take these and return one matrix per row. ``args`` is
    BatchArgs (read by column) or a list of dicts."""
    if isinstance(args, BatchArgs) and any(args.varies(name) for name in defaults):
        return {name: np.asarray(args.column(name), np.float64) if args.varies(name) or name in args.static
                else np.full(len(args), default) for name, default in defaults.items()}
    rows = args[:1] if isinstance(args, BatchArgs) or all(a is args[0] for a in args) else args
    return {name: np.array([a.get(name, default) for a in rows], np.float64) for name, default in defaults.items()}


def for_every_sample(matrices: np.ndarray, offsets: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a batch that shares its arguments repeated (as views) for ``count`` samples."""
    if len(matrices) == count:
        return matrices, offsets
    return (np.broadcast_to(matrices, (count, *matrices.shape[1:])),
            np.broadcast_to(offsets, (count, *offsets.shape[1:])))


# ---- brightness, contrast -----------------------------------------------------------------------
BRIGHTNESS_CONTRAST_DEFAULTS = {"brightness": 1.0, "brightness_shift": 0.0, "contrast": 1.0}


def brightness_contrast_maps(values: dict, channels: int, contrast_center: float | None, in_dtype,
                             out_dtype) -> tuple[np.ndarray, np.ndarray]:
    """out = brightness_shift * full_range(out) + brightness * (center + contrast * (in - center)),
    the same for every channel (values are not rescaled between the input's and the output's types,
    as in DALI); the centre (one, or one per row) defaults to half_range(in)."""
    center = half_range(in_dtype) if contrast_center is None else contrast_center
    brightness = values["brightness"]
    multiplier = brightness * values["contrast"]
    addend = values["brightness_shift"] * full_range(out_dtype) + brightness * (center - values["contrast"] * center)
    matrices = multiplier[:, None, None] * np.eye(channels)
    return matrices, np.repeat(addend[:, None], channels, axis=1)


# ---- hue, saturation, value (YIQ), with brightness and contrast (color_twist) --------------------
YIQ_DEFAULTS = {"hue": 0.0, "saturation": 1.0, "value": 1.0, "brightness": 1.0, "contrast": 1.0}


def yiq_maps(values: dict, in_dtype) -> tuple[np.ndarray, np.ndarray]:
    """brightness * contrast * YIQ_TO_RGB @ rotate(hue) @ scale(1, saturation, saturation) @ value
    @ RGB_TO_YIQ, offset (half - half * contrast) * brightness with half 128 for integers and 0.5
    for floats (DALI's color_twist); ``hue`` in degrees. The channels are taken as R, G and B
    whatever the image type, as in DALI."""
    radians = np.radians(values["hue"])
    chroma = values["saturation"] * values["value"]
    cos, sin = np.cos(radians) * chroma, np.sin(radians) * chroma
    middle = np.zeros((len(radians), 3, 3))
    middle[:, 0, 0] = values["value"]
    middle[:, 1, 1] = cos
    middle[:, 1, 2] = sin
    middle[:, 2, 1] = -sin
    middle[:, 2, 2] = cos
    scale = values["brightness"] * values["contrast"]
    matrices = scale[:, None, None] * (YIQ_TO_RGB @ middle @ RGB_TO_YIQ)
    half = 128.0 if np.dtype(in_dtype).kind in "iu" else 0.5
    offset = (half - half * values["contrast"]) * values["brightness"]
    return matrices, np.repeat(offset[:, None], 3, axis=1)


# ---- colour spaces ------------------------------------------------------------------------------
LINEAR_SPACES = (types.RGB, types.BGR, types.GRAY, types.YCbCr)


def _ycbcr_offsets(dtype) -> np.ndarray:
    """Y's footroom and the chroma's zero: 16 and 128 for uint8, else 1/16 and 1/2 of the range."""
    if np.dtype(dtype) == np.uint8:
        return np.array([16.0, 128.0, 128.0])
    return np.array([0.0625, 0.5, 0.5]) * full_range(dtype)


def _to_rgb(space: types.DALIImageType, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(matrix [3, K], offset [3]): a ``space`` value -> RGB."""
    if space is types.RGB:
        return np.eye(3), np.zeros(3)
    if space is types.BGR:
        return RGB_BGR, np.zeros(3)
    if space is types.GRAY:
        return np.ones((3, 1)), np.zeros(3)
    return RGB_FROM_YCBCR, -RGB_FROM_YCBCR @ _ycbcr_offsets(dtype)


def _from_rgb(space: types.DALIImageType, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(matrix [K', 3], offset [K']): RGB -> a ``space`` value."""
    if space is types.RGB:
        return np.eye(3), np.zeros(3)
    if space is types.BGR:
        return RGB_BGR, np.zeros(3)
    if space is types.GRAY:
        return LUMA[None, :], np.zeros(1)
    return YCBCR_FROM_RGB, _ycbcr_offsets(dtype)


def conversion_map(source: types.DALIImageType, target: types.DALIImageType, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(matrix [K', K], offset [K']) from one linear colour space to another for values of
    ``dtype``. GRAY <-> YCbCr are DALI's direct rules (Y = 219 / 255 * gray + 16, chroma 128; gray =
    (Y - 16) * 255 / 219); the rest go through RGB."""
    offsets = _ycbcr_offsets(dtype)
    if (source, target) == (types.GRAY, types.YCbCr):
        return np.array([[Y_SCALE], [0.0], [0.0]]), offsets
    if (source, target) == (types.YCbCr, types.GRAY):
        return np.array([[1.0 / Y_SCALE, 0.0, 0.0]]), np.array([-offsets[0] / Y_SCALE])
    to_rgb, to_offset = _to_rgb(source, dtype)
    from_rgb, from_offset = _from_rgb(target, dtype)
    return from_rgb @ to_rgb, from_rgb @ to_offset + from_offset


__all__ = ["BRIGHTNESS_CONTRAST_DEFAULTS", "LINEAR_SPACES", "YIQ_DEFAULTS", "batch_values", "brightness_contrast_maps",
           "conversion_map", "for_every_sample", "full_range", "half_range", "yiq_maps"]
