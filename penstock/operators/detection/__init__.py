"""Bounding boxes: encoding, crops, flips, rotations."""
from penstock.operators.detection import boxes  # noqa: F401  (registers the family's operators)
