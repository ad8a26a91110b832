"""Geometry: resize, crop, flip, transpose, rotate, warps, distortions, transform matrices."""
from penstock.operators.geometry import image_geometry, warps, distortions, transforms  # noqa: F401  (registers the family's operators)
