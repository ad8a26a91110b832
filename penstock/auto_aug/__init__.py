"""Automatic augmentation policies over ``fn`` operators: ``auto_augment`` (AutoAugment's ImageNet
policy), ``rand_augment`` and ``trivial_augment`` (TrivialAugment Wide), with DALI's
``nvidia.dali.auto_aug`` names and torchvision's operation tables and magnitude ranges. Each
sample draws its own operations; a pipeline using them splits the batch among the operations (as
DALI's do with conditionals)."""
from penstock.auto_aug import augmentations, auto_augment, core, rand_augment, trivial_augment

__all__ = ["augmentations", "auto_augment", "core", "rand_augment", "trivial_augment"]
