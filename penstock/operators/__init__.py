"""Operator families, one package each, with their schemas and their implementations for every
device side by side; a family imports only penstock.operators.shared, never another family.
Importing this package registers every operator."""
from penstock.operators import (audio, color, decoders, detection, filters, geometry, image, python,  # noqa: F401
                                random, readers, segmentation, tensor)
