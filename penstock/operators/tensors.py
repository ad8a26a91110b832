"""Tensor manipulation, per sample, on both devices: ``shapes``, ``reshape``, ``squeeze``,
``expand_dims``, ``cat``, ``stack``, ``copy``, ``one_hot`` and ``reductions.*`` (sum, min, max,
mean, mean_square, rms, std_dev, variance).

Each operator is one function of a sample (or of one sample of each input) written once against
the array API that numpy and torch share (``xp``); the CPU form calls it with numpy on the
workers, the GPU form with torch on the GPU stage. Layouts follow DALI: ``layout`` names the
output's axes where the operator takes it.
"""
from __future__ import annotations

import numpy as np

from penstock import devices, registry, types
from penstock.contract import BatchOperator, OutputSpec, SampleOperator
from penstock.schema import Arg, ArgError, OpSchema

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
    shape = list(args["shape"] or ())
    if args["rel_shape"] is not None:
        if len(args["rel_shape"]) != sample.ndim:
            raise ValueError(f"rel_shape has {len(args['rel_shape'])} values for {sample.ndim}-dimensional samples")
        shape = [int(round(size * factor)) for size, factor in zip(sample.shape, args["rel_shape"])]
    if int(np.prod(shape)) != int(np.prod(sample.shape)) and -1 not in shape:
        raise ValueError(f"cannot reshape a sample of shape {tuple(sample.shape)} ({int(np.prod(sample.shape))} "
                         f"elements) to {tuple(shape)}")
    return sample.reshape(tuple(shape))


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


def _axis_in_range(static: dict, per_sample: frozenset) -> None:
    if static.get("axis", 0) < 0:
        raise ArgError("argument 'axis' must be >= 0")


# name: (function of one sample of each input, (min, max) inputs, arguments, doc)
OPERATORS = {
    "shapes": (_shapes, (1, 1), (Arg("dtype", "dtype", types.INT64, "Element type of the shapes."),),
               "Each sample's shape, as a 1-D array."),
    "reshape": (_reshape, (1, 1), (Arg("shape", "ints", None, "The new shape (one -1 allowed)."),
                                   Arg("rel_shape", "floats", None, "The new shape as factors of the old one."),
                                   LAYOUT_ARG), "Each sample with a new shape and the same elements."),
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
        # reductions' types depend on the data's (module docstring): unknown until it arrives
        dtype = self.args["dtype"].numpy if "dtype" in self.args else \
            None if self.name.startswith("reductions.") else inputs[0].dtype
        layout = self.args.get("layout", "")
        return OutputSpec(np.dtype(dtype) if dtype is not None else None, None, layout)


def _register(name: str, function, num_inputs, args, doc) -> None:
    registry.register_schema(OpSchema(
        name=name, class_name=".".join([*name.split(".")[:-1],  # ops.reductions.StdDev, as in DALI
                                        "".join(word.capitalize() for word in name.split(".")[-1].split("_"))]),
        doc=doc, args=args,
        num_inputs=num_inputs, input_names=tuple(f"input{i}" for i in range(num_inputs[1])),
        checks=(_axis_in_range,)))

    class Cpu(TensorDeclaration, SampleOperator):
        def run(self, inputs, args, sample, out=None):
            result = np.asarray(function(np, args, *(np.asarray(value) for value in inputs)))
            return result if result.flags.c_contiguous else result.copy()  # 0-d results stay 0-d

    class Gpu(TensorDeclaration, BatchOperator):
        def run_batch(self, inputs, args, batch):
            import torch

            from penstock.operators.gpu_plan import tensors_of
            columns = [tensors_of(value) for value in inputs]
            return [function(torch, sample_args, *samples).contiguous()
                    for sample_args, samples in zip(args, zip(*columns))]

    Cpu.__name__ = Cpu.__qualname__ = name.title().replace("_", "").replace(".", "")
    Gpu.__name__ = Gpu.__qualname__ = Cpu.__name__ + "Gpu"
    registry.register(name, "cpu")(Cpu)
    registry.register(name, "gpu", requires=devices.gpu_problem)(Gpu)


for _name, (_function, _inputs, _args, _doc) in OPERATORS.items():
    _register(_name, _function, _inputs, _args, _doc)
