"""DALI's ``nvidia.dali.auto_aug.rand_augment``: this name is penstock.auto_aug.rand_augment itself."""
import sys

from penstock.auto_aug import rand_augment

sys.modules[__name__] = rand_augment
