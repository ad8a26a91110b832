"""AutoAugment (Cubuk et al., 2018) with its ImageNet policy: each sample goes through one of 25
sub-policies drawn uniformly, each two operations applied with their own probability and
magnitude bin (of 10); DALI's ``auto_augment`` API, the policy and ranges torchvision's
(``AutoAugmentPolicy.IMAGENET``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from penstock import fn, types
from penstock.auto_aug import augmentations as a
from penstock.auto_aug.core import (Augmentation, applied, apply_step, check_extras, fusable, seeded, select, step_table,
                                    with_probability)


@dataclass(frozen=True)
class Policy:
    """Sub-policies of (augmentation, probability, magnitude bin) steps over ``num_magnitude_bins``."""

    name: str
    num_magnitude_bins: int
    sub_policies: tuple  # of tuples of (Augmentation, probability, magnitude bin or None)


def get_image_net_policy(use_shape: bool = False, max_translate_abs=None, max_translate_rel=None) -> Policy:
    """The ImageNet policy of AutoAugment, as torchvision writes it (magnitude bins of 10). It has
    no translation, so the translation arguments (kept for DALI's signature) change nothing."""
    shear_x = a.shear_x.augmentation((0, 0.3), True)
    rotate = a.rotate.augmentation((0, 30), True)
    color = a.color.augmentation((0, 0.9), True, a.shift_enhance_range)
    contrast = a.contrast.augmentation((0, 0.9), True, a.shift_enhance_range)
    sharpness = a.sharpness.augmentation((0, 0.9), True, a.sharpness_kernel)
    posterize = a.posterize.augmentation((8, 4), False, a.poster_mask_uint8)
    solarize = a.solarize.augmentation((255, 0))
    equalize, invert, auto_contrast = a.equalize, a.invert, a.auto_contrast
    return Policy("image_net", 10, (
        ((posterize, 0.4, 8), (rotate, 0.6, 9)),
        ((solarize, 0.6, 5), (auto_contrast, 0.6, None)),
        ((equalize, 0.8, None), (equalize, 0.6, None)),
        ((posterize, 0.6, 7), (posterize, 0.6, 6)),
        ((equalize, 0.4, None), (solarize, 0.2, 4)),
        ((equalize, 0.4, None), (rotate, 0.8, 8)),
        ((solarize, 0.6, 3), (equalize, 0.6, None)),
        ((posterize, 0.8, 5), (equalize, 1.0, None)),
        ((rotate, 0.2, 3), (solarize, 0.6, 8)),
        ((equalize, 0.6, None), (posterize, 0.4, 6)),
        ((rotate, 0.8, 8), (color, 0.4, 0)),
        ((rotate, 0.4, 9), (equalize, 0.6, None)),
        ((equalize, 0.0, None), (equalize, 0.8, None)),
        ((invert, 0.6, None), (equalize, 1.0, None)),
        ((color, 0.6, 4), (contrast, 1.0, 8)),
        ((rotate, 0.8, 8), (color, 1.0, 2)),
        ((color, 0.8, 8), (solarize, 0.8, 7)),
        ((sharpness, 0.4, 7), (invert, 0.6, None)),
        ((shear_x, 0.6, 5), (equalize, 1.0, None)),
        ((color, 0.4, 0), (equalize, 0.6, None)),
        ((equalize, 0.4, None), (solarize, 0.2, 4)),
        ((solarize, 0.6, 5), (auto_contrast, 0.6, None)),
        ((invert, 0.6, None), (equalize, 1.0, None)),
        ((color, 0.6, 4), (contrast, 1.0, 8)),
        ((equalize, 0.8, None), (equalize, 0.6, None)),
    ))


POLICIES = {"image_net": get_image_net_policy}


def auto_augment(data, policy_name: str = "image_net", shape=None, fill_value=128, interp_type=None,
                 max_translate_abs=None, max_translate_rel=None, seed=None):
    """AutoAugment over a batch of HWC uint8 images with the named policy ('image_net')."""
    if policy_name not in POLICIES:
        raise ValueError(f"auto_augment: unknown policy {policy_name!r}; known: {', '.join(POLICIES)}")
    policy = POLICIES[policy_name](shape is not None, max_translate_abs, max_translate_rel)
    extras = {"fill_value": fill_value, "interp_type": interp_type}
    if shape is not None:
        extras["shape"] = shape
    return apply_auto_augment(policy, data, seed, **extras)


def auto_augment_image_net(data, shape=None, fill_value=128, interp_type=None, max_translate_abs=None,
                           max_translate_rel=None, seed=None):
    return auto_augment(data, "image_net", shape, fill_value, interp_type, max_translate_abs, max_translate_rel, seed)


def apply_auto_augment(policy: Policy, data, seed=None, **extras):
    """Applies a Policy: a sub-policy per sample, its steps each with its probability."""
    augmentations: list[Augmentation] = [step[0] for sub in policy.sub_policies for step in sub]
    check_extras(augmentations, extras, "auto_augment")
    for sub in policy.sub_policies:
        for aug, probability, magnitude_bin in sub:
            if not 0.0 <= probability <= 1.0:
                raise ValueError(f"auto_augment: {aug.name}'s probability {probability} is outside [0, 1]")
            if aug.mag_range is not None and magnitude_bin is None:
                raise ValueError(f"auto_augment: {aug.name} needs a magnitude bin")
    sign = fn.random.coin_flip(dtype=types.INT32, **seeded(seed))
    choice = fn.random.uniform(values=list(range(len(policy.sub_policies))), dtype=types.INT32, **seeded(seed))
    if fusable(augmentations) and len({len(sub) for sub in policy.sub_policies}) == 1:
        return _apply_fused(policy, data, choice, sign, seed, extras)

    def sub_policy(steps):
        def run(data):
            for aug, probability, magnitude_bin in steps:
                step = applied(aug, magnitude_bin=magnitude_bin, num_magnitude_bins=policy.num_magnitude_bins,
                               sign=sign, **extras)
                data = with_probability(step, probability, seed)(data)
            return data
        return run

    return select([sub_policy(steps) for steps in policy.sub_policies], choice, data, "auto_augment")


def _apply_fused(policy: Policy, data, choice, sign, seed, extras: dict):
    """The policy as one augment_step per position in the sub-policies: at step k a sample applies
    step k of its sub-policy with that step's probability, else the identity."""
    from penstock.auto_aug import augmentations as a
    from penstock.auto_aug.core import pick_row
    count = len(policy.sub_policies)
    for position in range(len(policy.sub_policies[0])):
        steps = [sub[position] for sub in policy.sub_policies]
        augmentations = [aug for aug, _, _ in steps] + [a.identity]
        tables = [step_table(aug, policy.num_magnitude_bins, [magnitude_bin or 0]) for aug, _, magnitude_bin in steps]
        tables.append(step_table(a.identity, policy.num_magnitude_bins))
        probability = pick_row(np.array([probability for _, probability, _ in steps], np.float32), choice)
        applies = fn.random.uniform(range=[0.0, 1.0], **seeded(seed)) < probability
        op_index = count + (choice - count) * fn.cast(applies, dtype=types.INT32)
        data = apply_step(data, augmentations, tables, op_index, sign, extras.get("fill_value", 128),
                          extras.get("interp_type"))
    return data
