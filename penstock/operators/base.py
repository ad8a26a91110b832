"""The contract between operator implementations and the executor.

Two kinds of implementation:
- ``SourceOperator`` (readers, external sources, random generators) makes each batch's list of
  per-sample items in order, in one thread (``next_batch``); the heavy part of turning an item into
  data (reading a file) is ``load``, which the executor runs on its worker threads.
- ``SampleOperator`` transforms one sample at a time on a worker thread (``run``). Random values are
  drawn for the whole batch beforehand (``draw``) from a stream keyed by (seed, operator, iteration),
  so results do not depend on which thread runs which sample.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class BuildContext:
    """What an implementation knows about the pipeline it belongs to."""

    batch_size: int
    num_threads: int
    device_id: int | None
    seed: int  # this operator's seed, already derived from the pipeline's
    pipeline: Any = None


@dataclass
class EpochInfo:
    """Where a source's batch stands in its epoch: the first ``valid`` samples are real data of
    epoch ``epoch``; the rest pad a short last batch. ``last`` marks the epoch's last batch."""

    epoch: int
    valid: int
    last: bool


@dataclass
class SourceBatch:
    """One batch from a source: per-sample items, and epoch bookkeeping when the source has epochs."""

    items: list
    epoch_info: EpochInfo | None = None
    source_infos: list[str] | None = None


@dataclass
class SampleContext:
    """One sample's place in its batch, for random draws and error messages."""

    index: int
    source_info: str = ""
    params: Any = None
    extra: dict = field(default_factory=dict)


class Operator:
    schema = None  # set by registry.register

    def __init__(self, args: dict, context: BuildContext):
        self.args = args
        self.context = context

    @property
    def name(self) -> str:
        return self.schema.name

    @property
    def device(self) -> str:
        return self.args.get("device", "cpu")


class SourceOperator(Operator):
    def next_batch(self, iteration: int) -> SourceBatch:
        raise NotImplementedError

    def load(self, item, sample: SampleContext) -> tuple:
        """Turns one item of ``next_batch`` into the operator's outputs (runs on a worker thread)."""
        return item

    def reset(self) -> None:
        """Starts over after the source signalled its end with StopIteration."""

    def epoch_size(self) -> int:
        raise ValueError(f"{self.name} has no epoch size")

    def shutdown(self) -> None:
        """Releases anything waiting on the user (fed inputs)."""


class SampleOperator(Operator):
    def draw(self, rng: np.random.Generator, count: int) -> list | None:
        """Random parameters for ``count`` samples; element i reaches run() as ``sample.params``."""
        return None

    def output_spec(self, inputs: tuple, args: dict) -> tuple[tuple[int, ...], np.dtype] | None:
        """(shape, dtype) of the single output for these inputs, when known before running; lets the
        executor hand ``run`` a slot of a preallocated batch buffer as ``out``."""
        return None

    def run(self, inputs: tuple, args: dict, sample: SampleContext, out: np.ndarray | None = None):
        """Returns the output (or a tuple of outputs) for one sample; writes into ``out`` if given."""
        raise NotImplementedError

    def output_layout(self, input_layouts: tuple[str, ...]) -> str:
        return input_layouts[0] if input_layouts else ""


@dataclass
class BatchContext:
    """What a batch operator gets besides its inputs: random draws (element i for sample i), the
    samples' sources for error messages, and the CUDA stream and device its work goes to."""

    params: Any
    source_infos: list
    stream: Any
    device: Any


class BatchOperator(Operator):
    """Runs on a whole batch at once on the executor's GPU stage (devices 'mixed' and 'gpu').

    Inputs arrive as the producing operator left them: a list of numpy arrays for CPU data, a
    ``GpuBatch`` or a deferred ``ImagePlan`` for GPU data. ``args`` has one dict per sample.
    """

    prepares_on_cpu = False  # True: prepare() runs per sample on the CPU workers, run_batch gets its results

    def draw(self, rng: np.random.Generator, count: int) -> list | None:
        return None

    def prepare(self, inputs: tuple, args: dict, sample: SampleContext):
        """Per-sample work on the CPU (parsing headers, choosing windows) ahead of run_batch."""
        raise NotImplementedError

    def close(self) -> None:
        """Stops what the operator started (threads, native resources): the pipeline's GPU stage
        has stopped and will not call it again."""

    def run_batch(self, inputs: list, args: list[dict], batch: BatchContext):
        raise NotImplementedError

    def output_layout(self, input_layouts: tuple[str, ...]) -> str:
        return input_layouts[0] if input_layouts else ""
