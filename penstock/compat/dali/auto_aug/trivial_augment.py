"""DALI's ``nvidia.dali.auto_aug.trivial_augment``: this name is penstock.auto_aug.trivial_augment itself."""
import sys

from penstock.auto_aug import trivial_augment

sys.modules[__name__] = trivial_augment
