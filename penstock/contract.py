"""The operator contract: everything the pipeline and the executor know about an operator.

An operator implementation is one class per (operator, device), registered in ``registry``. It is
built with its validated arguments and a ``BuildContext``, and it is one of three kinds:

- ``SourceOperator`` (readers, external sources, random generators) makes each batch's list of
  per-sample items in order, on the producer thread (``next_batch``); the heavy part of turning an
  item into data (reading a file) is ``load``, which runs on the worker threads or processes.
- ``SampleOperator`` transforms one sample at a time on a worker (``run``), writing into ``out``
  (a slot of the batch's output buffer) when it is given one.
- ``BatchOperator`` runs on a whole batch at once on the GPU stage (devices 'mixed' and 'gpu',
  ``run_batch``); what it returns may be a ``DeferredBatch`` that later operators extend and that
  runs when a result is needed (the fused image kernel, a decode in flight).

Random values are drawn for the whole batch beforehand (``draw``) from ``draws.random_stream(seed,
iteration)``, so results do not depend on which thread runs which sample.

Every operator declares what it produces before anything runs (``declare_outputs``: element type,
number of dimensions, layout and, when its inputs fix it, the shape of every sample). Readers
(``Reader``: epoch size and metadata) and fed sources (``FedSource``) are kinds of source; what
only some operators do (decode smaller, share windows, prepare on the CPU, route samples) they
declare by inheriting the capability (penstock.capabilities), which the pipeline and the executor
test for when they are built. They ask nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from penstock import devices
from penstock.sharding import Place
from penstock.tuning import DEFAULT as DEFAULT_TUNING, Tuning

__all__ = ["MISSING", "WholeBatchOperator", "BatchContext", "BatchOperator", "BuildContext", "EpochInfo", "FedSource",
           "Operator", "OutputSpec", "Reader", "SampleContext", "SampleOperator", "SourceBatch",
           "SourceOperator"]


class _Missing:
    """The value a sample has on the branch of a conditional it does not take (operators.conditional)."""

    __slots__ = ()

    def __repr__(self):
        return "MISSING"

    def __reduce__(self):  # one object, in worker processes too
        return "MISSING"


MISSING = _Missing()


@dataclass(frozen=True)
class BuildContext:
    """What an implementation knows about the pipeline it belongs to."""

    batch_size: int
    num_threads: int
    device_id: int | None
    seed: int  # this operator's seed, already derived from the pipeline's
    pipeline: Any = None
    node: str = ""  # the operator's node and the nodes of its inputs, in words (for error messages)
    num_inputs: int | None = None  # how many data inputs the node has (None: not known)
    graph_node: Any = None  # the operator's node in the pipeline's graph (None outside a pipeline)
    tuning: Tuning = DEFAULT_TUNING  # the numbers that tune its speed and memory (penstock.tuning)
    # read once where the pipeline is built and handed down, not read by the operators themselves:
    cores: int = 1  # the machine's cores per pipeline (penstock.distributed.default_threads), not num_threads
    job: Place | None = None  # the process's place in a distributed job (readers' default shard)
    emulated_gpu: bool = field(default_factory=devices.emulating_gpu)  # GPU work on CPU tensors (penstock.devices)


class LayoutNotKnown(ValueError):
    """A declaration needs its input's layout (to find axes by name) and it is not known when the
    pipeline is built: feed_input may still name it before the first run."""


def named_axes(op_name: str, layout: str, names: str, what: str = "axis_names") -> tuple[int, ...]:
    """The indices of the axes ``names`` (layout letters) in the input's ``layout``."""
    if not layout:
        raise LayoutNotKnown(f"{op_name}: {what} '{names}' need the input's layout, and it is not known; "
                             "give the source a layout (or feed_input(..., layout=)), or give axes instead")
    if any(name not in layout for name in names):
        raise ValueError(f"{op_name}: {what} '{names}' are not all in the input's layout '{layout}'; "
                         "give axes instead")
    return tuple(layout.index(name) for name in names)


@dataclass(frozen=True)
class OutputSpec:
    """What one output holds for every sample, known before anything runs: the element type
    (None: not known until data arrives, such as an external source without ``dtype``), the number
    of dimensions (None: unknown), the layout ('' for none), the shape of every sample when it
    does not depend on the data (None otherwise) and, for images, the number of channels when
    it does not (a decoder's output)."""

    dtype: np.dtype | None = None
    ndim: int | None = None
    layout: str = ""
    shape: tuple[int, ...] | None = None
    channels: int | None = None  # of images (the size of the layout's C axis), when known

    @property
    def known_channels(self) -> int | None:
        """The channel count: declared, or read from a fixed shape."""
        if self.channels is not None:
            return self.channels
        if self.shape is not None and "C" in self.layout and len(self.layout) == len(self.shape):
            return self.shape[self.layout.index("C")]
        return None

    def but(self, **changes) -> "OutputSpec":
        return replace(self, **changes)


UNKNOWN = OutputSpec()


@dataclass
class EpochInfo:
    """Where a source's batch stands in its epoch: the first ``valid`` samples are real data of
    epoch ``epoch``; the rest pad a short last batch. ``last`` marks the epoch's last batch, and
    ``index`` is the batch's place in its epoch (0 for the first)."""

    epoch: int
    valid: int
    last: bool
    index: int = 0


@dataclass
class SourceBatch:
    """One batch from a source: per-sample items, and epoch bookkeeping when the source has epochs."""

    items: list
    epoch_info: EpochInfo | None = None
    source_infos: list[str] | None = None


@dataclass
class SampleContext:
    """One sample's place in its batch: its index, where it came from (for error messages) and
    the operator's random draws for it (element ``index`` of what ``draw`` returned)."""

    index: int
    source_info: str = ""
    params: Any = None


def run_now(lane: str, call: Callable[[], None]) -> None:
    """Runs a lane's call at once, in the calling thread (where no executor runs the lanes)."""
    call()


def run_all_now(calls: list[Callable[[], None]]) -> None:
    """Runs CPU calls at once, in the calling thread (where no executor has CPU workers)."""
    for call in calls:
        call()


@dataclass
class BatchContext:
    """What a batch operator gets besides its inputs: random draws (element i for sample i), the
    samples' sources for error messages, the CUDA stream and device its work goes to,
    ``run_call(lane, call)``, which hands a blocking call to the executor's threads of that lane
    (one of the operator's ``lanes``), and ``run_on_workers(calls)``, which runs CPU work on the
    executor's CPU workers (rather than on the GPU stage's thread) and returns once all of it ran,
    raising the first call's error."""

    params: Any
    source_infos: list
    stream: Any
    device: Any
    run_call: Callable[[str, Callable[[], None]], None] = run_now
    run_on_workers: Callable[[list[Callable[[], None]]], None] = run_all_now


class Operator:
    """What every implementation has. ``schema`` is set by ``registry.register``."""

    schema = None
    # the arguments given per frame of a sequence (penstock.frames): their per-sample values are
    # converted frame by frame
    frame_args: frozenset = frozenset()

    def __init__(self, args: dict, context: BuildContext):
        arguments = self.schema.arguments if self.schema is not None else None
        self.args = arguments(args) if arguments is not None and not isinstance(args, arguments) else args
        self.context = context

    @property
    def name(self) -> str:
        return self.schema.name

    @property
    def device(self) -> str:
        return self.args.get("device", "cpu")

    def build_notes(self) -> list[str]:
        """What was decided about this operator at build, in words (``Pipeline.describe``)."""
        return []

    def declare_outputs(self, inputs: tuple[OutputSpec, ...]) -> tuple[OutputSpec, ...] | OutputSpec:
        """What each output holds, from what the inputs hold; one spec stands for every output.
        The default passes the first input's spec through; raise ValueError (naming the operator)
        for inputs the operator cannot take."""
        return inputs[0] if inputs else UNKNOWN

    def draw(self, rng: np.random.Generator, count: int) -> Any:
        """Random parameters for ``count`` samples from this batch's stream; element i reaches
        sample i (``SampleContext.params``, ``BatchContext.params``). None when it draws nothing."""
        return None


class SourceOperator(Operator):
    fed = False  # a FedSource: its data comes from Pipeline.feed_input
    # every sample of its batch is alike (constants): a batch as long as the other sources' batch,
    # which an external source with batch=True may give shorter than batch_size
    fits_any_batch = False
    lends_samples = False  # a Reader: a replacement is taken out of its epoch (see replacement)
    # ``load`` gives each item as the one output (a random generator's draws): the executor then
    # reads what the GPU stage takes of it straight from the batch's items, and the CPU stage's
    # workers get the items only when a CPU operator takes them
    items_are_values = False

    def next_batch(self, iteration: int) -> SourceBatch:
        raise NotImplementedError

    def load(self, item, sample: SampleContext) -> tuple:
        """Turns one item of ``next_batch`` into the operator's outputs (runs on a worker)."""
        return item

    def reset(self) -> None:
        """Starts over after the source signalled its end with StopIteration."""

    def shutdown(self) -> None:
        """Releases anything waiting on the user (fed inputs)."""

    def state(self) -> dict | None:
        """What this source needs to go on from here after a restore (penstock.checkpoints): a
        JSON-able value, or None when each batch depends on the iteration alone (random draws).
        Raises TypeError when the source cannot be resumed (an iterator cannot be rewound)."""
        return None

    def restore(self, state) -> None:
        """Goes back to ``state`` (what ``state()`` returned), before the first batch."""

    def replacement(self, item, epoch_info: "EpochInfo | None") -> tuple | None:
        """(item, source info or None to keep the sample's) for a sample that replaces one an
        operator failed on (``on_error="skip"``), or None when this source has none (the sample is
        then left out of its batch). By default the same item: what a source makes per sample
        without data (random draws) holds for the replacement too. Readers lend instead (below)."""
        return item, None


class Reader(SourceOperator):
    """A source with a data set of known size, read in epochs (and shards).

    Under ``on_error="skip"`` a failed sample is replaced by the last sample of its epoch's order
    still in the epoch (``lend``), which leaves the epoch: the epoch ends one sample sooner, and
    the batch that held that sample pads it out (``epoch_end`` tells how far each epoch now goes).
    Taking from the end makes the result depend only on which samples fail, not on how far ahead
    the pipeline has read."""

    lends_samples = True

    def epoch_size(self) -> int:
        raise NotImplementedError

    def reader_meta(self) -> dict:
        """epoch_size, epoch_size_padded, number_of_shards, shard_id, pad_last_batch, stick_to_shard,
        shard_size, batches_per_epoch."""
        raise NotImplementedError

    def lend(self, epoch: int, position: int) -> tuple | None:
        """(item, source info) of the last sample still in ``epoch`` when it comes after
        ``position`` (in the epoch's order), taken out of the epoch; else None (and when the sample
        at ``position`` is itself the last, it leaves the epoch)."""
        return None

    def epoch_end(self, epoch: int) -> int | None:
        """How many samples of ``epoch``'s order are still in it (None: all of them)."""
        return None

    def lent(self) -> dict:
        """The samples lent out so far, as the part of ``state()`` that says so: the executor
        records it when a batch is refilled, after the producer recorded the rest."""
        return {}


class FedSource(SourceOperator):
    """A source whose data the user feeds, one batch per iteration, through Pipeline.feed_input
    (when it has no ``source`` of its own: ``fed`` says whether this one is fed)."""

    def feed(self, data, layout: str | None) -> None:
        """Queues one iteration's data (and the layout it names, if any)."""
        raise NotImplementedError

    def has_data_for(self, iteration: int) -> bool:
        """Whether the batch of ``iteration`` (counted over every fed batch) was fed."""
        raise NotImplementedError

    def feed_end(self) -> None:
        """No more data comes before reset(): the source ends once what was fed is used."""
        raise NotImplementedError

    def replacement(self, item, epoch_info):
        return None  # what the user fed for a batch has no spare samples


class SampleOperator(Operator):
    def output_spec(self, inputs: tuple, args: dict) -> tuple[tuple[int, ...], np.dtype] | None:
        """(shape, dtype) of the single output for these inputs of one sample, when known before
        running it; lets the executor hand ``run`` a slot of a preallocated batch buffer as ``out``."""
        return None

    def run(self, inputs: tuple, args: dict, sample: SampleContext, out: np.ndarray | None = None):
        """Returns the output (or a tuple of outputs) for one sample; writes into ``out`` if given."""
        raise NotImplementedError


class WholeBatchOperator(Operator):
    """A CPU operator that needs the whole batch at once (padding to the batch's largest sample,
    permuting the batch). It runs once the batch's per-sample CPU operators have finished, on the
    thread that takes batches in order (the GPU stage, or the consumer), so only pipeline outputs,
    GPU operators and other whole-batch operators may take its outputs."""

    def run_batch(self, inputs: list[list], args: list[dict], params: Any) -> tuple[list, ...] | list:
        """The outputs (a list of per-sample values each) for the batch's ``inputs`` (one list of
        per-sample arrays per input) and per-sample ``args``."""
        raise NotImplementedError


class BatchOperator(Operator):
    """Runs on a whole batch at once on the executor's GPU stage (devices 'mixed' and 'gpu').

    Inputs arrive as the producing operator left them: a list of numpy arrays for CPU data, a
    ``GpuBatch``-like list of tensors or a ``DeferredBatch`` for GPU data. ``args`` has one dict per
    sample (samples with equal per-sample arguments share one dict).
    """

    # the operator's lanes, (name, threads) each: a lane is a queue of the executor's decode
    # stage, whose threads run the blocking calls run_batch hands to BatchContext.run_call (in the
    # order given), so that the GPU stage goes on with other batches while they work. A call
    # reports its own errors to the batch that waits for it.
    lanes: tuple[tuple[str, int], ...] = ()

    def run_batch(self, inputs: list, args: list[dict], batch: BatchContext):
        raise NotImplementedError

    def open(self, device, run_call) -> None:
        """Makes what run_batch needs and takes long to make (native decoders), on the GPU stage's
        thread as it starts, while the CPU stage works on the first batch; ``run_call(lane, call)``
        hands blocking work to the operator's lanes, as BatchContext.run_call does. Errors are left
        to run_batch, which makes it again and reports them on the batch."""

    def close(self) -> None:
        """Stops what the operator started (threads, native resources): the pipeline's GPU stage
        has stopped and will not call it again."""
