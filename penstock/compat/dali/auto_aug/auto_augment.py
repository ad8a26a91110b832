"""DALI's ``nvidia.dali.auto_aug.auto_augment``: this name is penstock.auto_aug.auto_augment itself."""
import sys

from penstock.auto_aug import auto_augment

sys.modules[__name__] = auto_augment
