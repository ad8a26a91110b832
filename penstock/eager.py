"""Operators called on data, outside any pipeline: ``penstock.eager.resize(images, resize_shorter=256)``.

Every operator of ``fn`` is here under the same name, with the same schema (the same arguments,
checks and error messages) and the same implementation, so a result equals what a pipeline gives
for the same batch and random draws. Use it to debug a step, or to run penstock's GPU operators
from a plain PyTorch loop.

- A batch is a list of per-sample arrays (numpy arrays, or torch tensors on the CPU or a GPU), or
  one numpy array / torch tensor whose first dimension is the batch (as external_source takes).
  Results come back in the same form: a list for a list, one array or tensor when the samples
  share a shape. GPU operators return torch tensors on the GPU; CPU operators numpy arrays (torch
  tensors for torch input).
- Placement as in a pipeline: an operator runs on the GPU when an input is a CUDA tensor, else on
  the CPU; ``device=`` says otherwise ('gpu' moves CPU data to the GPU first, 'mixed' decodes
  there).
- Per-sample arguments: ``eager.per_sample([...])`` (one value per sample) where a pipeline would
  take a DataNode, e.g. ``eager.rotate(images, angle=eager.per_sample([10.0, -5.0]))``.
- Layouts: samples of 3 dimensions whose last has 1 to 4 elements are HWC images; give a
  ``penstock.Batch`` to say otherwise.
- Sources take ``batch_size=``: ``eager.random.uniform(batch_size=8, range=(0, 1))`` gives one
  batch; a reader gives an iterator over one epoch's batches. Random draws follow ``seed(n)``
  (random until it is called), advancing with each call.
"""
from __future__ import annotations

import itertools
import sys

import numpy as np

from penstock import operators  # noqa: F401  (registers every operator)
from penstock import devices, registry
from penstock.api import make_namespaces, operator_functions
from penstock.batch import Batch, DeferredBatch, GpuBatch
from penstock.contract import (BatchContext, BatchOperator, BuildContext, OutputSpec, Reader, SampleContext,
                               SourceOperator, WholeBatchOperator, random_stream)
from penstock.executor.jobs import as_tuple, call_operator
from penstock.executor.samples import batch_args
from penstock.operators.readers.external import split_batch, to_numpy

_state = {"seed": int(np.random.SeedSequence().entropy % (2**31)), "calls": itertools.count()}


def seed(value: int) -> None:
    """Makes the random draws of eager calls from now on depend on ``value`` and the calls' order."""
    _state["seed"], _state["calls"] = int(value), itertools.count()


class per_sample:  # noqa: N801  (used like a function: eager.per_sample([...]))
    """One value of an argument per sample, where a pipeline would take a DataNode."""

    def __init__(self, values):
        self.values = list(values)


class _Input:
    """A batch given to an eager call: its samples and what the result should look like."""

    def __init__(self, value, where: str):
        self.layout = ""
        self.torch = type(value).__module__.startswith("torch") or (
            isinstance(value, (list, tuple)) and bool(value) and type(value[0]).__module__.startswith("torch"))
        self.listed = isinstance(value, (list, tuple, Batch, GpuBatch))
        if isinstance(value, (Batch, GpuBatch)):  # a pipeline's output: its samples, as arrays or tensors
            self.layout = value.layout()
            value = [value.at(i) for i in range(len(value))]
        first = value[0] if isinstance(value, (list, tuple)) and value else value
        self.on_gpu = self.torch and first.device.type == "cuda"
        if self.on_gpu:
            self.samples = list(value)
        else:
            self.samples = split_batch(value, where) if not isinstance(value, (list, tuple)) else \
                [to_numpy(sample, f"{where}, sample {i}") for i, sample in enumerate(value)]
        if not self.layout and self.samples and len(self.samples[0].shape) == 3 and 1 <= self.samples[0].shape[2] <= 4:
            self.layout = "HWC"

    def spec(self) -> OutputSpec:
        first = self.samples[0] if self.samples else None
        if first is None:
            return OutputSpec()
        from penstock.types import to_numpy_dtype
        dtype = np.dtype(to_numpy_dtype(first.dtype)) if self.on_gpu else first.dtype
        shapes = {tuple(sample.shape) for sample in self.samples}
        return OutputSpec(dtype, len(first.shape), self.layout, shapes.pop() if len(shapes) == 1 else None)


def _call(schema, inputs: tuple, kwargs: dict):
    kwargs = dict(kwargs)
    batch_size = kwargs.pop("batch_size", None)
    columns = {name: value.values for name, value in kwargs.items() if isinstance(value, per_sample)}
    for name in columns:
        arg = schema.all_args.get(name)
        if arg is None or not arg.per_sample:
            raise TypeError(f"{schema.name}: argument '{name}' cannot be given per sample")
        del kwargs[name]
    batches = [_Input(value, f"{schema.name}: input {i}") for i, value in enumerate(inputs)]
    low, high = schema.num_inputs
    if not low <= len(batches) <= high:
        raise TypeError(f"{schema.name}: expected {low if low == high else f'{low} to {high}'} input(s), "
                        f"got {len(batches)}")
    if "device" not in kwargs:
        kwargs["device"] = "gpu" if any(batch.on_gpu for batch in batches) else "cpu"
    static, _ = schema.validate(kwargs)
    schema.check_call(static, dict.fromkeys(columns))
    device = static.device
    if schema.is_source and not batches and not columns:
        return _source(schema, static, batch_size)
    sizes = {len(batch.samples) for batch in batches} | {len(values) for values in columns.values()}
    if len(sizes) != 1:
        raise ValueError(f"{schema.name}: the inputs and per-sample arguments hold different numbers of samples "
                         f"({sorted(sizes)})")
    count = sizes.pop()
    impl = _implementation(schema, static, count, len(batches))
    declared = impl.declare_outputs(tuple(batch.spec() for batch in batches))
    args = batch_args(impl, columns, count) if columns else [impl.args] * count
    params = impl.draw(random_stream(impl.context.seed, 0), count)
    samples = [batch.samples for batch in batches]
    if isinstance(impl, BatchOperator):
        outputs = _run_batch_operator(impl, samples, args, params, device, batches)
    elif isinstance(impl, WholeBatchOperator):
        outputs = [list(output) for output in as_tuple(call_operator(impl.name, "", impl.run_batch, _on_cpu(samples),
                                                                     args, params), schema.outputs_for(static, len(batches)))]
    else:
        outputs = _run_per_sample(impl, _on_cpu(samples), args, params, schema.outputs_for(static, len(batches)))
    layouts = [spec.layout for spec in (declared if isinstance(declared, tuple) else (declared,) * len(outputs))]
    results = [_shaped(output, batches[0] if batches else None, layout) for output, layout in zip(outputs, layouts)]
    return results[0] if len(results) == 1 else tuple(results)


def _implementation(schema, static: dict, count: int, num_inputs: int = 0):
    device_id = None if static.device == "cpu" else 0
    op_seed = int(np.random.SeedSequence([_state["seed"], next(_state["calls"])]).generate_state(1, np.uint64)[0]) \
        if static.get("seed", -1) in (None, -1) else static.seed
    cls = registry.implementation(schema.name, static.device)
    return cls(static, BuildContext(count, 1, device_id, op_seed, num_inputs=num_inputs))


def _on_cpu(samples: list[list]) -> list[list]:
    return [[to_numpy(sample, "input") for sample in column] for column in samples]


def _run_per_sample(impl, samples: list[list], args: list, params, num_outputs: int) -> list[list]:
    outputs = [[] for _ in range(num_outputs)]
    for index, inputs in enumerate(zip(*samples)):
        sample = SampleContext(index, "", None if params is None else params[index])
        result = as_tuple(call_operator(impl.name, "", impl.run, inputs, args[index], sample), num_outputs)
        for output, value in zip(outputs, result):
            output.append(value)
    return outputs


def _run_batch_operator(impl, samples: list[list], args: list, params, device: str, batches) -> list[list]:
    import torch
    target = devices.torch_device(0)
    if impl.prepares_on_cpu and not any(batch.on_gpu for batch in batches):
        inputs = [[call_operator(impl.name, "", impl.prepare, sample_inputs, args[index],
                                 SampleContext(index, "", None if params is None else params[index]))
                   for index, sample_inputs in enumerate(zip(*_on_cpu(samples)))]]
    elif device == "gpu":
        inputs = [[sample if isinstance(sample, torch.Tensor) and sample.device == target
                   else torch.as_tensor(np.asarray(to_numpy(sample, "input")) if not isinstance(sample, torch.Tensor)
                                        else sample).to(target) for sample in column] for column in samples]
    else:
        inputs = _on_cpu(samples)
    stream = torch.cuda.current_stream(target) if target.type == "cuda" else None
    context = BatchContext(params, [""] * len(args), stream, target)
    try:
        result = as_tuple(call_operator(impl.name, "", impl.run_batch, inputs, args, context),
                          impl.schema.outputs_for(impl.args))
        return [value.materialize()[0] if isinstance(value, DeferredBatch) else list(value) for value in result]
    finally:
        impl.close()


def _shaped(samples: list, given: _Input | None, layout: str):
    """Results in the form the batch was given: a list for a list, else one array or tensor when
    the samples share a shape (a list when they do not)."""
    import torch
    on_torch = bool(samples) and isinstance(samples[0], torch.Tensor)
    if given is not None and given.torch and not on_torch:
        samples = [torch.from_numpy(np.ascontiguousarray(sample)) if sample.ndim else torch.as_tensor(sample)
                   for sample in samples]
        on_torch = True
    if given is not None and given.listed or not samples:
        return list(samples)
    if len({tuple(sample.shape) for sample in samples}) != 1:
        return list(samples)
    return torch.stack(samples) if on_torch else np.stack(samples)


def _source(schema, static: dict, batch_size: int | None):
    if batch_size is None or int(batch_size) < 1:
        raise TypeError(f"{schema.name}: a source called eagerly needs batch_size= (a positive int)")
    if schema.name == "external_source":
        raise TypeError("external_source: eager calls take the data itself; there is nothing to source")
    impl = _implementation(schema, static, int(batch_size))
    if isinstance(impl, Reader):
        return _epoch(impl, schema, static)
    return _load(impl, impl.next_batch(0), schema, static)


def _load(impl: SourceOperator, batch, schema, static):
    num_outputs = schema.outputs_for(static)
    outputs = [[] for _ in range(num_outputs)]
    for index, item in enumerate(batch.items):
        info = batch.source_infos[index] if batch.source_infos else ""
        result = call_operator(impl.name, info, impl.load, item, SampleContext(index, info))  # a tuple
        for output, value in zip(outputs, result):
            output.append(value)
    shaped = [output if len({np.shape(v) for v in output}) != 1 else np.stack(output) for output in outputs]
    return shaped[0] if num_outputs == 1 else tuple(shaped)


def _epoch(impl: Reader, schema, static):
    """The reader's batches of one epoch (the last one padded as the reader pads it)."""
    for iteration in itertools.count():
        batch = impl.next_batch(iteration)
        yield _load(impl, batch, schema, static)
        if batch.epoch_info is None or batch.epoch_info.last:
            return


make_namespaces(sys.modules[__name__], operator_functions(__name__, _call))
