"""Output buffers reused from batch to batch, once nothing else refers to them."""
from __future__ import annotations

import sys
import threading

import numpy as np


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
            for buffer in self._buffers:  # not enumerate(): its reused result tuple holds a reference
                # references: the list, the loop variable, getrefcount's argument
                if buffer.shape == shape and buffer.dtype == dtype and sys.getrefcount(buffer) <= 3:
                    return buffer
            buffer = np.empty(shape, dtype)
            self._buffers.append(buffer)
            if len(self._buffers) > self._keep:
                self._buffers.pop(0)
            return buffer
