"""Array operators' shared parts: slice windows and their arithmetic, and the registration of an
operator written once over numpy and torch (``register_array_operator``)."""
from __future__ import annotations

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.contract import BatchOperator, OutputSpec, SampleOperator
from penstock.schema import OpSchema


def _llround(value: float) -> int:
    """Halves away from zero, as std::llround, with which DALI rounds windows and relative shapes."""
    return int(np.sign(value) * np.floor(abs(value) + 0.5))


def axis_in_range(axis: int, ndim: int, name: str = "axis", high: int | None = None) -> int:
    """``axis`` in [-ndim, high] (high: ndim - 1 unless said), negative ones counted from the back."""
    high = ndim - 1 if high is None else high
    if not -ndim <= axis <= high:
        raise ValueError(f"{name.capitalize()} {axis} out of range. Expected range is [{-ndim}, {high}] for a "
                         f"{ndim}D input")
    return axis + high + 1 if axis < 0 else axis


def _positional(args, name: str, count: int):
    """The anchor or shape input's values (one per sliced axis) and
    whether they are in elements: integers always are, floats unless normalized_<name> (DALI's
    rule)."""
    values = np.asarray(args[name])
    if values.dtype.kind not in "biuf":
        raise ValueError(f"the {name.replace('window_', '')} input holds {values.dtype} values, not numbers")
    values = values.reshape(-1)
    if len(values) != count:
        raise ValueError(f"expected {count} values for the sliced axes in the {name.replace('window_', '')} input, "
                         f"got {len(values)}")
    flag = "normalized_anchor" if name == "anchor" else "normalized_shape"
    return values.tolist(), values.dtype.kind == "f" and args[flag]


def _sliced_axes(args, ndim: int) -> list[int]:
    """The sliced axes in [0, ndim): none given (an empty list) slices every axis, as in DALI."""
    return [axis_in_range(axis, ndim, "axis") for axis in (args.axes if len(args.axes) else range(ndim))]


def _slice_windows(args, shape: tuple) -> list[tuple[int, int]]:
    """(start, end) on each of ``axes``: from the anchor and shape inputs, else from start/end/shape
    or their rel_ forms."""
    axes = _sliced_axes(args, len(shape))
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

    if args.anchor is not None or args.window_shape is not None:
        if args.anchor is None or args.window_shape is None:
            raise ValueError("the anchor and shape inputs go together: give both")
        (anchor, relative_anchor), (size, relative_size) = (_positional(args, name, len(axes))
                                                            for name in ("anchor", "window_shape"))
        if isinstance(anchor[0], float) != isinstance(size[0], float):
            raise ValueError("the anchor and shape inputs must have the same type (both integers, or both floats)")
        windows = []
        for a, s, e in zip(anchor, size, extents):
            # both normalized: one product of the sum, as DALI, so that the window's end rounds alike
            end = (a + s) * e if relative_anchor and relative_size else \
                (a * e if relative_anchor else a) + (s * e if relative_size else s)
            a = a * e if relative_anchor else a
            if end < a:
                raise ValueError(f"the window ends ({end}) before it starts ({a})")
            windows.append((_llround(a), _llround(end)))
        return windows
    start, rel_start = values("start"), values("rel_start")
    end, rel_end, shape_, rel_shape = values("end"), values("rel_end"), values("shape"), values("rel_shape")
    windows = []
    for i, extent in enumerate(extents):  # edges in elements, rounded once at the end
        begin = start[i] if start is not None else rel_start[i] * extent if rel_start is not None else 0
        size = shape_[i] if shape_ is not None else rel_shape[i] * extent if rel_shape is not None else 0
        if size < 0:
            raise ValueError(f"the window's shape {size} on axis {axes[i]} is negative")
        if end is not None:
            finish = end[i]
        elif rel_end is not None:
            finish = rel_end[i] * extent
        elif rel_start is not None and rel_shape is not None:
            finish = (rel_start[i] + rel_shape[i]) * extent  # one product of the sum, as DALI, to round alike
        elif shape_ is not None or rel_shape is not None:
            finish = begin + size
        else:
            finish = extent
        if finish < begin:
            raise ValueError(f"the window ends ({finish}) before it starts ({begin}) on axis {axes[i]}")
        windows.append((_llround(begin), _llround(finish)))
    return windows


def slice_sample(xp, args, sample):
    """A window of one sample, as slice makes it (``args``: slice's arguments, ``axes`` resolved;
    ``dtype`` optional); readers.numpy cuts its regions of interest with it too."""
    shape = tuple(sample.shape)
    out_shape, source, target = list(shape), [slice(None)] * len(shape), [slice(None)] * len(shape)
    padded = False
    axes = _sliced_axes(args, len(shape))
    for axis, (start, end) in zip(axes, _slice_windows(args, shape)):
        extent = shape[axis]
        if end < start:
            raise ValueError(f"the window [{start}, {end}) of axis {axis} ends before it starts")
        if start < 0 or end > extent:
            policy = args.out_of_bounds_policy
            if policy == "error":
                raise ValueError(f"Slice can't be placed out of bounds with current policy. Got: the window "
                                 f"[{start}, {end}) of axis {axis}, outside the sample's extent {extent} (shape "
                                 f"{shape}); out_of_bounds_policy='pad' or 'trim_to_shape' allow it")
            if policy == "trim_to_shape":
                start, end = max(start, 0), min(end, extent)
            else:
                padded = True
        out_shape[axis] = end - start
        inside = (min(max(start, 0), extent), max(min(end, extent), 0))
        source[axis] = slice(*inside) if inside[1] > inside[0] else slice(0, 0)
        target[axis] = slice(inside[0] - start, inside[0] - start + max(inside[1] - inside[0], 0))
    window = _slice_output(xp, args.get("dtype"), sample[tuple(source)])
    if not padded:
        return window
    fill = np.asarray(args.fill_values, np.float64)
    if fill.size > 1 and (not shape or fill.size != shape[-1]):
        raise ValueError(f"{fill.size} fill_values for samples of shape {shape}: give one, or one per channel "
                         "(the last axis)")
    fill = fill if fill.size > 1 else fill.reshape(())
    dtype = np.dtype(window.dtype) if xp is np else np.dtype(types.to_numpy_dtype(window.dtype))
    # a C++ cast of the float, as DALI: integer types truncate, then wrap
    fill = np.trunc(fill).astype(np.int64).astype(dtype) if dtype.kind in "iu" else fill.astype(dtype)
    if xp is np:
        result = np.empty(out_shape, dtype)
        result[...] = fill
    else:
        result = xp.empty(out_shape, dtype=window.dtype, device=window.device)
        result[...] = xp.as_tensor(fill, device=window.device)
    result[tuple(target)] = window
    return result


SLICE_OUTPUT_TYPES = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.uint8))  # besides the input's


def _slice_output(xp, dtype, window):
    """The window in ``dtype`` (a DALIDataType, or None: the input's): floats truncate to integers,
    then saturate, as DALI's slice converts."""
    if dtype is None:
        return window
    target = np.dtype(dtype.numpy)
    source = np.dtype(window.dtype) if xp is np else np.dtype(types.to_numpy_dtype(window.dtype))
    if target == source:
        return window
    if target not in SLICE_OUTPUT_TYPES:
        raise TypeError(f"dtype {target.name} is not an output type of slice for {source.name} data: give the "
                        f"input's type, or one of {', '.join(dtype.name for dtype in SLICE_OUTPUT_TYPES)}")
    if target.kind in "iu" and source.kind == "f":
        window = xp.trunc(window)
    if xp is np:
        return numeric.saturate(window, target)
    return numeric.saturate_tensor(window, types.to_torch_dtype(target))


class ArrayDeclaration:
    """Outputs of the input's type (or ``dtype``) and ``layout``: what an array operator declares
    unless it says otherwise."""
    function = None

    def declare_outputs(self, inputs):
        dtype = self.args.dtype.numpy if self.args.get("dtype") is not None else inputs[0].dtype
        layout = self.args.get("layout", "")
        return OutputSpec(np.dtype(dtype) if dtype is not None else None, None, layout)


def register_array_operator(name: str, function, num_inputs, args, doc, *, declaration=ArrayDeclaration,
                            input_names=None, checks=(), on_devices=("cpu", "gpu"), class_name=None,
                            **extras) -> None:
    """An operator whose every sample is ``function(xp, sample_args, *input_samples)`` with ``xp``
    numpy on the CPU and torch on the GPU (one definition of the arithmetic for both devices);
    ``declaration`` a class with declare_outputs; ``class_name`` (the ops name) defaults to the
    name's last part in CamelCase (ops.reductions.StdDev, as in DALI)."""
    camel = "".join(word.capitalize() for word in name.split(".")[-1].split("_"))
    registry.register_schema(OpSchema(
        name=name, class_name=class_name or ".".join([*name.split(".")[:-1], camel]),
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

            from penstock.operators.shared.gpu_plan import tensors_of
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
