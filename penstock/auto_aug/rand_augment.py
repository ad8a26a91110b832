"""RandAugment (Cubuk et al., 2019): each sample goes through ``n`` operations drawn uniformly
from the suite, each at magnitude bin ``m`` with a random sign; DALI's ``rand_augment`` API, the
suite's ranges torchvision's (``RandAugment``, 31 bins)."""
from __future__ import annotations

from typing import Sequence

from penstock import fn, types
from penstock.auto_aug import augmentations as a
from penstock.auto_aug.core import (Augmentation, applied, apply_step, check_extras, fusable, seeded, select, signed_bin,
                                    step_table)


def translations(use_shape: bool, default_abs: float, default_rel: float, max_translate_abs=None,
                 max_translate_rel=None) -> list[Augmentation]:
    """translate_x and translate_y, their range relative to the image (with a shape) or in pixels."""
    if use_shape:
        if max_translate_abs is not None:
            raise ValueError("max_translate_abs applies without `shape`; with a shape give max_translate_rel")
        height, width = _pair(max_translate_rel if max_translate_rel is not None else default_rel)
        return [a.translate_x.augmentation((0, width), True), a.translate_y.augmentation((0, height), True)]
    if max_translate_rel is not None:
        raise ValueError("max_translate_rel applies with `shape`; without one give max_translate_abs")
    height, width = _pair(max_translate_abs if max_translate_abs is not None else default_abs)
    return [a.translate_x_no_shape.augmentation((0, width), True), a.translate_y_no_shape.augmentation((0, height), True)]


def _pair(value) -> tuple:
    return (value, value) if not isinstance(value, (tuple, list)) else tuple(value)


def get_rand_augment_suite(use_shape: bool = False, max_translate_abs=None, max_translate_rel=None) -> list:
    """The 14 operations of torchvision's RandAugment with its magnitude ranges."""
    return translations(use_shape, 100, 150 / 331, max_translate_abs, max_translate_rel) + [
        a.shear_x.augmentation((0, 0.3), True),
        a.shear_y.augmentation((0, 0.3), True),
        a.rotate.augmentation((0, 30), True),
        a.brightness.augmentation((0, 0.9), True, a.shift_enhance_range),
        a.contrast.augmentation((0, 0.9), True, a.shift_enhance_range),
        a.color.augmentation((0, 0.9), True, a.shift_enhance_range),
        a.sharpness.augmentation((0, 0.9), True, a.sharpness_kernel),
        a.posterize.augmentation((8, 4), False, a.poster_mask_uint8),
        a.solarize.augmentation((255, 0)),
        a.equalize,
        a.auto_contrast,
        a.identity,
    ]


def rand_augment(data, n: int, m: int, num_magnitude_bins: int = 31, shape=None, fill_value=128, interp_type=None,
                 max_translate_abs=None, max_translate_rel=None, seed=None, monotonic_mag: bool = True,
                 excluded: Sequence[str] | None = None):
    """RandAugment over a batch of HWC uint8 images: ``n`` operations per sample, magnitude bin
    ``m`` of ``num_magnitude_bins``. ``shape`` (a batch from ``fn.shapes``, or (height, width))
    makes translations relative to the image; ``fill_value`` pads the geometric operations (None
    repeats the edge); ``excluded`` names operations to leave out."""
    if not monotonic_mag:
        raise ValueError("rand_augment: only monotonic_mag=True (torchvision's ranges) is provided")
    extras = {"fill_value": fill_value, "interp_type": interp_type}
    if shape is not None:
        extras["shape"] = shape
    suite = get_rand_augment_suite(shape is not None, max_translate_abs, max_translate_rel)
    names = [aug.name for aug in suite]
    for name in excluded or ():
        if name not in names:
            raise ValueError(f"rand_augment: excluded names {name!r}, which is not in the suite ({', '.join(names)})")
    chosen = [aug for aug in suite if aug.name not in (excluded or ())]
    return apply_rand_augment(chosen, data, n, m, num_magnitude_bins, seed, **extras)


def apply_rand_augment(augmentations: Sequence[Augmentation], data, n: int, m: int, num_magnitude_bins: int = 31,
                       seed=None, **extras):
    """RandAugment with the given augmentations."""
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"rand_augment: n must be a non-negative int, got {n!r}")
    if not isinstance(num_magnitude_bins, int) or num_magnitude_bins < 1:
        raise ValueError(f"rand_augment: num_magnitude_bins must be a positive int, got {num_magnitude_bins!r}")
    if not isinstance(m, int) or not 0 <= m < num_magnitude_bins:
        raise ValueError(f"rand_augment: m must be an int in [0, {num_magnitude_bins - 1}], got {m!r}")
    if n and not augmentations:
        raise ValueError("rand_augment: the list of augmentations is empty")
    check_extras(augmentations, extras, "rand_augment")
    if fusable(augmentations):  # each level is one operator over the whole batch
        tables = [step_table(aug, num_magnitude_bins) for aug in augmentations]
        for _ in range(n):
            op_index = fn.random.uniform(values=list(range(len(augmentations))), dtype=types.INT32, **seeded(seed))
            sign = fn.random.coin_flip(dtype=types.INT32, **seeded(seed))
            data = apply_step(data, augmentations, tables, op_index, sign * num_magnitude_bins + m,
                              extras.get("fill_value", 128), extras.get("interp_type"))
        return data
    for _ in range(n):
        op_index = fn.random.uniform(values=list(range(len(augmentations))), dtype=types.INT32, **seeded(seed))
        magnitude_bin, sign = signed_bin(m, seed=seed)
        functions = [applied(aug, magnitude_bin=magnitude_bin, num_magnitude_bins=num_magnitude_bins, sign=sign,
                             **extras) for aug in augmentations]
        data = select(functions, op_index, data, "rand_augment")
    return data
