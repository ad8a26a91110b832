"""``external_source``: data from Python, through ``source=`` (a callable or an iterable) or through
``Pipeline.feed_input`` from ``iter_setup``."""
from __future__ import annotations

import functools
import inspect
import queue
import threading

import numpy as np

from penstock import registry, types
from penstock.contract import FedSource, OutputSpec, SampleContext, SourceBatch
from penstock.schema import Arg, ArgError, ArgTypeError, OpSchema

SCHEMA = registry.register_schema(OpSchema(
    name="external_source",
    class_name="ExternalSource",
    doc="Data from Python. ``source`` (also the first positional argument) may be a callable "
        "(called once per batch, or once per sample with batch=False; given the iteration index, a "
        "BatchInfo with batch_info=True, or a SampleInfo with batch=False, if it takes one argument), "
        "an iterable or a generator function (called for a new iterator at each start). Without "
        "``cycle`` an iterable is gone through once: its end ends the epoch, and it does not start "
        "over. Without ``source``, feed each iteration's data with ``Pipeline.feed_input`` from "
        "``iter_setup``. A batch is a list of per-sample arrays, or one array / torch tensor / CuPy "
        "array whose first dimension is the batch. As in DALI, parallel=True needs a callable that "
        "takes the info, or batch=True, and no_copy not False; prefetch_queue_depth is only for "
        "parallel sources, repeat_last only for fed ones.",
    args=(
        Arg("source", "any", None, "A callable, an iterable, a generator function, or None for feed_input."),
        Arg("num_outputs", "int", None, "How many outputs the source gives per call (a tuple of that "
            "many batches); None means one output.", min=1),
        Arg("batch", "bool", True, "Whether the source gives whole batches (True) or single samples."),
        Arg("cycle", "any", None, "For an iterable or a generator function: None, False or 'no' (its "
            "end ends the epoch, and it is not gone through again), True or 'quiet' (start over without "
            "a break), 'raise' (end the epoch, then start over)."),
        Arg("dtype", "any", None, "Expected element type (a list: one per output); data of another "
            "type is an error. Without it, every batch of an output must have the element type of its "
            "first batch. The samples of a batch share one element type (bool, an integer or a "
            "floating-point type)."),
        Arg("ndim", "any", None, "Expected number of dimensions per sample (a list: one per output)."),
        Arg("layout", "any", None, "Layout string of the samples (a list: one per output)."),
        Arg("no_copy", "bool", None, "Accepted for DALI compatibility: data is never copied "
            "unless a conversion needs it."),
        Arg("blocking", "bool", True, "Accepted for DALI compatibility."),
        Arg("batch_info", "bool", False, "Pass a batch=True callable a BatchInfo (iteration, "
            "epoch_idx) rather than the iteration index."),
        Arg("parallel", "bool", False, "Accepted for DALI compatibility; sources run in the producer thread."),
        Arg("prefetch_queue_depth", "int", None, "Accepted for DALI compatibility.", min=1),
        Arg("cuda_stream", "any", None, "Accepted for DALI compatibility."),
        Arg("use_copy_kernel", "bool", False, "Accepted for DALI compatibility."),
        Arg("repeat_last", "bool", False, "Without new fed data, give the last batch again (sources "
            "fed by feed_input only)."),
    ),
    num_inputs=(0, 0),
    num_outputs=lambda args: args.num_outputs or 1,
    input_names=(),
    argument_inputs=("source", "num_outputs"),
    listed_outputs_arg="num_outputs",
    is_source=True,
    checks=(lambda static, per_sample: _check_call(static),),
))

CYCLE_VALUES = (None, False, True, "no", "quiet", "raise")
ITERABLE, GENERATOR_FUNCTION, CALLABLE = "iterable", "generator function", "callable"


def _check_call(args: dict) -> None:
    cycle = args.cycle
    if not any(cycle is value or (isinstance(value, str) and cycle == value) for value in CYCLE_VALUES):
        raise ArgError(f"argument 'cycle' must be None, False or 'no' (no cycling), True or 'quiet' (start over "
                       f"quietly) or 'raise' (end the epoch at each start over), got {cycle!r}")
    for name in ("dtype", "ndim", "layout"):
        per_output(args, name)
    if args.get("name") is not None and args.num_outputs is not None:
        raise ArgError("argument 'num_outputs' is not for a named source (a name names one output)")
    source = args.source
    if source is None:
        if cycle is not None:
            raise ArgError("argument 'cycle' is only for a 'source' that is an iterable or a generator function")
    else:
        kind = source_kind(source, cycle)
        if kind == CALLABLE:
            takes_argument(source)
        if args.repeat_last:
            raise ArgError("argument 'repeat_last' is only for sources fed by feed_input, not with 'source'")
    if args.parallel:
        if args.no_copy is False:
            raise ArgError("argument 'no_copy' cannot be False with parallel=True")
        if source is not None and kind == CALLABLE and not takes_argument(source):
            raise ArgTypeError("with parallel=True the 'source' callable must take one argument (the "
                               "iteration index, a BatchInfo, or a SampleInfo with batch=False)")
        if source is not None and kind != CALLABLE and not args.batch:
            raise ArgTypeError(f"with parallel=True a 'source' that is {'an' if kind == ITERABLE else 'a'} {kind} "
                               "must give batches (batch=True)")
    elif args.prefetch_queue_depth is not None:
        raise ArgError("argument 'prefetch_queue_depth' is only for parallel sources (parallel=True)")


def _cycles(cycle) -> bool:
    return cycle is True or cycle in ("quiet", "raise")


def _is_generator_function(source) -> bool:
    """A generator function, a partial of one, or an object whose __call__ is one (as DALI tells them)."""
    if inspect.isgeneratorfunction(source):
        return True
    if isinstance(source, functools.partial):
        return _is_generator_function(source.func)
    if inspect.isfunction(source) or inspect.ismethod(source):
        return False
    call = getattr(source, "__call__", None)
    return call is not None and call is not source and _is_generator_function(call)


def source_kind(source, cycle) -> str:
    """ITERABLE, GENERATOR_FUNCTION or CALLABLE, chosen as DALI chooses; raises ArgError where DALI
    refuses the source with that ``cycle``."""
    if _is_generator_function(source):
        return GENERATOR_FUNCTION
    if _cycles(cycle) and inspect.isgenerator(source):
        raise ArgTypeError("a generator cannot be cycled through (it cannot start over): give the generator "
                           "function that made it as 'source'")
    try:
        iter(source)
        return ITERABLE
    except TypeError:
        pass
    if cycle is not None:
        raise ArgError("argument 'cycle' is only for a 'source' that is an iterable or a generator function")
    if not callable(source):
        raise ArgTypeError(f"'source' must be a callable, an iterable or a generator function, got "
                           f"{type(source).__name__}")
    return CALLABLE


def takes_argument(source) -> bool:
    """Whether the callable takes the batch or sample info: it must take 0 or 1 positional
    parameters (one with a default counts), and no *args, **kwargs or keyword-only ones."""
    try:
        parameters = inspect.signature(source).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: called without an argument
        return False
    what = "the 'source' callable must take 0 or 1 positional parameters (the batch or sample info)"
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD, parameter.KEYWORD_ONLY):
            star = {parameter.VAR_POSITIONAL: "*", parameter.VAR_KEYWORD: "**"}.get(parameter.kind, "")
            raise ArgTypeError(f"{what}; it has {star}{parameter.name}")
    if len(parameters) > 1:
        raise ArgTypeError(f"{what}; it has {len(parameters)}: {', '.join(p.name for p in parameters)}")
    return len(parameters) == 1


def per_output(args: dict, name: str) -> list:
    """The value of ``dtype``, ``ndim`` or ``layout`` for each output: one value for every output,
    or a list with one per output (outputs past its end get none)."""
    value, count = args[name], args.num_outputs
    if isinstance(value, (list, tuple)):
        if count is None:
            raise ArgTypeError(f"argument '{name}' is a list, which is for a source with num_outputs")
        values = list(value[:count]) + [None] * (count - len(value))
    else:
        values = [value] * (count or 1)
    if name == "layout":
        return [types.layout_string(item) for item in values]
    arg = Arg(name, "dtype" if name == "dtype" else "int", min=0 if name == "ndim" else None)
    try:
        return [None if item is None else arg.convert(item) for item in values]
    except ArgError as error:
        raise type(error)(f"argument '{name}': {error}") from None


class BatchInfo:
    """What a batch callable with batch_info=True is told: which iteration (counted from 0 in each
    epoch) of which epoch it makes."""

    def __init__(self, iteration: int, epoch_idx: int):
        self.iteration, self.epoch_idx = iteration, epoch_idx

    def __repr__(self):
        return f"BatchInfo(iteration={self.iteration}, epoch_idx={self.epoch_idx})"


class SampleInfo:
    """What a per-sample source callable is told: which sample of which iteration (counted from 0 in
    each epoch) of which epoch it makes."""

    def __init__(self, idx_in_epoch: int, idx_in_batch: int, iteration: int, epoch_idx: int = 0):
        self.idx_in_epoch, self.idx_in_batch = idx_in_epoch, idx_in_batch
        self.iteration, self.epoch_idx = iteration, epoch_idx

    def __repr__(self):
        return f"SampleInfo(idx_in_epoch={self.idx_in_epoch}, idx_in_batch={self.idx_in_batch}, " \
               f"iteration={self.iteration}, epoch_idx={self.epoch_idx})"


def to_numpy(value, where: str) -> np.ndarray:
    """A sample as a numpy array, without a copy for numpy arrays and CPU torch tensors. As in DALI, a
    sample is something with a shape (numpy arrays and scalars, torch tensors, CuPy arrays, objects
    with an array interface): Python numbers, lists and bytes are refused."""
    if isinstance(value, np.ndarray):
        return value
    if not any(hasattr(value, name) for name in ("shape", "__array_interface__", "__cuda_array_interface__")):
        raise TypeError(f"{where}: a value of type {type(value).__name__} has no shape and cannot be a sample; give numpy "
                        "arrays, torch tensors or other arrays (np.asarray makes one)")
    module = type(value).__module__
    if module.startswith("torch"):
        if value.device.type != "cpu":
            value = value.cpu()
        return value.detach().numpy()
    if module.startswith("cupy"):
        return value.get()
    return np.asarray(value)


def split_batch(batch, where: str) -> list[np.ndarray]:
    """A batch given as a list of samples, or as one array / tensor with the batch first."""
    if isinstance(batch, (list, tuple)):
        return [to_numpy(sample, f"{where}, sample {i}") for i, sample in enumerate(batch)]
    array = to_numpy(batch, where)
    if array.ndim == 0:
        raise ValueError(f"{where}: a batch must be a list of samples or an array with the batch as its "
                         "first dimension; got a scalar")
    if array.dtype == object:  # ragged data numpy could not make one array of: its items are the samples
        return [to_numpy(sample, f"{where}, sample {i}") for i, sample in enumerate(array)]
    return list(array)


# DALI's element types: bool, signed and unsigned integers, floating point
CARRIED_KINDS = {"b": "bool", "i": "signed integer", "u": "unsigned integer", "f": "floating point"}


class _Ended:
    """Marks the end of fed data."""


@registry.register("external_source", "cpu")
class ExternalSource(FedSource):
    def __init__(self, args, context):
        super().__init__(args, context)
        self.num_outputs = args.num_outputs or 1
        self.source = args.source
        self.fed = self.source is None
        self._fed: queue.Queue = queue.Queue()
        self._stopping = threading.Event()
        self._last = None
        self._iterator = None
        self._calls_with_argument = False
        self._samples_in_epoch = 0
        # a callable's view of time: iterations restart at 0 after each end (StopIteration) and reset(),
        # so that `def source(i): if i >= n: raise StopIteration` works every epoch
        self._iteration_in_epoch = 0
        self._epoch = 0
        self._fed_layout: str | None = None  # the layout feed_input named last
        self._fed_batches = 0
        self._declared_types = per_output(args, "dtype")
        self._declared_ndims = per_output(args, "ndim")
        self._declared_layouts = per_output(args, "layout")
        # per output: the dtype of its first batch, which later batches must have (as in DALI),
        # unless dtype= declares one
        self._dtypes: list = [None if dtype is None else dtype.numpy for dtype in self._declared_types]
        self._ndims: list = [None] * self.num_outputs  # per output: the number of dimensions of its first batch
        self._batches_checked = 0
        node = self.context.node or "external_source"
        self._where = node if node.startswith("external_source") else f"external_source '{node}'"
        if self.source is not None:
            self._kind = source_kind(self.source, args.cycle)
            if self._kind == CALLABLE:
                self._calls_with_argument = takes_argument(self.source)
            else:
                # as in DALI, made once: without cycling the source is gone through once in the
                # pipeline's life, and reset() does not start it over
                self._iterator = self._new_iterator()

    def _new_iterator(self):
        try:
            return iter(self.source() if self._kind == GENERATOR_FUNCTION else self.source)
        except TypeError as error:
            raise TypeError(f"{self._where}: 'source' gave no iterator: {error}") from None

    # ---- feed_input ---------------------------------------------------------------------------
    def name_layout(self, layout) -> None:
        """The layout feed_input gives the samples fed from now on."""
        self._fed_layout = types.layout_string(layout)

    def feed(self, data) -> None:
        if self.num_outputs != 1:
            raise ValueError("external_source: feed_input works with single-output sources")
        self._fed.put(self._checked([split_batch(data, f"feed_input of {self._where}")])[0])
        self._fed_batches += 1

    def has_data_for(self, iteration: int) -> bool:
        return self._fed_batches > iteration or (self.args.repeat_last and self._fed_batches > 0)

    def feed_end(self) -> None:
        self._fed.put(_Ended)

    def shutdown(self) -> None:
        self._stopping.set()

    def _next_fed(self):
        while True:
            try:
                data = self._fed.get(timeout=0.1)
                break
            except queue.Empty:
                if self._stopping.is_set():
                    raise RuntimeError("the pipeline was shut down while waiting for feed_input") from None
        if data is _Ended:
            raise StopIteration
        return data

    # ---- sources ---------------------------------------------------------------------------------
    def next_batch(self, iteration: int) -> SourceBatch:
        batch = self._next_items()
        self._iteration_in_epoch += 1
        return batch

    def _next_items(self) -> SourceBatch:
        if self.fed:
            if self.args.repeat_last and self._fed.empty() and self._last is not None:
                return SourceBatch(self._last)
            self._last = self._next_fed()
            return SourceBatch(self._last)
        if self.args.batch:
            outputs = self._outputs_of(self._call_or_next(self._iteration_in_epoch), "source")
            samples = self._checked([split_batch(out, f"{self._where}, output {i}") for i, out in enumerate(outputs)])
            lengths = {len(s) for s in samples}
            if len(lengths) > 1:
                raise ValueError(f"{self._where}: outputs of one batch have different lengths {sorted(lengths)}")
            items = list(zip(*samples))
        else:
            items = []
            for index in range(self.context.batch_size):
                info = SampleInfo(self._samples_in_epoch, index, self._iteration_in_epoch, self._epoch)
                # as DALI: a source that runs out part-way through a batch ends the epoch there, and
                # the partial batch is dropped (len(data) // batch_size batches in an epoch)
                value = self._call_or_next(info)
                self._samples_in_epoch += 1
                outputs = self._outputs_of(value, f"sample {index}")
                items.append(tuple(to_numpy(out, f"{self._where}, sample {index}") for out in outputs))
            items = list(zip(*self._checked([list(column) for column in zip(*items)])))
        if len(items) > self.context.batch_size:
            raise ValueError(f"{self._where}: the source gave {len(items)} samples, more than the "
                             f"batch_size of {self.context.batch_size}")
        return SourceBatch(items)

    def _call_or_next(self, argument):
        if self._iterator is None:
            if not self._calls_with_argument:
                return self.source()
            if self.args.batch_info and self.args.batch:
                argument = BatchInfo(argument, self._epoch)
            return self.source(argument)
        try:
            return next(self._iterator)
        except StopIteration:
            if not _cycles(self.args.cycle):
                raise
            self._iterator = self._new_iterator()
            if self.args.cycle == "raise":
                raise
            return next(self._iterator)

    def _outputs_of(self, value, where: str) -> tuple:
        """The source's value for each output: with num_outputs (even 1), its items 0 to num_outputs - 1,
        as DALI indexes it (items past them are not used)."""
        if self.args.num_outputs is None:
            return (value,)
        try:
            return tuple(value[index] for index in range(self.num_outputs))
        except (IndexError, KeyError, TypeError):
            raise ValueError(f"{self._where}: num_outputs={self.num_outputs} but the {where} gave a "
                             f"{type(value).__name__} without items 0 to {self.num_outputs - 1}") from None

    def _checked(self, outputs: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        """One batch's samples of each output, checked: element types a pipeline carries, one
        dtype and one number of dimensions per output shared by its samples, the declared dtype
        or else the one of the output's first batch, the declared ndim, and the number of dimensions
        of the output's first batch."""
        for output, samples in enumerate(outputs):
            self._check(samples, output)
        for output, samples in enumerate(outputs):
            if samples and self._dtypes[output] is None:
                self._dtypes[output] = samples[0].dtype
            if samples and self._ndims[output] is None:
                self._ndims[output] = samples[0].ndim
        self._batches_checked += 1
        return outputs

    def _check(self, samples: list[np.ndarray], output: int) -> None:
        declared, ndim = self._declared_types[output], self._declared_ndims[output]
        layout = self._declared_layouts[output]
        which = f" of output {output}" if self.num_outputs > 1 else ""
        for index, sample in enumerate(samples):
            if sample.dtype.kind not in CARRIED_KINDS:
                raise TypeError(f"{self._where}: sample {index}{which} has dtype {sample.dtype}, which a pipeline "
                                f"cannot carry; give arrays of bool, integers or floating point"
                                + (" (an object array holds ragged or mixed data: give one array per sample)"
                                   if sample.dtype == object else ""))
            if declared is not None and sample.dtype != declared.numpy:
                raise TypeError(f"{self._where}: sample {index}{which} has dtype {sample.dtype}, but "
                                f"dtype={declared.name} was declared")
            if sample.dtype != samples[0].dtype:
                raise TypeError(f"{self._where}: the samples of a batch must share one dtype, but sample 0{which} "
                                f"has {samples[0].dtype} and sample {index} has {sample.dtype}")
            if sample.ndim != samples[0].ndim:
                raise ValueError(f"{self._where}: the samples of a batch must have one number of dimensions, but "
                                 f"sample 0{which} has {samples[0].ndim} and sample {index} has {sample.ndim}")
            if ndim is not None and sample.ndim != ndim:
                raise ValueError(f"{self._where}: sample {index}{which} has {sample.ndim} dimensions, but "
                                 f"ndim={ndim} was declared")
            if layout and sample.ndim != len(layout):
                raise ValueError(f"{self._where}: sample {index}{which} has {sample.ndim} dimensions, which "
                                 f"layout '{layout}' cannot describe")
        first = self._dtypes[output]
        if samples and first is not None and samples[0].dtype != first:
            raise TypeError(f"{self._where}: batch {self._batches_checked}{which} has dtype {samples[0].dtype}, "
                            f"but its first batch had {first}; a source keeps the dtype of its first batch "
                            "(convert the data, or declare dtype=)")
        if samples and self._ndims[output] is not None and samples[0].ndim != self._ndims[output]:
            raise ValueError(f"{self._where}: batch {self._batches_checked}{which} has {samples[0].ndim}-dimensional "
                             f"samples, but its first batch had {self._ndims[output]}-dimensional ones; a source keeps "
                             "the number of dimensions of its first batch")

    def load(self, item, sample: SampleContext) -> tuple:
        return item if isinstance(item, tuple) else (item,)

    def state(self) -> dict:
        if self._iterator is not None:
            raise TypeError("external_source: its source is an iterable, which cannot be rewound, so the pipeline "
                            "cannot be checkpointed; give a callable that takes the sample or batch info")
        return {"epoch": self._epoch, "iteration_in_epoch": self._iteration_in_epoch,
                "samples_in_epoch": self._samples_in_epoch}

    def restore(self, state: dict) -> None:
        self._epoch, self._iteration_in_epoch = int(state["epoch"]), int(state["iteration_in_epoch"])
        self._samples_in_epoch = int(state["samples_in_epoch"])

    def reset(self) -> None:
        self._samples_in_epoch = 0
        self._iteration_in_epoch = 0
        self._epoch += 1

    def declare_outputs(self, inputs):
        layouts = [self._fed_layout] if self._fed_layout is not None else self._declared_layouts
        return tuple(OutputSpec(None if dtype is None else dtype.numpy, ndim, layout)
                     for dtype, ndim, layout in zip(self._declared_types, self._declared_ndims, layouts))
