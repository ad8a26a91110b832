"""Host-to-GPU copies through reused pinned buffers: one copy for many arrays, queued on the
current CUDA stream without waiting for the work already on it. Allocating pinned memory
(cudaHostAlloc) for each copy would stall the device, so each ``PinnedStaging`` keeps a small ring
of buffers and reuses one once the copy that last read it has finished."""
from __future__ import annotations

import numpy as np
import torch

from penstock.types import to_torch_dtype

_ALIGN = 16  # bytes: every array starts on such a boundary, whatever its dtype


class PinnedStaging:
    SLOTS = 4

    def __init__(self):
        self._slots = [None] * self.SLOTS  # (pinned uint8 buffer, event after its copy)
        self._next = 0

    def upload(self, device, arrays: list) -> tuple[torch.Tensor, list[int]]:
        """The arrays packed into one uint8 tensor on ``device``, and each one's byte offset in it."""
        offsets, total = [], 0
        for array in arrays:
            offsets.append(total)
            total += -(-array.nbytes // _ALIGN) * _ALIGN
        if device.type != "cuda":
            packed = np.empty(max(total, 1), np.uint8)
            for array, offset in zip(arrays, offsets):
                packed[offset:offset + array.nbytes] = _bytes_of(array)
            return torch.from_numpy(packed), offsets
        slot = self._next
        self._next = (slot + 1) % self.SLOTS
        buffer, event = self._slots[slot] or (None, None)
        if event is not None:
            event.synchronize()  # the copy that last read this buffer (long done, in practice)
        if buffer is None or buffer.numel() < total:
            buffer = torch.empty(max(total + total // 2, 1 << 16), dtype=torch.uint8, pin_memory=True)
        host = buffer.numpy()
        for array, offset in zip(arrays, offsets):
            host[offset:offset + array.nbytes] = _bytes_of(array)
        moved = buffer[:max(total, 1)].to(device, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        self._slots[slot] = (buffer, event)
        return moved, offsets


def _bytes_of(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def upload_arrays(staging: PinnedStaging, device, arrays: list) -> list[torch.Tensor]:
    """Each array as a tensor on ``device`` (views into one packed copy)."""
    packed, offsets = staging.upload(device, arrays)
    return [packed[offset:offset + array.nbytes].view(to_torch_dtype(array.dtype)).view(array.shape)
            for array, offset in zip(arrays, offsets)]
