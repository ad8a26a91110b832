"""Image decoders, CPU and mixed."""
from penstock.operators.decoders import images, mixed  # noqa: F401  (registers the family's operators)
