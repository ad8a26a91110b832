"""Bounding boxes: flips, pastes, point transforms and rotations; SSD's box encoder; random crops that keep boxes."""
from penstock.operators.detection import box_transforms, box_encoder, random_crops  # noqa: F401  (registers the family's operators)
