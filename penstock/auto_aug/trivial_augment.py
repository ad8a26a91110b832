"""TrivialAugment Wide (Müller and Hutter, 2021): each sample goes through one operation drawn
uniformly from the suite at a magnitude bin drawn uniformly; DALI's ``trivial_augment_wide``
API, the suite's ranges torchvision's ``TrivialAugmentWide`` (31 bins)."""
from __future__ import annotations

from typing import Sequence

from penstock import fn, types
from penstock.auto_aug import augmentations as a
from penstock.auto_aug.core import Augmentation, applied, apply_step, check_extras, fusable, seeded, select, step_table
from penstock.auto_aug.rand_augment import translations


def get_trivial_augment_wide_suite(use_shape: bool = False, max_translate_abs=None, max_translate_rel=None) -> list:
    """torchvision's TrivialAugmentWide operations and ranges (translations 32 px, or 32/224 of the image)."""
    return translations(use_shape, 32, 32 / 224, max_translate_abs, max_translate_rel) + [
        a.shear_x.augmentation((0, 0.99), True),
        a.shear_y.augmentation((0, 0.99), True),
        a.rotate.augmentation((0, 135), True),
        a.brightness.augmentation((0, 0.99), True, a.shift_enhance_range),
        a.contrast.augmentation((0, 0.99), True, a.shift_enhance_range),
        a.color.augmentation((0, 0.99), True, a.shift_enhance_range),
        a.sharpness.augmentation((0, 0.99), True, a.sharpness_kernel),
        a.posterize.augmentation((8, 2), False, a.poster_mask_uint8),
        a.solarize.augmentation((255, 0)),
        a.equalize,
        a.auto_contrast,
        a.identity,
    ]


def trivial_augment_wide(data, num_magnitude_bins: int = 31, shape=None, fill_value=128, interp_type=None,
                         max_translate_abs=None, max_translate_rel=None, seed=None,
                         excluded: Sequence[str] | None = None):
    """TrivialAugment Wide over a batch of HWC uint8 images (arguments as rand_augment's)."""
    extras = {"fill_value": fill_value, "interp_type": interp_type}
    if shape is not None:
        extras["shape"] = shape
    suite = get_trivial_augment_wide_suite(shape is not None, max_translate_abs, max_translate_rel)
    names = [aug.name for aug in suite]
    for name in excluded or ():
        if name not in names:
            raise ValueError(f"trivial_augment_wide: excluded names {name!r}, which is not in the suite "
                             f"({', '.join(names)})")
    chosen = [aug for aug in suite if aug.name not in (excluded or ())]
    return apply_trivial_augment(chosen, data, num_magnitude_bins, seed, **extras)


def apply_trivial_augment(augmentations: Sequence[Augmentation], data, num_magnitude_bins: int = 31, seed=None,
                          **extras):
    if not isinstance(num_magnitude_bins, int) or num_magnitude_bins < 1:
        raise ValueError(f"trivial_augment_wide: num_magnitude_bins must be a positive int, got {num_magnitude_bins!r}")
    if not augmentations:
        raise ValueError("trivial_augment_wide: the list of augmentations is empty")
    check_extras(augmentations, extras, "trivial_augment_wide")
    op_index = fn.random.uniform(values=list(range(len(augmentations))), dtype=types.INT32, **seeded(seed))
    magnitude_bin = fn.random.uniform(values=list(range(num_magnitude_bins)), dtype=types.INT32, **seeded(seed))
    sign = fn.random.coin_flip(dtype=types.INT32, **seeded(seed))
    if fusable(augmentations):
        tables = [step_table(aug, num_magnitude_bins) for aug in augmentations]
        return apply_step(data, augmentations, tables, op_index, sign * num_magnitude_bins + magnitude_bin,
                          extras.get("fill_value", 128), extras.get("interp_type"))
    functions = [applied(aug, magnitude_bin=magnitude_bin, num_magnitude_bins=num_magnitude_bins, sign=sign, **extras)
                 for aug in augmentations]
    return select(functions, op_index, data, "trivial_augment_wide")
