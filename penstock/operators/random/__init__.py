"""Random generators, drawn per sample."""
from penstock.operators.random import generators, crop_generator  # noqa: F401  (registers the family's operators)
