"""``slice``: a window of each sample, on both devices (DALI's slice: anchor and shape as inputs or
arguments, normalized or in elements, on chosen axes, with an out-of-bounds policy; the window
arithmetic is penstock.operators.shared.arrays.slice_sample)."""
from __future__ import annotations

import numpy as np

from penstock.contract import named_axes
from penstock.operators.shared.arrays import slice_sample
from penstock.operators.tensor.table import FLOAT32, INT32, axis_names_arg, register_tensor_operators
from penstock.schema import Arg, ArgError

ANCHOR_TYPES = (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float32))


def _declare_slice(impl, inputs):
    """Resolves the sliced axes from the input's layout, once (axis_names first, as in DALI)."""
    layout, names = inputs[0].layout, impl.args.axis_names
    if names is not None:
        axes = named_axes(impl.name, layout, names)
    elif "axes" not in impl.args:  # given per sample
        axes = None
    elif impl.args.axes is not None:
        axes = tuple(impl.args.axes)
    elif "W" in layout and "H" in layout:
        axes = (layout.index("W"), layout.index("H"))  # DALI's default axis_names, "WH"
    else:
        axes = (1, 0)
    if axes is not None:
        impl.args = impl.args.replace(axes=axes)
    dtype = impl.args.dtype
    return inputs[0].but(shape=None, dtype=np.dtype(dtype.numpy) if dtype is not None else inputs[0].dtype)


def _slice_forms(static: dict, per_sample: frozenset) -> None:
    """As DALI: the window as anchor and shape inputs or as named arguments, not both; start or
    rel_start; one of end, rel_end, shape and rel_shape."""
    def supplied(name):
        return name in per_sample or static.get(name) is not None
    named = [name for name in ("start", "rel_start", "end", "rel_end", "shape", "rel_shape") if supplied(name)]
    if supplied("anchor") or supplied("window_shape"):
        if named:
            raise ArgError(f"the anchor and shape inputs and the named window arguments ({', '.join(named)}) "
                           "exclude each other; give one form")
    elif not named:
        raise ArgError("give the window: anchor and shape inputs, or start/end/shape arguments (or their rel_ forms)")
    for group in (("start", "rel_start"), ("end", "rel_end", "shape", "rel_shape")):
        given_ = [name for name in group if supplied(name)]
        if len(given_) > 1:
            raise ArgError(f"arguments {' and '.join(repr(name) for name in given_)} exclude each other; give one")
    if supplied("axes") and supplied("axis_names"):
        raise ArgError("arguments 'axes' and 'axis_names' exclude each other; give one")


SLICE = (slice_sample, (1, 1), (
    Arg("anchor", "any", None, "Where the window starts on each sliced axis (the second input in DALI's "
        "fn.slice(data, anchor, shape)): integers are elements; floats are fractions of the extent unless "
        "normalized_anchor=False.", per_sample=True, input_types=ANCHOR_TYPES),
    Arg("window_shape", "any", None, "The window's size on each sliced axis (the third input), of the anchor's "
        "type: integers are elements; floats fractions unless normalized_shape=False.", per_sample=True,
        input_types=ANCHOR_TYPES),
    Arg("normalized_anchor", "bool", True, "Whether a float anchor input is a fraction of the extent."),
    Arg("normalized_shape", "bool", True, "Whether a float shape input is a fraction of the extent."),
    Arg("start", "ints", None, "Where the window starts, in elements.", per_sample=True, input_types=INT32),
    Arg("end", "ints", None, "Where the window ends (exclusive), in elements.", per_sample=True,
        input_types=INT32),
    Arg("shape", "ints", None, "The window's size, in elements.", per_sample=True, input_types=INT32),
    Arg("rel_start", "floats", None, "Where the window starts, as a fraction of the extent.", per_sample=True,
        input_types=FLOAT32),
    Arg("rel_end", "floats", None, "Where the window ends, as a fraction of the extent.", per_sample=True,
        input_types=FLOAT32),
    Arg("rel_shape", "floats", None, "The window's size, as a fraction of the extent.", per_sample=True,
        input_types=FLOAT32),
    Arg("axes", "ints", None, "The sliced axes, in the order of the window's values, in [-ndim, ndim - 1] "
        "(default: W and H of the layout, else (1, 0)).", per_sample=True, input_types=INT32),
    axis_names_arg("The sliced axes by layout name, e.g. 'WH' (before axes)."),
    Arg("out_of_bounds_policy", "str", "error", "A window outside the sample: 'error', 'pad' (with fill_values) "
        "or 'trim_to_shape'.", choices=("error", "pad", "trim_to_shape")),
    Arg("fill_values", "floats", (0.0,), "Padding: one value, or one per channel (the last axis)."),
    Arg("dtype", "dtype", None, "Element type of the output (default: the input's; else float32, float16 or "
        "uint8), converted as cast converts.")),
    "A window of each sample (DALI's slice: anchor and shape as inputs or arguments, normalized or in "
    "elements, on chosen axes, with an out-of-bounds policy).")
register_tensor_operators({"slice": SLICE}, {"slice": _declare_slice},
                          {"slice": {"argument_inputs": ("anchor", "window_shape"), "checks": (_slice_forms,)}})
