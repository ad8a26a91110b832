"""Host-to-GPU copies of many arrays in one copy, from pinned memory, queued on the current CUDA
stream without waiting for the work already on it.

The pinned buffer comes from PyTorch's caching host allocator: allocating pinned memory
(cudaHostAlloc) for each copy would stall the device, and the allocator reuses a freed buffer only
once the copies that read it have finished (it records an event on the stream of each copy). So
this module keeps no buffers of its own, and a forked worker process inherits none.

Memory shared with the worker processes (their rings) may be pinned where it is (``pin``): arrays
the processes wrote there are then copied to the GPU directly, with no copy on the host."""
from __future__ import annotations

import bisect
import ctypes
import threading

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


_pinned_lock = threading.Lock()
_pinned_starts: list[int] = []  # sorted start addresses of the regions pinned by pin()
_pinned_ends: dict[int, int] = {}  # start -> end


def _address_of(buffer) -> tuple[int, int]:
    array = np.frombuffer(buffer, np.uint8)
    return array.ctypes.data, array.nbytes


def pin(buffer) -> bool:
    """Pins ``buffer`` (an mmap or other writable buffer) for the GPU's copies in place: True if
    it is now pinned, False where CUDA cannot (the arrays in it are then copied through a pinned
    staging buffer, as any others). ``unpin`` it before it is freed."""
    start, size = _address_of(buffer)
    try:
        status = torch.cuda.cudart().cudaHostRegister(start, size, 0)
    except (RuntimeError, AttributeError, AssertionError):
        return False
    if int(status) != 0:
        return False
    with _pinned_lock:
        bisect.insort(_pinned_starts, start)
        _pinned_ends[start] = start + size
    return True


def unpin(buffer) -> None:
    """Undoes ``pin``, once the GPU has finished every copy out of the buffer."""
    start, _ = _address_of(buffer)
    with _pinned_lock:
        if start not in _pinned_ends:
            return
        _pinned_starts.remove(start)
        del _pinned_ends[start]
    torch.cuda.cudart().cudaHostUnregister(start)


def is_pinned(array: np.ndarray) -> bool:
    """Whether a contiguous array lies in memory ``pin`` pinned."""
    if not _pinned_starts or not array.flags.c_contiguous:
        return False
    address = array.ctypes.data
    with _pinned_lock:
        position = bisect.bisect_right(_pinned_starts, address) - 1
        return position >= 0 and address + array.nbytes <= _pinned_ends[_pinned_starts[position]]


_queue_copy = None


def _copy_call():
    """The CUDA driver's cuMemcpyHtoDAsync, loaded as PyDLL: it only queues a copy from pinned
    memory, and keeping the interpreter lock through it saves a hand-over per image (through
    PyTorch's copy_, which releases the lock, each copy waited up to a switch interval to take it
    back: 0.4 ms an image on an H200 in the training pipeline); None where it cannot be loaded."""
    global _queue_copy
    if _queue_copy is None:
        try:
            function = ctypes.PyDLL("libcuda.so.1").cuMemcpyHtoDAsync_v2
        except (OSError, AttributeError):
            function = False
        else:
            function.argtypes = (ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
            function.restype = ctypes.c_int
        _queue_copy = function
    return _queue_copy or None


def copy_into(buffer: torch.Tensor, offsets: list, arrays: list) -> int:
    """Queues the copy of each array into ``buffer`` (a flat uint8 tensor on the GPU) at its byte
    offset, on the current stream: straight from the array where it lies in pinned memory (one
    driver call, no PyTorch operation: each of those releases the interpreter lock and may wait a
    switch interval to take it back), the others packed into one staged upload. Returns how many
    were copied in place; those arrays must stay unchanged until the stream has run the copies."""
    queue_copy = _copy_call() if _pinned_starts and buffer.is_cuda else None
    base = buffer.data_ptr()
    stream = torch.cuda.current_stream(buffer.device).cuda_stream if queue_copy else None
    staged = []
    for offset, array in zip(offsets, arrays):
        if queue_copy is not None and is_pinned(array) and \
                queue_copy(base + offset, array.ctypes.data, array.nbytes, stream) == 0:
            continue
        staged.append((offset, array))
    if staged:
        packed, packed_offsets = upload(buffer.device, [array for _, array in staged])
        for (offset, array), source in zip(staged, packed_offsets):
            buffer[offset:offset + array.nbytes].copy_(packed[source:source + array.nbytes])
    return len(arrays) - len(staged)


def upload_arrays(device, arrays: list) -> list[torch.Tensor]:
    """Each array as a tensor on ``device`` (views into one packed copy)."""
    packed, offsets = upload(device, arrays)
    torch_types = {dtype: to_torch_dtype(dtype) for dtype in {array.dtype for array in arrays}}  # once per type
    return [packed[offset:offset + array.nbytes].view(torch_types[array.dtype]).view(array.shape)
            for array, offset in zip(arrays, offsets)]


def upload_packed(device, arrays: list):
    """Arrays of one dtype as a PackedBatch on ``device``: their elements back to back, joined into
    pinned memory with one numpy call and copied once, and no tensor per array (a view costs
    microseconds of the thread that launches the GPU work, and a batch has hundreds)."""
    sizes = [array.size for array in arrays]
    offsets = np.cumsum([0, *sizes[:-1]]).tolist()
    return _upload_flats(device, [array.reshape(-1) for array in arrays], offsets,
                         [array.shape for array in arrays])


def upload_ragged(device, column):
    """A complete RaggedColumn as a PackedBatch on ``device``: its parts copied as they are."""
    flats, offsets, shapes = column.packed()
    if not flats:
        flats = [np.zeros(0, column.dtype)]
    return _upload_flats(device, flats, offsets.tolist(), list(map(tuple, shapes.tolist())))


def _upload_flats(device, flats: list, offsets: list, shapes: list):
    """A PackedBatch on ``device`` of the concatenation of 1-D arrays of one dtype, its samples
    at ``offsets`` with ``shapes``."""
    from penstock.batch import PackedBatch
    dtype = flats[0].dtype
    total = sum(flat.size for flat in flats)
    on_cuda = device.type == "cuda"
    packed = torch.empty(max(total, 1) * dtype.itemsize, dtype=torch.uint8, pin_memory=on_cuda)
    np.concatenate(flats, out=packed.numpy().view(dtype)[:total])
    if on_cuda:
        packed = packed.to(device, non_blocking=True)
    return PackedBatch(packed.view(to_torch_dtype(dtype)), offsets, shapes)


def to_device(device, arrays: list) -> list[torch.Tensor]:
    """Numpy arrays as tensors on ``device``: on a GPU views into one copy from pinned memory,
    which does not wait for the work already queued there (a copy from pageable memory would);
    on the CPU the arrays themselves."""
    if device.type == "cuda":
        return upload_arrays(device, arrays)
    return [torch.from_numpy(array) for array in arrays]
