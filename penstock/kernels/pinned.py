"""Host-to-GPU copies of many arrays in one copy, from pinned memory, queued on the current CUDA
stream without waiting for the work already on it.

The pinned buffer comes from PyTorch's caching host allocator: allocating pinned memory
(cudaHostAlloc) for each copy would stall the device, and the allocator reuses a freed buffer only
once the copies that read it have finished (it records an event on the stream of each copy). So
this module keeps no buffers of its own, and a forked worker process inherits none."""
from __future__ import annotations

import numpy as np
import torch

from penstock.types import to_torch_dtype

_ALIGN = 16  # bytes: every array starts on such a boundary, whatever its dtype


def upload(device, arrays: list) -> tuple[torch.Tensor, list[int]]:
    """The arrays packed into one uint8 tensor on ``device``, and each one's byte offset in it."""
    offsets, total = [], 0
    for array in arrays:
        offsets.append(total)
        total += -(-array.nbytes // _ALIGN) * _ALIGN
    on_cuda = device.type == "cuda"
    packed = torch.empty(max(total, 1), dtype=torch.uint8, pin_memory=on_cuda)
    host = packed.numpy()
    for array, offset in zip(arrays, offsets):
        host[offset:offset + array.nbytes] = _bytes_of(array)
    return (packed.to(device, non_blocking=True) if on_cuda else packed), offsets


def _bytes_of(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def upload_arrays(device, arrays: list) -> list[torch.Tensor]:
    """Each array as a tensor on ``device`` (views into one packed copy)."""
    packed, offsets = upload(device, arrays)
    return [packed[offset:offset + array.nbytes].view(to_torch_dtype(array.dtype)).view(array.shape)
            for array, offset in zip(arrays, offsets)]
