"""Tensor operators: shapes and layouts, slice, fills, reductions, sample properties, constant sources, arithmetic, casts of layout, subscripts, conditionals' split and merge, transfer."""
from penstock.operators.tensor import (shapes, slicing, fills, reductions, properties, constants,  # noqa: F401  (registers the family's operators)
                                       arithmetic, batch_ops, subscript, sequences, conditional, transfer)
