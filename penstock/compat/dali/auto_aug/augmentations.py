"""DALI's ``nvidia.dali.auto_aug.augmentations``: this name is penstock.auto_aug.augmentations itself."""
import sys

from penstock.auto_aug import augmentations

sys.modules[__name__] = augmentations
