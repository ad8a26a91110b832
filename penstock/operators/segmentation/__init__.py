"""Segmentation masks and polygons."""
from penstock.operators.segmentation import masks  # noqa: F401  (registers the family's operators)
