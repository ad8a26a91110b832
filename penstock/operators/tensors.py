"""Tensor manipulation, per sample, on both devices: ``shapes``, ``reshape``, ``reinterpret``, ``squeeze``,
``expand_dims``, ``cat``, ``stack``, ``copy``, ``one_hot``, ``slice``, ``element_extract``,
``cast_like``, ``get_property``, ``reductions.*`` (sum, min, max, mean, mean_square, rms, std_dev,
variance), and ``constant`` (what a Python value given as an input becomes).

Each operator is one function of a sample (or of one sample of each input) written once against
the array API that numpy and torch share (``xp``); the CPU form calls it with numpy on the
workers, the GPU form with torch on the GPU stage. Layouts follow DALI: ``layout`` names the
output's axes where the operator takes it.
"""
from __future__ import annotations

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.contract import BatchOperator, OutputSpec, SampleOperator, SourceBatch, SourceOperator
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema

LAYOUT_ARG = Arg("layout", "str", "", "Layout of the output ('' keeps none).")


def _shapes(xp, args, sample):
    shape = xp.asarray(list(sample.shape), dtype=_int_type(xp, args["dtype"].numpy))
    return shape if xp is np else shape.to(sample.device)


def _int_type(xp, dtype):
    if xp is np:
        return dtype
    from penstock.types import to_torch_dtype
    return to_torch_dtype(np.dtype(dtype))


def _reshape(xp, args, sample):
    """The sample with the shape that shape, rel_shape or src_dims give (the sample's own without
    any), the same elements in the same order."""
    given = [name for name in ("shape", "rel_shape", "src_dims") if args.get(name) is not None]
    if len(given) > 1:
        raise ValueError(f"give one of shape, rel_shape and src_dims, not {' and '.join(given)}")
    shape = list(sample.shape)
    if args["shape"] is not None:
        shape = list(args["shape"])
    elif args["rel_shape"] is not None:
        if len(args["rel_shape"]) != sample.ndim:
            raise ValueError(f"rel_shape has {len(args['rel_shape'])} values for {sample.ndim}-dimensional samples")
        shape = [int(round(size * factor)) for size, factor in zip(sample.shape, args["rel_shape"])]
    elif args.get("src_dims") is not None:
        if any(not -1 <= dim < sample.ndim for dim in args["src_dims"]):
            raise ValueError(f"src_dims {list(args['src_dims'])} name dimensions a {sample.ndim}-dimensional sample "
                             "does not have (-1 adds one of extent 1)")
        shape = [1 if dim == -1 else sample.shape[dim] for dim in args["src_dims"]]
    if int(np.prod(shape)) != int(np.prod(sample.shape)) and -1 not in shape:
        raise ValueError(f"cannot reshape a sample of shape {tuple(sample.shape)} ({int(np.prod(sample.shape))} "
                         f"elements) to {tuple(shape)}")
    return sample.reshape(tuple(shape))


def _reinterpret(xp, args, sample):
    """The sample's bytes as ``dtype`` (a type of another size changes the last axis, as numpy's
    view does), then reshaped as reshape does."""
    if args["dtype"] is not None:
        target = _int_type(xp, args["dtype"].numpy)
        source_size = sample.dtype.itemsize
        target_size = np.dtype(args["dtype"].numpy).itemsize
        if source_size != target_size and (sample.ndim == 0 or sample.shape[-1] * source_size % target_size):
            raise ValueError(f"a sample of shape {tuple(sample.shape)} and type {sample.dtype} does not hold a whole "
                             f"number of {np.dtype(args['dtype'].numpy).name} values in its last axis; give a shape")
        if sample.ndim == 0:
            sample = sample.reshape(1)
        sample = (np.ascontiguousarray(sample) if xp is np else sample.contiguous()).view(target)
    return _reshape(xp, args, sample)


def _squeeze(xp, args, sample):
    axes = args["axes"]
    for axis in sorted(axes or [axis for axis, size in enumerate(sample.shape) if size == 1], reverse=True):
        if sample.shape[axis] != 1:
            raise ValueError(f"axis {axis} of a sample of shape {tuple(sample.shape)} has size "
                             f"{sample.shape[axis]}, not 1")
        sample = sample.reshape(tuple(sample.shape[:axis]) + tuple(sample.shape[axis + 1:]))
    return sample


def _expand_dims(xp, args, sample):
    shape = list(sample.shape)
    for axis in sorted(args["axes"]):
        shape.insert(axis, 1)
    return sample.reshape(tuple(shape))


def _cat(xp, args, *samples):
    return xp.concatenate(samples, axis=args["axis"]) if xp is np else xp.cat(samples, dim=args["axis"])


def _stack(xp, args, *samples):
    return xp.stack(samples, axis=args["axis"]) if xp is np else xp.stack(samples, dim=args["axis"])


def _copy(xp, args, sample):
    return sample.copy() if xp is np else sample.clone()


def _one_hot(xp, args, sample):
    if sample.dtype.kind == "f" if xp is np else sample.dtype.is_floating_point:
        raise TypeError("one_hot takes integer class indices")
    classes = args["num_classes"]
    indices = sample.reshape(-1) if xp is np else sample.reshape(-1).long()
    if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= classes):
        raise ValueError(f"class index outside [0, {classes}) (num_classes={classes})")
    dtype = _int_type(xp, args["dtype"].numpy)
    if xp is np:
        result = np.full((len(indices), classes), args["off_value"], dtype)
        result[np.arange(len(indices)), indices] = args["on_value"]
    else:
        result = xp.full((len(indices), classes), args["off_value"], dtype=dtype, device=sample.device)
        result[xp.arange(len(indices), device=sample.device), indices] = args["on_value"]
    shape = tuple(sample.shape) if tuple(sample.shape) not in ((), (1,)) else ()
    return result.reshape(shape + (classes,))


def _axes(args, sample) -> tuple:
    axes = tuple(range(sample.ndim)) if args["axes"] is None else tuple(args["axes"])
    for axis in axes:
        if not 0 <= axis < sample.ndim:
            raise ValueError(f"axis {axis} of a {sample.ndim}-dimensional sample")
    return axes


def _reduction(kind: str):
    """sum, min, max, mean, mean_square, rms of a sample over ``axes`` (all by default); means are
    float32, sums of integers int64, min and max keep the type."""
    def reduce(xp, args, sample):
        axes, keep = _axes(args, sample), args["keep_dims"]
        if xp is np:
            floats = sample.astype(np.float32) if sample.dtype.kind != "f" else sample
            if kind == "sum":
                return np.sum(sample, axis=axes, keepdims=keep, dtype=None if sample.dtype.kind == "f" else np.int64)
            if kind in ("min", "max"):
                return (np.min if kind == "min" else np.max)(sample, axis=axes, keepdims=keep)
            squared = floats * floats if kind in ("mean_square", "rms") else floats
            value = np.mean(squared, axis=axes, keepdims=keep, dtype=np.float64).astype(np.float32)
            return np.sqrt(value) if kind == "rms" else value
        import torch
        floating = sample.is_floating_point()
        if kind == "sum":
            return torch.sum(sample, dim=axes, keepdim=keep, dtype=None if floating else torch.int64)
        if kind in ("min", "max"):
            return torch.amin(sample, dim=axes, keepdim=keep) if kind == "min" else torch.amax(sample, dim=axes, keepdim=keep)
        values = sample.double()
        squared = values * values if kind in ("mean_square", "rms") else values
        value = torch.mean(squared, dim=axes, keepdim=keep)
        return (torch.sqrt(value) if kind == "rms" else value).float()
    return reduce


def _deviation(kind: str):
    """std_dev and variance of a sample around ``mean`` (the second input, as in DALI), with ddof."""
    def deviation(xp, args, sample, mean):
        axes, keep = _axes(args, sample), args["keep_dims"]
        count = int(np.prod([sample.shape[axis] for axis in axes])) - args["ddof"]
        if count <= 0:
            raise ValueError(f"ddof={args['ddof']} leaves no degrees of freedom")
        if xp is np:
            centred = sample.astype(np.float64) - np.asarray(mean, np.float64)
            value = np.sum(centred * centred, axis=axes, keepdims=keep) / count
            return (np.sqrt(value) if kind == "std_dev" else value).astype(np.float32)
        centred = sample.double() - mean.double()
        value = (centred * centred).sum(dim=axes, keepdim=keep) / count
        return (value.sqrt() if kind == "std_dev" else value).float()
    return deviation


def _rounded(value: float) -> int:
    return int(np.floor(value + 0.5))  # halves up, as a window's edges are rounded in DALI


def _slice_windows(args, shape: tuple) -> list[tuple[int, int]]:
    """(start, end) on each of ``axes``: from the anchor and shape inputs (normalized to the
    extent unless said otherwise), else from start/end/shape or their rel_ forms."""
    axes = args["axes"]
    for axis in axes:
        if not 0 <= axis < len(shape):
            raise ValueError(f"axis {axis} of a {len(shape)}-dimensional sample (set axes or axis_names)")
    extents = [shape[axis] for axis in axes]

    def values(name, count=len(axes)):
        given = args[name]
        if given is None:
            return None
        given = tuple(given) if isinstance(given, (tuple, list)) else (given,)
        if len(given) == 1 and count > 1:
            given = given * count
        if len(given) != count:
            raise ValueError(f"'{name}' has {len(given)} values for {count} sliced axes {tuple(axes)}")
        return given

    anchor, size = values("anchor"), values("window_shape")
    if anchor is not None or size is not None:
        if anchor is None or size is None:
            raise ValueError("the anchor and shape inputs go together: give both")
        anchor = [a * e if args["normalized_anchor"] else a for a, e in zip(anchor, extents)]
        size = [s * e if args["normalized_shape"] else s for s, e in zip(size, extents)]
        return [(_rounded(a), _rounded(a + s)) for a, s in zip(anchor, size)]
    start, rel_start = values("start"), values("rel_start")
    end, rel_end, shape_, rel_shape = values("end"), values("rel_end"), values("shape"), values("rel_shape")
    windows = []
    for i, extent in enumerate(extents):  # edges in elements, rounded once at the end
        begin = start[i] if start is not None else rel_start[i] * extent if rel_start is not None else 0
        if end is not None:
            finish = end[i]
        elif rel_end is not None:
            finish = rel_end[i] * extent
        elif shape_ is not None:
            finish = begin + shape_[i]
        elif rel_shape is not None:
            finish = begin + rel_shape[i] * extent
        else:
            finish = extent
        windows.append((_rounded(begin), _rounded(finish)))
    return windows


def slice_sample(xp, args, sample):
    """A window of one sample, as slice makes it (``args``: slice's arguments, ``axes`` resolved);
    readers.numpy cuts its regions of interest with it too."""
    shape = tuple(sample.shape)
    out_shape, source, target = list(shape), [slice(None)] * len(shape), [slice(None)] * len(shape)
    padded = False
    for axis, (start, end) in zip(args["axes"], _slice_windows(args, shape)):
        extent = shape[axis]
        if end < start:
            raise ValueError(f"the window [{start}, {end}) of axis {axis} ends before it starts")
        if start < 0 or end > extent:
            policy = args["out_of_bounds_policy"]
            if policy == "error":
                raise ValueError(f"the window [{start}, {end}) of axis {axis} is outside the sample's extent {extent} "
                                 f"(shape {shape}); out_of_bounds_policy='pad' or 'trim_to_shape' allow it")
            if policy == "trim_to_shape":
                start, end = max(start, 0), min(end, extent)
            else:
                padded = True
        out_shape[axis] = end - start
        inside = (min(max(start, 0), extent), max(min(end, extent), 0))
        source[axis] = slice(*inside) if inside[1] > inside[0] else slice(0, 0)
        target[axis] = slice(inside[0] - start, inside[0] - start + max(inside[1] - inside[0], 0))
    if not padded:
        return sample[tuple(source)]
    fill = np.asarray(args["fill_values"], np.float64)
    if fill.size > 1 and (not shape or fill.size != shape[-1]):
        raise ValueError(f"{fill.size} fill_values for samples of shape {shape}: give one, or one per channel "
                         "(the last axis)")
    fill = fill if fill.size > 1 else fill.reshape(())
    if xp is np:
        result = np.empty(out_shape, sample.dtype)
        result[...] = numeric.saturate(fill, sample.dtype)
    else:
        from penstock.types import to_numpy_dtype
        result = xp.empty(out_shape, dtype=sample.dtype, device=sample.device)
        result[...] = xp.as_tensor(numeric.saturate(fill, to_numpy_dtype(sample.dtype)), device=sample.device)
    result[tuple(target)] = sample[tuple(source)]
    return result


def _element_extract(xp, args, sample):
    count = sample.shape[0] if sample.ndim else 0
    for index in args["element_map"]:
        if not 0 <= index < count:
            raise ValueError(f"element {index} of a sequence of {count} elements (shape {tuple(sample.shape)})")
    elements = tuple(sample[index] for index in args["element_map"])
    return elements if len(elements) > 1 else elements[0]


def _cast_like(xp, args, sample, like):
    if xp is np:
        return numeric.saturate(np.asarray(sample), like.dtype)
    return numeric.saturate_tensor(sample, like.dtype)


def _declare_slice(impl, inputs):
    """Resolves the sliced axes from the input's layout, once (axis_names first, as in DALI)."""
    layout, names = inputs[0].layout, impl.args["axis_names"]
    if names is not None:
        if not layout or any(name not in layout for name in names):
            raise ValueError(f"{impl.name}: axis_names '{names}' are not all in the input's layout "
                             f"'{layout or 'unknown'}'; give axes instead")
        axes = tuple(layout.index(name) for name in names)
    elif impl.args["axes"] is not None:
        axes = tuple(impl.args["axes"])
    elif "W" in layout and "H" in layout:
        axes = (layout.index("W"), layout.index("H"))  # DALI's default axis_names, "WH"
    else:
        axes = (1, 0)
    impl.args = {**impl.args, "axes": axes}
    return inputs[0].but(shape=None)


def _declare_element_extract(impl, inputs):
    spec = inputs[0]
    return spec.but(shape=spec.shape[1:] if spec.shape else None, layout=spec.layout[1:],
                    ndim=spec.ndim - 1 if spec.ndim else None, channels=spec.channels)


def _declare_cast_like(impl, inputs):
    return inputs[0].but(dtype=inputs[1].dtype)


def _axis_in_range(static: dict, per_sample: frozenset) -> None:
    if static.get("axis", 0) < 0:
        raise ArgError("argument 'axis' must be >= 0")


RESHAPE_ARGS = (Arg("shape", "ints", None, "The new shape (one -1 allowed)."),
                Arg("rel_shape", "floats", None, "The new shape as factors of the old one."),
                Arg("src_dims", "ints", None, "The new shape as the input's dimensions in this order (-1 adds one of "
                    "extent 1; dimensions left out must have extent 1)."), LAYOUT_ARG)

# name: (function of one sample of each input, (min, max) inputs, arguments, doc)
OPERATORS = {
    "shapes": (_shapes, (1, 1), (Arg("dtype", "dtype", types.INT64, "Element type of the shapes."),),
               "Each sample's shape, as a 1-D array."),
    "reshape": (_reshape, (1, 1), RESHAPE_ARGS, "Each sample with a new shape and the same elements."),
    "reinterpret": (_reinterpret, (1, 1), (Arg("dtype", "dtype", None, "The type the bytes are read as (default: "
                                               "the input's)."), *RESHAPE_ARGS),
                    "Each sample's bytes read as another type (``dtype``: a type of another size changes the last "
                    "axis's extent, as numpy's view does) and/or with another shape, as reshape gives."),
    "squeeze": (_squeeze, (1, 1), (Arg("axes", "ints", None, "Axes of size 1 to remove (default: all of them).",
                                       min=0),), "Each sample without axes of size 1."),
    "expand_dims": (_expand_dims, (1, 1), (Arg("axes", "ints", (0,), "Where new axes of size 1 go (in the "
                                                                      "output).", min=0), LAYOUT_ARG),
                    "Each sample with new axes of size 1."),
    "cat": (_cat, (1, 16), (Arg("axis", "int", 0, "The axis to join along.", min=0), LAYOUT_ARG),
            "The samples of the inputs joined along an existing axis."),
    "stack": (_stack, (1, 16), (Arg("axis", "int", 0, "Where the new axis goes.", min=0), LAYOUT_ARG),
              "The samples of the inputs stacked along a new axis."),
    "copy": (_copy, (1, 1), (), "A copy of each sample."),
    "one_hot": (_one_hot, (1, 1), (Arg("num_classes", "int", 1, "How many classes.", min=1),
                                   Arg("on_value", "float", 1.0, "The value of the sample's class."),
                                   Arg("off_value", "float", 0.0, "The value of the other classes."),
                                   Arg("dtype", "dtype", types.FLOAT, "Element type of the output.")),
                "Class indices as one-hot vectors (a scalar sample gives a vector of num_classes)."),
}


OPERATORS["slice"] = (slice_sample, (1, 1), (
    Arg("anchor", "floats", None, "Where the window starts on each sliced axis (the second input in DALI's "
        "fn.slice(data, anchor, shape)); normalized to the extent unless normalized_anchor=False.", per_sample=True),
    Arg("window_shape", "floats", None, "The window's size on each sliced axis (the third input).", per_sample=True),
    Arg("normalized_anchor", "bool", True, "Whether the anchor input is a fraction of the extent."),
    Arg("normalized_shape", "bool", True, "Whether the shape input is a fraction of the extent."),
    Arg("start", "ints", None, "Where the window starts, in elements.", per_sample=True),
    Arg("end", "ints", None, "Where the window ends (exclusive), in elements.", per_sample=True),
    Arg("shape", "ints", None, "The window's size, in elements.", per_sample=True),
    Arg("rel_start", "floats", None, "Where the window starts, as a fraction of the extent.", per_sample=True),
    Arg("rel_end", "floats", None, "Where the window ends, as a fraction of the extent.", per_sample=True),
    Arg("rel_shape", "floats", None, "The window's size, as a fraction of the extent.", per_sample=True),
    Arg("axes", "ints", None, "The sliced axes, in the order of the window's values (default: W and H of the "
        "layout, else (1, 0)).", min=0),
    Arg("axis_names", "str", None, "The sliced axes by layout name, e.g. 'WH' (before axes)."),
    Arg("out_of_bounds_policy", "str", "error", "A window outside the sample: 'error', 'pad' (with fill_values) "
        "or 'trim_to_shape'.", choices=("error", "pad", "trim_to_shape")),
    Arg("fill_values", "floats", (0.0,), "Padding: one value, or one per channel (the last axis).")),
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
    or an array broadcast to the shape, numpy-style), converted as cast converts; ``near``: a sample
    whose device it goes to."""
    shape = tuple(int(size) for size in shape)
    if xp is np:
        fill = numeric.saturate(np.asarray(value), dtype)
        broadcast = np.broadcast_to
    else:
        fill = value if isinstance(value, xp.Tensor) else xp.as_tensor(value, device=near.device)
        fill, broadcast = numeric.saturate_tensor(fill, dtype), xp.broadcast_to
    try:
        return broadcast(fill, shape).clone() if xp is not np else broadcast(fill, shape).copy()
    except (ValueError, RuntimeError):
        raise ValueError(f"a fill value of shape {tuple(fill.shape)} does not broadcast to the shape {shape}") from None


def _element_type(xp, dtype, default):
    """The element type of ``dtype`` (a DALIDataType) for ``xp``, else ``default``."""
    if dtype is None:
        return default
    return dtype.numpy if xp is np else _int_type(xp, dtype.numpy)


def _full(xp, args, fill):
    return _filled(xp, args["shape"] if args["shape"] is not None else fill.shape, fill, fill.dtype, fill)


def _full_like(xp, args, like, fill):
    return _filled(xp, like.shape, fill, like.dtype, like)


def _constant_like(value):
    def fill(xp, args, like):
        return _filled(xp, like.shape, value, _element_type(xp, args["dtype"], like.dtype), like)
    return fill


def _declare_like(impl, inputs):
    spec = inputs[0]
    dtype = impl.args["dtype"].numpy if impl.args.get("dtype") is not None else spec.dtype
    return OutputSpec(np.dtype(dtype) if dtype is not None else None, spec.ndim, spec.layout, spec.shape)


def _declare_full(impl, inputs):
    if "shape" not in impl.args:  # given per sample: its length is known when it arrives
        return OutputSpec(inputs[0].dtype, None, impl.args["layout"])
    shape = impl.args["shape"]
    return OutputSpec(inputs[0].dtype, len(shape) if shape is not None else inputs[0].ndim, impl.args["layout"])


LIKE_DTYPE = Arg("dtype", "dtype", None, "Element type of the output (default: the input's).")
OPERATORS["full"] = (_full, (1, 1), (Arg("shape", "ints", None, "The shape of each output sample (default: the "
                                         "fill value's).", min=0, per_sample=True), LAYOUT_ARG),
                     "Each sample of the fill value (a number or an array, broadcast numpy-style) spread over "
                     "``shape``, in the fill value's type.")
OPERATORS["full_like"] = (_full_like, (2, 2), (), "An array of the first input's shape, type and layout holding the "
                          "second (the fill value, broadcast numpy-style and converted as cast converts).")
OPERATORS["zeros_like"] = (_constant_like(0), (1, 1), (LIKE_DTYPE,), "Zeros in the input's shape, type (or "
                           "``dtype``) and layout.")
OPERATORS["ones_like"] = (_constant_like(1), (1, 1), (LIKE_DTYPE,), "Ones in the input's shape, type (or "
                          "``dtype``) and layout.")

DECLARATIONS = {"slice": _declare_slice, "element_extract": _declare_element_extract, "cast_like": _declare_cast_like,
                "full": _declare_full, "full_like": lambda impl, inputs: inputs[0], "zeros_like": _declare_like,
                "ones_like": _declare_like}
SCHEMA_EXTRAS = {"slice": {"argument_inputs": ("anchor", "window_shape")},
                 "element_extract": {"num_outputs": lambda static: len(static["element_map"])},
                 "full": {"input_names": ("fill_value",)}, "full_like": {"input_names": ("data_like", "fill_value")},
                 "zeros_like": {"input_names": ("data_like",)}, "ones_like": {"input_names": ("data_like",)}}

REDUCTION_ARGS = (Arg("axes", "ints", None, "Axes to reduce (default: all).", min=0),
                  Arg("keep_dims", "bool", False, "Keep the reduced axes, with size 1."))
for _kind in ("sum", "min", "max", "mean", "mean_square", "rms"):
    OPERATORS[f"reductions.{_kind}"] = (_reduction(_kind), (1, 1), REDUCTION_ARGS,
                                        f"The {_kind.replace('_', ' ')} of each sample over ``axes``.")
for _kind in ("std_dev", "variance"):
    OPERATORS[f"reductions.{_kind}"] = (_deviation(_kind), (2, 2), (*REDUCTION_ARGS, Arg(
        "ddof", "int", 0, "Delta degrees of freedom: the sum is divided by the count minus ddof.", min=0)),
        f"The {_kind.replace('_', ' ')} of each sample around the mean given as the second input.")


class TensorDeclaration:
    function = None

    def declare_outputs(self, inputs):
        if self.name in DECLARATIONS:
            return DECLARATIONS[self.name](self, inputs)
        # reductions' types depend on the data's (module docstring): unknown until it arrives
        dtype = self.args["dtype"].numpy if self.args.get("dtype") is not None else \
            None if self.name.startswith("reductions.") else inputs[0].dtype
        layout = self.args.get("layout", "")
        return OutputSpec(np.dtype(dtype) if dtype is not None else None, None, layout)


def register_array_operator(name: str, function, num_inputs, args, doc, *, declaration=TensorDeclaration,
                            input_names=None, checks=(), on_devices=("cpu", "gpu"), **extras) -> None:
    """An operator whose every sample is ``function(xp, sample_args, *input_samples)`` with ``xp``
    numpy on the CPU and torch on the GPU (one definition of the arithmetic for both devices);
    ``declaration`` a class with declare_outputs."""
    registry.register_schema(OpSchema(
        name=name, class_name=".".join([*name.split(".")[:-1],  # ops.reductions.StdDev, as in DALI
                                        "".join(word.capitalize() for word in name.split(".")[-1].split("_"))]),
        doc=doc, args=args, num_inputs=num_inputs,
        input_names=input_names or tuple(f"input{i}" for i in range(num_inputs[1])), checks=checks, **extras))

    class Cpu(declaration, SampleOperator):
        def run(self, inputs, args, sample, out=None):
            result = function(np, args, *(np.asarray(value) for value in inputs))
            if isinstance(result, tuple):
                return tuple(_contiguous(np.asarray(value)) for value in result)
            return _contiguous(np.asarray(result))

    class Gpu(declaration, BatchOperator):
        def run_batch(self, inputs, args, batch):
            import torch

            from penstock.operators.gpu_plan import tensors_of
            columns = [tensors_of(value) for value in inputs]
            results = [function(torch, sample_args, *samples) for sample_args, samples in zip(args, zip(*columns))]
            if self.schema.outputs_for(self.args) == 1:
                return [result.contiguous() for result in results]
            return tuple([sample[i].contiguous() for sample in results] for i in range(len(results[0]) if results
                                                                                      else self.schema.outputs_for(self.args)))

    Cpu.__name__ = Cpu.__qualname__ = name.title().replace("_", "").replace(".", "")
    Gpu.__name__ = Gpu.__qualname__ = Cpu.__name__ + "Gpu"
    if "cpu" in on_devices:
        registry.register(name, "cpu")(Cpu)
    if "gpu" in on_devices:
        registry.register(name, "gpu", requires=devices.gpu_problem)(Gpu)


def _contiguous(array: np.ndarray) -> np.ndarray:
    return array if array.flags.c_contiguous else array.copy()  # 0-d results stay 0-d


for _name, (_function, _inputs, _args, _doc) in OPERATORS.items():
    register_array_operator(_name, _function, _inputs, _args, _doc, checks=(_axis_in_range,),
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


class PropertyDeclaration:
    def declare_outputs(self, inputs):
        self._layout = inputs[0].layout
        return OutputSpec(np.dtype(np.uint8), 1, "")


@registry.register("get_property", "cpu")
class GetProperty(PropertyDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        return _property_bytes(args["key"], sample.source_info, self._layout)


@registry.register("get_property", "gpu", requires=devices.gpu_problem)
class GetPropertyGpu(PropertyDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        import torch
        infos = batch.source_infos or [""] * len(args)
        return [torch.as_tensor(_property_bytes(a["key"], info, self._layout)).to(batch.device)
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


@registry.register("constant", "cpu")
class Constant(SourceOperator):
    def __init__(self, args, context):
        super().__init__(args, context)
        data = args["value"] if args["value"] is not None else args["fdata"] if args["fdata"] is not None \
            else args["idata"]
        if data is None:
            raise ValueError("constant: give value, fdata or idata")
        default = np.float32 if args["fdata"] is not None else np.int32 if args["idata"] is not None else None
        dtype = args["dtype"].numpy if args["dtype"] is not None else default
        array = np.array(data, dtype=dtype)
        if args["shape"] is not None:
            if int(np.prod(args["shape"])) != array.size:
                raise ValueError(f"constant: {array.size} values do not fill shape {tuple(args['shape'])}")
            array = array.reshape(tuple(args["shape"]))
        array.setflags(write=False)  # one array shared by every sample
        self.array = array

    def declare_outputs(self, inputs):
        return OutputSpec(self.array.dtype, self.array.ndim, self.args["layout"], self.array.shape)

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
        array = np.full(tuple(args["shape"]), self.value, dtype=args["dtype"].numpy)
        array.setflags(write=False)
        self.array = array


registry.register("zeros", "cpu")(type("Zeros", (FilledSource,), {"value": 0}))
registry.register("ones", "cpu")(type("Ones", (FilledSource,), {"value": 1}))
