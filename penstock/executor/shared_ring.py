"""Large arrays from a worker process to its parent without pickling them through a pipe.

Each worker process has a ring of shared memory (mapped before the fork, so both sides see it).
The process writes an array at its next free position and sends only a ``RingRef``; the parent
reads the array in place and, once it has used every array of a batch, releases the ring up to
the end of that batch's arrays (batches finish in order, so releases only move forward). When the
ring has no room (the parent is slow to release), the process sends the array through the pipe
instead: the ring never blocks either side.

A CPU pipeline's large outputs (decoded images) go through a ``SharedHeap`` instead: the parent
lends its arrays out as the batches' samples, without a copy, and they come back in any order (a
batch the user keeps), which a ring, released in order, would wait for.
"""
from __future__ import annotations

import mmap
import threading
import weakref

import numpy as np

from penstock.columns import RowPreparation, is_row_bytes
from penstock.executor.buffers import FreeList
from penstock.tuning import Tuning

def pinned_ring_bytes(processes: int, tuning: Tuning) -> int:
    """The size of each of ``processes`` rings that are to be pinned: they share
    ``tuning.pinned_rings_bytes``, each between 32 MiB and ``tuning.ring_bytes``."""
    return min(tuning.ring_bytes, max(32 << 20, tuning.pinned_rings_bytes // max(1, processes)))


class RingRef(tuple):
    """RingRef((start, nbytes, shape, dtype)): an array in the ring; start is its position in bytes
    since the ring was made (not wrapped). A tuple without a __new__ of its own: thousands cross
    the pipe each second, and unpickle without running Python code."""

    __slots__ = ()

    @property
    def start(self) -> int:
        return self[0]


class HoldsRingRefs(tuple):
    """HoldsRingRefs((kind, items)): a tuple or list of class ``kind`` some of whose ``items`` are
    (or hold) RingRefs. Containers without any stay as they are, so the parent looks into only
    these: one type check for most values of a reply."""

    __slots__ = ()


class RingRows(tuple):
    """RingRows((kind, rows, others)): values of several samples, those of one RowPreparation class
    ``kind`` (penstock.contract) as ``rows`` int64 [n, 3 + k]: per value its position among the
    samples, the start and size in bytes of its first item (a uint8 array, in the ring), then the k
    ints of ``value.ring_row()``; the other values (not of that class, or not in the ring) in
    ``others``, position -> what ``put`` made of it. One array crosses the pipe for the rows, and
    the parent makes no object per sample for them."""

    __slots__ = ()


_REFERENCES = (RingRef, HoldsRingRefs)


class SharedRing:
    def __init__(self, size: int, smallest: int):
        self._size = size
        self._smallest = smallest  # arrays below this travel through the pipe: a reference would save nothing
        self.memory = self._memory = mmap.mmap(-1, size)
        self._base_address = np.frombuffer(self._memory, np.uint8, 1).ctypes.data
        self._released = np.frombuffer(mmap.mmap(-1, 8), np.int64)  # parent -> child: free below this
        self._written = 0  # child side: the next position to write

    @property
    def size(self) -> int:
        return self._size

    # ---- worker process side ------------------------------------------------------------------
    def put(self, value):
        """A RingRef for an array written into the ring, or the value itself when it is small, not
        an array, or there is no room; a tuple or list holding such arrays becomes a HoldsRingRefs."""
        if isinstance(value, (tuple, list)):
            items = [self.put(item) for item in value]
            if any(type(item) in _REFERENCES for item in items):
                return HoldsRingRefs((type(value), items))
            return value
        if not isinstance(value, np.ndarray) or value.nbytes < self._smallest or value.dtype.hasobject:
            return value
        start = self._write(value)
        return value if start is None else RingRef((start, value.nbytes, value.shape, value.dtype.str))

    def put_column(self, values: list):
        """The values of several samples (one kept value each): a RingRows when one of them is a
        RowPreparation whose bytes go in the ring, else each one ``put``."""
        kind = next((type(value) for value in values if isinstance(value, RowPreparation)), None)
        rows, others = [], {}
        for position, value in enumerate(values):
            if type(value) is kind and is_row_bytes(value[0]) and value[0].nbytes >= self._smallest:
                start = self._write(value[0])
                if start is not None:
                    rows.append((position, start, value[0].nbytes, *value.ring_row()))
                    continue
            others[position] = self.put(value)
        if not rows:
            return [others[position] for position in range(len(values))]
        return RingRows((kind, np.array(rows, np.int64), others))

    def _write(self, value: np.ndarray) -> int | None:
        """Writes the array at the ring's next free position: that position, or None without room."""
        size = value.nbytes
        start = self._written
        offset = start % self._size
        released = int(self._released[0])
        # only when the array does not fit before the ring's end: starting over whenever everything
        # was released (fewer pages touched) cut the GPU validation pipeline from 28k to 17-19k
        # images/s on an H200 (BENCHMARKS.md)
        if offset + size > self._size:  # no wrapping inside an array: skip to the ring's start
            start += self._size - offset
            offset = 0
        if start + size - released > self._size:
            return None
        np.frombuffer(self._memory, np.uint8, size, offset)[:] = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
        self._written = start + size
        return start

    # ---- parent side ----------------------------------------------------------------------------
    def resolve(self, value) -> tuple:
        """(the value with its RingRefs replaced by arrays read in place (valid until released),
        the ring position after its last array (0 when it has none))."""
        if type(value) is RingRef:
            start, nbytes, shape, dtype = value
            # writable, as arrays from a pipe are: the GPU decoder takes its address through ctypes,
            # which only reads writable buffers cheaply
            array = np.frombuffer(self._memory, np.uint8, nbytes, start % self._size)
            if dtype != "|u1" or len(shape) != 1:  # encoded files are flat bytes: nothing to reshape
                array = array.view(dtype).reshape(shape)
            return array, start + nbytes
        if type(value) is HoldsRingRefs:
            kind, items = value
            items, end = list(items), 0
            for position, item in enumerate(items):
                if type(item) in _REFERENCES:
                    items[position], item_end = self.resolve(item)
                    end = max(end, item_end)
            return _rebuilt(kind, items), end
        return value, 0

    def resolve_rows(self, values: RingRows) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
        """A RingRows read in place: the positions of its rows, the rows as RowColumn takes them
        (the address of each value's bytes, their size, the ring_row ints), each row's ring position
        after its bytes, and its other values resolved (position -> (value, ring position after
        it))."""
        _, rows, others = values
        starts, sizes = rows[:, 1], rows[:, 2]
        column_rows = rows[:, 1:].copy()
        column_rows[:, 0] = starts % self._size + self._base_address
        return rows[:, 0], column_rows, starts + sizes, {position: self.resolve(value)
                                                        for position, value in others.items()}

    def resolve_column(self, values: list) -> tuple[list, list]:
        """Values that came one by one (``put``) resolved, and each one's ring position after its
        last array (0 when it has none)."""
        resolved = [self.resolve(value) for value in values]
        return [value for value, _ in resolved], [end for _, end in resolved]

    def release(self, end: int) -> None:
        """Lets the process write over everything before ``end``."""
        if end > self._released[0]:
            self._released[0] = end



class SharedHeap:
    """Shared memory a worker process writes its large arrays into, lowest addresses first (the
    pages backed by memory are those of the most the parent held at once), and whose arrays the
    parent lends out as they are: each one's room is the process's again once it and its views are
    gone, in any order. The parent gives the room back through a queue in shared memory, which
    the process reads before it writes."""

    def __init__(self, size: int, smallest: int, fallback_size: int):
        try:
            self.memory = mmap.mmap(-1, size)
        except OSError:  # a host that refuses the reservation (strict overcommit): a ring's size
            size = min(size, fallback_size)
            self.memory = mmap.mmap(-1, size)
        self._size = size
        self._smallest = smallest
        # every array takes at least ``smallest``: no more can be out, or given back unread
        self._capacity = size // smallest + 1
        # parent -> child: [count given back, then (offset, length) per entry, round the queue]
        self._returns = np.frombuffer(mmap.mmap(-1, 8 * (1 + 2 * self._capacity)), np.int64)
        self._read = 0  # child side: entries of the queue taken back
        self._free = FreeList(size)  # child side
        self._lock = threading.Lock()  # parent side: arrays are given back on any thread that drops them

    @property
    def size(self) -> int:
        return self._size

    def put(self, value):
        """A RingRef for an array of ``smallest`` bytes or more written here, or the array itself
        when there is no room (the user holds many batches) or it is smaller."""
        if not isinstance(value, np.ndarray) or value.nbytes < self._smallest or value.dtype.hasobject:
            return value
        self._take_back()
        length = -(-value.nbytes // _ALIGNMENT) * _ALIGNMENT
        offset = self._free.take(length)
        if offset is None:
            return value
        np.frombuffer(self.memory, np.uint8, value.nbytes, offset)[:] = \
            np.ascontiguousarray(value).reshape(-1).view(np.uint8)
        return RingRef((offset, value.nbytes, value.shape, value.dtype.str))

    def _take_back(self) -> None:
        given = int(self._returns[0])
        while self._read < given:
            entry = 1 + 2 * (self._read % self._capacity)
            self._free.give_back(int(self._returns[entry]), int(self._returns[entry + 1]))
            self._read += 1

    def lend(self, ref: RingRef) -> np.ndarray:
        """The array of ``ref``, read in place for as long as it or a view of it lives."""
        offset, nbytes, shape, dtype = ref
        # made on the mapping itself, so that its views refer to it and it lives while they do
        array = np.ndarray(shape, np.dtype(dtype), buffer=self.memory, offset=offset)
        weakref.finalize(array, self._give_back, offset, -(-nbytes // _ALIGNMENT) * _ALIGNMENT)
        return array

    def _give_back(self, offset: int, length: int) -> None:
        with self._lock:
            given = int(self._returns[0])
            entry = 1 + 2 * (given % self._capacity)
            self._returns[entry], self._returns[entry + 1] = offset, length
            self._returns[0] = given + 1  # after the entry: the process reads the count first


_ALIGNMENT = 64


def _rebuilt(kind: type, items: list):
    """A tuple or list of class ``kind`` holding ``items``: lists, tuples and tuple classes without a
    __new__ of their own (EncodedImage) take the items as one iterable; a tuple class with its own
    __new__ (a named tuple) takes them one by one."""
    if issubclass(kind, list) or kind.__new__ is tuple.__new__:
        return kind(items)
    return kind(*items)
