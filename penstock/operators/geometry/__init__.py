"""Geometry: resize, tensor_resize, crop, flip, transpose, rotate, warps, distortions, transform matrices."""
from penstock.operators.geometry import (resize, crop_flip_transpose, rotate, warps, distortions, transforms,  # noqa: F401
                                         tensor_resize)  # (registers the family's operators)
