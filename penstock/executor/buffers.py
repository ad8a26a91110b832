"""Output buffers reused from batch to batch, once nothing else refers to them, and the shared
arena they live in when forked worker processes write into them."""
from __future__ import annotations

import bisect
import math
import mmap
import sys
import threading
import weakref

import numpy as np

# address space of a SharedArena: only the pages written are ever backed by memory
ARENA_BYTES = (16 << 30, 4 << 30, 1 << 30)  # tried in turn (a host may refuse the largest reservation)
_ALIGNMENT = 4096


class FreeList:
    """The free space of a region as sorted (offset, length) runs, never adjacent: taken first fit
    (the lowest offsets first, so that the pages in use stay few), joined again when given back."""

    def __init__(self, size: int):
        self._free = [(0, size)] if size else []

    def take(self, length: int) -> int | None:
        """The offset of ``length`` bytes now taken, or None when no run is that long."""
        for position, (offset, free) in enumerate(self._free):
            if free >= length:
                if free == length:
                    del self._free[position]
                else:
                    self._free[position] = (offset + length, free - length)
                return offset
        return None

    def give_back(self, offset: int, length: int) -> None:
        position = bisect.bisect(self._free, (offset, 0))
        if position < len(self._free) and self._free[position][0] == offset + length:  # joins the next
            length += self._free.pop(position)[1]
        if position > 0 and sum(self._free[position - 1]) == offset:  # joins the previous
            self._free[position - 1] = (self._free[position - 1][0], self._free[position - 1][1] + length)
        else:
            self._free.insert(position, (offset, length))


class SharedArena:
    """Memory shared with the worker processes forked after it is made, for the batch buffers they
    write their samples into: a worker computes a sample straight into its row of the batch, and
    sends back only that it did (no pickled array through a pipe, no copy here).

    The pipeline's process allocates (``array``); a buffer's space is free again when the array
    and every view of it are gone. A worker makes views of buffers from their location (``view``).
    """

    def __init__(self, upload_bytes: int = 0):
        self.memory = None
        for size in ARENA_BYTES:
            try:
                self.memory = mmap.mmap(-1, size + upload_bytes)
                break
            except (OSError, OverflowError, ValueError):
                continue
        self.size = len(self.memory) if self.memory is not None else 0
        # the first upload_bytes hold the buffers the GPU copies from (``array(..., upload=True)``),
        # a region the pipeline may pin (``upload_region``); the rest, every other buffer
        self.upload_bytes = upload_bytes if self.memory is not None else 0
        self._regions = (FreeList(self.size - self.upload_bytes), FreeList(self.upload_bytes))
        self._bases = (self.upload_bytes, 0)
        self._lock = threading.Lock()
        self.upload_high_water = 0  # the end of the upload region's highest space ever taken

    def array(self, shape: tuple, dtype, upload: bool = False) -> np.ndarray | None:
        """A new array in the arena (in its upload region with ``upload``), or None when it has no room."""
        dtype = np.dtype(dtype)
        length = max(_ALIGNMENT, -(-math.prod(shape) * dtype.itemsize // _ALIGNMENT) * _ALIGNMENT)
        with self._lock:
            offset = self._regions[upload].take(length)
            if offset is not None and upload:
                self.upload_high_water = max(self.upload_high_water, offset + length)
        if offset is None:
            return None
        offset += self._bases[upload]
        # made on the mapping itself (not a view of a frombuffer array): the views of its rows then
        # refer to this array, so it lives, and keeps its space, while any of them does
        array = np.ndarray(shape, dtype, buffer=self.memory, offset=offset)
        weakref.finalize(array, self._release, offset, length)
        return array

    def upload_region(self, nbytes: int) -> memoryview:
        """The first ``nbytes`` of the upload region (to pin or unpin)."""
        return memoryview(self.memory)[:min(nbytes, self.upload_bytes)]

    def location(self, array: np.ndarray) -> tuple | None:
        """(offset, shape, dtype) of an array made by ``array()``, for ``view`` in a worker; None
        for any other array."""
        if self.memory is None or array.base is not self.memory:
            return None
        offset = array.ctypes.data - self._address()
        return offset, array.shape, array.dtype.str

    def view(self, location: tuple) -> np.ndarray:
        offset, shape, dtype = location
        return np.ndarray(shape, np.dtype(dtype), buffer=self.memory, offset=offset)

    def _address(self) -> int:
        return np.ndarray((1,), np.uint8, buffer=self.memory).ctypes.data

    def _release(self, offset: int, length: int) -> None:
        upload = offset < self.upload_bytes
        with self._lock:
            self._regions[upload].give_back(offset - self._bases[upload], length)


class BufferPool:
    """Reuses output buffers once nobody outside the pool refers to them any more.

    A batch handed to the user (or a torch tensor made from it without a copy) keeps a reference
    to its buffer; while it lives, the buffer is not reused.
    """

    def __init__(self, keep: int, arena: SharedArena | None = None, upload: bool = False):
        self._buffers: list[np.ndarray] = []
        self._keep = keep
        self._arena = arena  # where new buffers go when worker processes write into them
        self._upload = upload  # in the arena's upload region (the GPU copies them), while it has room
        self._lock = threading.Lock()

    def acquire(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        with self._lock:
            for buffer in self._buffers:  # not enumerate(): its reused result tuple holds a reference
                # references: the list, the loop variable, getrefcount's argument
                if buffer.shape == shape and buffer.dtype == dtype and sys.getrefcount(buffer) <= 3:
                    return buffer
            buffer = None
            if self._arena is not None and self._upload:
                buffer = self._arena.array(shape, dtype, upload=True)
            if buffer is None and self._arena is not None:
                buffer = self._arena.array(shape, dtype)
            if buffer is None:
                buffer = np.empty(shape, dtype)
            self._buffers.append(buffer)
            if len(self._buffers) > self._keep:
                self._buffers.pop(0)
            return buffer
