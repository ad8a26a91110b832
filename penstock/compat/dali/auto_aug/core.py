"""DALI's ``nvidia.dali.auto_aug.core``: this name is penstock.auto_aug.core itself."""
import sys

from penstock.auto_aug import core

sys.modules[__name__] = core
