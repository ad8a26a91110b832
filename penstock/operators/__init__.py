"""Operator families; importing this package registers every operator."""
from penstock.operators import decoders, external, geometry, normalize, random, readers, transfer  # noqa: F401
from penstock.operators import gpu  # noqa: F401  (after the CPU operators it builds on)
