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

Random values are drawn for the whole batch beforehand (``draw``) from ``random_stream(seed,
iteration)``, so results do not depend on which thread runs which sample.

Every operator declares what it produces before anything runs (``declare_outputs``: element type,
number of dimensions, layout and, when its inputs fix it, the shape of every sample), and every
capability the engine asks about is a member of these classes, with its default here: readers
(``Reader``: epoch size and metadata), fed sources (``FedSource``), decoders that may decode
smaller (``decodes_smaller``), operators that resample to a size known from the input's
(``resampled_size``) or fixed (``fixed_resample_size``),
where a batch operator's per-sample preparation may run (``prepares_on_cpu``,
``preparation_crosses_processes``) and which blocking calls it hands to threads of the executor
(``lanes``). The pipeline and the executor ask nothing else.
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, replace
from collections.abc import Sequence
from typing import Any, Callable

import numpy as np

from penstock.batch import DeferredBatch

__all__ = ["MISSING", "WholeBatchOperator", "BatchContext", "BatchOperator", "BuildContext", "DeferredBatch", "EpochInfo", "FedSource",
           "Operator", "OutputSpec", "Reader", "SampleContext", "SampleOperator", "SourceBatch",
           "SourceOperator", "keyed_stream", "random_stream"]


def random_stream(seed: int, iteration: int) -> np.random.Generator:
    """The random stream of one operator (``seed``, already derived from the pipeline's) for one
    iteration: the same numbers whatever thread, process or prefetch depth draws them.

    It is ``Philox(key=[seed & (2**64 - 1), iteration])``'s stream, with the key handed over as
    numpy converts it (``np.asarray``, then uint64: a word of 2**63 or more beside a smaller one goes
    through a float, as in numpy) rather than through ``key=``, for which numpy first gathers OS
    entropy for a seed sequence it then drops: 23 us of the producer's thread per step and batch."""
    return keyed_stream(np.asarray([seed & (2**64 - 1), iteration]).astype(np.uint64))


def keyed_stream(key) -> np.random.Generator:
    """``Generator(Philox(key=key))``'s stream (``key``: an int below 2**64, or up to two such
    words), without the OS entropy numpy gathers for ``key=`` and then drops (7-25 us a call)."""
    words = np.zeros(2, np.uint64)
    words[:np.size(key)] = np.asarray(key, np.uint64)
    return np.random.Generator(np.random.Philox(_PhiloxKey(words)))


class _PhiloxKey(np.random.bit_generator.ISeedSequence):
    """A seed sequence whose state is a Philox key, as given (Philox asks it for two uint64 words)."""

    __slots__ = ("words",)

    def __init__(self, words: np.ndarray):
        self.words = words

    def generate_state(self, n_words, dtype=np.uint32):
        return self.words


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

    @property
    def engines(self) -> list[str]:
        """Which engines did its work so far, in words (decoders say CPU or GPU)."""
        return []

    # a GPU image step that extends the batch's deferred image plan rather than launching work of
    # its own: consecutive such steps run as one kernel launch (Pipeline.describe lists the chains)
    extends_image_plan = False

    # runs the user's own code (python_function): it runs in this process, where the user's
    # state lives, so worker processes are not chosen for a pipeline by default when it does
    runs_user_code = False

    def cpu_workers_wanted(self) -> int:
        """CPU workers (threads or processes) the operator's per-sample work is sized for, whatever
        the pipeline's num_threads: the pipeline runs at least this many. 0: num_threads decides.
        (The mixed decoders' automatic CPU share is sized by the machine's cores, not by
        num_threads, so that a seed gives the same batches whatever the threads.)"""
        return 0

    # "split" and "merge": the operators of conditionals, which route samples between branches
    # (operators.conditional); the executor routes a batch operator's samples itself, asking it
    # for the predicates and the samples (below)
    routes_samples: str | None = None

    def predicates(self, args: list[dict]) -> list[bool]:
        """The branch each sample takes, from its arguments (a split or merge)."""
        raise NotImplementedError(f"{self.name} routes no samples")

    def samples_of(self, value) -> list:
        """A batch value as one item per sample (a split or merge on the GPU stage)."""
        raise NotImplementedError(f"{self.name} routes no samples")

    # ---- what build-time rewrites may ask (see penstock.optimize) ----
    decodes_smaller = False  # may decode at 1/2, 1/4 or 1/8 scale for a resize that follows
    # the GPU stage's work for it is a copy or a step of the batch's fused image kernel, no more
    light_on_gpu = False
    # a GPU decoder that may hand a share of its windows to the CPU workers (share_windows)
    shares_windows = False

    def share_windows(self) -> None:
        """The rest of the pipeline's GPU work is light (``light_on_gpu``): the decoder's hardware
        engines set its pace, and a share of the windows decoded on the CPU workers beside them pays."""
        raise NotImplementedError(f"{self.name} does not share windows")

    def decode_smaller_for(self, target: Callable[[int, int], tuple[int, int]]) -> None:
        """Every consumer resamples an image of (height, width) to at most ``target(height,
        width)``: decoding at a smaller scale that stays at least that large, and that the
        consumers resample to the same sizes, changes nothing but the resampling tolerance."""
        raise NotImplementedError(f"{self.name} does not decode smaller")

    def resampled_size(self, height: int, width: int) -> tuple[int, int] | None:
        """(height, width) the operator resamples an input of (height, width) to, the same for
        every sample (no per-sample arguments decide it), else None."""
        return None

    def fixed_resample_size(self) -> tuple[int, int] | None:
        """(height, width) the operator resamples every input to, when that does not depend on
        the input (a fixed-size resize), else None."""
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


class RowPreparation(tuple):
    """A per-sample preparation (what ``BatchOperator.prepare`` returns) that crosses from a worker
    process as a row of ints: a tuple whose first item is a C-contiguous uint8 array (an encoded
    image, or decoded pixels), whose bytes go through the process's shared ring, and whose other
    items ``ring_row`` gives as ints (``from_ring_row`` gets the bytes back flat: the ints must tell
    any other shape). A worker sends the preparations of a request as one int64 array of such rows,
    and the pipeline's process makes no object per field. Subclasses stay plain tuples (no __new__
    of their own, ``__slots__ = ()``)."""

    __slots__ = ()
    ROW_FIELDS = 0  # how many ints ring_row() gives

    def ring_row(self) -> tuple:
        """Every item but the first, as ints."""
        raise NotImplementedError

    @classmethod
    def from_ring_row(cls, data, row) -> "RowPreparation":
        """The preparation again from its bytes (``data``, flat, read in place) and ``ring_row()``'s
        ints."""
        raise NotImplementedError


def address_of(data: np.ndarray) -> int:
    """Where an array's bytes are: through ctypes (a quarter of the time of the array interface,
    which counts where it runs for every image), or the array interface for read-only data, which
    ctypes does not take."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(data))
    except (TypeError, ValueError):
        return data.__array_interface__["data"][0]


def is_row_bytes(value) -> bool:
    """Whether a RowPreparation's first item can be addressed as bytes: a C-contiguous uint8 array."""
    return isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.flags.c_contiguous


class BatchColumn:
    """A batch's values of one kept slot held as columns rather than a list (RowColumn,
    ArrayColumn, RaggedColumn), indexed per sample like the list; ``others`` holds the samples whose value is
    held as itself."""

    others: dict

    def __iter__(self):
        return (self[index] for index in range(len(self)))

    def _hold_as_themselves(self, values: list) -> None:
        """Holds a list's values (None: not stored yet) in ``others``."""
        self.others = {index: value for index, value in enumerate(values) if value is not None}

    def _stored_in_columns(self, indices: list) -> None:
        """The samples of ``indices`` have their values in the columns now, not in ``others``."""
        if self.others:
            for index in indices:
                self.others.pop(index, None)

    def positions_without(self, marker) -> tuple | None:
        """The positions whose value is not ``marker`` (None: all of them)."""
        if not any(value is marker for value in self.others.values()):
            return None
        return tuple(index for index in range(len(self)) if self.others.get(index) is not marker)


class RowColumn(BatchColumn):
    """One batch's preparations of a RowPreparation class ``kind`` as columns: ``rows`` int64
    [size, 2 + k], per sample the address and size of its bytes, then its ``ring_row()`` ints.
    A sample whose value is not such a preparation (an image decoded on the worker, a sample on
    another branch of a conditional, one not stored yet) has size -1 there and its value in
    ``others``. The worker processes' replies land here as whole arrays of rows, so the
    pipeline's process makes no object per sample, and a batch operator reads the columns.
    Indexing gives a sample's preparation (made when asked); bytes addressed here belong to a
    worker's ring, or to the preparation ``held`` for them, until the batch is used."""

    ADDRESS, NBYTES = 0, 1

    def __init__(self, kind: type, size: int, row_width: int):
        self.kind = kind
        self.rows = np.zeros((size, row_width), np.int64)
        self.rows[:, self.NBYTES] = -1
        self.others: dict[int, Any] = {}  # samples without a row (absent: not stored yet, None)
        self.held: dict[int, Any] = {}  # preparations whose own arrays the rows address

    @classmethod
    def of(cls, kind: type, values) -> "RowColumn":
        """The column of a list of values (preparations made in this process, and others)."""
        if isinstance(values, RowColumn):
            return values
        column = cls(kind, len(values), 2 + kind.ROW_FIELDS)
        for index, value in enumerate(values):
            if value is not None:
                column[index] = value
        return column

    def __len__(self) -> int:
        return len(self.rows)

    def __setitem__(self, index: int, value) -> None:
        if type(value) is self.kind and is_row_bytes(value[0]):
            data = value[0]
            self.rows[index] = (address_of(data), data.nbytes, *value.ring_row())
            self.held[index] = value
            self.others.pop(index, None)
        else:
            self.rows[index, self.NBYTES] = -1
            self.others[index] = value
            self.held.pop(index, None)

    def put_rows(self, indices: list, rows: np.ndarray) -> None:
        """Stores the rows of several samples at once (their addresses absolute)."""
        self.rows[indices] = rows
        self._stored_in_columns(indices)
        if self.held:
            for index in indices:
                self.held.pop(index, None)

    def __getitem__(self, index: int):
        if index in self.held:
            return self.held[index]
        address, nbytes, *fields = self.rows[index].tolist()
        if nbytes < 0:
            return self.others.get(index)
        data = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))
        return self.kind.from_ring_row(data, fields)


class ArrayColumn(BatchColumn):
    """One batch's values of a kept slot as one array, for values that came from the worker
    processes as whole arrays [n, ...] (numbers drawn per sample, a fixed-shape value of each):
    ``array`` [size, ...] holds them, a sample whose value came otherwise is held as itself in
    ``others`` (in neither: not stored yet, None). Indexing gives a sample's row (a view, 0-d for
    a column of numbers) as a list of them would; ``numpy.asarray`` of a column whose every sample
    has its row is the array itself, so a column of per-sample arguments is read at once."""

    def __init__(self, size: int, row_shape: tuple, dtype):
        self.array = np.empty((size, *row_shape), dtype)
        self.present = np.zeros(size, bool)
        self.others: dict[int, Any] = {}

    @classmethod
    def of(cls, values: list, row_shape: tuple, dtype) -> "ArrayColumn":
        """A column of the given row shape and type holding ``values`` (a list) as its others."""
        column = cls(len(values), row_shape, dtype)
        column._hold_as_themselves(values)
        return column

    @classmethod
    def full(cls, array: np.ndarray) -> "ArrayColumn":
        """The column of a whole batch's array (a random generator's draws)."""
        column = cls.__new__(cls)
        column.array, column.present, column.others = array, np.ones(len(array), bool), {}
        return column

    @property
    def complete(self) -> bool:
        """Whether every sample has its row in ``array``."""
        return bool(self.present.all())

    def fits(self, rows: np.ndarray) -> bool:
        return rows.shape[1:] == self.array.shape[1:] and rows.dtype == self.array.dtype

    def put_rows(self, indices: list, rows: np.ndarray) -> None:
        self.array[indices] = rows
        self.present[indices] = True
        self._stored_in_columns(indices)

    def __len__(self) -> int:
        return len(self.array)

    def __setitem__(self, index: int, value) -> None:
        self.present[index] = False
        self.others[index] = value

    def __getitem__(self, index: int | slice):
        if isinstance(index, slice):  # the first samples, as a source's batch is cut to the others' size
            start, stop, _ = index.indices(len(self))
            column = ArrayColumn.__new__(ArrayColumn)
            column.array, column.present = self.array[start:stop], self.present[start:stop]
            column.others = {i - start: value for i, value in self.others.items() if start <= i < stop}
            return column
        if self.present[index]:
            return self.array[index, ...]
        return self.others.get(index)

    def __array__(self, dtype=None, copy=None):
        if not self.complete:
            return np.array(list(self), dtype=dtype)
        return self.array if dtype is None else self.array.astype(dtype, copy=False)


class RaggedColumn(BatchColumn):
    """One batch's arrays of one type and rank whose shapes differ (boxes, labels), as they came
    from the worker processes: parts of several samples each, the samples' elements back to back
    in ``flat`` with their shapes [n, rank]. A sample whose value came otherwise is held as itself
    in ``others`` (in neither: not stored yet, None). Indexing gives a sample's array (a view);
    ``packed`` gives the whole batch as the parts' elements and each sample's place in them, which
    a copy to the GPU takes without a view per sample."""

    def __init__(self, size: int, dtype, ndim: int):
        self.dtype, self.ndim = np.dtype(dtype), ndim
        self.parts: list = []  # (flat, shapes [n, ndim], starts [n])
        self.places = np.full((size, 2), -1, np.int64)  # per sample: its part, its position there
        self.others: dict[int, Any] = {}

    @classmethod
    def of(cls, values: list, dtype, ndim: int) -> "RaggedColumn":
        """A column of the given type and rank holding ``values`` (a list) as its others."""
        column = cls(len(values), dtype, ndim)
        column._hold_as_themselves(values)
        return column

    def fits(self, flat: np.ndarray, shapes: np.ndarray) -> bool:
        return flat.dtype == self.dtype and shapes.shape[1] == self.ndim

    def put_part(self, indices: list, flat: np.ndarray, shapes: np.ndarray, sizes: np.ndarray | None = None) -> None:
        """Stores the arrays of several samples: their elements back to back in ``flat``
        (``sizes``: their element counts, when the caller has them)."""
        if sizes is None:
            sizes = np.prod(shapes, axis=1)
        self.parts.append((flat, shapes, sizes.cumsum() - sizes))
        rows = np.asarray(indices)
        self.places[rows, 0] = len(self.parts) - 1
        self.places[rows, 1] = np.arange(len(rows))
        self._stored_in_columns(indices)

    def __len__(self) -> int:
        return len(self.places)

    def __setitem__(self, index: int, value) -> None:
        self.places[index] = -1
        self.others[index] = value

    def __getitem__(self, index: int):
        part, position = self.places[index].tolist()
        if part < 0:
            return self.others.get(index)
        flat, shapes, starts = self.parts[part]
        shape = shapes[position].tolist()
        start = int(starts[position])
        return flat[start:start + math.prod(shape)].reshape(shape)

    @property
    def complete(self) -> bool:
        """Whether every sample's array is in the parts."""
        return bool((self.places[:, 0] >= 0).all())

    def packed(self) -> tuple[list, np.ndarray, np.ndarray]:
        """(the parts' flat arrays, each sample's offset [size] into their concatenation, each
        sample's shape [size, rank]) of a complete column."""
        if not self.parts:
            return [], np.zeros(0, np.int64), np.zeros((0, self.ndim), np.int64)
        flats, part_shapes, part_starts = zip(*self.parts)
        bases = np.cumsum([0, *(flat.size for flat in flats)])[:-1]  # each part's first element
        firsts = np.cumsum([0, *(len(shapes) for shapes in part_shapes)])[:-1]  # each part's first row
        offsets = np.concatenate([starts + base for starts, base in zip(part_starts, bases)])
        rows = firsts[self.places[:, 0]] + self.places[:, 1]  # each sample's row among the parts' rows
        return list(flats), offsets[rows], np.concatenate(part_shapes)[rows]


class BatchArgs(Sequence):
    """Each sample's arguments for a batch operator (``run_batch``'s ``args``): reads as a list of
    dicts, each made when first asked for (samples with equal values share one), and per argument
    as a column (``column``, ``varies``), which operators that build tables for the whole batch
    read instead of hundreds of dicts. ``per_sample`` maps the arguments given per sample to their
    converted values: a list, or a float64 or int64 array for numbers; ``keys`` gives hashable
    stand-ins for values that are not (lists), by which samples share a dict."""

    def __init__(self, static: dict, size: int, per_sample: dict, keys: dict | None = None):
        self.static = static
        self.size = size
        self.per_sample = per_sample
        self._keys = keys or {}
        self._lists: dict = {}
        self._dicts: list = [None] * size
        self._shared: dict = {}

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(self.size))]
        if index < 0:
            index += self.size
        made = self._dicts[index]
        if made is None:
            key = tuple((self._keys.get(name) or self._values_of(name))[index] for name in self.per_sample)
            made = self._shared.get(key)
            if made is None:
                made = self._shared[key] = self.static.replace(**{name: self._values_of(name)[index]
                                                                  for name in self.per_sample})
            self._dicts[index] = made
        return made

    def __iter__(self):
        return (self[index] for index in range(self.size))

    def _values_of(self, name: str) -> list:
        values = self._lists.get(name)
        if values is None:
            column = self.per_sample[name]
            values = self._lists[name] = column.tolist() if isinstance(column, np.ndarray) else column
        return values

    def varies(self, name: str) -> bool:
        """Whether ``name`` is given per sample (else every sample has the operator's value)."""
        return name in self.per_sample

    def column(self, name: str):
        """The argument's value of every sample: the per-sample array or list, or the operator's
        value repeated."""
        if name in self.per_sample:
            return self.per_sample[name]
        return [self.static[name]] * self.size


def arg_column(args, name: str):
    """An argument's value of every sample, from BatchArgs or a plain list of dicts."""
    return args.column(name) if isinstance(args, BatchArgs) else [a[name] for a in args]


def distinct_args(args, names: tuple) -> list:
    """The samples' argument dicts, one of each kind, as far as ``names`` tell (at least the first
    sample's): what an operator builds its tables from when few of them differ."""
    if isinstance(args, BatchArgs) and not any(args.varies(name) for name in names):
        return [args[0]] if len(args) else []
    return list({id(a): a for a in args}.values())


class BatchOperator(Operator):
    """Runs on a whole batch at once on the executor's GPU stage (devices 'mixed' and 'gpu').

    Inputs arrive as the producing operator left them: a list of numpy arrays for CPU data, a
    ``GpuBatch``-like list of tensors or a ``DeferredBatch`` for GPU data. ``args`` has one dict per
    sample (samples with equal per-sample arguments share one dict).
    """

    # prepare() runs per sample on the CPU workers (when every input is CPU data), and run_batch
    # gets what it returned instead of the inputs
    prepares_on_cpu = False
    # what prepare() returns is plain data that may come back from a worker process
    preparation_crosses_processes = False
    # what prepare() returns holds data the GPU reads straight out of the worker processes' shared
    # rings (pixels to upload, JPEGs for the GPU's decoders): the rings are then pinned. nvJPEG's
    # hardware decoder is much slower on pageable JPEG data: the training pipeline ran at 17.9-22.3k
    # images/s with pageable rings, 26.9-27.4k with pinned ones (H200, BENCHMARKS.md)
    gpu_reads_preparations = False
    # the operator's lanes, (name, threads) each: a lane is a queue of the executor's decode
    # stage, whose threads run the blocking calls run_batch hands to BatchContext.run_call (in the
    # order given), so that the GPU stage goes on with other batches while they work. A call
    # reports its own errors to the batch that waits for it.
    lanes: tuple[tuple[str, int], ...] = ()

    def prepare(self, inputs: tuple, args: dict, sample: SampleContext):
        """Per-sample work on the CPU (parsing headers, choosing windows) ahead of run_batch."""
        raise NotImplementedError

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
