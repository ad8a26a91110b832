"""Values made from a value, per sample, on both devices: ``full``, ``full_like``, ``zeros_like``,
``ones_like``, ``one_hot`` (class indices as one-hot vectors) and ``cast_like`` (the first input in
the second's type)."""
from __future__ import annotations

import numpy as np

from penstock import numeric, types
from penstock.contract import OutputSpec
from penstock.operators.tensor.table import LAYOUT_ARG, int_type, register_tensor_operators
from penstock.schema import Arg, ArgError

def _cast_value(value: float, dtype: np.dtype):
    """on_value and off_value in ``dtype`` as DALI converts them (a C++ cast of the float: integer
    types truncate, then wrap)."""
    value = np.float32(value)
    return value.astype(dtype) if dtype.kind == "f" else np.asarray(int(value)).astype(np.int64).astype(dtype)


def _one_hot(xp, args, sample):
    """Class indices as one-hot vectors along a new axis (``axis``, the last by default); indices
    outside [0, num_classes) give off_value only; a sample of one element gives a vector of
    num_classes when no axis is given (DALI's scalars)."""
    classes, dtype = args.num_classes, np.dtype(args.dtype.numpy)
    scalar = args.axis is None and int(np.prod(sample.shape)) == 1
    axis = 0 if scalar else sample.ndim if args.axis in (None, -1) else args.axis
    if not 0 <= axis <= sample.ndim:
        raise ValueError(f"axis {args.axis} is outside [-1, {sample.ndim}] for a {sample.ndim}-dimensional sample")
    if args.axis_name is not None and not scalar and sample.ndim and not args.input_layout:
        raise ValueError(f"Input layout mismatch: axis_name '{args.axis_name}' goes into the input's layout, "
                         f"and the {sample.ndim}-dimensional input has none")
    if xp is np:
        indices = sample.reshape(-1).astype(np.int64)  # floats truncate towards 0, as a C++ cast
        result = np.full((len(indices), classes), _cast_value(args.off_value, dtype), dtype)
        inside = np.flatnonzero((indices >= 0) & (indices < classes))
        result[inside, indices[inside]] = _cast_value(args.on_value, dtype)
    else:
        indices = sample.reshape(-1).long()
        torch_dtype = int_type(xp, dtype)
        result = xp.full((len(indices), classes), _cast_value(args.off_value, dtype).item(), dtype=torch_dtype,
                         device=sample.device)
        inside = ((indices >= 0) & (indices < classes)).nonzero().reshape(-1)
        result[inside, indices[inside]] = xp.as_tensor(_cast_value(args.on_value, dtype).item(), dtype=torch_dtype,
                                                       device=sample.device)
    if scalar:
        return result.reshape(classes)
    result = result.reshape(tuple(sample.shape) + (classes,))
    return xp.moveaxis(result, -1, axis) if xp is np else xp.movedim(result, -1, axis)


def _cast_like(xp, args, sample, like):
    if xp is np:
        return numeric.saturate(np.asarray(sample), like.dtype)
    return numeric.saturate_tensor(sample, like.dtype)


def _declare_one_hot(impl, inputs):
    layout, name, axis = inputs[0].layout, impl.args.axis_name, impl.args.axis
    impl.args = impl.args.replace(input_layout=layout)  # a new axis's name needs one (but for scalars)
    dtype = np.dtype(impl.args.dtype.numpy)
    if name is None:
        return OutputSpec(dtype, None, "")
    if not layout:  # DALI's scalars: the new axis alone
        return OutputSpec(dtype, 1, name)
    place = len(layout) if axis in (None, -1) else axis
    return OutputSpec(dtype, len(layout) + 1, layout[:place] + name + layout[place:])


def _declare_cast_like(impl, inputs):
    return inputs[0].but(dtype=inputs[1].dtype)


def _one_hot_type(static: dict, per_sample: frozenset) -> None:
    if static.dtype.numpy in (np.float16, np.bool_):
        raise ArgError(f"dtype {np.dtype(static.dtype.numpy).name} is not an output type of one_hot (integers, "
                       "float32 or float64)")
    if static.axis_name is not None and len(static.axis_name) != 1:
        raise ArgError(f"axis_name must be one character, got '{static.axis_name}'")


# ---- full, full_like, zeros_like, ones_like: arrays filled with a value --------------------------------
def _filled(xp, shape, value, dtype, near):
    """An array of ``shape`` and ``dtype`` (numpy's, or torch's on the GPU) holding ``value`` (a number,
    or an array spread over the shape as DALI spreads it: see _fill_positions), converted as cast
    converts; ``near``: a sample whose device it goes to."""
    shape = tuple(int(size) for size in shape)
    if xp is np:
        fill = numeric.saturate(np.asarray(value), dtype)
        return fill.reshape(-1)[_fill_positions(fill.shape, shape)]
    fill = value if isinstance(value, xp.Tensor) else xp.as_tensor(value, device=near.device)
    fill = numeric.saturate_tensor(fill, dtype)
    positions = xp.as_tensor(_fill_positions(tuple(fill.shape), shape), device=fill.device)
    return fill.reshape(-1)[positions]


def _fill_positions(fill_shape: tuple, shape: tuple) -> np.ndarray:
    """For each element of an output of ``shape``, the index in the flattened fill value it takes, as
    DALI 2.4's full and full_like pick it (numpy's broadcasting where the shapes fit it; where an
    output extent of 1 meets a larger fill extent, DALI's kernel walks the fill value as if its
    extents there were 1, and a 1-D fill value against a last output extent of 1 is repeated in
    order)."""
    ndim = max(len(fill_shape), len(shape))
    fill = (1,) * (ndim - len(fill_shape)) + tuple(fill_shape)
    out = (1,) * (ndim - len(shape)) + tuple(shape)
    if any(f != o and 1 not in (f, o) for f, o in zip(fill, out)):
        raise ValueError(f"a fill value of shape {tuple(fill_shape)} does not broadcast to the shape {shape} (each "
                         "extent, counted from the last, must match or be 1)")
    size, volume = int(np.prod(fill_shape)), int(np.prod(shape))
    if volume == 0:
        return np.zeros(shape, np.int64)
    if size == 0:
        raise ValueError(f"an empty fill value (shape {tuple(fill_shape)}) cannot fill the shape {shape}")
    significant = list(fill_shape)
    while significant and significant[0] == 1:
        significant.pop(0)
    if len(significant) == 1 and significant[0] > 1 and shape and shape[-1] == 1:
        return np.arange(volume).reshape(shape) % size
    walked = [1 if o == 1 else f for f, o in zip(fill, out)]
    positions = np.zeros(out, np.int64)
    for axis in range(ndim):
        if fill[axis] != 1:
            steps = np.arange(out[axis]) * int(np.prod(walked[axis + 1:]))
            positions += steps.reshape([-1 if other == axis else 1 for other in range(ndim)])
    return (positions % size).reshape(shape)


def _element_type(xp, dtype, default):
    """The element type of ``dtype`` (a DALIDataType) for ``xp``, else ``default``."""
    if dtype is None:
        return default
    return dtype.numpy if xp is np else int_type(xp, dtype.numpy)


def _full(xp, args, fill):
    shape = tuple(args.shape) if args.shape is not None else ()
    if args.layout and len(args.layout) != len(shape):
        raise ValueError(f"layout '{args.layout}' has {len(args.layout)} axes for outputs of shape {shape}")
    return _filled(xp, shape, fill, fill.dtype, fill)


def _full_like(xp, args, like, fill):
    return _filled(xp, like.shape, fill, like.dtype, like)


def _constant_like(value):
    def fill(xp, args, like):
        return _filled(xp, like.shape, value, _element_type(xp, args.dtype, like.dtype), like)
    return fill


def _declare_like(impl, inputs):
    spec = inputs[0]
    dtype = impl.args.dtype.numpy if impl.args.get("dtype") is not None else spec.dtype
    return OutputSpec(np.dtype(dtype) if dtype is not None else None, spec.ndim, spec.layout, spec.shape)


def _declare_full(impl, inputs):
    if "shape" not in impl.args:  # given per sample: its length is known when it arrives
        return OutputSpec(inputs[0].dtype, None, impl.args.layout)
    shape = impl.args.shape
    return OutputSpec(inputs[0].dtype, len(shape) if shape is not None else 0, impl.args.layout)


LIKE_DTYPE = Arg("dtype", "dtype", None, "Element type of the output (default: the input's).")


OPERATORS = {
    "one_hot": (_one_hot, (1, 1), (Arg("num_classes", "int", 0, "How many classes.", min=0),
                                   Arg("axis", "int", None, "Where the new axis of num_classes goes, in [-1, ndim] "
                                       "(default: last; -1 is last too).", min=-1),
                                   Arg("axis_name", "str", None, "The new axis's name in the output's layout "
                                       "(without it the output has none)."),
                                   Arg("on_value", "float", 1.0, "The value of the sample's class."),
                                   Arg("off_value", "float", 0.0, "The value of the other classes (and of every "
                                       "class for an index outside [0, num_classes))."),
                                   Arg("dtype", "dtype", types.FLOAT, "Element type of the output.")),
                "Class indices (integers; floats truncate) as one-hot vectors along a new axis; a sample of one "
                "element gives a vector of num_classes when no axis is given."),
}
OPERATORS["cast_like"] = (_cast_like, (2, 2), (), "The first input cast to the element type of the second "
                          "(rounding to nearest even and saturating, as cast).")
OPERATORS["full"] = (_full, (1, 1), (Arg("shape", "ints", None, "The shape of each output sample (default: a "
                                         "scalar).", min=0, per_sample=True), LAYOUT_ARG),
                     "Each sample of the fill value (a number or an array, broadcast numpy-style where the "
                     "shapes fit; as DALI, an output extent of 1 may meet a larger fill extent) spread over "
                     "``shape``, in the fill value's type.")
OPERATORS["full_like"] = (_full_like, (2, 2), (), "An array of the first input's shape, type and layout holding the "
                          "second (the fill value, spread as full spreads it and converted as cast converts).")
OPERATORS["zeros_like"] = (_constant_like(0), (1, 1), (LIKE_DTYPE,), "Zeros in the input's shape, type (or "
                           "``dtype``) and layout.")
OPERATORS["ones_like"] = (_constant_like(1), (1, 1), (LIKE_DTYPE,), "Ones in the input's shape, type (or "
                          "``dtype``) and layout.")
DECLARATIONS = {"cast_like": _declare_cast_like, "full": _declare_full, "full_like": lambda impl, inputs: inputs[0],
                "zeros_like": _declare_like, "ones_like": _declare_like, "one_hot": _declare_one_hot}
SCHEMA_EXTRAS = {"one_hot": {"checks": (_one_hot_type,)},
                 "full": {"input_names": ("fill_value",)}, "full_like": {"input_names": ("data_like", "fill_value")},
                 "zeros_like": {"input_names": ("data_like",)}, "ones_like": {"input_names": ("data_like",)}}
register_tensor_operators(OPERATORS, DECLARATIONS, SCHEMA_EXTRAS)
