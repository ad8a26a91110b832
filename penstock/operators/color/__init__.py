"""Colour: space conversion, brightness/contrast/hue/saturation, equalize, lookup tables."""
from penstock.operators.color import adjust, color_nonlinear  # noqa: F401  (registers the family's operators)
