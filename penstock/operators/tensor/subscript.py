"""Indexing a DataNode as a numpy array, per sample: ``x[1]``, ``x[:, 2:-1]``, ``x[idx, ::2]`` with
``idx`` a per-sample DataNode, and new axes (``x[:, dali.newaxis]``, penstock.graph).

As DALI's hidden TensorSubscript operator: subscript ``i`` is either an index ``at_i`` (the axis is
removed; negative counts from the end; out of range is an error) or a range ``lo_i:hi_i:step_i``
(clipped to the extent as Python clips). Axes without a subscript are kept whole; the layout loses
the removed axes' names.
"""
from __future__ import annotations

import numpy as np

from penstock.contract import OutputSpec
from penstock.operators.shared.arrays import register_array_operator
from penstock.operators.tensor.table import TensorDeclaration
from penstock.schema import Arg

MAX_SUBSCRIPTS = 32  # as DALI


def _index(args, axis: int, extent: int) -> int:
    at = int(args[f"at_{axis}"])
    if not -extent <= at < extent:
        raise IndexError(f"index {at} is out of range for axis {axis} of extent {extent}")
    return at % extent


def _bound(value) -> int | None:
    return None if value is None else int(value)


def subscript(xp, args, sample):
    """The sample indexed by the subscripts of ``args``."""
    count = args.num_subscripts
    if count is not None and count > sample.ndim:
        raise IndexError(f"{count} subscripts for a {sample.ndim}-dimensional sample")
    index = []
    for axis in range(sample.ndim):
        if args.get(f"at_{axis}") is not None:
            index.append(_index(args, axis, sample.shape[axis]))
            continue
        step = _bound(args.get(f"step_{axis}"))
        if step == 0:
            raise ValueError(f"step_{axis}: a step of 0")
        index.append(slice(_bound(args.get(f"lo_{axis}")), _bound(args.get(f"hi_{axis}")), step))
    result = sample[tuple(index)]
    if xp is not np and any(isinstance(item, slice) and (item.step or 1) < 0 for item in index):
        raise ValueError("negative steps are not supported on the GPU")
    return result


class SubscriptDeclaration(TensorDeclaration):
    def declare_outputs(self, inputs):
        spec = inputs[0]
        # an index given per sample is absent from the static arguments, an unused one is None there
        removed = {axis for axis in range(MAX_SUBSCRIPTS) if self.args.get(f"at_{axis}", True) is not None}
        layout = "".join(name for axis, name in enumerate(spec.layout) if axis not in removed)
        return OutputSpec(spec.dtype, None if spec.ndim is None else spec.ndim - len(removed), layout)


def _subscript_args():
    args = [Arg("num_subscripts", "int", None, "How many subscripts were written (checked against each sample's "
                "dimensions).", min=0, nullable=True)]
    for axis in range(MAX_SUBSCRIPTS):
        args += [Arg(f"at_{axis}", "int", None, f"The index taken on axis {axis} (the axis is removed).", per_sample=True),
                 Arg(f"lo_{axis}", "int", None, f"Where the range on axis {axis} starts.", per_sample=True),
                 Arg(f"hi_{axis}", "int", None, f"Where the range on axis {axis} ends (exclusive).", per_sample=True),
                 Arg(f"step_{axis}", "int", None, f"The step of the range on axis {axis}.", per_sample=True)]
    return tuple(args)


register_array_operator("tensor_subscript", subscript, (1, 1), _subscript_args(),
                        "Each sample indexed as numpy indexes (what ``x[...]`` on a DataNode makes).",
                        declaration=SubscriptDeclaration)
