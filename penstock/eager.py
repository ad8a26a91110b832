"""Operators called on data, outside any pipeline: ``penstock.eager.resize(images, resize_shorter=256)``.

Every operator of ``fn`` is here under the same name, with the same schema (the same arguments,
checks and error messages) and the same implementation, so a result equals what a pipeline gives
for the same batch and random draws. Use it to debug a step, or to run penstock's GPU operators
from a plain PyTorch loop.

- A batch is a list of per-sample arrays (numpy arrays, or torch tensors on the CPU or a GPU), or
  one numpy array / torch tensor whose first dimension is the batch (as external_source takes).
  Its samples share one number of dimensions and one element type, as a pipeline's input does.
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

Each call runs a pipeline of its own, fed with the call's data: the operator's node, one
external_source per input (and per per-sample argument), one iteration through the executor. Seeds,
placement, input checks and execution are the pipeline's. Data enters as it enters a pipeline,
through the host: a CUDA tensor is read back, then copied to the GPU with the batch.
"""
from __future__ import annotations

import itertools
import sys

import numpy as np

from penstock import operators  # noqa: F401  (registers every operator)
from penstock import graph, registry
from penstock.api import make_namespaces, operator_functions
from penstock.batch import Batch, GpuBatch
from penstock.operators.readers.external import split_batch
from penstock.pipeline import Pipeline

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
        self.samples = split_batch(value, where)
        if not self.layout and self.samples and len(self.samples[0].shape) == 3 and 1 <= self.samples[0].shape[2] <= 4:
            self.layout = "HWC"


class _Call(Pipeline):
    """The pipeline of one eager call: ``feeds`` (external_source name -> samples) are fed to its
    first iteration, then their end, so that nothing waits for a second one."""

    def __init__(self, feeds: dict, **pipeline_args):
        super().__init__(**pipeline_args)
        self._feeds = feeds

    def iter_setup(self) -> None:
        if self._feeds is None:
            raise StopIteration
        for name, samples in self._feeds.items():
            self.feed_input(name, samples)
        self._feeds = None


def _call(schema, inputs: tuple, kwargs: dict):
    kwargs = dict(kwargs)
    batch_size = kwargs.pop("batch_size", None)
    columns = {name: kwargs.pop(name).values for name, value in list(kwargs.items()) if isinstance(value, per_sample)}
    batches = [_Input(value, f"{schema.name}: input {i}") for i, value in enumerate(inputs)]
    sizes = {len(batch.samples) for batch in batches} | {len(values) for values in columns.values()}
    if len(sizes) > 1:
        raise ValueError(f"{schema.name}: the inputs and per-sample arguments hold different numbers of samples "
                         f"({sorted(sizes)})")
    if not sizes and (batch_size is None or int(batch_size) < 1):
        raise TypeError(f"{schema.name}: a source called eagerly needs batch_size= (a positive int)")
    count = sizes.pop() if sizes else int(batch_size)
    # placement as in a pipeline: on the GPU when an input is there, unless device= says otherwise
    device = kwargs.get("device", "gpu" if any(batch.on_gpu for batch in batches) else "cpu")
    feeds = {f"input {i}": batch.samples for i, batch in enumerate(batches)}
    feeds.update((f"argument {name}", _per_sample_arrays(values)) for name, values in columns.items())
    call_seed = int(np.random.SeedSequence([_state["seed"], next(_state["calls"])]).generate_state(1)[0])
    pipe = _Call(feeds, batch_size=max(count, 1), num_threads=1, seed=call_seed, worker_processes=False,
                 device_id=None if device == "cpu" else 0, gpu_fallback=False)
    with pipe:
        nodes = []
        for i, batch in enumerate(batches):
            node = graph.invoke(_EXTERNAL, (), {"name": f"input {i}", "layout": batch.layout or None})
            nodes.append(node.gpu() if device == "gpu" else node)
        kwargs.update((name, graph.invoke(_EXTERNAL, (), {"name": f"argument {name}"})) for name in columns)
        outputs = graph.invoke(schema, tuple(nodes), kwargs)
    if isinstance(outputs, dict):  # named outputs (readers.tfrecord's features)
        outputs = tuple(outputs.values())
    pipe.set_outputs(*(outputs if isinstance(outputs, (list, tuple)) else (outputs,)))
    if pipe.reader_meta():
        return _epoch(pipe)
    try:
        results = [_shaped(batch, batches[0] if batches else None) for batch in pipe.run()]
    except StopIteration:  # a source whose data would come from feed_input: an eager call has none
        raise TypeError(f"{schema.name}: gave no batch; an eager call takes the data itself, as its inputs") from None
    finally:
        pipe.close()
    return results[0] if len(results) == 1 else tuple(results)


_EXTERNAL = registry.get_schema("external_source")


def _per_sample_arrays(values: list) -> list:
    """A per-sample argument's values as the arrays an external_source carries: one array for the
    column where they make one (Python numbers of mixed types share its dtype), else one each."""
    try:
        column = np.asarray(values)
    except ValueError:  # ragged
        column = None
    if column is not None and column.dtype.kind in "biuf":
        return list(column)
    return [np.asarray(value) for value in values]


def _shaped(batch, given: _Input | None):
    """A pipeline output in the form the batch was given: a list for a list, else one array or
    tensor when the samples share a shape (a list when they do not)."""
    import torch
    samples = [batch.at(i) for i in range(len(batch))]
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


def _epoch(pipe: Pipeline):
    """The reader's batches of one epoch (the last one padded as the reader pads it)."""
    try:
        while True:
            outputs = [_shaped(batch, None) for batch in pipe.run()]
            yield outputs[0] if len(outputs) == 1 else tuple(outputs)
            info = pipe.last_epoch_info
            if info is None or info.last:
                return
    finally:
        pipe.close()


make_namespaces(sys.modules[__name__], operator_functions(__name__, _call))
