"""Operator families, each with its schemas and its implementations for every device it has, side
by side; importing this package registers every operator."""
from penstock.operators import decoders, external, geometry, normalize, random, readers, transfer  # noqa: F401
