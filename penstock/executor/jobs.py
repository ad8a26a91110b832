"""The batches in flight and what is recorded while they run: errors, each naming its operator and
sample, and the seconds every thread spends in each operator and stage."""
from __future__ import annotations

import collections
import pickle
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from penstock.batch import Batch
from penstock.contract import EpochInfo

POLL_SECONDS = 0.1  # how often a waiting thread looks whether the pipeline is shutting down


class PipelineError(RuntimeError):
    """An operator failed on a sample; the message names the operator and the sample's source,
    which ``operator``, ``source`` and ``reason`` also hold (empty where unknown)."""

    def __init__(self, message: str, operator: str = "", source: str = "", reason: str = ""):
        super().__init__(message)
        self.operator, self.source, self.reason = operator, source, reason

    def __reduce__(self):
        """From a worker process: the message, the fields and the original exception as the cause
        when it pickles (with the worker's traceback as a note on it; tracebacks do not pickle)."""
        return _rebuilt_error, (str(self), self.operator, self.source, self.reason, _portable_cause(self.__cause__))


def _portable_cause(cause: BaseException | None) -> BaseException | None:
    if cause is None:
        return None
    try:
        pickle.loads(pickle.dumps(cause))
    except Exception:
        return None
    if cause.__traceback__ is not None:  # once: the traceback is dropped once it is a note
        cause.add_note("raised in a penstock worker process:\n" + "".join(traceback.format_tb(cause.__traceback__)))
        cause.with_traceback(None)
    return cause


def _rebuilt_error(message: str, operator: str, source: str, reason: str, cause: BaseException | None):
    error = PipelineError(message, operator, source, reason)
    error.__cause__ = cause
    return error


class Skipped(NamedTuple):
    """A sample left out under ``on_error="skip"``: where it came from, the operator that failed
    on it and why."""

    source: str
    operator: str
    reason: str


@dataclass
class IterationResult:
    outputs: tuple[Batch, ...]
    epoch_info: EpochInfo | None
    iteration: int


@dataclass
class Job:
    """One batch in flight."""

    iteration: int
    size: int = 0
    source_items: dict = field(default_factory=dict)
    source_infos: list = field(default_factory=list)
    params: dict = field(default_factory=dict)
    values: list = field(default_factory=list)  # per kept value (see ExecutionPlan.kept): per-sample values
    buffers: list = field(default_factory=list)  # per kept value: dense buffer or None
    ragged: list = field(default_factory=list)
    gpu_outputs: dict = field(default_factory=dict)  # output index -> GpuBatch
    ring_ends: dict = field(default_factory=dict)  # worker process link -> end of this batch's data in its ring
    gpu_stream: Any = None  # the CUDA stream of this batch's GPU stage
    gpu_values: Any = None  # what its batch operators returned, until its outputs are made
    epoch_info: EpochInfo | None = None
    finished: Any = None  # itertools.count: how many samples the workers have finished
    error: BaseException | None = None
    stop: bool = False  # a source ended (StopIteration)
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    skip_failures: bool = False  # on_error="skip": a sample an operator fails on is left out
    failed: dict = field(default_factory=dict)  # sample index -> its PipelineError, under skip_failures
    skipped: list = field(default_factory=list)  # Skipped records of this batch, once refilled
    source_states: dict | None = None  # with checkpointing: each source's state after this batch

    def record_error(self, error: BaseException) -> None:
        """Keeps the batch's first error; the consumer raises it."""
        with self.lock:
            if self.error is None:
                self.error = error

    def record_failure(self, index: int, error: BaseException) -> None:
        """A sample failed: under ``skip_failures`` an operator's failure leaves the sample to be
        replaced (``executor.skipping``), anything else fails the batch."""
        if self.skip_failures and isinstance(error, PipelineError):
            with self.lock:
                self.failed[index] = error
        else:
            self.record_error(error)


def finish_samples(tasks: list, error: BaseException | None = None) -> None:
    """Counts the samples of ``tasks`` ((job, index) pairs) as finished, failed with ``error`` when
    one is given; a job whose samples have all finished is done."""
    for job, _ in tasks:
        if error is not None:
            job.record_error(error)
        if next(job.finished) == job.size - 1:
            job.done.set()


def call_operator(op_name: str, source_info: str, function, *args):
    """``function(*args)``, its exceptions turned into a PipelineError naming the operator and the
    sample's source."""
    try:
        return function(*args)
    except PipelineError:
        raise
    except Exception as error:
        where = f" on sample from '{source_info}'" if source_info else ""
        reason = f"{type(error).__name__}: {error}"
        raise PipelineError(f"{op_name} failed{where}: {reason}", op_name, source_info, reason) from error


def as_tuple(result, count: int) -> tuple:
    """An operator's result as the tuple of its ``count`` outputs."""
    if count == 1:
        return (result,)
    return tuple(result)


class StageTimes:
    """Seconds spent in each operator and stage: every thread adds to a dictionary of its own (no
    lock while running), and ``totals`` sums them."""

    def __init__(self):
        self._local = threading.local()
        self._per_thread: list[dict] = []
        self._lock = threading.Lock()

    def of_this_thread(self) -> dict:
        """The calling thread's dictionary, stage -> seconds."""
        timings = getattr(self._local, "timings", None)
        if timings is None:
            timings = self._local.timings = collections.defaultdict(float)
            with self._lock:
                self._per_thread.append(timings)
        return timings

    def totals(self) -> dict[str, float]:
        totals: dict[str, float] = collections.defaultdict(float)
        with self._lock:
            for timings in self._per_thread:
                for stage, seconds in list(timings.items()):
                    totals[stage] += seconds
        return dict(totals)


class WorkerCalls:
    """CPU work that the GPU stage hands back to the CPU workers (images the GPU decoders refused):
    the workers take these calls before their next sample. ``wake`` rouses an idle worker; the
    thread that hands calls over waits for them (``run``) and stops waiting when the pipeline
    shuts down."""

    WAKE = object()  # put among the worker threads' tasks: take the waiting calls

    def __init__(self, wake, stopping: threading.Event):
        self._calls: collections.deque = collections.deque()
        self._wake = wake
        self._stopping = stopping

    def __bool__(self) -> bool:
        return bool(self._calls)

    def run(self, calls: list) -> None:
        """Runs ``calls`` on the workers; returns once all have run, raising the first one's error."""
        if not calls:
            return
        left = [len(calls)]
        errors: dict = {}  # position of the call -> its error
        lock, finished = threading.Lock(), threading.Event()

        def counted(position, call):
            def run_counted():
                try:
                    call()
                except BaseException as error:
                    errors[position] = error
                with lock:
                    left[0] -= 1
                    if left[0] == 0:
                        finished.set()
            return run_counted

        for position, call in enumerate(calls):
            self._calls.append(counted(position, call))
            self._wake()
        while not finished.wait(timeout=POLL_SECONDS):
            if self._stopping.is_set():
                raise RuntimeError("the pipeline was shut down")
        if errors:
            raise errors[min(errors)]

    def run_waiting(self) -> None:
        """Runs the calls handed over so far (a worker's side)."""
        while True:
            try:
                call = self._calls.popleft()
            except IndexError:
                return
            call()
