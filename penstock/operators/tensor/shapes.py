"""Shapes and layouts, per sample, on both devices: ``shapes``, ``reshape``, ``reinterpret``,
``squeeze``, ``expand_dims``, ``cat``, ``stack``, ``copy``, ``element_extract``.

Each operator is one function of a sample (or of one sample of each input) written once against
the array API that numpy and torch share (``xp``); the CPU form calls it with numpy on the
workers, the GPU form with torch on the GPU stage. Layouts follow DALI's operators: kept where
the axes stay (copy, cat, reshape to as many dimensions), losing the names of removed axes
(squeeze), gaining the names given for new ones (expand_dims' new_axis_names, stack's axis_name),
else none.
"""
from __future__ import annotations

import numpy as np

from penstock import types
from penstock.contract import OutputSpec, named_axes
from penstock.operators.shared.arrays import _llround, axis_in_range
from penstock.operators.tensor.table import FLOAT32, axis_names_arg, int_type, one_axis_form, register_tensor_operators
from penstock.schema import REQUIRED, Arg, ArgError

INTEGER_TYPES = tuple(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                                            np.uint64))


def _shapes(xp, args, sample):
    shape = xp.asarray(list(sample.shape), dtype=int_type(xp, args.dtype.numpy))
    return shape if xp is np else shape.to(sample.device)


def _reshaped(args, shape: tuple) -> list:
    """The output shape reshape gives a sample of ``shape`` (one -1 left for numpy to fill)."""
    ndim, src_dims = len(shape), args.get("src_dims")
    if src_dims is not None:
        if any(not -1 <= dim < ndim for dim in src_dims):
            raise ValueError(f"src_dims {list(src_dims)} name dimensions a {ndim}-dimensional sample "
                             "does not have (-1 adds one of extent 1)")
        left_out = [dim for dim in range(ndim) if dim not in src_dims and shape[dim] != 1]
        if args.rel_shape is None and args.shape is None and left_out:
            raise ValueError(f"src_dims {list(src_dims)} leave out dimension {left_out[0]} of extent "
                             f"{shape[left_out[0]]} (only extents of 1 may be left out)")
    if args.shape is not None:
        new = [int(size) for size in args.shape]
        if sum(size < 0 for size in new) > 1 or 0 in new:
            raise ValueError(f"shape {new}: one negative extent at most, and no 0")
        return [-1 if size < 0 else size for size in new]
    if args.rel_shape is not None:
        factors = list(args.rel_shape)
        if src_dims is not None and len(src_dims) != len(factors):
            raise ValueError(f"src_dims and rel_shape have different lengths: {len(src_dims)} and {len(factors)}")
        if sum(factor < 0 for factor in factors) > 1 or 0 in factors:
            raise ValueError(f"rel_shape {factors}: one negative extent at most, and no 0")
        if src_dims is None and (len(factors) > ndim + 1 or len(factors) == ndim + 1 and factors[-1] >= 0):
            raise ValueError(f"rel_shape has {len(factors)} values for {ndim}-dimensional samples (one more only "
                             "when the last is negative)")
        sources = list(src_dims) if src_dims is not None else list(range(len(factors)))
        return [-1 if factor < 0 else 1 if source < 0 else _llround(factor * shape[source])
                for factor, source in zip(factors, sources)]
    if src_dims is not None:
        return [1 if dim == -1 else shape[dim] for dim in src_dims]
    return list(shape)


def _reshape(xp, args, sample):
    """The sample with the shape that shape, rel_shape or src_dims give (the sample's own without
    any), the same elements in the same order."""
    shape = _reshaped(args, tuple(sample.shape))
    known, volume = int(np.prod([size for size in shape if size != -1])), int(np.prod(sample.shape))
    if (known == 0 or volume % known) if -1 in shape else known != volume:
        raise ValueError(f"cannot reshape a sample of shape {tuple(sample.shape)} ({int(np.prod(sample.shape))} "
                         f"elements) to {tuple(shape)}")
    return sample.reshape(tuple(shape))


def _type_name(dtype) -> str:
    return np.dtype(dtype).name if isinstance(dtype, np.dtype) else np.dtype(types.to_numpy_dtype(dtype)).name


def _reinterpret(xp, args, sample):
    """The sample's bytes as ``dtype``, shaped as DALI shapes them: a shape or rel_shape (of the input's
    extents) gives the output's extents in the new type, which must hold the same bytes; else (the
    input's shape, or src_dims') the last axis holds as many bytes as before."""
    source_size = sample.dtype.itemsize if xp is np else sample.element_size()
    target = sample.dtype if args.dtype is None else int_type(xp, args.dtype.numpy)
    target_size = np.dtype(args.dtype.numpy).itemsize if args.dtype is not None else source_size
    shape, size = _reshaped(args, tuple(sample.shape)), int(np.prod(sample.shape)) * source_size
    if args.shape is None and args.rel_shape is None:
        if target_size != source_size:
            if not shape or shape[-1] * source_size % target_size:
                raise ValueError(f"the last axis of a sample of shape {tuple(shape)} and type {_type_name(sample.dtype)} "
                                 f"does not hold a whole number of {np.dtype(args.dtype.numpy).name} values; "
                                 "give a shape")
            shape[-1] = shape[-1] * source_size // target_size
    else:
        if -1 in shape:
            others = int(np.prod([extent for extent in shape if extent != -1]))
            if others == 0:
                raise ValueError(f"cannot infer the extent of {tuple(shape)} for a sample of shape "
                                 f"{tuple(sample.shape)}")
            shape[shape.index(-1)] = size // (others * target_size)
        if int(np.prod(shape)) * target_size != size:
            raise ValueError(f"a sample of shape {tuple(sample.shape)} holds {size} bytes, the shape {tuple(shape)} "
                             f"of {target_size}-byte elements {int(np.prod(shape)) * target_size}")
    flat = (np.ascontiguousarray(sample) if xp is np else sample.contiguous()).reshape(-1)
    return flat.view(target).reshape(tuple(shape))


def _kept_dims(axes, ndim: int) -> list[int]:
    """The dimensions squeeze keeps, found as DALI finds them: walking the dimensions and the sorted
    axes together, so that a negative axis (first once sorted) stops any from being removed and
    axes past the end are passed over."""
    axes = sorted(axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"axes {tuple(axes)} name a dimension twice")
    kept, next_axis = [], 0
    for dim in range(ndim):
        if next_axis < len(axes) and axes[next_axis] == dim:
            next_axis += 1
        else:
            kept.append(dim)
    return kept


def _squeeze(xp, args, sample):
    kept = _kept_dims(args.axes, sample.ndim)
    removed = [dim for dim in range(sample.ndim) if dim not in kept and sample.shape[dim] != 1]
    if removed:
        raise ValueError(f"axis {removed[0]} of a sample of shape {tuple(sample.shape)} has size "
                         f"{sample.shape[removed[0]]}, not 1")
    return sample.reshape(tuple(sample.shape[dim] for dim in kept))


def _expand_dims(xp, args, sample):
    if args.new_axis_names is not None and not args.input_layout and sample.ndim:
        raise ValueError("Specifying ``new_axis_names`` requires an input with a proper layout (or scalars)")
    shape = list(sample.shape)
    for axis in sorted(args.axes):
        if axis > len(shape):
            raise ValueError(f"Data has not enough dimensions to add new axes at specified indices: axis {axis} "
                             f"is past the end of a {len(shape) + len(args.axes)}-dimensional output (input "
                             f"shape {tuple(sample.shape)})")
        shape.insert(axis, 1)
    return sample.reshape(tuple(shape))


def _cat(xp, args, *samples):
    axis = axis_in_range(args.axis or 0, samples[0].ndim, "axis")
    return xp.concatenate(samples, axis=axis) if xp is np else xp.cat(samples, dim=axis)


def _stack(xp, args, *samples):
    axis = axis_in_range(args.axis or 0, samples[0].ndim, "axis", high=samples[0].ndim)
    return xp.stack(samples, axis=axis) if xp is np else xp.stack(samples, dim=axis)


def _copy(xp, args, sample):
    return sample.copy() if xp is np else sample.clone()


SEQUENCE_DIMENSIONS = ("Input must have at least two dimensions - outermost for sequence and at least one for data "
                       "elements.")


def _element_extract(xp, args, sample):
    if sample.ndim < 2:
        raise ValueError(f"{SEQUENCE_DIMENSIONS} Got shape {tuple(sample.shape)}")
    for index in args.element_map:
        if not index < sample.shape[0]:
            raise ValueError(f"Index `{index}` from `element_map` is out of bounds for sample with sequence length "
                             f"equal `{sample.shape[0]}`")
    elements = tuple(sample[index] for index in args.element_map)
    return elements if len(elements) > 1 else elements[0]


def _reshaped_ndim(args: dict, spec: OutputSpec) -> int | None:
    """The number of dimensions reshape gives, where the arguments and the input's spec tell it."""
    if any(name not in args for name in ("shape", "rel_shape")):
        return None  # given per sample: known when the samples arrive
    for name in ("shape", "src_dims", "rel_shape"):
        if args[name] is not None:
            return len(args[name])
    return spec.ndim if spec.ndim is not None else len(spec.layout) or None


def _declare_reshape(impl, inputs):
    """DALI's layouts: ``layout`` where given ('' clears it), else the input's where the number of
    dimensions stays."""
    spec, args = inputs[0], impl.args
    ndim = _reshaped_ndim(args, spec)
    if args.layout is not None:
        if args.layout and ndim is not None and len(args.layout) != ndim:
            raise ValueError(f"{impl.name}: layout '{args.layout}' has {len(args.layout)} axes for "
                             f"{ndim}-dimensional outputs")
        layout = args.layout
    elif ndim is None:  # a shape given per sample: DALI keeps the input's layout (and fails where it does not fit)
        layout = spec.layout
    else:
        layout = spec.layout if len(spec.layout) == ndim else ""
    dtype = spec.dtype if args.get("dtype") is None else np.dtype(args.dtype.numpy)
    return OutputSpec(dtype, ndim, layout)


def _declare_squeeze(impl, inputs):
    layout = inputs[0].layout
    if impl.args.axis_names is not None:
        impl.args = impl.args.replace(axes=named_axes(impl.name, layout, impl.args.axis_names))
    ndim = len(layout) or inputs[0].ndim
    if ndim is None:
        return OutputSpec(inputs[0].dtype, None, "")
    kept = _kept_dims(impl.args.axes, ndim)
    return OutputSpec(inputs[0].dtype, len(kept), "".join(layout[dim] for dim in kept) if layout else "")


def _declare_expand_dims(impl, inputs):
    """DALI's layouts: with new_axis_names (even ''), the input's names and the new ones in their
    places (the input needs a layout, but for scalars; '' names no new axis: no layout); without
    them, the input's layout where no axis is added, else none."""
    layout, names, axes = inputs[0].layout, impl.args.new_axis_names, impl.args.axes
    impl.args = impl.args.replace(input_layout=layout)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{impl.name}: axes {tuple(axes)} name an axis twice")
    ndim = inputs[0].ndim if inputs[0].ndim is not None else len(layout) or None
    out_ndim = ndim + len(axes) if ndim is not None else None
    if names is None or not axes or names == "":
        return OutputSpec(inputs[0].dtype, out_ndim, layout if not axes else "")
    if len(names) != len(axes):
        raise ValueError(f"{impl.name}: {len(names)} new_axis_names for {len(axes)} axes")
    if not layout and ndim:
        raise ValueError(f"{impl.name}: Specifying ``new_axis_names`` requires an input with a proper layout "
                         "(or scalars)")
    merged, old = [], iter(layout)
    named = dict(zip(axes, names))
    for axis in range(len(layout) + len(axes)):
        merged.append(named[axis] if axis in named else next(old, ""))
    return OutputSpec(inputs[0].dtype, out_ndim, "".join(merged))


def _joined_layout(impl, inputs) -> str:
    """The first input's layout: DALI 2.4 reads every input's layout from the first (so layouts that
    differ are not refused)."""
    return inputs[0].layout


def _declare_cat(impl, inputs):
    layout = _joined_layout(impl, inputs)
    if impl.args.axis_name is not None:
        impl.args = impl.args.replace(axis=named_axes(impl.name, layout, impl.args.axis_name, "axis_name")[0])
    return OutputSpec(inputs[0].dtype, inputs[0].ndim, layout)


def _declare_stack(impl, inputs):
    layout, name = _joined_layout(impl, inputs), impl.args.axis_name
    ndim = inputs[0].ndim if inputs[0].ndim is not None else len(layout) or None
    if name is None:
        return OutputSpec(inputs[0].dtype, ndim + 1 if ndim is not None else None, "")
    if not layout and ndim != 0:
        raise ValueError(f"{impl.name}: axis_name '{name}' needs inputs with a layout (or scalars)")
    axis = axis_in_range(impl.args.axis or 0, len(layout), "axis", high=len(layout))
    return OutputSpec(inputs[0].dtype, len(layout) + 1, layout[:axis] + name + layout[axis:])


def _declare_element_extract(impl, inputs):
    """Sequences: samples of at least 2 dimensions (frames first), of a layout starting with 'F' where
    they have one (as DALI)."""
    spec = inputs[0]
    if spec.layout and spec.layout[0] != "F":
        raise ValueError(f"{impl.name}: Input layout must describe a sequence - it must start with 'F', got "
                         f"'{spec.layout}' instead.")
    if spec.ndim is not None and spec.ndim < 2:
        raise ValueError(f"{impl.name}: {SEQUENCE_DIMENSIONS} Got {spec.ndim}-dimensional samples")
    return spec.but(shape=spec.shape[1:] if spec.shape else None, layout=spec.layout[1:],
                    ndim=spec.ndim - 1 if spec.ndim else None, channels=spec.channels)


def _one_shape_form(static: dict, per_sample: frozenset) -> None:
    """As DALI: the shape input, shape and rel_shape exclude each other; something must change."""
    def supplied(name):  # shape=[] is a value: a scalar's shape
        return name in per_sample or static.get(name) is not None
    named = [name for name in ("shape", "rel_shape") if supplied(name)]
    if len(named) > 1:
        raise ArgError("the shape input, 'shape' and 'rel_shape' exclude each other; give one")
    if not any(supplied(name) for name in ("shape", "rel_shape", "src_dims", "dtype")) \
            and static.get("layout") is None:
        raise ArgError("give a new shape (the shape input, 'shape', 'rel_shape' or 'src_dims'), 'layout'"
                       + (" or 'dtype'" if "dtype" in static else "") + ": without any the operator does nothing")


def _squeeze_axes_given(static: dict, per_sample: frozenset) -> None:
    if static.axes is None and static.axis_names is None:
        raise ArgError("give the axes to remove: 'axes' or 'axis_names'")


RESHAPE_ARGS = (Arg("shape", "ints", None, "The new shape (one negative extent: the rest of the volume); also the "
                    "second input (of any integer type).", per_sample=True, input_types=INTEGER_TYPES),
                Arg("rel_shape", "floats", None, "The new shape as factors of the input's extents (of those of "
                    "src_dims where given; one negative factor: the rest of the volume).", per_sample=True,
                    input_types=FLOAT32),
                Arg("src_dims", "ints", None, "The input's dimensions in the output's order (-1 adds one of extent "
                    "1; dimensions left out must have extent 1); with shape, only checked to name dimensions of "
                    "the input."),
                Arg("layout", "str", None, "Layout of the output (default: the input's where the number of "
                    "dimensions stays, else none; '' clears it)."))


JOIN_LIMIT = 999  # inputs of cat and stack, as DALI's


# name: (function of one sample of each input, (min, max) inputs, arguments, doc)
OPERATORS = {
    "shapes": (_shapes, (1, 1), (Arg("dtype", "dtype", types.INT64, "Element type of the shapes (DALI's: 32- and "
                                     "64-bit integers and floats).",
                                     choices=(types.INT32, types.UINT32, types.INT64, types.UINT64, types.FLOAT,
                                              types.FLOAT64)),),
               "Each sample's shape, as a 1-D array."),
    "reshape": (_reshape, (1, 1), RESHAPE_ARGS, "Each sample with a new shape and the same elements."),
    "reinterpret": (_reinterpret, (1, 1), (Arg("dtype", "dtype", None, "The type the bytes are read as (default: "
                                               "the input's)."), *RESHAPE_ARGS),
                    "Each sample's bytes read as another type (``dtype``: a type of another size changes the last "
                    "axis's extent, as numpy's view does) and/or with another shape, as reshape gives."),
    "squeeze": (_squeeze, (1, 1), (Arg("axes", "ints", None, "Axes of extent 1 to remove (as DALI: a negative "
                                   "axis leaves every axis, and axes past the last are passed over)."),
                                   axis_names_arg("The axes to remove by layout name (instead of axes).")),
                "Each sample without the given axes of extent 1; the layout loses their names."),
    "expand_dims": (_expand_dims, (1, 1), (Arg("axes", "ints", REQUIRED, "Where the new axes of extent 1 go (indices "
                                               "in the output).", min=0),
                                           Arg("new_axis_names", "str", None, "The new axes' names in the output's "
                                               "layout, one per axis (the input needs a layout); without them the "
                                               "output has none.")),
                    "Each sample with new axes of extent 1."),
    "cat": (_cat, (1, JOIN_LIMIT), (Arg("axis", "int", None, "The axis to join along, in [-ndim, ndim - 1] (default "
                                        "0)."),
                                    Arg("axis_name", "str", None, "The axis to join along by layout name (instead "
                                        "of axis).")),
            "The samples of the inputs joined along an existing axis; the output has the inputs' layout."),
    "stack": (_stack, (1, JOIN_LIMIT), (Arg("axis", "int", None, "Where the new axis goes, in [-ndim, ndim] "
                                            "(default 0)."),
                                        Arg("axis_name", "str", None, "The new axis's name, inserted in the inputs' "
                                            "layout (without it the output has none).")),
              "The samples of the inputs stacked along a new axis."),
    "copy": (_copy, (1, 1), (), "A copy of each sample, with its layout."),
}
OPERATORS["element_extract"] = (_element_extract, (1, 1), (
    Arg("element_map", "ints", REQUIRED, "Which elements of each sequence (its first axis) to output, one "
        "output each.", min=0),), "Elements of sequences (the first axis), one output per index of element_map.")
DECLARATIONS = {"element_extract": _declare_element_extract, "copy": lambda impl, inputs: inputs[0],
                "reshape": _declare_reshape, "reinterpret": _declare_reshape, "squeeze": _declare_squeeze,
                "expand_dims": _declare_expand_dims, "cat": _declare_cat, "stack": _declare_stack}
_RESHAPE_EXTRAS = {"argument_inputs": ("shape",), "input_names": ("data",), "checks": (_one_shape_form,)}
SCHEMA_EXTRAS = {"reshape": _RESHAPE_EXTRAS, "reinterpret": _RESHAPE_EXTRAS,
                 "squeeze": {"checks": (_squeeze_axes_given, one_axis_form("axes", "axis_names"))},
                 "cat": {"checks": (one_axis_form("axis", "axis_name"),)},
                 "element_extract": {"num_outputs": lambda static: len(static.element_map)}}
register_tensor_operators(OPERATORS, DECLARATIONS, SCHEMA_EXTRAS)
