"""Sequences (samples whose first axis, ``F`` in the layout, holds frames), on both devices:
``per_frame`` marks a batch as sequences (its arrays are handed on untouched: only the layout
changes, as in DALI), ``sequence_rearrange`` picks and reorders the frames of each sequence."""
from __future__ import annotations

from penstock.contract import OutputSpec
from penstock.operators.shared.arrays import register_array_operator
from penstock.schema import REQUIRED, Arg, ArgError


def _per_frame(xp, args, sample):
    if sample.ndim == 0:
        raise ValueError("a scalar sample cannot be marked as a sequence (it has no frames axis)")
    return sample


def _rearrange(xp, args, sample):
    """out[i] = sample[new_order[i]]."""
    if sample.ndim < 2:
        raise ValueError(f"expected sequences of frames of at least 1 dimension, got a sample of shape "
                         f"{tuple(sample.shape)}")
    order, frames = args.new_order, sample.shape[0]
    if not order:
        raise ValueError("new_order is empty: a sequence needs at least one frame")
    for position, index in enumerate(order):
        if not 0 <= index < frames:
            raise ValueError(f"new_order[{position}] is {index}, outside [0, {frames}) for a sequence of {frames} "
                             f"frames (shape {tuple(sample.shape)})")
    return sample[list(order)]


class PerFrameDeclaration:
    def declare_outputs(self, inputs):
        spec = inputs[0]
        if spec.layout:
            if self.args.replace_:
                return spec.but(layout="F" + spec.layout[1:])
            if spec.layout[0] != "F":
                raise ValueError(f"{self.name}: the input's layout '{spec.layout}' does not start with 'F' (frames); "
                                 "replace=True makes its first axis the frames axis")
            return spec
        if spec.ndim == 0:
            raise ValueError(f"{self.name}: scalar samples cannot be marked as sequences")
        # without a layout, DALI names the other axes '*'; where the number of dimensions is known
        # only when data arrives, the frames axis alone is named
        return spec.but(layout="F" + "*" * ((spec.ndim or 1) - 1))


class RearrangeDeclaration:
    def declare_outputs(self, inputs):
        spec = inputs[0]
        if spec.layout and spec.layout[0] != "F":
            raise ValueError(f"{self.name}: expected sequences (a layout starting with 'F', frames), got layout "
                             f"'{spec.layout}'")
        if spec.ndim is not None and spec.ndim < 2:
            raise ValueError(f"{self.name}: expected sequences of frames of at least 1 dimension, got "
                             f"{spec.ndim}-dimensional samples")
        return OutputSpec(spec.dtype, spec.ndim, spec.layout)


def _order_not_empty(static: dict, per_sample: frozenset) -> None:
    if "new_order" not in per_sample and not static.new_order:
        raise ArgError("argument 'new_order' is empty: a sequence needs at least one frame")


register_array_operator(
    "per_frame", _per_frame, (1, 1),
    (Arg("replace", "bool", False, "An input whose layout does not start with 'F': True replaces its first "
         "letter with 'F'; False refuses it."),),
    "Marks the samples as sequences (per-frame values, for arguments that take one value per frame): the data is "
    "untouched, the layout starts with 'F'. An input without a layout gets 'F' followed by '*' for its other axes.",
    declaration=PerFrameDeclaration, input_names=("input",))
register_array_operator(
    "sequence_rearrange", _rearrange, (1, 1),
    (Arg("new_order", "ints", REQUIRED, "The frames of the output: out[i] = in[new_order[i]] (frames may repeat "
         "or be left out; at least one).", per_sample=True, min=0),),
    "Reorders the frames (the first axis) of each sequence; the layout, if any, must start with 'F'.",
    declaration=RearrangeDeclaration, input_names=("input",), checks=(_order_not_empty,))
