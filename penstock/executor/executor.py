"""The Executor: its stages and the threads that run them, the producer, and the consumer's side
(next, reset, shutdown, stage_seconds)."""
from __future__ import annotations

import atexit
import dataclasses
import functools
import itertools
import queue
import threading
import time
import weakref
from dataclasses import dataclass, replace
from typing import Callable

from penstock import devices
from penstock.batch import Batch
from penstock.contract import SourceOperator
from penstock.draws import random_stream
from penstock.executor.buffers import BufferPool, SharedArena
from penstock.executor.gpu_stage import GPU_BATCHES_IN_FLIGHT, GpuStage, Lanes
from penstock.executor.jobs import POLL_SECONDS, IterationResult, Job, StageTimes, WorkerCalls, finish_samples
from penstock.executor.plan import ExecutionPlan, Step
from penstock.executor.processes import WorkerProcesses
from penstock.executor.samples import SampleRunner, run_whole_batch_steps
from penstock.executor.skipping import refill
from penstock.tuning import DEFAULT, Tuning

_live_executors: "weakref.WeakSet[Executor]" = weakref.WeakSet()


@dataclass(frozen=True)
class Stage:
    """One stage of the executor: ``threads`` threads named penstock-<name> (penstock-<name>-<i>
    when ``numbered``) run ``loop``. ``takes`` and ``gives`` name where its work comes from and
    where it goes: the executor's queues and semaphore, or the event that marks a batch done."""

    name: str
    loop: Callable[[], None]
    threads: int
    takes: str
    gives: str
    processes: int = 0  # forked worker processes that the stage's thread feeds
    numbered: bool = False

    def make_threads(self) -> list[threading.Thread]:
        names = [f"penstock-{self.name}-{i}" if self.numbered else f"penstock-{self.name}"
                 for i in range(self.threads)]
        return [threading.Thread(target=self.loop, name=name, daemon=True) for name in names]


class Executor:
    """Runs a pipeline's operators in stages, ahead of the consumer: the stage table in __init__
    says which, with how many threads and processes, and the queues between them."""

    def __init__(self, sources: list[tuple[int, SourceOperator, int]], steps: list[Step],
                 outputs: list[tuple[int, int]], output_layouts: list[str], num_threads: int,
                 prefetch_depth: int, device=None, worker_processes: bool | None = False,
                 skip_failures: bool = False, timeout: float | None = None, checkpointing: bool = False,
                 start_iteration: int = 0, tuning: Tuning = DEFAULT):
        self._plan = plan = ExecutionPlan.build(sources, steps, outputs)
        self._tuning = tuning
        # checkpoints (penstock.checkpoints): the sources' states after each batch, recorded by the
        # producer; the one of the last batch handed out is the pipeline's checkpoint
        self._checkpointing = checkpointing
        self._delivered_state = (start_iteration, self._source_states()) if checkpointing else None
        self._skip_failures = skip_failures  # on_error="skip" (executor.skipping)
        self._timeout = timeout or None  # seconds next() waits for a batch; None (or 0): no limit
        self._producer_in = "waiting"  # what the producer thread is doing, for a timeout's message
        readers = [source.name for _, source, _ in plan.sources if source.lends_samples]
        if skip_failures and len(readers) > 1:
            raise ValueError(f"on_error='skip' refills batches from one reader; this pipeline has {len(readers)} "
                             f"({', '.join(readers)})")
        self._skipped: dict[int, list] = {}  # epoch -> Skipped records of the batches handed out
        # a reader's epoch may end before its last batch (executor.skipping): see _next_with_samples
        self._looks_ahead = skip_failures and bool(readers)
        self._held: Job | None = None
        if self._looks_ahead and any(source.fed for _, source, _ in plan.sources):
            raise ValueError("on_error='skip' with a reader cannot take feed_input data: an epoch whose last "
                             "samples fail ends batches early, and the batches fed for them would be "
                             "dropped; give the external_source a source= callable instead")
        self._output_layouts = list(output_layouts)  # the GPU stage reads this list: changed in place
        # batches prepared ahead of the consumer: prefetch_depth finished or in the CPU stage, and,
        # as each stage has its own in DALI, the GPU stage's own (GPU_BATCHES_IN_FLIGHT): else
        # the CPU workers would wait while the GPU stage holds two batches; and cpu_batches_ahead
        # more for the CPU stage of a GPU pipeline, whose time per batch varies (a worker's message
        # of slow samples), where a batch late to the GPU stage leaves the hardware JPEG decoders idle
        depth = max(1, prefetch_depth) + (GPU_BATCHES_IN_FLIGHT + tuning.cpu_batches_ahead if plan.gpu_steps else 0)
        self._times = StageTimes()
        uses_processes = plan.uses_processes(worker_processes)
        # worker processes write their samples straight into batch buffers shared with them
        arena = SharedArena(tuning.pinned_upload_bytes if plan.upload_slots else 0) \
            if uses_processes and plan.shared_slots else None
        self._arena = arena
        self._runner = SampleRunner(plan, [BufferPool(keep=depth + 3, arena=arena if slot in plan.shared_slots else None,
                                                      upload=slot in plan.upload_slots)
                                           for slot in range(len(plan.kept))], self._times)
        self._slots = threading.Semaphore(depth)  # batches the producer may start before the consumer takes one
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()  # (job, sample index); None: stop
        self._in_flight: queue.Queue = queue.Queue()  # batches in iteration order, from the producer
        self._ready: queue.Queue = queue.Queue()  # batches whose GPU stage has run
        self._resume = threading.Event()
        self._stopping = threading.Event()
        self._handed_out = threading.Event()  # the consumer has had a batch (the rings' pinning waits for it)
        self._next_iteration = start_iteration
        self._failure: BaseException | None = None
        self._end_delivered = False  # the consumer got StopIteration and has not called reset() yet
        workers = plan.cpu_workers(num_threads)
        processes = WorkerProcesses(self._runner, workers, self._tasks, self._stopping, arena, tuning) \
            if uses_processes else None
        # CPU work the GPU stage hands back (images the GPU decoders refused): the worker threads,
        # or the thread that feeds the worker processes, take it before their next samples
        tasks = self._tasks  # (not self: the executor is freed with its last reference, with no cycle)
        self._worker_calls = calls = processes.calls if processes is not None else \
            WorkerCalls(lambda: tasks.put(WorkerCalls.WAKE), self._stopping)
        lanes = Lanes(plan, device)
        refill = weakref.WeakMethod(self._refill)  # the GPU stage is the executor's: no cycle back to it
        gpu = GpuStage(plan, device, self._output_layouts, self._in_flight, self._ready, self._stopping,
                       self._times, lanes, calls, lambda job: refill()(job)) if plan.gpu_steps else None

        # The stages, in the order a batch goes through them, one line each: the threads are made from
        # this list. The consumer is the caller's thread: next() takes batches from _ready, or from
        # _in_flight when there is no GPU stage.
        stages = [Stage("producer", self._produce_loop, threads=1, takes="_slots", gives="_in_flight, _tasks")]
        if processes is None:
            samples = Stage("worker", self._work, threads=worker_count(workers, tuning), numbered=True,
                            takes="_tasks", gives="job.done")
        else:  # one thread feeds the processes: more Python threads would compete with the GPU stage
            samples = Stage("dispatcher", processes.dispatch, threads=1, processes=processes.count,
                            takes="_tasks", gives="job.done")
        stages.append(samples)
        if gpu is not None:
            stages.append(Stage("gpu", gpu.run, threads=1, takes="_in_flight", gives="_ready"))
        if gpu is not None and gpu.on_cuda:  # what the GPU stage's first kernel launch would wait for
            stages.append(Stage("triton-warm-up", functools.partial(devices.warm_up_triton, device), threads=1,
                                takes="nothing", gives="Triton loaded, before the first batch's kernels"))
        for (step_key, lane), threads in lanes.threads.items():  # the decode stage: the lanes of batch operators
            stages.append(Stage(f"lane-{step_key}-{lane.replace(' ', '-')}", lanes.loop((step_key, lane)), threads=threads,
                                numbered=True, takes="calls the GPU stage hands over", gives="the batch's pending decode"))
        self._stages = stages
        self._threads = {stage.name: stage.make_threads() for stage in stages}
        self._lanes = lanes
        self._sample_threads = samples.threads  # each stops at a None from _tasks
        self._processes = processes
        self._gpu = gpu
        self._started = False
        _live_executors.add(self)

    # ---- consumer side -------------------------------------------------------------------
    def start(self) -> None:
        if self._started:
            return
        self._started = True
        if self._processes is not None:  # forked before this executor's threads exist
            self._processes.start()
            self._pin_rings()
        self._resume.set()
        for thread in self._all_threads():
            thread.start()

    def next(self) -> IterationResult:
        """The next batch, in order; raises StopIteration at a source's end, or the worker's error."""
        if self._failure is None and self._lanes.failure is not None:
            self._failure = self._lanes.failure
        if self._failure is not None:
            raise self._failure
        if self._stopping.is_set():  # closed: batches prepared ahead are not handed out any more
            raise RuntimeError("the pipeline was shut down (close()); make a new one to run again")
        if self._end_delivered:  # nothing more comes before reset(): say so again rather than wait
            raise StopIteration
        self.start()
        return self._hand_out(self._next_with_samples() if self._looks_ahead else self._take())

    def _take(self) -> Job:
        """The next batch in iteration order, once its CPU stage has finished and it was refilled."""
        try:
            job = self._wait(self._ready if self._gpu is not None else self._in_flight)
            self._wait_event(job.done)
            if self._gpu is None:  # else the GPU stage did, in the same order
                self._refill(job)
        except BaseException:
            self.shutdown()
            raise
        self._slots.release()
        return job

    def _next_with_samples(self) -> Job:
        """Under on_error="skip" with a reader: the next batch that holds samples of its epoch,
        marked ``last`` when no later batch of its epoch does. Whether one does is known only once
        the next batch was refilled (its samples may all fail), so one batch is held back until
        then; batches refilled to nothing (their epoch ended with an earlier one) are not handed
        out, their skipped records go with the batch that ends the epoch."""
        held, self._held = self._held, None
        while held is None or not (held.error is not None or held.stop or held.epoch_info.last):
            job = self._take()
            if held is not None and (job.error is not None or job.stop):
                self._held = job  # handed out (raised) by the next call
                return held
            if job.error is not None or job.stop:
                return job
            if job.size == 0:
                if held is not None:
                    held.epoch_info = replace(held.epoch_info, last=True)
                    held.skipped.extend(job.skipped)
                else:
                    self._note_skipped(job)
                continue
            if held is not None:
                self._held = job
                return held
            held = job
        return held

    def _hand_out(self, job: Job) -> IterationResult:
        """The batch for the consumer, with its records kept; raises its error or its source's end."""
        self._note_skipped(job)
        if job.error is not None:
            self._failure = job.error
            self.shutdown()
            raise job.error
        if job.stop:
            self._end_delivered = True
            if self._checkpointing:  # the sources ended: the next batch is this iteration's, after reset()
                self._delivered_state = (job.iteration, job.source_states)
            raise StopIteration
        if self._checkpointing:
            self._delivered_state = (job.iteration + 1, job.source_states)
        self._handed_out.set()
        return IterationResult(self._assemble(job), job.epoch_info, job.iteration)

    def _note_skipped(self, job: Job) -> None:
        if job.skipped:
            self._skipped.setdefault(job.epoch_info.epoch if job.epoch_info else 0, []).extend(job.skipped)

    def checkpoint_state(self) -> tuple[int, dict]:
        """(the next iteration, each source's state) after the last batch handed out."""
        return self._delivered_state

    def _source_states(self) -> dict:
        return {key: source.state() for key, source, _ in self._plan.sources}

    def skipped(self, epoch: int) -> list:
        """The samples left out under on_error="skip" in the batches of ``epoch`` handed out so far."""
        return list(self._skipped.get(epoch, ()))

    def describe(self) -> str:
        """The stages, their threads and processes, in words."""
        return "; ".join(f"{stage.name} x {stage.threads}" + (f" feeding {stage.processes} worker processes"
                                                              if stage.processes else "")
                         for stage in self._stages)

    @property
    def started(self) -> bool:
        return self._started

    @property
    def ended(self) -> bool:
        """Whether a source signalled its end and the producer waits for reset()."""
        return not self._resume.is_set()

    def set_output_layouts(self, layouts: list[str]) -> None:
        """The layouts of the outputs of batches handed out from now on (feed_input may set one)."""
        self._output_layouts[:] = layouts

    def reset(self) -> None:
        """Lets sources that ended start over."""
        self._end_delivered = False
        if not self._resume.is_set():
            for _, source, _ in self._plan.sources:
                source.reset()
            self._resume.set()

    def shutdown(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._resume.set()
        self._slots.release()  # wakes a producer waiting for a free slot, so that it sees the stop now
        source_error = None
        for _, source, _ in self._plan.sources:
            try:
                source.shutdown()
            except Exception as error:  # the threads are stopped all the same, then it is raised
                source_error = source_error or error
        for _ in range(self._sample_threads):
            self._tasks.put(None)
        if self._processes is not None:
            self._processes.wake()
        current = threading.current_thread()
        gpu_threads = [thread for name in ("gpu", *self._lane_names()) for thread in self._threads.get(name, ())]
        # the CPU stages look at the stop at least every POLL_SECONDS, or finish the sample they
        # are in: within the deadline, unless inside the user's code (a source that does not
        # return), which no thread can be stopped in; such a thread is left behind (a daemon)
        # rather than holding up the caller
        deadline = time.monotonic() + self._tuning.thread_stop_seconds
        for thread in self._all_threads():
            if thread.is_alive() and thread is not current and thread not in gpu_threads:
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if self._gpu is not None and current not in gpu_threads:
            self._stop_gpu_stage()
        if self._processes is not None:
            self._processes.close()
        if not any(thread.is_alive() for thread in self._all_threads()):
            # the stages' loops are this executor's bound methods: dropped, so that a pipeline let go
            # of frees its buffers (shared memory included) at once, not at the next cyclic collection
            self._stages = [dataclasses.replace(stage, loop=None) for stage in self._stages]
        if source_error is not None:
            raise source_error

    def _stop_gpu_stage(self) -> None:
        """Waits for the GPU stage to reach its cancellation point (the stop is looked at between
        two operators of a batch and between batches; a launch cannot be interrupted: at most one
        operator's launches, milliseconds on a GPU, seconds in Triton's interpreter), then for the
        lanes to finish the calls handed over before, then releases the decoders, the lanes and
        the pinned rings."""
        for thread in self._threads["gpu"]:
            if thread.is_alive():
                thread.join()
        self._lanes.stop()
        for name in self._lane_names():
            for thread in self._threads[name]:
                if thread.is_alive():
                    thread.join()
        self._gpu.close()
        self._unpin_rings()

    def _pin_rings(self) -> None:
        """Pins the worker processes' rings where the GPU reads preparations from them: its decoders
        and copies then read each image straight from where its process wrote it. Pins too the
        shared arena's upload region where GPU operators take values the processes write there
        (``ExecutionPlan.upload_slots``): as much of it as the first batches took, twice over
        (Tuning.pinned_upload_bytes at most), so that the GPU copies those rows in place. On a
        thread of its own, once the consumer has its first batch: pinning Tuning.pinned_rings_bytes
        takes a few tenths of a second, in which the process's other threads wait for its memory
        map (any allocation, any first touch of a page), which delayed the first batch by as much
        when they ran side by side. Until then, the GPU reads rings as pageable memory and the
        upload region's rows through pinned staging."""
        self._pinned_rings, self._pinned_upload, self._pinning = [], None, None
        if self._gpu is None or not self._gpu.on_cuda:
            return
        rings = self._processes.rings() if self._plan.gpu_reads_rings else []
        arena, device = self._arena if self._plan.upload_slots else None, self._gpu.device
        if not rings and arena is None:
            return

        def pin_rings() -> None:
            while not self._handed_out.wait(timeout=POLL_SECONDS):
                if self._stopping.is_set():
                    return
            import torch
            from penstock.runtime import pinned
            torch.cuda.set_device(device)  # the pipeline's GPU's context registers them
            for ring in rings:
                if self._stopping.is_set():
                    return
                if pinned.pin(ring.memory):
                    self._pinned_rings.append(ring)
            if arena is not None and arena.upload_high_water and not self._stopping.is_set():
                region = arena.upload_region(min(2 * arena.upload_high_water, self._tuning.pinned_upload_bytes))
                if pinned.pin(region):
                    self._pinned_upload = region
        self._pinning = threading.Thread(target=pin_rings, name="penstock-pin-rings", daemon=True)
        self._pinning.start()

    def _unpin_rings(self) -> None:
        """Unpins them once the GPU has finished copying from them (a stage still running keeps
        them pinned: the memory stays locked until the process ends, rather than copied from after
        it is freed)."""
        pinning = getattr(self, "_pinning", None)
        if pinning is not None:  # it stops after the ring it is pinning
            pinning.join()
        rings, self._pinned_rings = getattr(self, "_pinned_rings", []), []
        region, self._pinned_upload = getattr(self, "_pinned_upload", None), None
        if rings or region is not None:
            import torch
            from penstock.runtime import pinned
            torch.cuda.synchronize(self._gpu.device)
            for ring in rings:
                pinned.unpin(ring.memory)
            if region is not None:
                pinned.unpin(region)

    def stage_seconds(self) -> dict[str, float]:
        """Seconds spent so far in each operator and stage, summed over threads and worker processes
        (CPU operators run on several at once, so their sum can exceed the wall time)."""
        return self._times.totals()

    def _refill(self, job: Job) -> None:
        """Ends a batch's CPU stage, in iteration order: replaces the samples operators failed on
        (on_error="skip"), then runs the whole-batch CPU operators."""
        if self._skip_failures and job.error is None and not job.stop and job.size > 0:
            refill(job, self._plan, self._runner, self._worker_calls.run)
            if job.source_states is not None:  # the samples lent out by this batch's refill
                for key, source, _ in self._plan.sources:
                    if source.lends_samples:
                        job.source_states[key] = {**job.source_states[key], **source.lent()}
        if self._plan.whole_batch_steps and job.error is None and not job.stop and job.size > 0:
            try:
                run_whole_batch_steps(self._plan, job, self._times)
            except BaseException as error:
                job.error = error

    def _lane_names(self) -> list[str]:
        return [name for name in self._threads if name.startswith("lane-")]

    def _all_threads(self) -> list[threading.Thread]:
        return [thread for threads in self._threads.values() for thread in threads]

    def _wait(self, source_queue: queue.Queue):
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while True:
            try:
                return source_queue.get(timeout=POLL_SECONDS)
            except queue.Empty:
                self._check_waiting(deadline)

    def _wait_event(self, event: threading.Event) -> None:
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while not event.wait(timeout=POLL_SECONDS):
            self._check_waiting(deadline)

    def _check_waiting(self, deadline: float | None) -> None:
        if self._stopping.is_set():
            raise RuntimeError("the pipeline was shut down")
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"no batch came within the pipeline's timeout of {self._timeout:g} s; the producer "
                               f"thread is {self._producer_in} (a source that does not return, or a sample that "
                               "takes longer than that)")

    def _assemble(self, job: Job) -> tuple:
        batches = []
        for output_index, ref in enumerate(self._plan.outputs):
            if output_index in job.gpu_outputs:
                batches.append(job.gpu_outputs[output_index])
                continue
            slot = self._plan.kept[ref]
            samples = job.values[slot]
            layout = self._output_layouts[output_index]
            buffer = job.buffers[slot]
            if buffer is not None and not job.ragged[slot] and all(sample.base is buffer for sample in samples):
                batches.append(Batch(samples, layout, dense=buffer))
            else:
                batches.append(Batch(samples, layout))
        return tuple(batches)

    # ---- producer --------------------------------------------------------------------------
    def _produce_loop(self) -> None:
        while not self._stopping.is_set():
            if not self._slots.acquire(timeout=POLL_SECONDS):
                continue
            while not self._resume.wait(timeout=POLL_SECONDS):
                if self._stopping.is_set():
                    return
            if self._stopping.is_set():
                return
            job = Job(iteration=self._next_iteration, skip_failures=self._skip_failures)
            started = time.perf_counter()
            try:
                self._prepare(job)
            except StopIteration:
                job.stop = True
                self._resume.clear()
            except BaseException as error:  # surfaces in the consumer's thread
                job.error = error
            if self._checkpointing and job.error is None:
                try:
                    job.source_states = self._source_states()
                except BaseException as error:
                    job.error = error
            self._times.of_this_thread()["sources, random draws (producer thread)"] += time.perf_counter() - started
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
            if self._processes is not None:
                self._processes.wake()

    def _prepare(self, job: Job) -> None:
        size = None
        # sources that fit any batch go last: their batch is cut to the others' size
        for key, source, _ in sorted(self._plan.sources, key=lambda entry: entry[1].fits_any_batch):
            self._producer_in = f"in {source.name}'s next batch (iteration {job.iteration})"
            batch = source.next_batch(job.iteration)
            self._producer_in = "waiting for a free slot (the consumer) or done"
            if source.fits_any_batch and size is not None:
                batch.items = batch.items[:size]
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
        for step in self._plan.steps:
            rng = random_stream(step.impl.context.seed, job.iteration)
            job.params[step.key] = step.impl.draw(rng, job.size)
        kept_count = len(self._plan.kept)
        job.values = [[None] * job.size for _ in range(kept_count)]
        for slot, key in self._plan.passed_slots.items():
            job.values[slot] = job.source_items[key]
        job.buffers = [None] * kept_count
        job.ragged = [False] * kept_count
        job.finished = itertools.count()

    # ---- worker threads ----------------------------------------------------------------------
    def _work(self) -> None:
        """A worker thread: computes queued samples with the sample runner until it takes a None."""
        runner = self._runner
        calls = self._worker_calls
        while True:
            task = self._tasks.get()
            if calls:
                calls.run_waiting()
            if task is None:  # shut down
                return
            if task is WorkerCalls.WAKE:
                continue
            job, index = task
            if job.error is None and not self._stopping.is_set():
                try:
                    kept = runner.compute(*runner.request(job, index), job)
                except BaseException as error:
                    job.record_failure(index, error)
                else:
                    runner.store_computed(job, index, kept)
            finish_samples([task])


def worker_count(num_threads: int, tuning: Tuning) -> int:
    """Python worker threads for ``num_threads``: at least one, at most ``max_python_workers`` (more
    cost more in contention for the interpreter lock than they add; num_threads above it still
    sizes native thread pools and the number of worker processes)."""
    return max(1, min(num_threads, tuning.max_python_workers))


def shutdown_all() -> None:
    for executor in list(_live_executors):
        executor.shutdown()


# Pipelines left open at exit: stop their threads while the interpreter is whole (daemon threads
# stopped later, during finalization, can abort the process from inside native code).
atexit.register(shutdown_all)
