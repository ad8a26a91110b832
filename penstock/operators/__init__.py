"""Operator families; importing this package registers every operator."""
from penstock.operators import decoders, external, geometry, normalize, random, readers, transfer  # noqa: F401
