"""Geometry: resize, crop, flip, transpose, rotate, warps, distortions, transform matrices."""
from penstock.operators.geometry import resize, crop_flip_transpose, rotate, warps, distortions, transforms  # noqa: F401  (registers the family's operators)
