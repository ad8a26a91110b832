"""Tensor manipulation, per sample, on both devices: ``shapes``, ``reshape``, ``reinterpret``, ``squeeze``,
``expand_dims``, ``cat``, ``stack``, ``copy``, ``one_hot``, ``slice``, ``element_extract``,
``cast_like``, ``get_property``, ``reductions.*`` (sum, min, max, mean, mean_square, rms, std_dev,
variance), and ``constant`` (what a Python value given as an input becomes).

Each operator is one function of a sample (or of one sample of each input) written once against
the array API that numpy and torch share (``xp``); the CPU form calls it with numpy on the
workers, the GPU form with torch on the GPU stage. Layouts follow DALI's operators: kept where
the axes stay (copy, slice, cat, reshape to as many dimensions), losing the names of removed axes
(squeeze, reductions), gaining the names given for new ones (expand_dims' new_axis_names, stack's
and one_hot's axis_name), else none.
"""
from __future__ import annotations

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.contract import BatchOperator, OutputSpec, SampleOperator, SourceBatch, SourceOperator, named_axes
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema, given
from penstock.operators.shared.arrays import ArrayDeclaration, register_array_operator, _llround, axis_in_range, slice_sample

LAYOUT_ARG = Arg("layout", "str", "", "Layout of the output ('' keeps none).")
# the element types DALI takes for per-sample arguments (argument inputs) and slice's anchor and shape inputs
INT32, FLOAT32 = (np.dtype(np.int32),), (np.dtype(np.float32),)
ANCHOR_TYPES = (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float32))
INTEGER_TYPES = tuple(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                                            np.uint64))


def _shapes(xp, args, sample):
    shape = xp.asarray(list(sample.shape), dtype=_int_type(xp, args.dtype.numpy))
    return shape if xp is np else shape.to(sample.device)


def _int_type(xp, dtype):
    if xp is np:
        return dtype
    from penstock.types import to_torch_dtype
    return to_torch_dtype(np.dtype(dtype))


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
    target = sample.dtype if args.dtype is None else _int_type(xp, args.dtype.numpy)
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
        torch_dtype = _int_type(xp, dtype)
        result = xp.full((len(indices), classes), _cast_value(args.off_value, dtype).item(), dtype=torch_dtype,
                         device=sample.device)
        inside = ((indices >= 0) & (indices < classes)).nonzero().reshape(-1)
        result[inside, indices[inside]] = xp.as_tensor(_cast_value(args.on_value, dtype).item(), dtype=torch_dtype,
                                                       device=sample.device)
    if scalar:
        return result.reshape(classes)
    result = result.reshape(tuple(sample.shape) + (classes,))
    return xp.moveaxis(result, -1, axis) if xp is np else xp.movedim(result, -1, axis)


def _axes(args, sample) -> tuple:
    if args.axes is None:
        return tuple(range(sample.ndim))
    return tuple(sorted({axis_in_range(axis, sample.ndim, "axis") for axis in args.axes}))


def _reduction(kind: str):
    """sum, min, max, mean, mean_square, rms of a sample over ``axes`` (all by default), in the
    type reduction_type gives."""
    def reduce(xp, args, sample):
        axes, keep = _axes(args, sample), args.keep_dims
        if xp is np:
            out = np.dtype(_reduction_type(kind, args, sample.dtype))
            if kind in ("min", "max"):
                return (np.min if kind == "min" else np.max)(sample, axis=axes, keepdims=keep)
            if kind == "sum":
                wide = np.float64 if sample.dtype.kind == "f" or out.kind == "f" else \
                    np.uint64 if sample.dtype.kind == "u" and out.kind == "u" else np.int64
                return np.sum(sample, axis=axes, keepdims=keep, dtype=wide).astype(out)
            floats = sample.astype(np.float64)
            squared = floats * floats if kind in ("mean_square", "rms") else floats
            value = np.mean(squared, axis=axes, keepdims=keep)
            value = np.sqrt(value) if kind == "rms" else value
            return numeric.saturate(np.trunc(value) if out.kind in "iu" else value, out)  # DALI truncates here
        import torch
        out = types.to_torch_dtype(_reduction_type(kind, args, types.to_numpy_dtype(sample.dtype), gpu=True))
        if kind in ("min", "max"):
            return torch.amin(sample, dim=axes, keepdim=keep) if kind == "min" else torch.amax(sample, dim=axes, keepdim=keep)
        if kind == "sum":
            wide = torch.float64 if sample.is_floating_point() or out.is_floating_point else torch.int64
            return torch.sum(sample, dim=axes, keepdim=keep, dtype=wide).to(out)
        values = sample.double()
        squared = values * values if kind in ("mean_square", "rms") else values
        value = torch.mean(squared, dim=axes, keepdim=keep)
        value = torch.sqrt(value) if kind == "rms" else value
        return numeric.saturate_tensor(torch.trunc(value) if not out.is_floating_point else value, out)
    return reduce


def _reduction_type(kind: str, args: dict, dtype, gpu: bool = False) -> np.dtype:
    """DALI's output types: ``dtype`` where given (among those DALI's reductions.<kind> gives data of
    this type); min and max keep the input's; sums of integers are 64-bit of the same signedness
    (signed on the GPU, where torch has no uint64); means, rms and deviations float32."""
    dtype = np.dtype(dtype)
    if dtype not in REDUCED_TYPES:
        raise TypeError(f"reductions.{kind}: data of type {dtype.name} cannot be reduced; it takes "
                        f"{', '.join(t.name for t in REDUCED_TYPES)}")
    if args.get("dtype") is not None:
        target = np.dtype(args.dtype.numpy)
        if target not in _reduction_types(kind, dtype):
            raise TypeError(f"reductions.{kind}: dtype {target.name} is not an output type for {dtype.name} data; "
                            f"it takes {', '.join(t.name for t in _reduction_types(kind, dtype))}")
        return target
    if kind in ("min", "max") or kind == "sum" and dtype.kind == "f":
        return dtype
    if kind == "sum":
        return np.dtype(np.uint64 if dtype.kind in "ub" and not gpu else np.int64)
    return np.dtype(np.float32)


REDUCED_TYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64,
                                            np.int64, np.float32))


def _reduction_types(kind: str, dtype: np.dtype) -> tuple:
    """The output types DALI's reductions give data of ``dtype``: float32 data float32 only; integers
    their own type (not mean_square's), the 64-bit type of their signedness (sum and mean_square;
    64-bit data sums to its own type only), float32."""
    float32 = np.dtype(np.float32)
    if dtype == float32:
        return (float32,)
    wide = np.dtype(np.uint64 if dtype.kind == "u" else np.int64)
    if kind == "sum":
        return (dtype,) if dtype.itemsize == 8 else (dtype, wide, float32)
    return (wide, float32) if kind == "mean_square" else (dtype, float32)


def _deviation(kind: str):
    """std_dev and variance of a sample around ``mean`` (the second input, as in DALI), with ddof."""
    def deviation(xp, args, sample, mean):
        axes, keep = _axes(args, sample), args.keep_dims
        _reduction_type(kind, args, sample.dtype if xp is np else types.to_numpy_dtype(sample.dtype))
        count = int(np.prod([sample.shape[axis] for axis in axes])) - args.ddof
        if count <= 0:
            raise ValueError(f"ddof={args.ddof} leaves no degrees of freedom")
        if xp is np:
            centred = sample.astype(np.float64) - np.asarray(mean, np.float64)
            value = np.sum(centred * centred, axis=axes, keepdims=keep) / count
            return (np.sqrt(value) if kind == "std_dev" else value).astype(np.float32)
        centred = sample.double() - mean.double()
        value = (centred * centred).sum(dim=axes, keepdim=keep) / count
        return (value.sqrt() if kind == "std_dev" else value).float()
    return deviation


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


def _cast_like(xp, args, sample, like):
    if xp is np:
        return numeric.saturate(np.asarray(sample), like.dtype)
    return numeric.saturate_tensor(sample, like.dtype)


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


def _declare_reduction(impl, inputs):
    spec, args = inputs[0], impl.args
    kind = impl.name.split(".")[1]
    if args.axis_names is not None:
        impl.args = args = args.replace(axes=named_axes(impl.name, spec.layout, args.axis_names))
    if spec.dtype is not None:
        dtype = _reduction_type(kind, args, spec.dtype, gpu=isinstance(impl, BatchOperator))
    elif args.get("dtype") is not None:
        dtype = np.dtype(args.dtype.numpy)
    else:  # known before the data only where it does not depend on the input's type
        dtype = np.dtype(np.float32) if kind not in ("sum", "min", "max") else None
    layout = spec.layout
    if layout and not args.keep_dims:
        reduced = set(range(len(layout))) if args.axes is None else {axis % len(layout) for axis in args.axes}
        layout = "".join(name for axis, name in enumerate(layout) if axis not in reduced)
    return OutputSpec(dtype, None, layout)


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


def _declare_cast_like(impl, inputs):
    return inputs[0].but(dtype=inputs[1].dtype)


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


def _one_axis_form(axes: str, names: str):
    """A check: ``axes`` and ``names`` exclude each other (and one is needed where ``axes`` has no
    default)."""
    def check(static: dict, per_sample: frozenset) -> None:
        if static.get(axes) is not None and static.get(names) is not None:
            raise ArgError(f"arguments '{axes}' and '{names}' exclude each other; give one")
    return check


def _squeeze_axes_given(static: dict, per_sample: frozenset) -> None:
    if static.axes is None and static.axis_names is None:
        raise ArgError("give the axes to remove: 'axes' or 'axis_names'")


def _one_hot_type(static: dict, per_sample: frozenset) -> None:
    if static.dtype.numpy in (np.float16, np.bool_):
        raise ArgError(f"dtype {np.dtype(static.dtype.numpy).name} is not an output type of one_hot (integers, "
                       "float32 or float64)")
    if static.axis_name is not None and len(static.axis_name) != 1:
        raise ArgError(f"axis_name must be one character, got '{static.axis_name}'")


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


def _axis_names_arg(doc: str) -> Arg:
    return Arg("axis_names", "str", None, doc)


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
                                   _axis_names_arg("The axes to remove by layout name (instead of axes).")),
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


OPERATORS["slice"] = (slice_sample, (1, 1), (
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
    _axis_names_arg("The sliced axes by layout name, e.g. 'WH' (before axes)."),
    Arg("out_of_bounds_policy", "str", "error", "A window outside the sample: 'error', 'pad' (with fill_values) "
        "or 'trim_to_shape'.", choices=("error", "pad", "trim_to_shape")),
    Arg("fill_values", "floats", (0.0,), "Padding: one value, or one per channel (the last axis)."),
    Arg("dtype", "dtype", None, "Element type of the output (default: the input's; else float32, float16 or "
        "uint8), converted as cast converts.")),
    "A window of each sample (DALI's slice: anchor and shape as inputs or arguments, normalized or in "
    "elements, on chosen axes, with an out-of-bounds policy).")
OPERATORS["element_extract"] = (_element_extract, (1, 1), (
    Arg("element_map", "ints", REQUIRED, "Which elements of each sequence (its first axis) to output, one "
        "output each.", min=0),), "Elements of sequences (the first axis), one output per index of element_map.")
OPERATORS["cast_like"] = (_cast_like, (2, 2), (), "The first input cast to the element type of the second "
                          "(rounding to nearest even and saturating, as cast).")

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
    return dtype.numpy if xp is np else _int_type(xp, dtype.numpy)


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

REDUCTION_ARGS = (Arg("axes", "ints", None, "Axes to reduce, in [-ndim, ndim - 1] (default: all)."),
                  _axis_names_arg("Axes to reduce by layout name (instead of axes)."),
                  Arg("keep_dims", "bool", False, "Keep the reduced axes, with extent 1."))
REDUCTION_TYPE = Arg("dtype", "dtype", None, "Output type, in which the result is accumulated (default: min and "
                     "max keep the input's; sum gives int64 or uint64 for integers; the others float32).")
for _kind in ("sum", "min", "max", "mean", "mean_square", "rms"):
    OPERATORS[f"reductions.{_kind}"] = (_reduction(_kind), (1, 1),
                                        (*REDUCTION_ARGS, *((REDUCTION_TYPE,) if _kind not in ("min", "max") else ())),
                                        f"The {_kind.replace('_', ' ')} of each sample over ``axes``.")
for _kind in ("std_dev", "variance"):
    OPERATORS[f"reductions.{_kind}"] = (_deviation(_kind), (2, 2), (*REDUCTION_ARGS, Arg(
        "ddof", "int", 0, "Delta degrees of freedom: the sum is divided by the count minus ddof.", min=0)),
        f"The {_kind.replace('_', ' ')} (float32) of each sample around the mean given as the second input.")

DECLARATIONS = {"slice": _declare_slice, "element_extract": _declare_element_extract, "cast_like": _declare_cast_like,
                "full": _declare_full, "full_like": lambda impl, inputs: inputs[0], "zeros_like": _declare_like,
                "ones_like": _declare_like, "copy": lambda impl, inputs: inputs[0], "reshape": _declare_reshape,
                "reinterpret": _declare_reshape, "squeeze": _declare_squeeze, "expand_dims": _declare_expand_dims,
                "cat": _declare_cat, "stack": _declare_stack, "one_hot": _declare_one_hot,
                **{name: _declare_reduction for name in OPERATORS if name.startswith("reductions.")}}
_RESHAPE_EXTRAS = {"argument_inputs": ("shape",), "input_names": ("data",), "checks": (_one_shape_form,)}
SCHEMA_EXTRAS = {"slice": {"argument_inputs": ("anchor", "window_shape"), "checks": (_slice_forms,)},
                 "reshape": _RESHAPE_EXTRAS, "reinterpret": _RESHAPE_EXTRAS,
                 "squeeze": {"checks": (_squeeze_axes_given, _one_axis_form("axes", "axis_names"))},
                 "cat": {"checks": (_one_axis_form("axis", "axis_name"),)},
                 "one_hot": {"checks": (_one_hot_type,)},
                 "reductions.rms": {"class_name": "reductions.RMS"},  # DALI's spelling
                 "element_extract": {"num_outputs": lambda static: len(static.element_map)},
                 "full": {"input_names": ("fill_value",)}, "full_like": {"input_names": ("data_like", "fill_value")},
                 "zeros_like": {"input_names": ("data_like",)}, "ones_like": {"input_names": ("data_like",)}}
for _name in OPERATORS:
    if _name.startswith("reductions."):
        SCHEMA_EXTRAS.setdefault(_name, {}).setdefault("checks", (_one_axis_form("axes", "axis_names"),))


class TensorDeclaration(ArrayDeclaration):
    function = None

    def declare_outputs(self, inputs):
        if self.name in DECLARATIONS:
            return DECLARATIONS[self.name](self, inputs)
        return super().declare_outputs(inputs)


for _name, (_function, _inputs, _args, _doc) in OPERATORS.items():
    register_array_operator(_name, _function, _inputs, _args, _doc, declaration=TensorDeclaration,
                            **SCHEMA_EXTRAS.get(_name, {}))


# ---- get_property: what is known of each sample besides its data -----------------------------
def _property_bytes(key: str, source_info: str, layout: str) -> np.ndarray:
    text = source_info if key == "source_info" else layout
    return np.frombuffer(text.encode(), np.uint8).copy()


registry.register_schema(OpSchema(
    name="get_property", class_name="GetProperty", num_inputs=(1, 1),
    doc="A property of each sample as a 1-D uint8 array of its text (as in DALI): 'source_info' (where the "
        "sample came from: its file name) or 'layout'.",
    args=(Arg("key", "str", REQUIRED, "The property.", choices=("source_info", "layout")),)))


def _has_source_info(data) -> bool:
    """Whether the samples of ``data`` (an output in the pipeline's graph) carry DALI's source_info: a
    reader's first output does (the file), and an operator's outputs do where one of its data inputs
    does (argument inputs do not count); external_source's and generators' samples have none."""
    node = data.op_node
    if "readers" in node.schema.name.split("."):
        return data.index == 0
    return any(_has_source_info(input_) for input_ in node.inputs)


class PropertyDeclaration:
    def __init__(self, args, context):
        super().__init__(args, context)
        node = context.graph_node
        # outside a pipeline's graph (eager calls) every sample keeps what its batch was given
        self._has_source_info = node is None or not node.inputs or _has_source_info(node.inputs[0])

    def declare_outputs(self, inputs):
        self._layout = inputs[0].layout
        return OutputSpec(np.dtype(np.uint8), 1, "")

    def _source_info(self, info: str) -> str:
        return info if self._has_source_info else ""


@registry.register("get_property", "cpu")
class GetProperty(PropertyDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        return _property_bytes(args.key, self._source_info(sample.source_info), self._layout)


@registry.register("get_property", "gpu", requires=devices.gpu_problem)
class GetPropertyGpu(PropertyDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        import torch
        infos = batch.source_infos or [""] * len(args)
        return [torch.as_tensor(_property_bytes(a.key, self._source_info(info), self._layout)).to(batch.device)
                for a, info in zip(args, infos)]


# ---- constant: the same array in every sample ---------------------------------------------------
registry.register_schema(OpSchema(
    name="constant", class_name="Constant", num_inputs=(0, 0), input_names=(), is_source=True,
    doc="The same array in every sample: ``value`` (any array-like), else ``fdata`` or ``idata`` (as in DALI), "
        "shaped by ``shape`` (default: 1-D, or the value's own shape).",
    args=(Arg("value", "any", None, "The data (a number, a list, a numpy array)."),
          Arg("fdata", "floats", None, "Floating-point data."), Arg("idata", "ints", None, "Integer data."),
          Arg("shape", "ints", None, "The shape of each sample.", min=0),
          Arg("dtype", "dtype", None, "Element type (default: float32 for fdata, int32 for idata, else the value's)."),
          LAYOUT_ARG)))


CONSTANT_TYPES = tuple(np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                             np.int64, np.uint64, np.float32, np.float16))


def _check_dali_constant(args) -> None:
    """fdata or idata, not both; a layout of one name per axis; DALI's element types."""
    if args.fdata is not None and args.idata is not None:
        raise ValueError("constant: arguments 'fdata' and 'idata' exclude each other; give one")
    values = args.fdata if args.fdata is not None else args.idata
    ndim = len(args.shape) if args.shape is not None else 1
    if args.layout and len(args.layout) != ndim:
        raise ValueError(f"constant: layout '{args.layout}' has {len(args.layout)} axes for "
                         f"{ndim}-dimensional outputs ({len(values)} values)")
    if args.dtype is not None and np.dtype(args.dtype.numpy) not in CONSTANT_TYPES:
        raise TypeError(f"constant: dtype {np.dtype(args.dtype.numpy).name} is not an output type; it takes "
                        f"{', '.join(t.name for t in CONSTANT_TYPES)}")


@registry.register("constant", "cpu")
class Constant(SourceOperator):
    fits_any_batch = True

    def __init__(self, args, context):
        super().__init__(args, context)
        data = args.value if args.value is not None else args.fdata if args.fdata is not None \
            else args.idata
        if data is None:
            raise ValueError("constant: give value, fdata or idata")
        if args.value is None:  # DALI's arguments, with DALI's rules
            _check_dali_constant(args)
        default = np.float32 if args.fdata is not None else np.int32 if args.idata is not None else None
        dtype = args.dtype.numpy if args.dtype is not None else default
        # converted as DALI converts: rounded to nearest and saturated (idata=-1 as uint8 is 0)
        array = np.array(data) if dtype is None else numeric.saturate(np.array(data), np.dtype(dtype))
        if args.shape is not None and array.size == 1:  # one value fills the shape
            array = np.full(tuple(args.shape), array.reshape(()), array.dtype)
        if args.shape is not None:
            if int(np.prod(args.shape)) != array.size:
                raise ValueError(f"constant: {array.size} values do not fill shape {tuple(args.shape)}")
            array = array.reshape(tuple(args.shape))
        array.setflags(write=False)  # one array shared by every sample
        self.array = array

    def declare_outputs(self, inputs):
        return OutputSpec(self.array.dtype, self.array.ndim, self.args.layout, self.array.shape)

    def next_batch(self, iteration):
        return SourceBatch([self.array] * self.context.batch_size)

    def load(self, item, sample):
        return (item,)


# ---- zeros, ones: a fixed array of a value in every sample ---------------------------------------------
for _name, _value in (("zeros", 0), ("ones", 1)):
    registry.register_schema(OpSchema(
        name=_name, class_name=_name.capitalize(), num_inputs=(0, 0), input_names=(), is_source=True,
        doc=f"An array of ``shape`` and ``dtype`` holding {_name} in every sample (as in DALI: int32 by default).",
        args=(Arg("shape", "ints", (), "The shape of each sample (default: a scalar).", min=0),
              Arg("dtype", "dtype", types.INT32, "Element type."), LAYOUT_ARG)))


class FilledSource(Constant):
    """zeros and ones: Constant's batches of one read-only array, made from shape, dtype and value."""

    value = 0

    def __init__(self, args, context):
        SourceOperator.__init__(self, args, context)
        array = np.full(tuple(args.shape), self.value, dtype=args.dtype.numpy)
        array.setflags(write=False)
        self.array = array


registry.register("zeros", "cpu")(type("Zeros", (FilledSource,), {"value": 0}))
registry.register("ones", "cpu")(type("Ones", (FilledSource,), {"value": 1}))
