"""The CPU stage in forked worker processes: Python runs in parallel across processes, without one
interpreter lock. One dispatcher thread in the pipeline's process hands queued samples to idle
processes and stores what they send back; each process runs the sample runner (its loop and the
messages' formats: executor.worker_process)."""
from __future__ import annotations

import gc
import multiprocessing
import os
import queue
import selectors
import signal
import threading
import time
import warnings
import weakref

import numpy as np

from penstock.columns import ArrayColumn, RaggedColumn, RowColumn
from penstock.contract import SampleOperator
from penstock.executor.buffers import SharedArena
from penstock.executor.jobs import POLL_SECONDS, Job, PipelineError, WorkerCalls, finish_samples
from penstock.executor.samples import SampleRunner
from penstock.executor.shared_ring import RingRef, RingRows, SharedHeap, SharedRing, pinned_ring_bytes
from penstock.executor.worker_process import (RaggedPack, RingColumn, WrittenInPlace, request_for, serve_samples,
                                              unpack_rows)
from penstock.tuning import Tuning

class WorkerProcesses:
    """``count`` forked worker processes, and the loop of the one thread that feeds them: every
    further Python thread here would compete with the GPU stage for the interpreter lock."""

    def __init__(self, runner: SampleRunner, count: int, tasks: queue.SimpleQueue, stopping: threading.Event,
                 arena: SharedArena | None, tuning: Tuning):
        self.count = count
        self._tuning = tuning
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
                self._links.append(ProcessLink(self._runner, self._arena, self.count, self._tuning))
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
        ones still computing after ``worker_stop_seconds`` are terminated."""
        for link in self._links:
            link.ask_to_stop()
        deadline = time.monotonic() + self._tuning.worker_stop_seconds
        for link in self._links:
            link.close(deadline)
        self._closed.set()  # the thread that forked them ends (after they did: its end kills them)
        if self._forker is not None and self._forker is not threading.current_thread():
            self._forker.join()
        for end in self._doorbell:  # a pipeline's descriptors go with it, not with the garbage collector
            end.close()

    def dispatch(self) -> None:
        """The dispatcher thread: hands queued samples to idle worker processes, up to ``process_chunk``
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
        tuning = self._tuning
        process_chunk, light_chunk, reply_ring_share = tuning.process_chunk, tuning.light_chunk, tuning.reply_ring_share
        message_seconds, heavy_message_seconds = tuning.message_seconds, tuning.heavy_message_seconds

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
                chunk = min(process_chunk, self._tasks.qsize() // len(idle)) if sample_seconds is not None else 1
                if sample_seconds is not None:
                    # samples that take a worker little time (a GPU pipeline's header parsing and
                    # window choice) go many to a message: each costs this thread the interpreter
                    # lock for pickling, a pipe write, a poll and a read
                    chunk = max(chunk, min(light_chunk, int(message_seconds / max(sample_seconds, 1e-6))))
                    # heavy samples one or a few at a time: a process that took a batch's samples
                    # while the others were busy would compute them alone
                    chunk = min(chunk, max(1, int(heavy_message_seconds / sample_seconds)))
                # a reply fits its ring (which holds the batches in flight too), and touches no
                # more of it than it needs
                if sample_bytes:
                    chunk = min(chunk, int(idle[-1].ring.size / (reply_ring_share * sample_bytes)))
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
                    link.send(request_for(tasks, source_keys, step_keys, self._shared_buffers))
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
                try:
                    shared = self._store_reply(link, tasks, replies) / len(tasks)
                    self._note_row_shapes(tasks)
                except BaseException as error:  # these samples are in no queue now: they fail here
                    finish_samples(tasks, error)
                    raise
                sample_bytes = shared if not sample_bytes else 0.8 * sample_bytes + 0.2 * shared
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
            if type(column) is RaggedPack and slot not in dense_slots and slot not in prepared_slots:
                _store_ragged(runs, slot, column)
                continue
            in_ring, lent = (), False
            if slot in prepared_slots:
                values, ends = link.ring.resolve_column(column)
                for (job, _), end in zip(done, ends):  # each batch keeps its arrays in the ring until it is used
                    _keep_ring(link, job, end)
            elif type(column) is RingColumn:
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
                values = unpack_rows(column)
            for position, ((job, index), value) in enumerate(zip(done, values)):
                if job.error is not None:
                    continue
                read = value
                if value is WrittenInPlace and slot not in dense_slots:  # a row of the job's ArrayColumn
                    job.values[slot].present[index] = True
                    continue
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
        write in place; the buffer is made here when the last batch's rows tell its shape (the
        buffer of a value that is not a pipeline output is the array of the job's ArrayColumn)."""
        shared = {}
        if self._arena is None:
            return shared
        dense_slots = self._runner.plan.dense_slots
        for slot in self._runner.plan.shared_slots:
            if job.ragged[slot]:
                continue
            buffer = job.buffers[slot]
            if buffer is None:
                if slot not in self._row_shapes:
                    continue  # the first sample back through the pipe makes it
                buffer = self._runner.batch_buffer(job, slot, *self._row_shapes[slot])
                if slot not in dense_slots:
                    job.values[slot] = ArrayColumn.over(buffer, job.values[slot])
            location = self._arena.location(buffer)
            if location is not None:
                shared[slot] = location
        return shared

    def _note_row_shapes(self, tasks: list) -> None:
        if self._arena is None:
            return
        dense_slots = self._runner.plan.dense_slots
        for job in {id(job): job for job, _ in tasks}.values():
            for slot in self._runner.plan.shared_slots:
                if slot not in dense_slots:
                    self._note_column_rows(slot, job.values[slot])
                    continue
                buffer = job.buffers[slot]
                if job.ragged[slot]:
                    self._row_shapes.pop(slot, None)
                elif buffer is not None:
                    self._row_shapes[slot] = (buffer.shape[1:], buffer.dtype)

    def _note_column_rows(self, slot: int, column) -> None:
        """Learns the rows of a value that is not a pipeline output from its column: those of an
        ArrayColumn once every sample has its row there; none where a sample's value is otherwise
        (rows of other shapes, a RaggedColumn). A column still being filled says nothing yet."""
        if isinstance(column, ArrayColumn):
            if column.others:
                self._row_shapes.pop(slot, None)
            elif column.complete:
                self._row_shapes[slot] = (column.array.shape[1:], column.array.dtype)
        elif isinstance(column, RaggedColumn) or any(value is not None for value in column):
            self._row_shapes.pop(slot, None)

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
    and sends back replies (see executor.worker_process). The process gets the sample runner (and
    through it the plan), and a shared ring when the plan has per-sample preparations (one of
    ``processes`` rings that are pinned, when the GPU reads them)."""

    def __init__(self, runner: SampleRunner, arena: SharedArena | None, processes: int, tuning: Tuning):
        context = multiprocessing.get_context("fork")
        self._connection, child = context.Pipe()
        plan = runner.plan
        # large values (decoded images) come back through the ring too, not only preparations;
        # without preparations, through a heap whose arrays are lent out as the batches' samples
        if plan.prepared_slots:
            self.ring = SharedRing(pinned_ring_bytes(processes, tuning) if plan.gpu_reads_rings else tuning.ring_bytes,
                                   tuning.ring_smallest)
        else:
            self.ring = SharedHeap(tuning.lent_ring_bytes, tuning.lent_smallest, tuning.ring_bytes)
        self._process = context.Process(target=serve_samples,
                                        args=(runner, child, self.ring, arena, os.getpid(), tuning),
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
            for index, value in zip(indices, unpack_rows(column[begin:end])):
                values[index] = value


def _store_ragged(runs: list, slot: int, column: "RaggedPack") -> None:
    """Stores a RaggedPack of a value that is not an output (boxes, labels on their way to the
    GPU) in the RaggedColumns of their batches, each batch's part at once."""
    flat, shapes = column
    sizes = _sizes(shapes)
    ends = sizes.cumsum()
    for job, begin, end, indices in runs:
        if job.error is not None:
            continue
        values = job.values[slot]
        first = int(ends[begin - 1]) if begin else 0
        part = flat[first:int(ends[end - 1])], shapes[begin:end]
        if isinstance(values, ArrayColumn) and values.array is job.buffers[slot]:
            # the batch's rows are written in place in a shared buffer: these samples did not fit one
            for index, value in zip(indices, unpack_rows(RaggedPack(part))):
                values[index] = value
            continue
        if not isinstance(values, RaggedColumn):
            values = job.values[slot] = RaggedColumn.of(values, flat.dtype, shapes.shape[1])
        if values.fits(*part):
            values.put_part(indices, *part, sizes[begin:end])
        else:  # arrays of another type or rank than the batch's first: kept one by one
            for index, value in zip(indices, unpack_rows(RaggedPack(part))):
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
