"""Tensor operators: arithmetic, reshape, slice, pad, casts of layout, subscripts, conditionals' split and merge, transfer."""
from penstock.operators.tensor import tensors, arithmetic, batch_ops, subscript, sequences, conditional, transfer  # noqa: F401  (registers the family's operators)
