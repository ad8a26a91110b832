"""The GPU stage: one thread that runs the batch operators (devices 'mixed' and 'gpu') on whole
batches, in order, and makes the batches' GPU outputs; and the decode stage: one thread per lane
that a batch operator declares, running the blocking calls (GPU decodes) it hands over."""
from __future__ import annotations

import collections
import contextlib
import queue
import threading
import time
from typing import Any, Callable

from penstock import devices
from penstock.batch import DeferredBatch, GpuBatch, PackedBatch
from penstock.contract import BatchContext
from penstock.executor import branches
from penstock.executor.jobs import POLL_SECONDS, Job, StageTimes, WorkerCalls, as_tuple, call_operator
from penstock.executor.plan import PREPARED, ExecutionPlan
from penstock.executor.samples import batch_args

GPU_BATCHES_IN_FLIGHT = 2  # the GPU stage starts a batch before finishing the one before it


class Lanes:
    """The decode stage: a queue per (batch operator, lane) that the operators declare
    (``BatchOperator.lanes``: name and threads), and its threads (``loop(key)``), which take the
    calls in the order they were handed over; the calls release the interpreter lock while they
    work, and report their errors to the batch that waits for them."""

    def __init__(self, plan: ExecutionPlan, device):
        self.queues = {(step.key, lane): queue.SimpleQueue() for step in plan.gpu_steps for lane, _ in step.impl.lanes}
        self.threads = {(step.key, lane): threads for step in plan.gpu_steps for lane, threads in step.impl.lanes}
        self._device = device
        self.failure: BaseException | None = None  # a call that broke the contract (raised)

    def run_call_for(self, step) -> Callable[[str, Callable[[], None]], None]:
        """The ``BatchContext.run_call`` of one operator."""
        queues = {lane: self.queues[(step.key, lane)] for lane, _ in step.impl.lanes}

        def run_call(lane: str, call: Callable[[], None]) -> None:
            if lane not in queues:
                raise ValueError(f"{step.impl.name}: no lane '{lane}'; it declares {', '.join(queues) or 'none'}")
            queues[lane].put(call)
        return run_call

    def loop(self, key) -> Callable[[], None]:
        calls = self.queues[key]

        def run() -> None:
            if self._device is not None and self._device.type == "cuda":  # once: the calls' current device
                import torch
                torch.cuda.set_device(self._device)
                devices.keep_thread_off_gpu_interrupts()  # the calls wait for the GPU
            while True:
                call = calls.get()
                if call is None:  # shut down, after the calls handed over before
                    return
                try:
                    call()
                except BaseException as error:  # the call should have reported it to its batch
                    self.failure = self.failure or error
                del call  # not kept alive while waiting for the next one
        return run

    def stop(self) -> None:
        for key, calls in self.queues.items():
            for _ in range(self.threads[key]):
                calls.put(None)


class GpuStage:
    """Takes batches from ``in_flight`` (their CPU stage may still be running), runs their batch
    operators and hands them on to ``ready``. ``output_layouts`` is the executor's list, which it
    changes in place when a fed layout arrives."""

    def __init__(self, plan: ExecutionPlan, device, output_layouts: list[str], in_flight: queue.Queue,
                 ready: queue.Queue, stopping: threading.Event, times: StageTimes, lanes: Lanes,
                 worker_calls: WorkerCalls, refill: Callable[[Job], None]):
        self._plan = plan
        self._worker_calls = worker_calls
        self._refill = refill  # replaces the samples operators failed on (on_error="skip"), in order
        self._run_calls = {step.key: lanes.run_call_for(step) for step in plan.gpu_steps}
        self._device = device
        self._output_layouts = output_layouts
        self._in_flight = in_flight
        self._ready = ready
        self._stopping = stopping
        self._timer = times.of_this_thread
        # (event, the worker processes' rings to release after it, the batch's CPU values to keep until then)
        self._pending: collections.deque = collections.deque()
        self._streams: list = []  # one CUDA stream per batch in flight (None on a device that is not CUDA)
        self._started: collections.deque = collections.deque()  # batches whose first operators ran, oldest first
        self._taken: Job | None = None  # the next batch, taken from the queue; its CPU stage may still be running
        self._finishing: Job | None = None  # the batch whose outputs are being made
        # A batch's steps up to its last one that hands calls to the decode stage run when it is
        # started; the rest when it is finished, after the next batch's decodes are queued: a step
        # that needs decoded pixels (materializing the plan) waits for a decode queued a batch ago,
        # not for the one just queued.
        with_lanes = [index for index, step in enumerate(plan.gpu_steps) if step.impl.lanes]
        self._head_steps = with_lanes[-1] + 1 if with_lanes else len(plan.gpu_steps)

    @property
    def device(self):
        return self._device

    @property
    def on_cuda(self) -> bool:
        return self._device is not None and self._device.type == "cuda"

    def close(self) -> None:
        """Closes the batch operators, once this stage's thread has stopped."""
        for step in self._plan.gpu_steps:
            step.impl.close()

    def run(self) -> None:
        """Batches in order, GPU_BATCHES_IN_FLIGHT at a time: batch i+1's first operators run
        (through its decode, queued on the decoders) before batch i's other operators and its
        outputs (waiting for its decode, launching its kernels), so the decoders have the next
        batch while this thread works on the current one.
        Each batch in flight gets its own CUDA stream: batch i's kernel never waits behind batch
        i+1's decode.

        CUDA objects (streams, the batches in progress) hang off this object, which the executor
        holds, not off this thread's frame: when another pipeline forks its worker processes, the
        child discards the frames of the threads it did not inherit, and a CUDA object freed there
        aborts it."""
        import torch
        self._streams = [torch.cuda.Stream(self._device) if self._device.type == "cuda" else None
                         for _ in range(GPU_BATCHES_IN_FLIGHT)]
        for step in self._plan.gpu_steps:
            try:
                step.impl.open(self._device, self._run_calls[step.key])
            except Exception:  # run_batch makes it again and reports the error on the batch, naming the operator
                pass
        while not self._stopping.is_set():
            idle = not self._started
            waited = time.perf_counter()
            if self._taken is None:
                try:
                    self._taken = self._in_flight.get(timeout=POLL_SECONDS) if idle else self._in_flight.get_nowait()
                except queue.Empty:
                    pass
            taken = self._taken
            ready = taken is not None and taken.done.wait(timeout=POLL_SECONDS if idle else 0)
            if idle:
                self._timer()["waiting for the CPU stage (gpu)"] += time.perf_counter() - waited
            if not ready:
                if self._started:  # nothing to start now: finish the oldest started batch rather than wait
                    self._finish_oldest()
                continue
            self._start_batch(taken, self._streams[taken.iteration % GPU_BATCHES_IN_FLIGHT])
            self._started.append(taken)
            self._taken = None
            del taken
            if len(self._started) >= GPU_BATCHES_IN_FLIGHT:
                self._finish_oldest()

    def _finish_oldest(self) -> None:
        self._finishing = self._started.popleft()
        self._finish_batch(self._finishing)
        self._finishing = None

    def _start_batch(self, job: Job, stream) -> None:
        """The batch operators of one batch, in graph order, queued on ``stream``; what they
        return may be deferred (an ImagePlan, a decode in flight)."""
        job.gpu_stream = stream
        try:
            self._refill(job)
        except BaseException as error:  # surfaces in the consumer's thread
            job.error = error
        if job.error is not None or job.stop or job.size == 0:
            return
        import torch
        job.gpu_values = {}  # (filled by the steps) held by the job, not only by this frame
        try:
            with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                if self._plan.has_branches:
                    self._run_steps_with_branches(job, job.gpu_values, stream)
                else:
                    self._run_steps(job, self._plan.gpu_steps[:self._head_steps])
        except BaseException as error:  # surfaces in the consumer's thread
            job.error = error

    def _run_steps(self, job: Job, steps) -> None:
        kept, values, stream = self._plan.kept, job.gpu_values, job.gpu_stream

        def batch_value(ref):
            return values[ref] if ref in values else job.values[kept[ref]]

        for step in steps:
            impl = step.impl
            prepared = (step.key, PREPARED) in kept
            inputs = [batch_value((step.key, PREPARED))] if prepared else [batch_value(ref) for ref in step.inputs]
            if step.arg_inputs:
                args = batch_args(impl, {name: batch_value(ref) for name, ref in step.arg_inputs.items()}, job.size)
            else:
                args = [impl.args] * job.size
            context = BatchContext(job.params[step.key], job.source_infos, stream, self._device,
                                   self._run_calls[step.key], self._worker_calls.run)
            self._run_step(step, inputs, args, context, values)

    def _run_step(self, step, inputs: list, args: list, context: BatchContext, values: dict) -> None:
        self._unless_closing()
        impl = step.impl
        begun = time.perf_counter()
        result = as_tuple(call_operator(impl.name, "", impl.run_batch, inputs, args, context), step.num_outputs)
        self._timer()[f"{impl.name} ({impl.device})"] += time.perf_counter() - begun
        for position, value in enumerate(result):
            values[(step.key, position)] = value

    def _run_steps_with_branches(self, job: Job, values: dict, stream) -> None:
        """The batch operators of a pipeline with conditionals: each runs on the samples of its
        branch (executor.branches), split and merge route them."""
        kept, size = self._plan.kept, job.size
        subsets: dict = {}  # GPU value -> positions of its samples (absent: all)

        def positions(ref):
            return subsets.get(ref) if ref in values else branches.positions_of(job.values[kept[ref]])

        def value_of(ref, where):
            return values[ref] if ref in values else branches.present(job.values[kept[ref]], where)

        for step in self._plan.gpu_steps:
            impl = step.impl
            refs = [(step.key, PREPARED)] if (step.key, PREPARED) in kept else list(step.inputs)
            if self._plan.routes.get(step.key) == "merge":
                where = positions(step.arg_inputs["predicate"])
                merged = branches.merge(impl.samples_of(value_of(refs[0], positions(refs[0]))), positions(refs[0]),
                                        impl.samples_of(value_of(refs[1], positions(refs[1]))), where, size)
                values[(step.key, 0)], subsets[(step.key, 0)] = merged, where
                continue
            found = {positions(ref) for ref in (*refs, *step.arg_inputs.values())}
            if len(found) > 1:
                raise RuntimeError(f"{impl.name}: inputs from different branches of a conditional")
            where = found.pop() if found else None
            count = size if where is None else len(where)
            inputs = [value_of(ref, where) for ref in refs]
            args = batch_args(impl, {name: value_of(ref, where) for name, ref in step.arg_inputs.items()}, count) \
                if step.arg_inputs else [impl.args] * count
            if self._plan.routes.get(step.key) == "split":
                predicates = call_operator(impl.name, "", impl.predicates, args)
                parts = branches.split(impl.samples_of(inputs[0]), predicates, where, size)
                values[(step.key, 0)], subsets[(step.key, 0)], values[(step.key, 1)], subsets[(step.key, 1)] = parts
                continue
            if count == 0:  # no sample took this branch
                for position in range(step.num_outputs):
                    values[(step.key, position)], subsets[(step.key, position)] = [], where
                continue
            infos = branches.present(job.source_infos, where) if job.source_infos else job.source_infos
            context = BatchContext(branches.take(job.params[step.key], where), infos, stream, self._device,
                                   self._run_calls[step.key], self._worker_calls.run)
            self._run_step(step, inputs, args, context, values)
            for position in range(step.num_outputs):
                subsets[(step.key, position)] = where

    def _unless_closing(self) -> None:
        """Abandons the batch when the pipeline is being closed, so that close() waits for one
        operator's launches at most, not for the batch's."""
        if self._stopping.is_set():
            raise RuntimeError("the pipeline was closed while this batch was on the GPU")

    def _finish_batch(self, job: Job) -> None:
        """Makes the batch's outputs (running deferred work), then hands the batch on."""
        stream = job.gpu_stream
        if job.error is None and not job.stop and job.size > 0:
            try:
                import torch
                with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                    if not self._plan.has_branches:
                        self._run_steps(job, self._plan.gpu_steps[self._head_steps:])
                    self._make_outputs(job, stream)
            except BaseException as error:
                job.error = error
        job.gpu_values = None
        _release_rings(job.ring_ends)  # unless _make_outputs left that to the batch's GPU work
        self._ready.put(job)

    def _make_outputs(self, job: Job, stream) -> None:
        values = job.gpu_values
        ready = None
        if stream is not None:
            import torch
            ready = torch.cuda.Event()
        for output_index, ref in enumerate(self._plan.outputs):
            if ref not in values:
                continue
            self._unless_closing()
            begun = time.perf_counter()
            samples, dense = _materialize(values[ref])
            self._timer()["decode wait + fused image kernel (gpu, launch)"] += time.perf_counter() - begun
            job.gpu_outputs[output_index] = GpuBatch(samples, self._output_layouts[output_index], dense, ready)
        if ready is not None:
            ready.record(stream)
            # The rings of the worker processes (pinned ones are copied from in place) are kept until
            # the GPU has used them. The batch's GPU values are not: each was allocated on this stream,
            # and the work that reads it is queued there, so PyTorch's allocator gives its memory only
            # to work queued after that. The next batch on this stream (two batches on) then decodes
            # into the memory of this one's decoded images: one decode buffer per stream, where keeping
            # them until the event held three batches' (4 x 640 MiB on 2-megapixel photographs instead
            # of 2, BENCHMARKS.md). Host memory the GPU reads is kept by its own means: staging copies
            # by their events (runtime.pinned), the rings here, and the batch's CPU values (rows the
            # GPU copies from in place, where the shared arena's upload region is pinned).
            self._pending.append((ready, job.ring_ends, job.values))
            job.ring_ends = {}
            while self._pending and self._pending[0][0].query():
                _release_rings(self._pending.popleft()[1])


def _release_rings(ring_ends: dict) -> None:
    """Lets the worker processes write over a batch's inputs in their rings."""
    for link, end in ring_ends.items():
        link.ring.release(end)


def _materialize(value) -> tuple[list, Any]:
    """A GPU value as (per-sample tensors, dense tensor or None); the per-sample list may be None
    when the dense tensor is there (a GpuBatch makes it when asked)."""
    if isinstance(value, DeferredBatch):
        return value.materialize(per_sample=False)
    if isinstance(value, PackedBatch):  # its views are made when asked for
        return value, value.dense()
    return list(value), None
