"""The CPU stage in forked worker processes: Python runs in parallel across processes, without one
interpreter lock. One dispatcher thread in the pipeline's process hands queued samples to idle
processes and stores what they send back; each process runs the sample runner.

The messages, pickled through each process's pipe:

request (dispatcher -> process), made by ``_requests``: a list with one block per batch that the
    request's samples belong to, each block a tuple (indices, infos, items, param_keys, params, shared):
    indices     the samples' indices in their batch;
    infos       their source infos (file names, for error messages), or None when the batch has none;
    items       per source, in plan order, its items of those samples, as a ``_column``;
    param_keys  the key of every step (other than the sources), in plan order (the job's params);
    params      per step, its draws of those samples: None when it draws nothing, the batch's array
                (or UniformBlocks) taken at ``indices``, else the list of the samples' draws;
    shared      kept slot -> location in the SharedArena of the batch's buffer for that value, for
                the values per-sample operators may write straight into their sample's row.
    None instead of a request stops the process.
reply (process -> dispatcher), made by ``_serve_samples``: a tuple (errors, columns, seconds, times):
    errors      per sample of the request, in order: None, or a PipelineError (its message and fields)
                of its failure (which names the operator and the sample's source when an operator
                failed);
    columns     per kept value (ExecutionPlan.kept, slot order), its values of the samples that did
                not fail, in order, as a ``_column``: WrittenInPlace for a value the process wrote
                (or copied) into its row of a shared buffer; arrays of a megabyte and more
                (decoded images) written into the process's SharedHeap (a CPU pipeline: lent to the
                batch as they are) or ring, a _RingColumn of RingRefs. Per-sample preparations (the
                GPU stage's inputs) go through ``SharedRing.put_column``: arrays large enough are
                written into the process's shared ring when it has room, and travel as RingRefs,
                or, for values with the ring's row protocol (encoded images), the column as one
                RingRows array;
    seconds     how long the process took for the request (the dispatcher sizes its messages by it);
    times       the seconds each operator took for the request, by name: the pipeline's stage_seconds()
                adds them up (they are the process's own stage times).
"""
from __future__ import annotations

import ctypes
import gc
import multiprocessing
import os
import queue
import select
import selectors
import signal
import socket
import struct
import threading
import time
import warnings
import weakref
from multiprocessing.reduction import ForkingPickler

import numpy as np

from penstock.contract import ArrayColumn, RaggedColumn, RowColumn, SampleOperator
from penstock.draws import UniformBlocks
from penstock.executor.buffers import SharedArena
from penstock.executor.jobs import POLL_SECONDS, Job, PipelineError, WorkerCalls, finish_samples
from penstock.executor.samples import SampleRunner
from penstock.executor.shared_ring import (LENT_RING_BYTES, LENT_SMALLEST, RING_BYTES, RingRef, RingRows, SharedHeap,
                                          SharedRing, pinned_ring_bytes)

PROCESS_CHUNK = 32  # samples per message to a worker process when they are shared out evenly, at most
# Each message costs the dispatcher thread 0.1-0.3 ms of the interpreter lock (pickling, the pipe
# write that wakes the process, a poll, a read): samples that take a worker little time (a GPU
# pipeline's header parsing and window choice) go many to a message, enough for about this long
# of the worker's time, rather than spread over every idle process
MESSAGE_SECONDS = 0.01
# the worker processes' niceness above the pipeline's process: where they fill every core (a CPU
# share of large JPEGs), the threads that feed the GPU still get a core when they want one. nvJPEG's
# hardware call keeps its thread on the CPU for the whole call, and took 214, 234, 245 and 269 us a
# 2-megapixel image with 0, 0.1, 0.2 and 0.3 of the JPEGs on workers at the pipeline's priority
# (4.3 to 15.3 of 16 cores busy). Niceness 5 against 0, alternating in one call: validation on those
# photographs 5,686 and 5,579 images/s against 5,483 and 5,650, training within 1%, the ImageNet-like
# training 25,965 against 24,322 (one run each): within the spread, kept for the reason above
# (10: validation 5,954, one run; H100, BENCHMARKS.md)
WORKER_NICENESS = 5
LIGHT_CHUNK = 128  # samples per message of light samples, at most
HEAVY_MESSAGE_SECONDS = 0.05  # a message carries about this long of a worker's time, at most
# samples whose values come back through the ring (large images) go few to a message: a reply
# takes at most 1 / REPLY_RING_SHARE of the ring, which holds those of the batches in flight too
REPLY_RING_SHARE = 4
STOP_SECONDS = 0.3  # how long closing waits for busy worker processes before terminating them
# how often an idle worker process looks whether the pipeline's process is still there: killed, it
# closes no pipe (later processes inherit its end of the earlier ones' pipes), and nothing else
# would tell the workers to stop
PARENT_CHECK_SECONDS = 1.0


class WorkerProcesses:
    """``count`` forked worker processes, and the loop of the one thread that feeds them: every
    further Python thread here would compete with the GPU stage for the interpreter lock."""

    def __init__(self, runner: SampleRunner, count: int, tasks: queue.SimpleQueue, stopping: threading.Event,
                 arena: SharedArena | None = None):
        self.count = count
        self._runner = runner
        self._arena = arena  # the batch buffers the processes write samples into (None: all through the pipes)
        # kept slot -> (row shape, dtype) of the last batch's buffer, for the values per-sample
        # operators write: the next batch's buffer is made before its samples are sent
        self._row_shapes: dict[int, tuple] = {}
        self._tasks = tasks  # (job, sample index), or None: shut down
        self._stopping = stopping
        self._links: list[ProcessLink] = []
        # output slots of operators that write their samples into the batch's buffer when given a
        # row: a batch of theirs is one array, even when a value comes back through the ring
        plan = runner.plan
        self._buffered_slots = frozenset(slot for step in plan.cpu_steps if step.key in plan.dense_outputs
                                         for slot in (plan.dense_outputs[step.key],)
                                         if type(step.impl).output_spec is not SampleOperator.output_spec)
        self._doorbell = multiprocessing.Pipe(duplex=False)  # rung when samples or calls are queued
        self._closed = threading.Event()
        self._forker: threading.Thread | None = None  # the thread that forked the processes, when not the main one
        # run by the dispatcher thread, in this process; it wakes the processes through a weak
        # reference, as a bound method would make a cycle that keeps the shared memory until the
        # next cyclic collection after the pipeline is let go
        wake = weakref.WeakMethod(self.wake)
        self.calls = WorkerCalls(lambda: wake()(), stopping)

    def start(self) -> None:
        """Forks the processes; call it before the pipeline's threads exist. When one cannot be
        made (no memory for its shared ring, no more processes), those already made are stopped.

        Each process is killed by the system when the thread that forked it ends (Linux's parent
        death signal follows the thread, not the process): the main thread forks them itself, any
        other thread (which may end while the pipeline lives on) has a thread of the pipeline's
        fork them and wait until close()."""
        if threading.current_thread() is threading.main_thread():
            self._fork()
            return
        forked = threading.Event()
        failure: list = []

        def fork_and_wait() -> None:
            try:
                self._fork()
            except BaseException as error:  # raised again in start()'s thread
                failure.append(error)
            forked.set()
            self._closed.wait()

        self._forker = threading.Thread(target=fork_and_wait, name="penstock-worker-forker", daemon=True)
        self._forker.start()
        forked.wait()
        if failure:
            raise failure[0]

    def _fork(self) -> None:
        try:
            for _ in range(self.count):
                self._links.append(ProcessLink(self._runner, self._arena, self.count))
        except OSError as error:
            self.close()
            raise OSError(error.errno, f"penstock could not start its worker processes ({error.strerror or error}); "
                                       "free memory, or make the pipeline with worker_processes=False") from None

    def rings(self) -> list[SharedRing]:
        """The rings of the processes' preparations (those the GPU may read)."""
        return [link.ring for link in self._links if isinstance(link.ring, SharedRing)]

    def wake(self) -> None:
        """Wakes the dispatcher: samples or calls were queued, or the pipeline stops."""
        try:
            self._doorbell[1].send_bytes(b"")
        except OSError:  # closed: so is the dispatcher
            pass

    def close(self) -> None:
        """Stops every process within about a second, busy or not: all are told at once, and the
        ones still computing after STOP_SECONDS are terminated."""
        for link in self._links:
            link.ask_to_stop()
        deadline = time.monotonic() + STOP_SECONDS
        for link in self._links:
            link.close(deadline)
        self._closed.set()  # the thread that forked them ends (after they did: its end kills them)
        if self._forker is not None and self._forker is not threading.current_thread():
            self._forker.join()
        for end in self._doorbell:  # a pipeline's descriptors go with it, not with the garbage collector
            end.close()

    def dispatch(self) -> None:
        """The dispatcher thread: hands queued samples to idle worker processes, up to PROCESS_CHUNK
        per message (one message carries several samples, which saves hand-offs here), and stores
        their results."""
        busy: dict = {}  # connection -> (link, tasks)
        try:
            self._dispatch_loop(busy)
        except BaseException as error:  # fails the batches in flight rather than leave the consumer waiting
            for _, tasks in busy.values():
                finish_samples(tasks, error)
            while not self._stopping.is_set():
                try:
                    task = self._tasks.get(timeout=POLL_SECONDS)
                except queue.Empty:
                    continue
                if task is None:
                    return
                finish_samples([task], error)

    def _dispatch_loop(self, busy: dict) -> None:
        # one selector for the thread's life, told of each link as it becomes busy and idle again:
        # multiprocessing.connection.wait builds one and registers every connection on each call
        with selectors.DefaultSelector() as selector:
            self._dispatch_with(selector, busy)

    def _dispatch_with(self, selector: selectors.BaseSelector, busy: dict) -> None:
        idle = list(self._links)
        doorbell = self._doorbell[0]
        selector.register(doorbell, selectors.EVENT_READ)
        source_keys, step_keys = self._runner.plan.source_keys, self._runner.plan.worker_step_keys
        closing = False
        calls = self.calls
        sample_seconds = None  # a worker's time per sample (moving average), once measured
        sample_bytes = 0  # what a sample's values take of the ring (moving average)

        def lost(error: RuntimeError, tasks: list) -> None:
            """A process died with ``tasks``: they fail, naming their samples; once every process
            has, so do the samples still queued and those to come (dispatch() fails them)."""
            nonlocal alive
            error = _lost_samples_error(error, tasks)
            finish_samples(tasks, error)
            alive -= 1
            if not alive:
                raise error

        alive = len(self._links)

        def hand_out() -> None:
            """Sends queued samples to the idle processes."""
            nonlocal closing
            while idle and not closing:
                # one sample each until a reply says how long one takes
                chunk = min(PROCESS_CHUNK, self._tasks.qsize() // len(idle)) if sample_seconds is not None else 1
                if sample_seconds is not None:
                    chunk = max(chunk, min(LIGHT_CHUNK, int(MESSAGE_SECONDS / max(sample_seconds, 1e-6))))
                    # heavy samples one or a few at a time: a process that took a batch's samples
                    # while the others were busy would compute them alone
                    chunk = min(chunk, max(1, int(HEAVY_MESSAGE_SECONDS / sample_seconds)))
                if sample_bytes:  # a reply fits its ring, and touches no more of it than it needs
                    chunk = min(chunk, int(idle[-1].ring.size / (REPLY_RING_SHARE * sample_bytes)))
                tasks = self._waiting_tasks(max(1, chunk))
                if tasks and tasks[-1] is None:
                    closing = True
                    tasks.pop()
                tasks = [(job, index) for job, index in tasks if not self._skip(job)]
                if not tasks:
                    break
                link = idle.pop()
                busy[link.connection] = (link, tasks)
                try:
                    link.send(_requests(tasks, source_keys, step_keys, self._shared_buffers))
                except RuntimeError as error:  # the process is gone: these samples fail, it gets no more
                    del busy[link.connection]
                    lost(error, tasks)
                    continue
                selector.register(link.connection, selectors.EVENT_READ)

        while not self._stopping.is_set():
            if calls:
                calls.run_waiting()
            hand_out()
            if closing and not busy:
                return
            for key, _ in selector.select(timeout=POLL_SECONDS):
                connection = key.fileobj
                if connection is doorbell:
                    doorbell.recv_bytes()
                    continue
                selector.unregister(connection)
                link, tasks = busy.pop(connection)
                try:
                    replies = link.receive()
                except RuntimeError as error:  # the process died: its samples fail, naming them
                    lost(error, tasks)
                    continue
                took = replies[2] / len(tasks)  # the worker's own time: not how long the reply waited here
                sample_seconds = took if sample_seconds is None else 0.8 * sample_seconds + 0.2 * took
                # the process gets its next samples before this reply is stored: storing may copy
                # large values, which it would otherwise wait for
                idle.append(link)
                hand_out()
                shared = self._store_reply(link, tasks, replies) / len(tasks)
                sample_bytes = shared if not sample_bytes else 0.8 * sample_bytes + 0.2 * shared
                self._note_row_shapes(tasks)
                finish_samples(tasks)

    def _store_reply(self, link: "ProcessLink", tasks: list, reply: tuple) -> int:
        """Stores a reply's values in their batches, value by value (kept slot) rather than sample
        by sample: a preparation's values are resolved from the ring together. Returns the bytes
        of its values that came through the ring."""
        errors, columns, _, times = reply
        timings = self._runner.timings()  # this thread's: stage_seconds() sums every thread's
        for stage, seconds in times.items():
            timings[stage] += seconds
        done = tasks
        if errors.count(None) != len(errors):
            done = []
            for task, error in zip(tasks, errors):
                if error is None:
                    done.append(task)
                else:
                    task[0].record_failure(task[1], error)
        prepared_slots, dense_slots = self._runner.plan.prepared_slots, self._runner.plan.dense_slots
        store = self._runner.store
        copied_end, ring_bytes = 0, 0  # the ring's position after the values copied out of it; their size
        runs = _job_runs(done)
        passed_slots = self._runner.plan.passed_slots
        for slot, column in enumerate(columns):
            if slot in passed_slots:
                continue
            if type(column) is RingRows:
                self._store_rows(link, done, runs, slot, column)
                continue
            if isinstance(column, np.ndarray) and column.ndim > 1 and slot in dense_slots:
                self._store_stacked(runs, slot, column)
                continue
            if isinstance(column, np.ndarray) and slot not in dense_slots and slot not in prepared_slots:
                _store_array(runs, slot, column)
                continue
            if type(column) is _RaggedColumn and slot not in dense_slots and slot not in prepared_slots:
                _store_ragged(runs, slot, column)
                continue
            in_ring, lent = (), False
            if slot in prepared_slots:
                values, ends = link.ring.resolve_column(column)
                for (job, _), end in zip(done, ends):  # each batch keeps its arrays in the ring until it is used
                    _keep_ring(link, job, end)
            elif type(column) is _RingColumn:
                in_ring = [type(value) is RingRef for value in column]
                if prepared_slots:  # copied out below: the ring is released in order with the batches
                    values, ends = link.ring.resolve_column(column)
                    copied_end = max(copied_end, *ends)
                else:
                    # lent as they are: the samples of a batch that is a list, as a decoder's are on
                    # threads; copied into the batch's buffer where the operator writes its samples
                    # into one (the next batches' rows are then written in place)
                    values = [link.ring.lend(value) if ref else value for value, ref in zip(column, in_ring)]
                    lent = slot not in self._buffered_slots
                ring_bytes += sum(value.nbytes for value, ref in zip(values, in_ring) if ref)
            else:
                values = _rows(column)
            for position, ((job, index), value) in enumerate(zip(done, values)):
                if job.error is not None:
                    continue
                read = value
                if value is WrittenInPlace:
                    value = job.buffers[slot][index]
                elif slot in dense_slots and not (lent and in_ring[position]):
                    value = store(job, slot, index, value)
                if prepared_slots and in_ring and in_ring[position] and value is read:
                    value = value.copy()  # the process writes over the ring's copy once the batch is used
                job.values[slot][index] = value
        if copied_end:  # the ring also holds preparations, released in order with their batches
            for job, _ in done:
                _keep_ring(link, job, copied_end)
        return ring_bytes

    def _store_stacked(self, runs: list, slot: int, column: np.ndarray) -> None:
        """Stores a stacked column of a dense value, each batch's rows copied at once."""
        for job, begin, end, indices in runs:
            if job.error is not None:
                continue
            values = self._runner.store_stacked(job, slot, indices, column[begin:end])
            stored = job.values[slot]
            for index, value in zip(indices, values if values is not None else list(column[begin:end])):
                stored[index] = value

    @staticmethod
    def _store_rows(link: "ProcessLink", done: list, runs: list, slot: int, column: RingRows) -> None:
        """Stores a column of RowPreparations (encoded images) in the RowColumns of their batches,
        each batch's rows at once."""
        kind = column[0]
        positions, rows, ends, others = link.ring.resolve_rows(column)
        if len(runs) == 1 and len(rows) == len(done) and not others:  # the usual reply: one batch's rows, in order
            job, _, _, run_indices = runs[0]
            _keep_ring(link, job, int(ends.max()))
            _put_rows(job, slot, kind, run_indices, rows)
            return
        indices = np.fromiter((index for _, index in done), np.int64, len(done))
        for job, begin, end, _ in runs:
            mine = (positions >= begin) & (positions < end)
            if not mine.any():
                continue
            _keep_ring(link, job, int(ends[mine].max()))
            _put_rows(job, slot, kind, indices[positions[mine]].tolist(), rows[mine])
        for position, (value, end) in others.items():
            job, index = done[position]
            _keep_ring(link, job, end)
            if job.error is None:
                job.values[slot][index] = value

    def _shared_buffers(self, job: Job) -> dict:
        """Kept slot -> SharedArena location of the job's buffer, for the values the processes may
        write in place; the buffer is made here when the last batch's rows tell its shape."""
        shared = {}
        if self._arena is None:
            return shared
        for slot in self._runner.plan.dense_outputs.values():
            if job.ragged[slot]:
                continue
            buffer = job.buffers[slot]
            if buffer is None:
                if slot not in self._row_shapes:
                    continue  # the first sample back through the pipe makes it
                buffer = self._runner.batch_buffer(job, slot, *self._row_shapes[slot])
            location = self._arena.location(buffer)
            if location is not None:
                shared[slot] = location
        return shared

    def _note_row_shapes(self, tasks: list) -> None:
        if self._arena is None:
            return
        for job in {id(job): job for job, _ in tasks}.values():
            for slot in self._runner.plan.dense_outputs.values():
                buffer = job.buffers[slot]
                if job.ragged[slot]:
                    self._row_shapes.pop(slot, None)
                elif buffer is not None:
                    self._row_shapes[slot] = (buffer.shape[1:], buffer.dtype)

    def _waiting_tasks(self, count: int) -> list:
        """Up to ``count`` queued tasks, without waiting; a None (shut down) ends the list."""
        tasks = []
        while len(tasks) < count and (not tasks or tasks[-1] is not None):
            try:
                tasks.append(self._tasks.get_nowait())
            except queue.Empty:
                break
        return tasks

    def _skip(self, job: Job) -> bool:
        """Whether a task's batch already failed (its other samples are not computed)."""
        if job.error is None and not self._stopping.is_set():
            return False
        finish_samples([(job, None)])
        return True


class ProcessLink:
    """A forked worker process that computes samples for the dispatcher thread: it is sent requests
    and sends back replies (see this module's docstring). The process gets the sample runner (and
    through it the plan), and a shared ring when the plan has per-sample preparations (one of
    ``processes`` rings that are pinned, when the GPU reads them)."""

    def __init__(self, runner: SampleRunner, arena: SharedArena | None = None, processes: int = 1):
        context = multiprocessing.get_context("fork")
        self._connection, child = context.Pipe()
        plan = runner.plan
        # large values (decoded images) come back through the ring too, not only preparations;
        # without preparations, through a heap whose arrays are lent out as the batches' samples
        self.ring = SharedRing(pinned_ring_bytes(processes) if plan.gpu_reads_rings else RING_BYTES) \
            if plan.prepared_slots else SharedHeap(LENT_RING_BYTES)
        self._process = context.Process(target=_serve_samples, args=(runner, child, self.ring, arena, os.getpid()),
                                        daemon=True, name="penstock-worker-process")
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

    def send(self, request: list) -> None:
        """Sends a request; receive() gets its reply."""
        try:
            self._connection.send(request)
        except (OSError, BrokenPipeError):
            raise self._stopped() from None

    def receive(self) -> tuple:
        """The reply to the last send()."""
        try:
            return self._connection.recv()
        except (EOFError, OSError):
            raise self._stopped() from None

    def _stopped(self) -> RuntimeError:
        try:
            self._process.join(timeout=1)
            reason = _exit_reason(self._process.exitcode)
        except ValueError:  # closed by close(): the pipeline is closing
            reason = "the pipeline was closed"
        return RuntimeError(f"a penstock worker process stopped unexpectedly ({reason})")

    def ask_to_stop(self) -> None:
        """Tells the process to stop after its current request (close() then makes sure it did)."""
        try:
            self._connection.send(None)
        except (OSError, BrokenPipeError, ValueError):
            pass

    def close(self, deadline: float) -> None:
        """Stops the process: it has until ``deadline`` (time.monotonic) to finish its request and
        exit, then it is terminated, and killed if it does not go. The pipeline is closing: what it
        was computing is not wanted any more."""
        if self._connection.closed:  # closed already (a start that failed, then the pipeline's close)
            return
        self._process.join(timeout=max(0.0, deadline - time.monotonic()))
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(timeout=0.5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(timeout=1)
        self._connection.close()
        if not self._process.is_alive():
            self._process.close()  # its sentinel pipe


def _exit_reason(exitcode: int | None) -> str:
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (out of memory?)" if -exitcode == signal.SIGKILL else ""
        return f"killed by {name}{hint}"
    return f"exit code {exitcode}"


class WrittenInPlace:
    """In a reply: the value was written into the sample's row of the batch's shared buffer."""


class _SharedRows:
    """What the sample runner takes of a job (Job) in a worker process: the batch buffers shared
    with it, in which it writes its samples' rows; values without one go back through the pipe."""

    __slots__ = ("buffers", "ragged", "lock", "size")

    def __init__(self, kept_count: int, buffers: dict):
        self.buffers = [buffers.get(slot) for slot in range(kept_count)]
        self.ragged = [buffer is None for buffer in self.buffers]  # never made here: the pipeline's process makes them
        self.lock = None
        self.size = None

    def _fitting_buffer(self, slot: int, value):
        """The shared buffer of ``slot`` when ``value`` has the shape of one of its rows, else None."""
        buffer = self.buffers[slot]
        if buffer is None or self.ragged[slot] or not isinstance(value, np.ndarray) or value.shape != buffer.shape[1:]:
            return None
        return buffer

    def write(self, slot: int, index: int, value) -> bool:
        """Copies ``value`` into the sample's row of the shared buffer of ``slot`` when it has the
        row's shape and type (an operator that made its own array: a decoder); whether it did.
        One copy here, in parallel with the other processes, instead of several through the pipe."""
        buffer = self._fitting_buffer(slot, value)
        if buffer is None or value.dtype != buffer.dtype:
            return False
        buffer[index] = value
        return True

    def written(self, slot: int, index: int, value) -> bool:
        """Whether ``value`` is the sample's row of the shared buffer of ``slot``."""
        buffer = self._fitting_buffer(slot, value)
        return buffer is not None and \
            value.__array_interface__["data"][0] == buffer.__array_interface__["data"][0] + index * buffer.strides[0]


def _keep_freed_memory() -> None:
    """Lets this process's allocator keep what it frees (glibc): an operator's temporaries (a float
    copy of an image, a megabyte) are otherwise mapped afresh and faulted in page by page for every
    sample, and returned to the system at once. Blocks up to 16 MiB come from the heap, and the heap
    gives back what it has free above 64 MiB: a worker process keeps at most that beyond its need."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return
    for option, value in ((_M_TRIM_THRESHOLD, 64 << 20), (_M_TOP_PAD, 16 << 20), (_M_MMAP_THRESHOLD, 16 << 20)):
        mallopt(option, value)


_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3  # glibc's malloc.h


def _die_with_parent(parent: int) -> bool:
    """Asks the system to kill this process when the thread that forked it ends (Linux); whether
    the parent is still there. Without it, a worker computing or sending a reply when the pipeline's
    process is killed would live on, holding its memory and the parent's stdout."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the sends and the idle wait look for the parent
        pass
    return os.getppid() == parent  # it may have died before the request was made


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class _ParentGone(Exception):
    """The pipeline's process died while this worker waited to send it a reply."""


class _Replies:
    """Sends replies through the worker's end of its pipe without ever blocking for longer than
    PARENT_CHECK_SECONDS: a reply larger than the pipe holds waits for the parent to read it, and a
    killed parent's end of the pipe may stay open in other processes (the later workers inherit the
    earlier ones' pipes), which would leave the send waiting for ever. Connection.send's format."""

    def __init__(self, connection, parent: int):
        self._connection, self._parent = connection, parent
        self._socket = self._writable = None
        try:
            self._socket = socket.socket(fileno=os.dup(connection.fileno()))
        except OSError:  # not a socket: Connection.send, which may block
            return
        # poll, not select: a process with many files open has descriptors past select's 1024
        self._writable = select.poll()
        self._writable.register(self._socket, select.POLLOUT)

    def send(self, reply) -> None:
        if self._socket is None:
            self._connection.send(reply)
            return
        data = ForkingPickler.dumps(reply)
        size = len(data)
        header = struct.pack("!i", size) if size <= 0x7fffffff else struct.pack("!iQ", -1, size)
        self._send_all(memoryview(header))
        self._send_all(memoryview(data))

    def _send_all(self, view: memoryview) -> None:
        while view:
            try:
                view = view[self._socket.send(view, socket.MSG_DONTWAIT):]
                continue
            except BlockingIOError:
                pass
            writable = self._writable.poll(PARENT_CHECK_SECONDS * 1000)
            if not writable and os.getppid() != self._parent:
                raise _ParentGone

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()


def _serve_samples(runner: SampleRunner, connection, ring: SharedRing | SharedHeap, arena: SharedArena | None,
                   parent: int) -> None:
    """The worker process: answers each request with its reply until it gets None, the pipe closes
    or the pipeline's process is gone."""
    if not _die_with_parent(parent):
        return
    replies = _Replies(connection, parent)
    try:
        _answer_requests(runner, connection, ring, arena, parent, replies)
    except _ParentGone:
        pass
    finally:
        replies.close()


def _answer_requests(runner: SampleRunner, connection, ring: SharedRing | SharedHeap, arena: SharedArena | None,
                     parent: int, replies: _Replies) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it stops us
    if WORKER_NICENESS:  # worker processes are forked: a POSIX system, which has nice()
        try:
            os.nice(WORKER_NICENESS)
        except OSError:  # a policy that refuses: the workers run at the pipeline's priority
            pass
    _keep_freed_memory()
    plan = runner.plan
    kept_count = len(plan.kept)
    timings = runner.timings()
    reported = dict(timings)  # what was there at the fork is the pipeline process's, not this one's
    while True:
        try:
            while not connection.poll(PARENT_CHECK_SECONDS):
                if os.getppid() != parent:  # the pipeline's process is gone (killed, or os._exit)
                    return
            message = connection.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        errors, computed = [], []
        started = time.perf_counter()
        for items, params, index, source_info, shared in _unpacked(plan.source_keys, message):
            rows = _SharedRows(kept_count, {slot: arena.view(location) for slot, location in shared.items()}) \
                if shared else None
            try:
                kept = runner.compute(items, params, index, source_info, rows)
                if rows is not None:
                    for slot in shared:
                        if rows.written(slot, index, kept[slot]) or rows.write(slot, index, kept[slot]):
                            kept[slot] = WrittenInPlace
                computed.append(kept)
                errors.append(None)
            except Exception as error:
                errors.append(error if isinstance(error, PipelineError) else  # pickled without its causes
                              PipelineError(f"{type(error).__name__}: {error}"))
        columns = [None if slot in plan.passed_slots else  # the pipeline's process has these
                   ring.put_column([kept[slot] for kept in computed]) if slot in plan.prepared_slots
                   else _column([kept[slot] for kept in computed], ring) for slot in range(kept_count)]
        seconds = time.perf_counter() - started
        times = {stage: spent - reported.get(stage, 0.0) for stage, spent in timings.items()
                 if spent != reported.get(stage, 0.0)}
        if times:
            reported = dict(timings)
        replies.send((errors, columns, seconds, times))


def _store_array(runs: list, slot: int, column: np.ndarray) -> None:
    """Stores a stacked column of a value that is not an output (per-sample arguments) in the
    ArrayColumns of their batches, each batch's rows at once."""
    for job, begin, end, indices in runs:
        if job.error is not None:
            continue
        values = job.values[slot]
        if not isinstance(values, ArrayColumn):
            values = job.values[slot] = ArrayColumn.of(values, column.shape[1:], column.dtype)
        if values.fits(column):
            values.put_rows(indices, column[begin:end])
        else:  # rows of another shape or type than the batch's first: kept one by one
            for index, value in zip(indices, _rows(column[begin:end])):
                values[index] = value


def _store_ragged(runs: list, slot: int, column: "_RaggedColumn") -> None:
    """Stores a _RaggedColumn of a value that is not an output (boxes, labels on their way to the
    GPU) in the RaggedColumns of their batches, each batch's part at once."""
    flat, shapes = column
    sizes = _sizes(shapes)
    ends = sizes.cumsum()
    for job, begin, end, indices in runs:
        if job.error is not None:
            continue
        values = job.values[slot]
        if not isinstance(values, RaggedColumn):
            values = job.values[slot] = RaggedColumn.of(values, flat.dtype, shapes.shape[1])
        first = int(ends[begin - 1]) if begin else 0
        part = flat[first:int(ends[end - 1])], shapes[begin:end]
        if values.fits(*part):
            values.put_part(indices, *part, sizes[begin:end])
        else:  # arrays of another type or rank than the batch's first: kept one by one
            for index, value in zip(indices, _rows(_RaggedColumn(part))):
                values[index] = value


def _put_rows(job: Job, slot: int, kind: type, indices: list, rows: np.ndarray) -> None:
    """Stores rows of one batch's RowPreparations in its RowColumn (made at the batch's first)."""
    if job.error is not None:
        return
    values = job.values[slot]
    if not isinstance(values, RowColumn):
        values = job.values[slot] = RowColumn.of(kind, values)
    values.put_rows(indices, rows)


def _sizes(shapes: np.ndarray) -> np.ndarray:
    """The element counts of arrays of the shapes [n, rank]: products written out for the usual ranks
    (numpy's reduction along an axis costs several times as much)."""
    if shapes.shape[1] == 1:
        return shapes[:, 0]
    if shapes.shape[1] == 2:
        return shapes[:, 0] * shapes[:, 1]
    return np.prod(shapes, axis=1)


def _keep_ring(link: "ProcessLink", job: Job, end: int) -> None:
    """Keeps a worker's ring up to ``end`` until the batch has used its arrays."""
    if end > job.ring_ends.get(link, 0):
        job.ring_ends[link] = end


def _job_runs(tasks: list) -> list:
    """(job, begin, end, indices) for each run of consecutive tasks of one batch: the run's
    positions in ``tasks`` and its samples' indices in the batch."""
    first = tasks[0][0] if tasks else None
    if tasks and all(job is first for job, _ in tasks):  # the usual message: samples of one batch
        return [(first, 0, len(tasks), [index for _, index in tasks])]
    runs, begin = [], 0
    jobs = [job for job, _ in tasks]
    for position in range(1, len(tasks) + 1):
        if position == len(tasks) or jobs[position] is not jobs[begin]:
            runs.append((jobs[begin], begin, position, [index for _, index in tasks[begin:position]]))
            begin = position
    return runs


def _lost_samples_error(error: RuntimeError, tasks: list) -> PipelineError:
    """The error of the samples a worker process was computing when it died."""
    sources = [job.source_infos[index] for job, index in tasks if job.source_infos]
    if sources:
        shown = ", ".join(f"'{source}'" for source in sources[:3]) + (f" and {len(sources) - 3} more"
                                                                      if len(sources) > 3 else "")
        where = f" while computing the samples from {shown}"
    else:
        where = f" while computing {len(tasks)} samples"
    return PipelineError(f"{error}{where}", "worker process", sources[0] if sources else "", str(error))


def _requests(tasks: list, source_keys: tuple, step_keys: frozenset, shared_buffers) -> list:
    """The request for the samples of ``tasks`` ((job, index) pairs): the items of the sources
    ``source_keys`` and the random draws of the steps ``step_keys`` (what the workers run);
    ``shared_buffers(job)`` gives a block's ``shared``. A block carries a draws array
    once, sliced for its samples, rather than one small array per sample: pickling is what the
    dispatcher thread spends most on."""
    blocks, by_job = [], {}
    for job, index in tasks:
        if id(job) not in by_job:
            by_job[id(job)] = []
            blocks.append((job, by_job[id(job)]))
        by_job[id(job)].append(index)
    message = []
    for job, indices in blocks:
        positions = np.array(indices)
        infos = [job.source_infos[index] for index in indices] if job.source_infos else None
        items = [_source_column(job.source_items[key], indices, positions) for key in source_keys]
        keys = [key for key in job.params if key in step_keys]
        params = [None if draws is None else draws[positions] if isinstance(draws, (np.ndarray, UniformBlocks))
                  else [draws[index] for index in indices] for draws in (job.params[key] for key in keys)]
        message.append((indices, infos, items, keys, params, shared_buffers(job)))
    return message


def _source_column(items, indices: list, positions: np.ndarray):
    """A source's items of some samples as a _column: a slice of its batch's array (random
    generators' draws), else stacked or listed from the samples' items."""
    if isinstance(items, ArrayColumn) and items.complete:
        return items.array[positions]
    return _column([items[index] for index in indices])


def _unpacked(source_keys: tuple, message: list):
    """(items, draws, index, source info, shared buffer locations) of each sample of a request."""
    for indices, infos, items, param_keys, params, shared in message:
        items = [_rows(values) for values in items]
        for position, index in enumerate(indices):
            yield ({key: values[position] for key, values in zip(source_keys, items)},
                   {key: None if draws is None else draws[position] for key, draws in zip(param_keys, params)},
                   index, infos[position] if infos is not None else "", shared)


class _RaggedColumn(tuple):
    """_RaggedColumn((flat, shapes)): arrays of one dtype and rank but different shapes (boxes,
    labels), their elements back to back in ``flat`` and their shapes as an int64 array [n, rank].
    A tuple without a __new__ of its own: it unpickles without running Python code."""

    __slots__ = ()


class _RingColumn(tuple):
    """_RingColumn(values): one value of several samples, those of LENT_SMALLEST bytes or more as
    RingRefs to the process's ring or heap (the others as themselves): a decoded 12-megapixel
    image pickled through the pipe is copied five times on its way (stacked, pickled, written, read,
    stored) and holds as much memory at each step."""

    __slots__ = ()


def _column(values: list, ring: SharedRing | SharedHeap | None = None):
    """One value of several samples, for the pipe: with a ring, a _RingColumn when one of them is
    a large array; arrays of one shape and type stacked into one array, arrays of one type and
    rank but different shapes packed into one _RaggedColumn (one pickled object, not one per
    sample, each of which costs the receiving thread microseconds to unpickle; the other end takes
    views, see _rows), anything else as the list."""
    if ring is not None and any(_large(value) for value in values):
        return _RingColumn(ring.put(value) if _large(value) else value for value in values)
    first = values[0] if values else None
    if not isinstance(first, np.ndarray) or first.dtype.hasobject or \
            not all(isinstance(value, np.ndarray) and value.dtype == first.dtype for value in values):
        return values
    if all(value.shape == first.shape for value in values):
        return np.stack(values)
    if first.ndim == 0 or any(value.ndim != first.ndim for value in values):
        return values
    return _RaggedColumn((np.concatenate([value.reshape(-1) for value in values]),
                          np.array([value.shape for value in values], np.int64)))


def _large(value) -> bool:
    return isinstance(value, np.ndarray) and value.nbytes >= LENT_SMALLEST and not value.dtype.hasobject


def _rows(column) -> list:
    """The per-sample values of a _column: views of a stacked array's rows (0-d arrays for a
    column of scalars, not numpy scalars) or of a _RaggedColumn's parts, or the list itself."""
    if type(column) is _RaggedColumn:
        flat, shapes = column
        ends = np.cumsum(np.prod(shapes, axis=1)).tolist()
        starts = [0, *ends[:-1]]
        return [flat[start:end].reshape(shape) for start, end, shape in zip(starts, ends, shapes.tolist())]
    if not isinstance(column, np.ndarray):
        return column
    if column.ndim > 1:
        return list(column)
    return [column[index, ...] for index in range(len(column))]
