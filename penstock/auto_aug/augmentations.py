"""The operations of AutoAugment, RandAugment and TrivialAugment, over ``fn`` operators on HWC
uint8 images (CPU or GPU), with DALI's names and torchvision's magnitude ranges.

Each is an ``Augmentation`` (penstock.auto_aug.core): ``aug.augmentation(mag_range=...)`` makes a
copy with another range. Each names its ``kind`` of penstock.operators.image.augment_step, which runs a
whole policy step of these in one operator (the functions here are what it computes, and what runs
for suites with augmentations of the user's own). Geometry goes through ``warp_affine`` / ``rotate`` (on the GPU these fold
into the batch's image plan); ``brightness`` and ``color`` are the colour operators (folded too).
"""
from __future__ import annotations

import numpy as np

from penstock import fn, types
from penstock.auto_aug.core import augmentation


def warp_x_param(magnitude):
    return np.array([magnitude, 0.0], np.float32)


def warp_y_param(magnitude):
    return np.array([0.0, magnitude], np.float32)


def shift_enhance_range(magnitude):
    """Enhance operations are neutral at 1: a magnitude in [-1, 1] becomes a factor in [0, 2]."""
    return 1.0 + magnitude


def _warp(data, matrix, fill_value, interp_type):
    return fn.warp_affine(data, matrix=matrix, fill_value=fill_value, interp_type=interp_type or types.INTERP_LINEAR,
                          inverse_map=False)


@augmentation(mag_range=(0, 0.3), randomly_negate=True, mag_to_param=warp_x_param, kind="shear_x")
def shear_x(data, shear, fill_value=128, interp_type=None):
    return _warp(data, fn.transforms.shear(shear=shear), fill_value, interp_type)


@augmentation(mag_range=(0, 0.3), randomly_negate=True, mag_to_param=warp_y_param, kind="shear_y")
def shear_y(data, shear, fill_value=128, interp_type=None):
    return _warp(data, fn.transforms.shear(shear=shear), fill_value, interp_type)


def _image_side(shape, axis: int):
    """Height (axis 0) or width (axis 1) of each sample, from a shape batch or a (height, width) pair."""
    if isinstance(shape, (tuple, list)):
        return float(shape[axis])
    if shape.device != "cpu":
        raise ValueError(f"translate: `shape` ({shape.name}) is on the GPU; give the images' shapes as a CPU batch, "
                         "such as fn.peek_image_shape(encoded) or fn.shapes of the images before .gpu(), as in DALI")
    return fn.cast(fn.element_extract(shape, element_map=[axis]), dtype=types.FLOAT)


@augmentation(mag_range=(0.0, 150 / 331), randomly_negate=True, mag_to_param=warp_x_param, kind="translate_x_rel")
def translate_x(data, rel_offset, shape, fill_value=128, interp_type=None):
    return _warp(data, fn.transforms.translation(offset=rel_offset * _image_side(shape, 1)), fill_value, interp_type)


@augmentation(mag_range=(0.0, 150 / 331), randomly_negate=True, mag_to_param=warp_y_param, kind="translate_y_rel")
def translate_y(data, rel_offset, shape, fill_value=128, interp_type=None):
    return _warp(data, fn.transforms.translation(offset=rel_offset * _image_side(shape, 0)), fill_value, interp_type)


@augmentation(mag_range=(0, 100), randomly_negate=True, mag_to_param=warp_x_param, name="translate_x", kind="translate_x")
def translate_x_no_shape(data, offset, fill_value=128, interp_type=None):
    return _warp(data, fn.transforms.translation(offset=offset), fill_value, interp_type)


@augmentation(mag_range=(0, 100), randomly_negate=True, mag_to_param=warp_y_param, name="translate_y", kind="translate_y")
def translate_y_no_shape(data, offset, fill_value=128, interp_type=None):
    return _warp(data, fn.transforms.translation(offset=offset), fill_value, interp_type)


@augmentation(mag_range=(0, 30), randomly_negate=True, kind="rotate")
def rotate(data, angle, fill_value=128, interp_type=None, rotate_keep_size=True):
    return fn.rotate(data, angle=angle, fill_value=0.0 if fill_value is None else fill_value,
                     interp_type=interp_type or types.INTERP_LINEAR, keep_size=rotate_keep_size)


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=shift_enhance_range, kind="brightness")
def brightness(data, parameter):
    return fn.brightness(data, brightness=parameter)


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=shift_enhance_range, kind="contrast")
def contrast(data, parameter):
    """As PIL's ImageEnhance.Contrast (and torchvision's adjust_contrast): blends with the mean of
    the image's luma."""
    mean = fn.reductions.mean(data, axes=(0, 1), keep_dims=True)
    center = fn.reductions.sum(mean * np.array([0.299, 0.587, 0.114], np.float32), axes=(2,), keep_dims=True)
    return fn.cast_like(center + (data - center) * parameter, data)


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=shift_enhance_range, kind="color")
def color(data, parameter):
    return fn.saturation(data, saturation=parameter)


def sharpness_kernel(magnitude):
    """PIL's sharpness filter (a smoothing kernel) blended with the identity; magnitude in [-1, 1]."""
    blur = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float32) / 13
    identity = np.zeros((3, 3), np.float32)
    identity[1, 1] = 1.0
    return -magnitude * blur + (1 + magnitude) * identity


def sharpness_kernel_shifted(magnitude):
    return sharpness_kernel(magnitude - 1)


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=sharpness_kernel, kind="sharpness")
def sharpness(data, kernel):
    return fn.filter(data, kernel)


def poster_mask_uint8(magnitude):
    """The mask keeping the ``magnitude`` highest bits (1 to 8) of a uint8 value."""
    bits = int(min(max(round(float(magnitude)), 1), 8))
    return np.uint8(255 ^ (2 ** (8 - bits) - 1))


@augmentation(mag_range=(8, 4), mag_to_param=poster_mask_uint8, kind="posterize")
def posterize(data, mask):
    return data & fn.cast(mask, dtype=types.UINT8) if not isinstance(mask, np.integer) else \
        data & types.Constant(mask, dtype=types.UINT8)


@augmentation(mag_range=(255, 0), kind="solarize")
def solarize(data, threshold):
    """Values at or above the threshold are inverted (torchvision's rule)."""
    kept = data < threshold
    return fn.cast(kept * data + (kept ^ True) * (types.Constant(255, dtype=types.UINT8) - data), dtype=types.UINT8)


def solarize_add_shift(shift):
    if shift >= 128:
        raise ValueError("solarize_add: the shift must be below 128")
    return np.uint8(shift)


@augmentation(mag_range=(0, 110), mag_to_param=solarize_add_shift, kind="solarize_add")
def solarize_add(data, shift):
    shifted = data < types.Constant(128, dtype=types.UINT8)
    return fn.cast(shifted * fn.math.min(fn.cast(data, dtype=types.INT32) + shift, 255) + (shifted ^ True) * data,
                   dtype=types.UINT8)


@augmentation(kind="invert")
def invert(data, _):
    return types.Constant(255, dtype=types.UINT8) - data


@augmentation(kind="equalize")
def equalize(data, _):
    """Histogram equalization per channel, as OpenCV's equalizeHist (PIL's rounding differs slightly)."""
    return fn.equalize(data)


@augmentation(kind="auto_contrast")
def auto_contrast(data, _):
    """Each channel stretched to [0, 255] from its own minimum and maximum (unchanged when flat)."""
    low = fn.reductions.min(data, axes=(0, 1), keep_dims=True)
    high = fn.reductions.max(data, axes=(0, 1), keep_dims=True)
    spread = fn.cast(high, dtype=types.FLOAT) - low
    flat = spread <= 0
    scale = 255.0 / (spread + flat * 255.0)
    return fn.cast_like((data - low * (flat ^ True)) * scale, data)


@augmentation(kind="identity")
def identity(data, _):
    return data
