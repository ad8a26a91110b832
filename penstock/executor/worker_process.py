"""The worker process's side of the CPU stage in forked processes: its loop, which runs the sample
runner on each request and sends back the reply, and the formats of both messages.

The messages, pickled through each process's pipe:
The messages, pickled through each process's pipe:

request (dispatcher -> process), made by ``request_for``: a list with one block per batch that the
    request's samples belong to, each block a tuple (indices, infos, items, param_keys, params, shared):
    indices     the samples' indices in their batch;
    infos       their source infos (file names, for error messages), or None when the batch has none;
    items       per source, in plan order, its items of those samples, as a ``pack_column``;
    param_keys  the key of every step (other than the sources), in plan order (the job's params);
    params      per step, its draws of those samples: None when it draws nothing, the batch's array
                (or UniformBlocks) taken at ``indices``, else the list of the samples' draws;
    shared      kept slot -> location in the SharedArena of the batch's buffer for that value, for
                the values per-sample operators may write straight into their sample's row.
    None instead of a request stops the process.
reply (process -> dispatcher), made by ``serve_samples``: a tuple (errors, columns, seconds, times):
    errors      per sample of the request, in order: None, or a PipelineError (its message and fields)
                of its failure (which names the operator and the sample's source when an operator
                failed);
    columns     per kept value (ExecutionPlan.kept, slot order), its values of the samples that did
                not fail, in order, as a ``pack_column``: WrittenInPlace for a value the process wrote
                (or copied) into its row of a shared buffer; arrays of a megabyte and more
                (decoded images) written into the process's SharedHeap (a CPU pipeline: lent to the
                batch as they are) or ring, a RingColumn of RingRefs. Per-sample preparations (the
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
import os
import select
import signal
import socket
import struct
import time
from multiprocessing.reduction import ForkingPickler

import numpy as np

from penstock.columns import ArrayColumn
from penstock.draws import of_samples
from penstock.executor.buffers import SharedArena
from penstock.executor.jobs import PipelineError
from penstock.executor.samples import SampleRunner
from penstock.executor.shared_ring import SharedHeap, SharedRing
from penstock.tuning import Tuning

# how often an idle worker process looks whether the pipeline's process is still there: killed, it
# closes no pipe (later processes inherit its end of the earlier ones' pipes), and nothing else
# would tell the workers to stop
PARENT_CHECK_SECONDS = 1.0


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


def serve_samples(runner: SampleRunner, connection, ring: SharedRing | SharedHeap, arena: SharedArena | None,
                  parent: int, tuning: Tuning) -> None:
    """The worker process: answers each request with its reply until it gets None, the pipe closes
    or the pipeline's process is gone."""
    if not _die_with_parent(parent):
        return
    replies = _Replies(connection, parent)
    try:
        _answer_requests(runner, connection, ring, arena, parent, replies, tuning)
    except _ParentGone:
        pass
    finally:
        replies.close()


def _answer_requests(runner: SampleRunner, connection, ring: SharedRing | SharedHeap, arena: SharedArena | None,
                     parent: int, replies: _Replies, tuning: Tuning) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it stops us
    # niced: where the workers fill every core (a CPU share of large JPEGs), the threads that feed
    # the GPU still get a core when they want one
    if tuning.worker_niceness:  # worker processes are forked: a POSIX system, which has nice()
        try:
            os.nice(tuning.worker_niceness)
        except OSError:  # a policy that refuses: the workers run at the pipeline's priority
            pass
    _keep_freed_memory()
    plan = runner.plan
    kept_count = len(plan.kept)
    timings = runner.timings()
    reported = dict(timings)  # what was there at the fork is the pipeline process's, not this one's
    lent_smallest = tuning.lent_smallest
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
        for items, params, index, source_info, shared in unpacked_samples(plan.source_keys, message):
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
                   else pack_column([kept[slot] for kept in computed], ring, lent_smallest)
                   for slot in range(kept_count)]
        seconds = time.perf_counter() - started
        times = {stage: spent - reported.get(stage, 0.0) for stage, spent in timings.items()
                 if spent != reported.get(stage, 0.0)}
        if times:
            reported = dict(timings)
        replies.send((errors, columns, seconds, times))


def request_for(tasks: list, source_keys: tuple, step_keys: frozenset, shared_buffers) -> list:
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
        params = [None if draws is None else of_samples(draws, indices) for draws in (job.params[key] for key in keys)]
        message.append((indices, infos, items, keys, params, shared_buffers(job)))
    return message


def _source_column(items, indices: list, positions: np.ndarray):
    """A source's items of some samples as a pack_column: a slice of its batch's array (random
    generators' draws), else stacked or listed from the samples' items."""
    if isinstance(items, ArrayColumn) and items.complete:
        return items.array[positions]
    return pack_column([items[index] for index in indices])


def unpacked_samples(source_keys: tuple, message: list):
    """(items, draws, index, source info, shared buffer locations) of each sample of a request."""
    for indices, infos, items, param_keys, params, shared in message:
        items = [unpack_rows(values) for values in items]
        for position, index in enumerate(indices):
            yield ({key: values[position] for key, values in zip(source_keys, items)},
                   {key: None if draws is None else draws[position] for key, draws in zip(param_keys, params)},
                   index, infos[position] if infos is not None else "", shared)


class RaggedPack(tuple):
    """RaggedPack((flat, shapes)): arrays of one dtype and rank but different shapes (boxes,
    labels), their elements back to back in ``flat`` and their shapes as an int64 array [n, rank].
    A tuple without a __new__ of its own: it unpickles without running Python code."""

    __slots__ = ()


class RingColumn(tuple):
    """RingColumn(values): one value of several samples, those of ``lent_smallest`` bytes or more as
    RingRefs to the process's ring or heap (the others as themselves): a decoded 12-megapixel
    image pickled through the pipe is copied five times on its way (stacked, pickled, written, read,
    stored) and holds as much memory at each step."""

    __slots__ = ()


def pack_column(values: list, ring: SharedRing | SharedHeap | None = None, lent_smallest: int = 0):
    """One value of several samples, for the pipe: with a ring, a RingColumn when one of them is
    a large array; arrays of one shape and type stacked into one array, arrays of one type and
    rank but different shapes packed into one RaggedPack (one pickled object, not one per
    sample, each of which costs the receiving thread microseconds to unpickle; the other end takes
    views, see unpack_rows), anything else as the list."""
    if ring is not None and any(_large(value, lent_smallest) for value in values):
        return RingColumn(ring.put(value) if _large(value, lent_smallest) else value for value in values)
    first = values[0] if values else None
    if not isinstance(first, np.ndarray) or first.dtype.hasobject or \
            not all(isinstance(value, np.ndarray) and value.dtype == first.dtype for value in values):
        return values
    if all(value.shape == first.shape for value in values):
        return np.stack(values)
    if first.ndim == 0 or any(value.ndim != first.ndim for value in values):
        return values
    return RaggedPack((np.concatenate([value.reshape(-1) for value in values]),
                          np.array([value.shape for value in values], np.int64)))


def _large(value, smallest: int) -> bool:
    return isinstance(value, np.ndarray) and value.nbytes >= smallest and not value.dtype.hasobject


def unpack_rows(column) -> list:
    """The per-sample values of a pack_column: views of a stacked array's rows (0-d arrays for a
    column of scalars, not numpy scalars) or of a RaggedPack's parts, or the list itself."""
    if type(column) is RaggedPack:
        flat, shapes = column
        ends = np.cumsum(np.prod(shapes, axis=1)).tolist()
        starts = [0, *ends[:-1]]
        return [flat[start:end].reshape(shape) for start, end, shape in zip(starts, ends, shapes.tolist())]
    if not isinstance(column, np.ndarray):
        return column
    if column.ndim > 1:
        return list(column)
    return [column[index, ...] for index in range(len(column))]
