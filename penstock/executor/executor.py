"""Executor internals: the plan, the batch jobs, the threads and the buffer pool."""
from __future__ import annotations

import atexit
import collections
import contextlib
import gc
import itertools
import multiprocessing
import multiprocessing.connection
import queue
import signal
import sys
import threading
import time
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from penstock.batch import Batch, GpuBatch
from penstock.draws import UniformBlocks
from penstock.executor.shared_ring import SharedRing
from penstock.contract import (BatchContext, BatchOperator, DeferredBatch, EpochInfo, SampleContext, SourceOperator,
                               random_stream)

_POLL_SECONDS = 0.1
# Python worker threads beyond this many cost more in contention for the interpreter lock than
# they add: the ResNet-50 training pipeline on 16 cores ran at 3,300 images/s with 8 workers and
# 2,100 with 16 (BENCHMARKS.md). A pipeline's num_threads above it still sizes native thread pools
# (nvImageCodec's CPU threads).
MAX_PYTHON_WORKERS = 8
PROCESS_CHUNK = 32  # samples per message to a worker process, at most
GPU_BATCHES_IN_FLIGHT = 2  # the GPU stage starts a batch before finishing the one before it
PREPARED = -1  # the output position under which a batch operator's per-sample preparation is kept
_live_executors: "weakref.WeakSet[Executor]" = weakref.WeakSet()


class PipelineError(RuntimeError):
    """An operator failed on a sample; the message names the operator and the sample's source."""


@dataclass
class Step:
    """One operator of the plan, with where its inputs come from (keys into a sample's values)."""

    key: int
    impl: Any
    inputs: tuple[tuple[int, int], ...]
    arg_inputs: dict[str, tuple[int, int]]
    num_outputs: int


@dataclass
class IterationResult:
    outputs: tuple[Batch, ...]
    epoch_info: EpochInfo | None
    iteration: int


@dataclass
class _Job:
    """One batch in flight."""

    iteration: int
    size: int = 0
    source_items: dict = field(default_factory=dict)
    source_infos: list = field(default_factory=list)
    params: dict = field(default_factory=dict)
    values: list = field(default_factory=list)  # per kept value (see Executor._kept): per-sample arrays
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


class BufferPool:
    """Reuses output buffers once nobody outside the pool refers to them any more.

    A batch handed to the user (or a torch tensor made from it without a copy) keeps a reference
    to its buffer; while it lives, the buffer is not reused.
    """

    def __init__(self, keep: int):
        self._buffers: list[np.ndarray] = []
        self._keep = keep
        self._lock = threading.Lock()

    def acquire(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        with self._lock:
            for position, buffer in enumerate(self._buffers):
                # references: the list, the loop variable, getrefcount's argument
                if buffer.shape == shape and buffer.dtype == dtype and sys.getrefcount(buffer) <= 3:
                    return buffer
            buffer = np.empty(shape, dtype)
            self._buffers.append(buffer)
            if len(self._buffers) > self._keep:
                self._buffers.pop(0)
            return buffer


class Executor:
    def __init__(self, sources: list[tuple[int, SourceOperator, int]], steps: list[Step],
                 outputs: list[tuple[int, int]], output_layouts: list[str], batch_size: int,
                 num_threads: int, prefetch_depth: int, seed: int, device=None, worker_processes: bool | None = False):
        self._sources = sources  # (key, impl, number of outputs)
        self._steps = steps
        self._cpu_steps = [step for step in steps if not isinstance(step.impl, BatchOperator)]
        self._gpu_steps = [step for step in steps if isinstance(step.impl, BatchOperator)]
        self._device = device
        self._outputs = outputs
        self._output_layouts = output_layouts
        self._batch_size = batch_size
        self._seed = seed
        # batches prepared ahead of the consumer: prefetch_depth finished or in the CPU stage, and,
        # as each stage has its own in DALI, the GPU stage's own (GPU_BATCHES_IN_FLIGHT): else
        # the CPU workers would wait while the GPU stage holds two batches
        self._depth = max(1, prefetch_depth) + (GPU_BATCHES_IN_FLIGHT if self._gpu_steps else 0)
        self._kept = self._find_kept_values()
        self._dense_slots = {self._kept[ref] for ref in outputs if ref in self._kept}
        self._pools = [BufferPool(keep=self._depth + 3) for _ in self._kept]
        self._dense_outputs = self._find_dense_outputs()
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._in_flight: queue.Queue = queue.Queue()
        self._ready: queue.Queue = queue.Queue()  # after the GPU stage, when there is one
        self._gpu_pending: collections.deque = collections.deque()  # (event, inputs kept alive until it)
        self._local = threading.local()
        self._timings: list[dict] = []  # one per thread: stage -> seconds, summed by stage_seconds()
        self._timings_lock = threading.Lock()
        self._slots = threading.Semaphore(self._depth)
        self._resume = threading.Event()
        self._stopping = threading.Event()
        self._next_iteration = 0
        self._failure: BaseException | None = None
        self._end_delivered = False  # the consumer got StopIteration and has not called reset() yet
        # worker processes: for CPU pipelines, and GPU pipelines whose batch operators prepare
        # nothing on the CPU or prepare plain data that can cross to this process
        can_use_processes = "fork" in multiprocessing.get_all_start_methods() and all(
            step.impl.preparation_crosses_processes or not self._prepared_on_cpu(step) for step in self._gpu_steps)
        if worker_processes is None:  # by default for pipelines whose GPU stage takes per-sample preparation
            worker_processes = any(self._prepared_on_cpu(step) for step in self._gpu_steps)
        self._use_processes = worker_processes and can_use_processes
        self._links: list | None = None
        self._ring_slots: set[int] = set()
        if self._use_processes:
            # one thread hands samples to the processes and collects their results: every further
            # Python thread here would compete with the GPU stage for the interpreter lock
            self._process_count = max(1, num_threads)
            # the GPU stage's per-sample inputs (encoded images, CPU-decoded pixels) come back through
            # shared memory, read in place, and are released once the batch's GPU stage has run
            self._ring_slots = {slot for (key, position), slot in self._kept.items() if position == PREPARED}
            self._doorbell = multiprocessing.Pipe(duplex=False)  # rung when samples are queued
            self._workers = [threading.Thread(target=self._dispatch, name="penstock-dispatcher", daemon=True)]
        else:
            self._workers = [threading.Thread(target=self._work, name=f"penstock-worker-{i}", daemon=True)
                             for i in range(worker_count(num_threads))]
        self._producer = threading.Thread(target=self._produce_loop, name="penstock-producer", daemon=True)
        self._gpu_thread = threading.Thread(target=self._gpu_loop, name="penstock-gpu", daemon=True) \
            if self._gpu_steps else None
        self._started = False
        _live_executors.add(self)

    # ---- consumer side -------------------------------------------------------------------
    def start(self) -> None:
        if self._started:
            return
        self._started = True
        if self._use_processes:  # forked before this executor's threads exist
            self._links = [ProcessLink(self) for _ in range(self._process_count)]
        for worker in self._workers:
            worker.start()
        self._resume.set()
        self._producer.start()
        if self._gpu_thread is not None:
            self._gpu_thread.start()

    def next(self) -> IterationResult:
        """The next batch, in order; raises StopIteration at a source's end, or the worker's error."""
        if self._failure is not None:
            raise self._failure
        if self._stopping.is_set():  # closed: batches prepared ahead are not handed out any more
            raise RuntimeError("the pipeline was shut down (close()); make a new one to run again")
        if self._end_delivered:  # nothing more comes before reset(): say so again rather than wait
            raise StopIteration
        self.start()
        try:
            job = self._wait(self._ready if self._gpu_thread is not None else self._in_flight)
            self._wait_event(job.done)
        except BaseException:
            self.shutdown()
            raise
        self._slots.release()
        if job.error is not None:
            self._failure = job.error
            self.shutdown()
            raise job.error
        if job.stop:
            self._end_delivered = True
            raise StopIteration
        return IterationResult(self._assemble(job), job.epoch_info, job.iteration)

    @property
    def ended(self) -> bool:
        """Whether a source signalled its end and the producer waits for reset()."""
        return not self._resume.is_set()

    def set_output_layouts(self, layouts: list[str]) -> None:
        """The layouts of the outputs of batches handed out from now on (feed_input may set one)."""
        self._output_layouts = list(layouts)

    def reset(self) -> None:
        """Lets sources that ended start over."""
        self._end_delivered = False
        if not self._resume.is_set():
            for _, source, _ in self._sources:
                source.reset()
            self._resume.set()

    def shutdown(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._resume.set()
        self._slots.release()  # wakes a producer waiting for a free slot, so that it sees the stop now
        for _, source, _ in self._sources:
            source.shutdown()
        for _ in self._workers:
            self._tasks.put(None)
        if self._links is not None:
            self._doorbell[1].send_bytes(b"")
        current = threading.current_thread()
        for thread in (*self._workers, self._producer, self._gpu_thread):
            if thread is not None and thread.is_alive() and thread is not current:
                thread.join(timeout=10)
        for link in self._links or ():
            link.close()
        if self._gpu_thread is None or not self._gpu_thread.is_alive():
            for step in self._gpu_steps:
                step.impl.close()

    def _timer(self) -> dict:
        timings = getattr(self._local, "timings", None)
        if timings is None:
            timings = self._local.timings = collections.defaultdict(float)
            with self._timings_lock:
                self._timings.append(timings)
        return timings

    def stage_seconds(self) -> dict[str, float]:
        """Seconds spent so far in each operator and stage, summed over threads (CPU operators run on
        several threads at once, so their sum can exceed the wall time)."""
        totals: dict[str, float] = collections.defaultdict(float)
        with self._timings_lock:
            for timings in self._timings:
                for stage, seconds in list(timings.items()):
                    totals[stage] += seconds
        return dict(totals)

    def _wait(self, source_queue: queue.Queue):
        while True:
            try:
                return source_queue.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                if self._stopping.is_set():
                    raise RuntimeError("the pipeline was shut down") from None

    def _wait_event(self, event: threading.Event) -> None:
        while not event.wait(timeout=_POLL_SECONDS):
            if self._stopping.is_set():
                raise RuntimeError("the pipeline was shut down")

    # ---- producer --------------------------------------------------------------------------
    def _produce_loop(self) -> None:
        while not self._stopping.is_set():
            if not self._slots.acquire(timeout=_POLL_SECONDS):
                continue
            while not self._resume.wait(timeout=_POLL_SECONDS):
                if self._stopping.is_set():
                    return
            if self._stopping.is_set():
                return
            job = _Job(iteration=self._next_iteration)
            started = time.perf_counter()
            try:
                self._prepare(job)
            except StopIteration:
                job.stop = True
                self._resume.clear()
            except BaseException as error:  # surfaces in the consumer's thread
                job.error = error
            self._timer()["sources, random draws (producer thread)"] += time.perf_counter() - started
            if job.stop or job.error is not None or job.size == 0:
                job.done.set()
                self._in_flight.put(job)
                if job.error is not None:
                    return
                continue
            self._next_iteration += 1
            self._in_flight.put(job)
            for index in range(job.size):
                self._tasks.put((job, index))
            if self._links is not None:
                self._doorbell[1].send_bytes(b"")

    def _prepare(self, job: _Job) -> None:
        size = None
        for key, source, _ in self._sources:
            batch = source.next_batch(job.iteration)
            if size is not None and len(batch.items) != size:
                raise ValueError(f"{source.name}: gave {len(batch.items)} samples while another source "
                                 f"gave {size} for the same batch")
            size = len(batch.items)
            job.source_items[key] = batch.items
            if batch.source_infos is not None:
                job.source_infos = batch.source_infos
            if batch.epoch_info is not None and job.epoch_info is None:
                job.epoch_info = batch.epoch_info
        job.size = size or 0
        for step in self._steps:
            rng = random_stream(step.impl.context.seed, job.iteration)
            job.params[step.key] = step.impl.draw(rng, job.size)
        job.values = [[None] * job.size for _ in self._kept]
        job.buffers = [None] * len(self._kept)
        job.ragged = [False] * len(self._kept)
        job.finished = itertools.count()

    # ---- workers ---------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:  # shut down
                return
            job, index = task
            if job.error is None and not self._stopping.is_set():
                try:
                    kept = self._compute_sample(*self._request(job, index), job)
                except BaseException as error:
                    _record_error(job, error)
                else:
                    for slot, value in enumerate(kept):
                        job.values[slot][index] = value
            self._finish([task])

    def _request(self, job: _Job, index: int) -> tuple:
        """What computing one sample needs: (source items, random draws, index, source info)."""
        source_info = job.source_infos[index] if job.source_infos else ""
        items = {key: job.source_items[key][index] for key, _, _ in self._sources}
        params = {key: (None if draws is None else draws[index]) for key, draws in job.params.items()}
        return items, params, index, source_info

    # ---- worker processes --------------------------------------------------------------------
    def _requests(self, tasks: list) -> list:
        """What the samples of ``tasks`` need, as one block per batch: (indices, source infos, each
        source's items, each operator's draws). A block carries a draws array once, sliced for its
        samples, rather than one small array per sample: pickling is what this thread spends most on."""
        blocks, by_job = [], {}
        for job, index in tasks:
            if id(job) not in by_job:
                by_job[id(job)] = []
                blocks.append((job, by_job[id(job)]))
            by_job[id(job)].append(index)
        message = []
        for job, indices in blocks:
            infos = [job.source_infos[index] for index in indices] if job.source_infos else None
            items = [_column([job.source_items[key][index] for index in indices]) for key, _, _ in self._sources]
            params = [None if draws is None else draws[indices] if isinstance(draws, (np.ndarray, UniformBlocks))
                      else [draws[index] for index in indices] for draws in job.params.values()]
            message.append((indices, infos, items, list(job.params), params))
        return message

    def _dispatch(self) -> None:
        """Hands queued samples to idle worker processes, up to PROCESS_CHUNK per message (one
        message carries several samples, which saves hand-offs here), and stores their results."""
        busy: dict = {}  # connection -> (link, tasks)
        try:
            self._dispatch_loop(busy)
        except BaseException as error:  # fails the batches in flight rather than leave the consumer waiting
            for _, tasks in busy.values():
                self._finish(tasks, error)
            while not self._stopping.is_set():
                try:
                    task = self._tasks.get(timeout=_POLL_SECONDS)
                except queue.Empty:
                    continue
                if task is None:
                    return
                self._finish([task], error)

    def _dispatch_loop(self, busy: dict) -> None:
        idle = list(self._links)
        doorbell = self._doorbell[0]
        closing = False
        while not self._stopping.is_set():
            while idle and not closing:
                tasks = self._waiting_tasks(max(1, min(PROCESS_CHUNK, self._tasks.qsize() // len(idle))))
                if tasks and tasks[-1] is None:
                    closing = True
                    tasks.pop()
                tasks = [(job, index) for job, index in tasks if not self._skip(job)]
                if not tasks:
                    break
                link = idle.pop()
                busy[link.connection] = (link, tasks)
                try:
                    link.send(self._requests(tasks))
                except RuntimeError as error:  # the process is gone: these samples fail, it gets no more
                    del busy[link.connection]
                    self._finish(tasks, error)
                    continue
            if closing and not busy:
                return
            for connection in multiprocessing.connection.wait([doorbell, *busy], timeout=_POLL_SECONDS):
                if connection is doorbell:
                    doorbell.recv_bytes()
                    continue
                link, tasks = busy.pop(connection)
                try:
                    replies = link.receive()
                except RuntimeError as error:
                    self._finish(tasks, error)
                    continue
                ring = link.ring
                for (job, index), (error, payload) in zip(tasks, _replies(replies)):
                    if error is not None:
                        _record_error(job, error)
                        continue
                    for slot, value in enumerate(payload):
                        if slot in self._ring_slots:
                            value, end = ring.resolve(value)
                            if end > job.ring_ends.get(link, 0):
                                job.ring_ends[link] = end
                        if job.error is None:
                            job.values[slot][index] = self._store(job, slot, index, value)
                self._finish(tasks)
                idle.append(link)

    def _waiting_tasks(self, count: int) -> list:
        """Up to ``count`` queued tasks, without waiting; a None (shut down) ends the list."""
        tasks = []
        while len(tasks) < count and (not tasks or tasks[-1] is not None):
            try:
                tasks.append(self._tasks.get_nowait())
            except queue.Empty:
                break
        return tasks

    def _skip(self, job: _Job) -> bool:
        """Whether a task's batch already failed (its other samples are not computed)."""
        if job.error is None and not self._stopping.is_set():
            return False
        self._finish([(job, None)])
        return True

    @staticmethod
    def _finish(tasks: list, error: BaseException | None = None) -> None:
        for job, _ in tasks:
            if error is not None:
                _record_error(job, error)
            if next(job.finished) == job.size - 1:
                job.done.set()

    def _store(self, job: _Job, slot: int, index: int, value):
        """A value computed in a worker process: copied into its output's batch buffer when dense."""
        if slot not in self._dense_slots or job.ragged[slot] or not isinstance(value, np.ndarray):
            return value
        buffer = job.buffers[slot]
        if buffer is None:
            with job.lock:
                buffer = job.buffers[slot]
                if buffer is None:
                    buffer = job.buffers[slot] = self._pools[slot].acquire((job.size, *value.shape), value.dtype)
        if buffer.shape[1:] != value.shape or buffer.dtype != value.dtype:
            job.ragged[slot] = True
            return value
        buffer[index] = value
        return buffer[index]

    def _compute_sample(self, items: dict, params: dict, index: int, source_info: str, job: _Job | None = None) -> list:
        """Every per-sample CPU step for one sample; returns the kept values in slot order. With
        ``job``, outputs are written straight into the job's batch buffers."""
        values: dict[tuple[int, int], Any] = {}
        timings = self._timer()
        clock = time.perf_counter
        for key, source, num_outputs in self._sources:
            sample = SampleContext(index, source_info)
            started = clock()
            result = _call(source.name, source_info, source.load, items[key], sample)
            timings[source.name] += clock() - started
            for position, value in enumerate(result):
                values[(key, position)] = value
        for step in self._cpu_steps:
            inputs = tuple(values[ref] for ref in step.inputs)
            args = step.impl.args
            if step.arg_inputs:
                args = _call(step.impl.name, source_info, _sample_args, step.impl, step.arg_inputs, values)
            sample = SampleContext(index, source_info, params[step.key])
            out = self._output_slot(job, step, inputs, args, index) if job is not None else None
            started = clock()
            result = _as_tuple(_call(step.impl.name, source_info, step.impl.run, inputs, args, sample, out),
                               step.num_outputs)
            timings[step.impl.name] += clock() - started
            for position, value in enumerate(result):
                values[(step.key, position)] = value
        for step in self._gpu_steps:
            if (step.key, PREPARED) in self._kept:
                inputs = tuple(values[ref] for ref in step.inputs)
                args = step.impl.args
                if step.arg_inputs:
                    args = _call(step.impl.name, source_info, _sample_args, step.impl, step.arg_inputs, values)
                sample = SampleContext(index, source_info, params[step.key])
                started = clock()
                values[(step.key, PREPARED)] = _call(step.impl.name, source_info, step.impl.prepare, inputs, args, sample)
                timings[f"{step.impl.name} (cpu part)"] += clock() - started
        return [values[ref] for ref in self._kept]

    def _find_kept_values(self) -> dict[tuple[int, int], int]:
        """The per-sample values kept after the CPU stage (pipeline outputs computed on the CPU, and CPU
        values the GPU stage reads), each with its slot in a job's ``values``."""
        gpu_keys = {step.key for step in self._gpu_steps}
        wanted = [ref for ref in self._outputs if ref[0] not in gpu_keys]
        for step in self._gpu_steps:
            if self._prepared_on_cpu(step):
                wanted.append((step.key, PREPARED))
            else:
                wanted.extend(ref for ref in (*step.inputs, *step.arg_inputs.values()) if ref[0] not in gpu_keys)
        return {ref: slot for slot, ref in enumerate(dict.fromkeys(wanted))}

    def _prepared_on_cpu(self, step: Step) -> bool:
        """Whether a batch operator's per-sample preparation runs on the CPU workers: it has one, and
        all its inputs are CPU data."""
        gpu_keys = {s.key for s in self._gpu_steps}
        return step.impl.prepares_on_cpu and \
            not any(ref[0] in gpu_keys for ref in (*step.inputs, *step.arg_inputs.values()))

    def _find_dense_outputs(self) -> dict[int, int]:
        """Step key -> the kept slot of the pipeline output it may write into directly."""
        dense = {}
        for ref in self._outputs:
            step = next((s for s in self._cpu_steps if s.key == ref[0]), None)
            if step is not None and step.num_outputs == 1 and ref[0] not in dense and ref in self._kept:
                dense[ref[0]] = self._kept[ref]
        return dense

    def _output_slot(self, job: _Job, step: Step, inputs: tuple, args: dict, index: int):
        output_index = self._dense_outputs.get(step.key)
        if output_index is None or job.ragged[output_index]:
            return None
        spec = step.impl.output_spec(inputs, args)
        if spec is None:
            return None
        shape, dtype = tuple(spec[0]), np.dtype(spec[1])
        buffer = job.buffers[output_index]
        if buffer is None:  # the first sample allocates; checked again under the lock
            with job.lock:
                buffer = job.buffers[output_index]
                if buffer is None:
                    buffer = self._pools[output_index].acquire((job.size, *shape), dtype)
                    job.buffers[output_index] = buffer
        if buffer.shape[1:] != shape or buffer.dtype != dtype:
            job.ragged[output_index] = True
            return None
        return buffer[index]

    def _assemble(self, job: _Job) -> tuple:
        batches = []
        for output_index, ref in enumerate(self._outputs):
            if output_index in job.gpu_outputs:
                batches.append(job.gpu_outputs[output_index])
                continue
            slot = self._kept[ref]
            samples = job.values[slot]
            layout = self._output_layouts[output_index]
            buffer = job.buffers[slot]
            if buffer is not None and not job.ragged[slot] and all(sample.base is buffer for sample in samples):
                batches.append(Batch(samples, layout, dense=buffer))
            else:
                batches.append(Batch(samples, layout))
        return tuple(batches)

    # ---- GPU stage ---------------------------------------------------------------------------
    def _gpu_loop(self) -> None:
        """Batches in order, two at a time: batch i+1's operators are started (its decode queued on
        the decoders) before batch i's outputs are made (waiting for its decode, launching its
        kernel), so the decoders have the next batch while this thread works on the current one.
        Each of the two gets its own CUDA stream: batch i's kernel never waits behind batch i+1's
        decode.

        CUDA objects (streams, the batches in progress) hang off the executor, not this thread's
        frame: when another pipeline forks its worker processes, the child discards the frames of
        the threads it did not inherit, and a CUDA object freed there aborts it."""
        import torch
        self._gpu_streams = [torch.cuda.Stream(self._device) if self._device.type == "cuda" else None
                             for _ in range(GPU_BATCHES_IN_FLIGHT)]
        self._gpu_started = None  # a batch whose operators ran, outputs not yet made
        self._gpu_taken = None  # the next batch, taken from the queue; its CPU stage may still be running
        self._gpu_finishing = None  # the batch whose outputs are being made
        while not self._stopping.is_set():
            if self._gpu_taken is None:
                try:
                    self._gpu_taken = self._in_flight.get(timeout=_POLL_SECONDS) if self._gpu_started is None \
                        else self._in_flight.get_nowait()
                except queue.Empty:
                    pass
            taken = self._gpu_taken
            if taken is None or not taken.done.wait(timeout=_POLL_SECONDS if self._gpu_started is None else 0):
                if self._gpu_started is not None:  # nothing to start now: finish the started batch rather than wait
                    self._gpu_finishing, self._gpu_started = self._gpu_started, None
                    self._finish_gpu(self._gpu_finishing)
                    self._gpu_finishing = None
                continue
            self._start_gpu(taken, self._gpu_streams[taken.iteration % GPU_BATCHES_IN_FLIGHT])
            self._gpu_finishing, self._gpu_started, self._gpu_taken = self._gpu_started, taken, None
            del taken
            if self._gpu_finishing is not None:
                self._finish_gpu(self._gpu_finishing)
                self._gpu_finishing = None

    def _start_gpu(self, job: _Job, stream) -> None:
        """The batch operators of one batch, in graph order, queued on ``stream``; what they
        return may be deferred (an ImagePlan, a decode in flight)."""
        job.gpu_stream = stream
        if job.error is not None or job.stop or job.size == 0:
            return
        import torch
        values: dict[tuple[int, int], Any] = {}
        job.gpu_values = values  # (filled below) held by the job, not only by this frame

        def batch_value(ref):
            return values[ref] if ref in values else job.values[self._kept[ref]]

        try:
            with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                for step in self._gpu_steps:
                    impl = step.impl
                    prepared = (step.key, PREPARED) in self._kept
                    inputs = [batch_value((step.key, PREPARED))] if prepared else \
                        [batch_value(ref) for ref in step.inputs]
                    if step.arg_inputs:
                        args = _batch_args(impl, {name: batch_value(ref) for name, ref in step.arg_inputs.items()},
                                           job.size)
                    else:
                        args = [impl.args] * job.size
                    context = BatchContext(job.params[step.key], job.source_infos, stream, self._device)
                    begun = time.perf_counter()
                    result = _as_tuple(_call(impl.name, "", impl.run_batch, inputs, args, context), step.num_outputs)
                    self._timer()[f"{impl.name} ({impl.device})"] += time.perf_counter() - begun
                    for position, value in enumerate(result):
                        values[(step.key, position)] = value
        except BaseException as error:  # surfaces in the consumer's thread
            job.error = error

    def _finish_gpu(self, job: _Job) -> None:
        """Makes the batch's outputs (running deferred work), then hands the batch on."""
        stream = job.gpu_stream
        if job.error is None and not job.stop and job.size > 0:
            try:
                import torch
                with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                    self._make_gpu_outputs(job, stream)
            except BaseException as error:
                job.error = error
        job.gpu_values = None
        for link, end in job.ring_ends.items():  # the GPU stage has read this batch's inputs
            link.ring.release(end)
        self._ready.put(job)

    def _make_gpu_outputs(self, job: _Job, stream) -> None:
        values = job.gpu_values
        ready = None
        if stream is not None:
            import torch
            ready = torch.cuda.Event()
        for output_index, ref in enumerate(self._outputs):
            if ref not in values:
                continue
            begun = time.perf_counter()
            samples, dense = _materialize(values[ref])
            self._timer()["decode wait + fused image kernel (gpu, launch)"] += time.perf_counter() - begun
            job.gpu_outputs[output_index] = GpuBatch(samples, self._output_layouts[output_index], dense, ready)
        if ready is not None:
            ready.record(stream)
            # the inputs (decoded images, staging copies) stay referenced until the GPU has used them
            self._gpu_pending.append((ready, values))
            while self._gpu_pending and self._gpu_pending[0][0].query():
                self._gpu_pending.popleft()


class ProcessLink:
    """A forked worker process that computes samples for one worker thread: the thread sends the
    sample's source items and random draws, the process runs every per-sample operator and sends
    back the results. Python runs in parallel across processes, without one interpreter lock."""

    def __init__(self, executor: "Executor"):
        context = multiprocessing.get_context("fork")
        self._connection, child = context.Pipe()
        self.ring = SharedRing() if executor._ring_slots else None
        self._process = context.Process(target=_serve_samples, args=(executor, child, self.ring), daemon=True,
                                        name="penstock-worker-process")
        with warnings.catch_warnings():
            # Python 3.12 warns about forking a process that has threads; the child only runs
            # operators, which take no locks those threads could hold
            warnings.simplefilter("ignore", DeprecationWarning)
            # the child must never free what it inherits: garbage not yet collected here may hold
            # CUDA objects (events, tensors), and freeing one in a forked child aborts it. Frozen
            # objects are left alone by the child's collector (and stay unshared pages there).
            gc.freeze()
            try:
                self._process.start()
            finally:
                gc.unfreeze()
        child.close()

    @property
    def connection(self):
        return self._connection

    def send(self, requests: list) -> None:
        """Asks for (items, params, index, source_info) samples; receive() gets the results."""
        try:
            self._connection.send(requests)
        except (OSError, BrokenPipeError):
            raise self._stopped() from None

    def receive(self) -> list:
        """(status, kept values or error) for each sample of the last send()."""
        try:
            return self._connection.recv()
        except (EOFError, OSError):
            raise self._stopped() from None

    def _stopped(self) -> RuntimeError:
        self._process.join(timeout=1)
        return RuntimeError(f"a penstock worker process stopped unexpectedly (exit code {self._process.exitcode})")

    def close(self) -> None:
        try:
            self._connection.send(None)
        except (OSError, BrokenPipeError):
            pass
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(timeout=5)
        self._connection.close()


def _serve_samples(executor: "Executor", connection, ring: SharedRing) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it stops us
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        errors, computed = [], []
        for items, params, index, source_info in _unpacked(executor, message):
            try:
                kept = executor._compute_sample(items, params, index, source_info)
                for slot in executor._ring_slots:
                    kept[slot] = ring.put(kept[slot])
                computed.append(kept)
                errors.append(None)
            except Exception as error:
                failure = error if isinstance(error, PipelineError) else PipelineError(f"{type(error).__name__}: {error}")
                errors.append(PipelineError(str(failure)))
        connection.send((errors, [_column([kept[slot] for kept in computed]) for slot in range(len(executor._kept))]))


def _column(values: list):
    """One value of several samples, for the pipe: arrays of one shape and type stacked into one
    array (one pickled object, not one per sample; the other end takes views of its rows, see
    _rows), anything else as the list."""
    first = values[0] if values else None
    if isinstance(first, np.ndarray) and not first.dtype.hasobject and all(
            isinstance(value, np.ndarray) and value.shape == first.shape and value.dtype == first.dtype
            for value in values):
        return np.stack(values)
    return values


def _rows(column) -> list:
    """The per-sample values of a _column: views of a stacked array's rows (0-d arrays for a
    column of scalars, not numpy scalars), or the list itself."""
    if not isinstance(column, np.ndarray):
        return column
    if column.ndim > 1:
        return list(column)
    return [column[index, ...] for index in range(len(column))]


def _replies(reply: tuple):
    """(error or None, kept values) per sample of a worker process's reply (see _serve_samples)."""
    errors, columns = reply
    columns = [_rows(column) for column in columns]
    position = 0
    for error in errors:
        if error is not None:
            yield error, None
            continue
        yield None, [column[position] for column in columns]
        position += 1


def _unpacked(executor: "Executor", message: list):
    """(items, draws, index, source info) of each sample of a message made by Executor._requests."""
    source_keys = [key for key, _, _ in executor._sources]
    for indices, infos, items, param_keys, params in message:
        items = [_rows(values) for values in items]
        for position, index in enumerate(indices):
            yield ({key: values[position] for key, values in zip(source_keys, items)},
                   {key: None if draws is None else draws[position] for key, draws in zip(param_keys, params)},
                   index, infos[position] if infos is not None else "")


def _record_error(job: _Job, error: BaseException) -> None:
    with job.lock:
        if job.error is None:
            job.error = error


def worker_count(num_threads: int) -> int:
    return max(1, min(num_threads, MAX_PYTHON_WORKERS))


def _as_tuple(result, count: int) -> tuple:
    if count == 1:
        return (result,)
    return tuple(result)


def _call(op_name: str, source_info: str, function, *args):
    try:
        return function(*args)
    except PipelineError:
        raise
    except Exception as error:
        where = f" on sample from '{source_info}'" if source_info else ""
        raise PipelineError(f"{op_name} failed{where}: {type(error).__name__}: {error}") from error


def _materialize(value) -> tuple[list, Any]:
    """A GPU value as (per-sample tensors, dense tensor or None); the per-sample list may be None
    when the dense tensor is there (a GpuBatch makes it when asked)."""
    if isinstance(value, DeferredBatch):
        return value.materialize(per_sample=False)
    return list(value), None


def _sample_args(impl, arg_inputs: dict, values: dict) -> dict:
    """The operator's arguments for one sample, with its per-sample arguments filled in."""
    args = dict(impl.args)
    for name, ref in arg_inputs.items():
        args[name] = _per_sample_value(impl, name, values[ref])
    return args


def _batch_args(impl, columns: dict, size: int) -> list:
    """Each sample's arguments for a batch operator, its per-sample arguments (``columns``: name ->
    per-sample values) filled in. A batch's samples share few distinct values (a coin flip has
    two): each is converted once, and samples with the same values share one dictionary."""
    converted: dict = {}
    combined: dict = {}
    names = list(columns)
    args = []
    for index in range(size):
        keys = []
        for name in names:
            value = columns[name][index]
            key = (name, _value_key(value))
            if key not in converted:
                converted[key] = _call(impl.name, "", _per_sample_value, impl, name, value)
            keys.append(key)
        keys = tuple(keys)
        sample_args = combined.get(keys)
        if sample_args is None:
            sample_args = combined[keys] = {**impl.args, **{key[0]: converted[key] for key in keys}}
        args.append(sample_args)
    return args


def _value_key(value):
    """A hashable stand-in for a per-sample argument's value."""
    if isinstance(value, np.ndarray):
        return value.dtype.str, value.shape, value.tobytes()
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return type(value), value


def _per_sample_value(impl, name: str, value):
    """A per-sample argument's array, converted to the plain value the schema describes."""
    arg = impl.schema.all_args[name]
    array = np.asarray(value)
    plain = array.item() if array.ndim == 0 or (array.size == 1 and arg.kind not in ("floats", "ints")) \
        else array.tolist()
    try:
        return arg.convert(plain)
    except ValueError as error:
        raise ValueError(f"per-sample argument '{name}': {error}") from None


def shutdown_all() -> None:
    for executor in list(_live_executors):
        executor.shutdown()


# Pipelines left open at exit: stop their threads while the interpreter is whole (daemon threads
# stopped later, during finalization, can abort the process from inside native code).
atexit.register(shutdown_all)
