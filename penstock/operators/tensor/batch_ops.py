"""Operators over a whole batch, on both devices: ``pad`` (to the batch's largest extent, or a
given shape, aligned), ``permute_batch`` (samples taken from other positions of the batch) and the
source ``batch_permutation`` (a random order of the batch, for MixUp-style pairing).

Each is one function of the batch's list of samples written against the array API numpy and torch
share; on the CPU it is a WholeBatchOperator (it runs once the batch's per-sample work is done), on
the GPU a BatchOperator. ``pad`` on the GPU pads a planned image batch as the fused image kernel
writes it, and other batches with one kernel launch (penstock.kernels.triton_pad).
"""
from __future__ import annotations

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.batch import PackedBatch, back_to_back, hwc_facts
from penstock.contract import BatchOperator, OutputSpec, SourceBatch, SourceOperator, WholeBatchOperator, named_axes
from penstock.operators.shared.arrays import axis_in_range
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema


def _per_axis(values, count: int, name: str, default: int) -> list:
    """A per-axis argument of one sample: one value for every axis, one per axis, or none (the default)."""
    values = list(values or [])
    if not values:
        return [default] * count
    if len(values) == 1:
        return values * count
    if len(values) != count:
        raise ValueError(f"'{name}' has {len(values)} values for {count} padded axes")
    return values


def _pad_rule(sample_args, ndim: int) -> list:
    """(axis, wanted extent, alignment) of each padded axis of one sample's arguments."""
    given = sample_args.axes
    axes = [axis_in_range(int(axis), ndim) for axis in (given if given is not None and len(given) else range(ndim))]
    wanted = _per_axis(sample_args.shape, len(axes), "shape", -1)
    align = _per_axis(sample_args.align, len(axes), "align", 1)
    if any(step < 1 for step in align):
        raise ValueError(f"Values of `align` argument must be positive, got {tuple(align)}")
    return list(zip(axes, wanted, align))


def _padded_shapes(args: list, sample_shapes: list) -> list:
    """As DALI: on each padded axis, a sample grows to ``shape`` (a value above 0; else the batch's
    largest extent) or stays at its own extent when that is larger, then up to a multiple of
    ``align``; shape and align may differ per sample. Each sample's padded shape."""
    ndim = len(sample_shapes[0])
    if any(len(shape) != ndim for shape in sample_shapes):
        raise ValueError(f"samples of {sorted({len(shape) for shape in sample_shapes})} dimensions in one batch")
    largest = [max(shape[axis] for shape in sample_shapes) for axis in range(ndim)]
    rules: dict = {}  # one per distinct arguments: usually one for the batch
    shapes = []
    for sample_shape, sample_args in zip(sample_shapes, args):
        rule = rules.get(id(sample_args))
        if rule is None:
            rule = rules[id(sample_args)] = _pad_rule(sample_args, ndim)
        shape = list(sample_shape)
        for axis, size, step in rule:
            extent = max(size if size > 0 else largest[axis], shape[axis])
            shape[axis] = -(-extent // step) * step
        shapes.append(tuple(shape))
    return shapes


def _pad(xp, args: list, samples: list):
    """``pad`` of a batch: numpy arrays on the CPU (a sample already of its padded shape is passed
    on as it is); on the GPU one buffer for the whole batch (a PackedBatch, dense where every
    sample has one shape), written by one kernel launch where the kernel applies: a tensor per
    sample left PyTorch's caching allocator holding a block of every size a batch asked for, and
    filling the buffer before copying the samples in wrote it twice."""
    if not samples:
        return []
    shapes = _padded_shapes(args, [tuple(sample.shape) for sample in samples])
    fills = [np.asarray(sample_args.fill_value, np.float64) for sample_args in args]
    if xp is np:
        results = []
        for sample, shape, fill in zip(samples, shapes, fills):
            if shape == sample.shape:
                results.append(sample)
                continue
            out = np.full(shape, numeric.saturate(fill, sample.dtype), dtype=sample.dtype)
            out[tuple(slice(0, size) for size in sample.shape)] = sample
            results.append(out)
        return results
    from penstock.kernels.triton_pad import run_pad
    from penstock.runtime.pinned import to_device
    dtype = types.to_numpy_dtype(samples[0].dtype)
    values = [numeric.saturate(fill, dtype).item() for fill in fills]
    padded = run_pad(samples, shapes, values, upload=to_device)
    if padded is not None:
        return padded
    volumes = [int(np.prod(shape)) for shape in shapes]
    offsets = np.concatenate([[0], np.cumsum(volumes)]).tolist()
    buffer = xp.empty(offsets[-1], dtype=samples[0].dtype, device=samples[0].device)
    for sample, shape, value, offset, volume in zip(samples, shapes, values, offsets, volumes):
        out = buffer[offset:offset + volume].view(shape)
        out.fill_(value)
        out[tuple(slice(0, size) for size in sample.shape)] = sample
    if len(set(shapes)) == 1:
        return PackedBatch(buffer, back_to_back(len(shapes), volumes[0]), shapes)
    return PackedBatch(buffer, offsets[:-1], shapes)


def _pad_gpu(args: list, batch_input):
    """``pad`` on the GPU. A planned image batch (resize, crop_mirror_normalize and the other fused
    image steps, not yet run) is padded as the fused kernel writes it, where only its height and
    width grow: each image at the top left of its padded canvas, the padding written in the same
    pass, with no unpadded copy of the batch made first."""
    import torch

    from penstock.kernels.image_plan import ImagePlan
    from penstock.operators.shared.gpu_plan import tensors_of
    if isinstance(batch_input, ImagePlan) and len(batch_input) and len(args) == len(batch_input):
        shapes = batch_input.output_shapes()
        padded = _padded_shapes(args, shapes)
        channel_axis = 0 if batch_input.chw else 2
        if all(new[channel_axis] == old[channel_axis] for new, old in zip(padded, shapes)):
            dtype = types.to_numpy_dtype(batch_input.dtype or hwc_facts(batch_input.sources)[1])
            channels = shapes[0][channel_axis]
            values = {id(a): float(numeric.saturate(np.asarray(a.fill_value, np.float64), dtype))
                      for a in {id(a): a for a in args}.values()}  # once per distinct arguments
            fills = np.repeat(np.array([values[id(a)] for a in args])[:, None], channels, axis=1)
            canvas = [shape[1:] if batch_input.chw else shape[:2] for shape in padded]
            return batch_input.materialize_on_canvas(canvas, fills)
    return _pad(torch, args, tensors_of(batch_input))


def _permute(xp, args, samples: list) -> list:
    first = args[0].indices if args else ()
    if len(first) == len(samples):  # one list for the batch
        indices = list(first)
    elif all(len(a.indices) == 1 for a in args):  # one index per sample
        indices = [a.indices[0] for a in args]
    else:
        raise ValueError(f"indices: {len(first)} values for a batch of {len(samples)}; give one per sample")
    for position, index in enumerate(indices):
        if not isinstance(index, (int, np.integer)) or not 0 <= index < len(samples):
            raise ValueError(f"indices[{position}] = {index!r} is not a position in a batch of {len(samples)}")
    return [samples[int(index)] for index in indices]


def _declare_pad(impl, inputs):
    layout, names = inputs[0].layout, impl.args.axis_names
    if names is not None:
        impl.args = impl.args.replace(axes=named_axes(impl.name, layout, names))
    return inputs[0].but(shape=None)


def _declare_permute(impl, inputs):
    return inputs[0]


def _check_pad(static: dict, per_sample: frozenset) -> None:
    if "align" not in per_sample and any(step < 1 for step in static.align or ()):
        raise ArgError("argument 'align' must be positive")


OPERATORS = {
    "pad": (_pad, _declare_pad, (
        Arg("axes", "ints", None, "The padded axes, in [-ndim, ndim - 1] (default, or none given: all).",
            per_sample=True, input_types=(np.dtype(np.int32),)),
        Arg("axis_names", "str", None, "The padded axes by layout name (before axes)."),
        Arg("fill_value", "float", 0.0, "The value of the padding (saturated to the data's type).", per_sample=True),
        Arg("shape", "ints", None, "The extent of each padded axis (one value for all, or one per axis): a sample "
            "grows to it, or keeps its own extent when larger; 0 or less: the batch's largest extent.",
            per_sample=True),
        Arg("align", "ints", None, "Round each padded extent up to a multiple of this (one value, or one per "
            "axis).", per_sample=True)), "Each sample padded at the end of its axes to the batch's largest extent "
        "(or to ``shape``), rounded up to ``align``; samples keep their place in the padded array.", (_check_pad,)),
    "permute_batch": (_permute, _declare_permute, (
        Arg("indices", "ints", REQUIRED, "Per sample, the position in the batch of the sample it takes: a list "
            "for the whole batch, or a per-sample input such as batch_permutation's.", per_sample=True, min=0),),
        "Sample i of the output is sample indices[i] of the input.", ()),
}


class Declared:
    declare = None

    def declare_outputs(self, inputs):
        return type(self).declare(self, inputs)


_GPU_FORMS = {"pad": _pad_gpu}  # operators whose GPU form takes the batch as it comes (a plan, say)


def _register(name, function, declare, args, doc, checks, gpu_function=None):
    registry.register_schema(OpSchema(name=name, class_name="".join(w.capitalize() for w in name.split("_")),
                                      doc=doc, args=args, checks=checks))

    class Cpu(Declared, WholeBatchOperator):
        def run_batch(self, inputs, args, params):
            return function(np, args, inputs[0])

    class Gpu(Declared, BatchOperator):
        def run_batch(self, inputs, args, batch):
            if gpu_function is not None:
                return gpu_function(args, inputs[0])
            from penstock.operators.shared.gpu_plan import tensors_of
            import torch
            return function(torch, args, tensors_of(inputs[0]))

    Cpu.declare = Gpu.declare = staticmethod(declare)
    Cpu.__name__ = Cpu.__qualname__ = "".join(w.capitalize() for w in name.split("_"))
    Gpu.__name__ = Gpu.__qualname__ = Cpu.__name__ + "Gpu"
    registry.register(name, "cpu")(Cpu)
    registry.register(name, "gpu", requires=devices.gpu_problem)(Gpu)


for _name, (_function, _declare, _args, _doc, _checks) in OPERATORS.items():
    _register(_name, _function, _declare, _args, _doc, _checks, gpu_function=_GPU_FORMS.get(_name))


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
        from penstock.draws import random_stream
        rng, size = random_stream(self.context.seed, iteration), self.context.batch_size
        while True:
            order = rng.integers(0, size, size) if self.args.allow_repetitions else rng.permutation(size)
            if not self.args.no_fixed_points or size < 2 or not np.any(order == np.arange(size)):
                break
        return SourceBatch([np.asarray(index, np.int32) for index in order])

    def load(self, item, sample):
        return (item,)
