"""DALI's ``nvidia.dali.auto_aug``: penstock's automatic augmentation modules under DALI's paths
(``from penstock.compat.dali.auto_aug import rand_augment``)."""
from penstock.auto_aug import augmentations, auto_augment, core, rand_augment, trivial_augment

__all__ = ["augmentations", "auto_augment", "core", "rand_augment", "trivial_augment"]
