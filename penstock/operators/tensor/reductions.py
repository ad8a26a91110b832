"""``reductions.*`` per sample, on both devices: sum, min, max, mean, mean_square, rms over chosen
axes, and std_dev and variance around a given mean; the layout loses the names of the reduced axes
(unless keep_dims)."""
from __future__ import annotations

import numpy as np

from penstock import numeric, types
from penstock.contract import BatchOperator, OutputSpec, named_axes
from penstock.operators.shared.arrays import axis_in_range
from penstock.operators.tensor.table import axis_names_arg, one_axis_form, register_tensor_operators
from penstock.schema import Arg

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


REDUCTION_ARGS = (Arg("axes", "ints", None, "Axes to reduce, in [-ndim, ndim - 1] (default: all)."),
                  axis_names_arg("Axes to reduce by layout name (instead of axes)."),
                  Arg("keep_dims", "bool", False, "Keep the reduced axes, with extent 1."))
REDUCTION_TYPE = Arg("dtype", "dtype", None, "Output type, in which the result is accumulated (default: min and "
                     "max keep the input's; sum gives int64 or uint64 for integers; the others float32).")
OPERATORS = {}
for _kind in ("sum", "min", "max", "mean", "mean_square", "rms"):
    OPERATORS[f"reductions.{_kind}"] = (_reduction(_kind), (1, 1),
                                        (*REDUCTION_ARGS, *((REDUCTION_TYPE,) if _kind not in ("min", "max") else ())),
                                        f"The {_kind.replace('_', ' ')} of each sample over ``axes``.")
for _kind in ("std_dev", "variance"):
    OPERATORS[f"reductions.{_kind}"] = (_deviation(_kind), (2, 2), (*REDUCTION_ARGS, Arg(
        "ddof", "int", 0, "Delta degrees of freedom: the sum is divided by the count minus ddof.", min=0)),
        f"The {_kind.replace('_', ' ')} (float32) of each sample around the mean given as the second input.")
SCHEMA_EXTRAS = {name: {"checks": (one_axis_form("axes", "axis_names"),)} for name in OPERATORS}
SCHEMA_EXTRAS["reductions.rms"]["class_name"] = "reductions.RMS"  # DALI's spelling
register_tensor_operators(OPERATORS, {name: _declare_reduction for name in OPERATORS}, SCHEMA_EXTRAS)
