"""Operators over a whole batch, on both devices: ``pad`` (to the batch's largest extent, or a
given shape, aligned), ``permute_batch`` (samples taken from other positions of the batch) and the
source ``batch_permutation`` (a random order of the batch, for MixUp-style pairing).

Each is one function of the batch's list of samples written against the array API numpy and torch
share; on the CPU it is a WholeBatchOperator (it runs once the batch's per-sample work is done), on
the GPU a BatchOperator.
"""
from __future__ import annotations

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.contract import BatchOperator, OutputSpec, SourceBatch, SourceOperator, WholeBatchOperator
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema


def _pad(xp, args, samples: list) -> list:
    if not samples:
        return []
    ndim = samples[0].ndim
    if any(sample.ndim != ndim for sample in samples):
        raise ValueError(f"samples of {sorted({s.ndim for s in samples})} dimensions in one batch")
    axes = list(range(ndim)) if args["axes"] is None else list(args["axes"])
    for axis in axes:
        if not 0 <= axis < ndim:
            raise ValueError(f"axis {axis} of {ndim}-dimensional samples")
    wanted = list(args["shape"] or [-1] * len(axes))
    if len(wanted) != len(axes):
        raise ValueError(f"'shape' has {len(wanted)} values for {len(axes)} padded axes {tuple(axes)}")
    align = list(args["align"] or [1] * len(axes))
    align = align * len(axes) if len(align) == 1 else align
    if len(align) != len(axes):
        raise ValueError(f"'align' has {len(align)} values for {len(axes)} padded axes {tuple(axes)}")
    largest = [max(sample.shape[axis] for sample in samples) for axis in axes]
    target = {}
    for axis, size, most, step in zip(axes, wanted, largest, align):
        size = most if size < 0 else size
        if size < most:
            raise ValueError(f"a sample has {most} elements on axis {axis}, more than shape's {size}")
        target[axis] = -(-size // step) * step
    results = []
    for sample in samples:
        shape = tuple(target.get(axis, sample.shape[axis]) for axis in range(ndim))
        if shape == tuple(sample.shape):
            results.append(sample)
            continue
        if xp is np:
            out = np.full(shape, numeric.saturate(np.asarray(args["fill_value"]), sample.dtype), dtype=sample.dtype)
        else:
            fill = numeric.saturate(np.asarray(args["fill_value"]), types.to_numpy_dtype(sample.dtype))
            out = xp.full(shape, fill.item(), dtype=sample.dtype, device=sample.device)
        out[tuple(slice(0, size) for size in sample.shape)] = sample
        results.append(out)
    return results


def _permute(xp, args, samples: list) -> list:
    first = args[0]["indices"] if args else ()
    if len(first) == len(samples):  # one list for the batch
        indices = list(first)
    elif all(len(a["indices"]) == 1 for a in args):  # one index per sample
        indices = [a["indices"][0] for a in args]
    else:
        raise ValueError(f"indices: {len(first)} values for a batch of {len(samples)}; give one per sample")
    for position, index in enumerate(indices):
        if not isinstance(index, (int, np.integer)) or not 0 <= index < len(samples):
            raise ValueError(f"indices[{position}] = {index!r} is not a position in a batch of {len(samples)}")
    return [samples[int(index)] for index in indices]


def _declare_pad(impl, inputs):
    layout, names = inputs[0].layout, impl.args["axis_names"]
    if names is not None:
        if not layout or any(name not in layout for name in names):
            raise ValueError(f"pad: axis_names '{names}' are not all in the input's layout '{layout or 'unknown'}'")
        impl.args = {**impl.args, "axes": tuple(layout.index(name) for name in names)}
    return inputs[0].but(shape=None)


def _declare_permute(impl, inputs):
    return inputs[0]


def _check_pad(static: dict, per_sample: frozenset) -> None:
    if any(step < 1 for step in static["align"] or ()):
        raise ArgError("argument 'align' must be positive")


OPERATORS = {
    "pad": (_pad, _declare_pad, (
        Arg("axes", "ints", None, "The padded axes (default: all).", min=0),
        Arg("axis_names", "str", None, "The padded axes by layout name (before axes)."),
        Arg("fill_value", "float", 0.0, "The value of the padding (saturated to the data's type)."),
        Arg("shape", "ints", None, "The extent of each padded axis (-1 or not given: the batch's largest)."),
        Arg("align", "ints", None, "Round each padded extent up to a multiple of this (one value, or one per "
            "axis).")), "Each sample padded at the end of its axes to the batch's largest extent (or to "
        "``shape``), rounded up to ``align``; samples keep their place in the padded array.", (_check_pad,)),
    "permute_batch": (_permute, _declare_permute, (
        Arg("indices", "ints", REQUIRED, "Per sample, the position in the batch of the sample it takes: a list "
            "for the whole batch, or a per-sample input such as batch_permutation's.", per_sample=True, min=0),),
        "Sample i of the output is sample indices[i] of the input.", ()),
}


class Declared:
    declare = None

    def declare_outputs(self, inputs):
        return type(self).declare(self, inputs)


def _register(name, function, declare, args, doc, checks):
    registry.register_schema(OpSchema(name=name, class_name="".join(w.capitalize() for w in name.split("_")),
                                      doc=doc, args=args, checks=checks))

    class Cpu(Declared, WholeBatchOperator):
        def run_batch(self, inputs, args, params):
            return _pad(np, args[0], inputs[0]) if function is _pad else function(np, args, inputs[0])

    class Gpu(Declared, BatchOperator):
        def run_batch(self, inputs, args, batch):
            from penstock.operators.gpu_plan import tensors_of
            import torch
            samples = tensors_of(inputs[0])
            return _pad(torch, args[0], samples) if function is _pad else function(torch, args, samples)

    Cpu.declare = Gpu.declare = staticmethod(declare)
    Cpu.__name__ = Cpu.__qualname__ = "".join(w.capitalize() for w in name.split("_"))
    Gpu.__name__ = Gpu.__qualname__ = Cpu.__name__ + "Gpu"
    registry.register(name, "cpu")(Cpu)
    registry.register(name, "gpu", requires=devices.gpu_problem)(Gpu)


for _name, (_function, _declare, _args, _doc, _checks) in OPERATORS.items():
    _register(_name, _function, _declare, _args, _doc, _checks)


registry.register_schema(OpSchema(
    name="batch_permutation", class_name="BatchPermutation", num_inputs=(0, 0), input_names=(), is_source=True,
    doc="A random order of the batch's positions, one int32 per sample (the input of permute_batch).",
    args=(Arg("allow_repetitions", "bool", False, "Draw each position independently (positions may repeat)."),
          Arg("no_fixed_points", "bool", False, "No sample keeps its own position (when the batch has more than "
              "one)."))))


@registry.register("batch_permutation", "cpu")
class BatchPermutation(SourceOperator):
    def declare_outputs(self, inputs):
        return OutputSpec(np.dtype(np.int32), 0, "", ())

    def next_batch(self, iteration):
        from penstock.contract import random_stream
        rng, size = random_stream(self.context.seed, iteration), self.context.batch_size
        while True:
            order = rng.integers(0, size, size) if self.args["allow_repetitions"] else rng.permutation(size)
            if not self.args["no_fixed_points"] or size < 2 or not np.any(order == np.arange(size)):
                break
        return SourceBatch([np.asarray(index, np.int32) for index in order])

    def load(self, item, sample):
        return (item,)
