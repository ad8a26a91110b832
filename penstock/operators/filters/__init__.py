"""Filters: convolution, blur, laplacian, noise."""
from penstock.operators.filters import rules, convolution, noise  # noqa: F401  (registers the family's operators)
