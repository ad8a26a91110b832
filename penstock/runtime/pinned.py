"""Host-to-GPU copies of many arrays in one copy, from pinned memory, queued on the current CUDA
stream without waiting for the work already on it.

The copies go through pinned staging buffers this module keeps and reuses (``_Staging``): a buffer
is taken again once the copy that read it has finished (an event recorded after the copy says so,
asked without waiting). The copy, the event and its query are CUDA driver calls made with the
interpreter lock held: each PyTorch copy releases the lock, and the thread that launches the GPU
work then waits up to a switch interval (5 ms) to take it back while other threads run Python.
Where the driver cannot be loaded this way, the buffer comes from PyTorch's caching host
allocator and PyTorch copies it. A forked worker process inherits the buffers and never touches
them.

Memory shared with the worker processes (their rings) may be pinned where it is (``pin``): arrays
the processes wrote there are then copied to the GPU directly, with no copy on the host."""
from __future__ import annotations

import bisect
import ctypes
import math
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
    with staged(device, max(total, 1)) as (host, packed):
        for array, offset in zip(arrays, offsets):
            host[offset:offset + array.nbytes] = _bytes_of(array)
    return packed, offsets


class staged:
    """``with staged(device, nbytes) as (host, out):`` fill ``host`` (a uint8 numpy array of
    ``nbytes``); on leaving, ``out`` (a uint8 tensor on ``device``) gets it by a copy queued on the
    current stream. On the CPU, ``out`` is ``host``'s own tensor."""

    def __init__(self, device, nbytes: int):
        self._device, self._nbytes = device, nbytes
        self._on_cuda = device.type == "cuda"

    def __enter__(self):
        if not self._on_cuda:
            self._out = torch.empty(self._nbytes, dtype=torch.uint8)
            return self._out.numpy(), self._out
        self._out = torch.empty(self._nbytes, dtype=torch.uint8, device=self._device)
        self._staging = _staging_for(self._out.device)
        self._buffer = self._staging.take(self._nbytes)
        return self._buffer.host[:self._nbytes], self._out

    def __exit__(self, kind, error, trace):
        if self._on_cuda:
            if error is None:
                self._staging.copy(self._buffer, self._out, self._nbytes)
            self._staging.give_back(self._buffer)
        return False


class _StagingBuffer:
    __slots__ = ("tensor", "host", "event")

    def __init__(self, tensor: torch.Tensor, event):
        self.tensor, self.host, self.event = tensor, tensor.numpy(), event


def _hand_to_pytorch(buffer: _StagingBuffer, calls) -> None:
    """After a PyTorch copy from the buffer: PyTorch's allocator now knows when the buffer is read,
    its event does not, so the buffer is not reused and its event is destroyed."""
    if buffer.event is not None:
        calls.destroy_event(buffer.event)
    buffer.event = None


class _Staging:
    """One GPU's pinned staging buffers, reused once their copies finished (see the module's
    docstring); their events belong to that GPU's context."""

    KEPT = 16  # buffers kept at most; more are freed once their copies finished

    def __init__(self, device: torch.device):
        self._device = device
        self._lock = threading.Lock()
        self._free: list[_StagingBuffer] = []

    def take(self, nbytes: int) -> _StagingBuffer:
        calls = _driver_calls()
        with self._lock:
            for position, buffer in enumerate(self._free):
                if buffer.host.nbytes >= nbytes and calls.finished(buffer.event):
                    return self._free.pop(position)
        size = max(1 << 16, 1 << (nbytes - 1).bit_length())  # powers of two: few sizes, each reused
        with torch.cuda.device(self._device):
            return _StagingBuffer(torch.empty(size, dtype=torch.uint8, pin_memory=True),
                                  calls.new_event() if calls is not None else None)

    def copy(self, buffer: _StagingBuffer, out: torch.Tensor, nbytes: int) -> None:
        """Queues the copy of the buffer's first ``nbytes`` into ``out`` on the current stream."""
        calls = _driver_calls()
        stream = torch.cuda.current_stream(out.device).cuda_stream
        if calls is not None and calls.copy(out.data_ptr(), buffer.tensor.data_ptr(), nbytes, stream) == 0:
            calls.record(buffer.event, stream)
            return
        out.copy_(buffer.tensor[:nbytes], non_blocking=True)
        _hand_to_pytorch(buffer, calls)

    def give_back(self, buffer: _StagingBuffer) -> None:
        if buffer.event is None:  # no event tells when its copy finished: PyTorch's allocator frees it
            return
        calls = _driver_calls()
        with self._lock:
            self._free.append(buffer)
            if len(self._free) > self.KEPT:  # frees finished ones beyond KEPT
                # each asked once: a copy finishing between two questions would put its buffer in both lists
                finished = [calls.finished(kept.event) for kept in self._free]
                busy = [kept for kept, done in zip(self._free, finished) if not done]
                done = [kept for kept, done in zip(self._free, finished) if done]
                kept_count = max(self.KEPT - len(busy), 0)
                self._free = busy + done[:kept_count]
                for dropped in done[kept_count:]:  # its memory goes back through PyTorch; its event here
                    calls.destroy_event(dropped.event)


_stagings: dict[int, _Staging] = {}
_stagings_lock = threading.Lock()


def _staging_for(device: torch.device) -> _Staging:
    with _stagings_lock:
        staging = _stagings.get(device.index)
        if staging is None:
            staging = _stagings[device.index] = _Staging(device)
        return staging


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
    return array.flags.c_contiguous and _is_pinned_range(array.ctypes.data, array.nbytes)


def _is_pinned_range(address: int, nbytes: int) -> bool:
    if not _pinned_starts:
        return False
    with _pinned_lock:
        position = bisect.bisect_right(_pinned_starts, address) - 1
        return position >= 0 and address + nbytes <= _pinned_ends[_pinned_starts[position]]


class _DriverCalls:
    """The CUDA driver's copy and event calls, loaded as PyDLL: they only queue work or ask, and
    keep the interpreter lock (see the module's docstring)."""

    def __init__(self, library):
        self.copy = library.cuMemcpyHtoDAsync_v2
        self.copy.argtypes = (ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
        self.copy.restype = ctypes.c_int
        self._create = library.cuEventCreate
        self._create.argtypes = (ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint)
        self._record = library.cuEventRecord
        self._record.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
        self._query = library.cuEventQuery
        self._query.argtypes = (ctypes.c_void_p,)
        self._destroy = library.cuEventDestroy_v2
        self._destroy.argtypes = (ctypes.c_void_p,)
        for function in (self._create, self._record, self._query, self._destroy):
            function.restype = ctypes.c_int

    def new_event(self):
        event = ctypes.c_void_p()
        if self._create(ctypes.byref(event), _CU_EVENT_DISABLE_TIMING) != 0:
            raise RuntimeError("cuEventCreate failed")
        return event

    def record(self, event, stream: int) -> None:
        if self._record(event, stream) != 0:
            raise RuntimeError("cuEventRecord failed")

    def finished(self, event) -> bool:
        """Whether the work before the event's last record has run (a new event: True)."""
        return self._query(event) == 0

    def destroy_event(self, event) -> None:
        self._destroy(event)


_CU_EVENT_DISABLE_TIMING = 2
_driver_loaded = None


def _driver_calls() -> _DriverCalls | None:
    """The driver's calls (once loaded), or None where the driver cannot be loaded."""
    global _driver_loaded
    if _driver_loaded is None:
        try:
            _driver_loaded = _DriverCalls(ctypes.PyDLL("libcuda.so.1"))
        except (OSError, AttributeError):
            _driver_loaded = False
    return _driver_loaded or None


def copy_into(buffer: torch.Tensor, offsets: list, arrays: list) -> int:
    """Queues the copy of each array into ``buffer`` (a flat uint8 tensor on the GPU) at its byte
    offset, on the current stream: straight from the array where it lies in pinned memory (one
    driver call, no PyTorch operation: each of those releases the interpreter lock and may wait a
    switch interval to take it back), the others packed into one pinned staging buffer and each
    copied from there (``_copy_through_staging``). Returns how many were copied in place; those
    arrays must stay unchanged until the stream has run the copies."""
    contiguous = [array.flags.c_contiguous for array in arrays]
    return _copy(buffer, offsets, [array.ctypes.data if whole else 0 for array, whole in zip(arrays, contiguous)],
                 [array.nbytes if whole else -1 for array, whole in zip(arrays, contiguous)], arrays.__getitem__)


def copy_bytes_into(buffer: torch.Tensor, offsets: list, addresses: list, sizes: list) -> int:
    """``copy_into`` for bytes given by address and size (rows of the worker processes' replies,
    whose bytes lie in their rings): no array is made for those copied in place."""
    def array(position: int) -> np.ndarray:
        return np.ctypeslib.as_array((ctypes.c_uint8 * sizes[position]).from_address(addresses[position]))
    return _copy(buffer, offsets, addresses, sizes, array)


def _copy(buffer: torch.Tensor, offsets: list, addresses: list, sizes: list, array_at) -> int:
    """The copies of copy_into: source ``position`` is ``sizes[position]`` bytes at
    ``addresses[position]`` (size -1: not contiguous), ``array_at(position)`` its array for a
    staged upload."""
    calls = _driver_calls() if buffer.is_cuda else None
    in_place = calls is not None and bool(_pinned_starts)
    base = buffer.data_ptr()
    stream = torch.cuda.current_stream(buffer.device).cuda_stream if calls is not None else None
    staged = []
    for position, (offset, address, nbytes) in enumerate(zip(offsets, addresses, sizes)):
        if in_place and nbytes >= 0 and _is_pinned_range(address, nbytes) and \
                calls.copy(base + offset, address, nbytes, stream) == 0:
            continue
        staged.append((offset, array_at(position)))
    if staged and calls is not None:
        _copy_through_staging(buffer, staged, calls, stream)
    elif staged:
        packed, packed_offsets = upload(buffer.device, [array for _, array in staged])
        for (offset, array), source in zip(staged, packed_offsets):
            buffer[offset:offset + array.nbytes].copy_(packed[source:source + array.nbytes])
    return len(offsets) - len(staged)


def _copy_through_staging(buffer: torch.Tensor, staged: list, calls: "_DriverCalls", stream: int) -> None:
    """(offset, array) pairs packed into one pinned staging buffer, each copied from there to its
    offset in ``buffer``: no buffer on the GPU in between (PyTorch's allocator would keep a block
    of each size a batch needed) and no copy on the GPU."""
    starts, total = [], 0
    for _, array in staged:
        starts.append(total)
        total += -(-array.nbytes // _ALIGN) * _ALIGN
    staging = _staging_for(buffer.device)
    host_buffer = staging.take(max(total, 1))
    for (_, array), start in zip(staged, starts):
        host_buffer.host[start:start + array.nbytes] = _bytes_of(array)
    host, base = host_buffer.tensor.data_ptr(), buffer.data_ptr()
    for (offset, array), start in zip(staged, starts):
        if host_buffer.event is not None and calls.copy(base + offset, host + start, array.nbytes, stream) == 0:
            continue
        buffer[offset:offset + array.nbytes].copy_(host_buffer.tensor[start:start + array.nbytes], non_blocking=True)
        _hand_to_pytorch(host_buffer, calls)
    if host_buffer.event is not None:
        calls.record(host_buffer.event, stream)
    staging.give_back(host_buffer)


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


def upload_rows(device, rows: np.ndarray):
    """The rows of an array [N, ...] as a PackedBatch on ``device``: one copy, and no array or
    tensor per row. Rows in pinned memory (the worker processes' shared rows, once pinned) are
    copied from where they are, without the pass through the staging buffer: the caller keeps
    them unchanged until the current stream has run the copy (the GPU stage keeps a batch's
    values until its GPU work has run)."""
    from penstock.batch import PackedBatch, back_to_back
    count, shape = len(rows), tuple(rows.shape[1:])
    offsets = back_to_back(count, math.prod(shape))
    if device.type == "cuda" and rows.nbytes and is_pinned(rows):
        packed = torch.empty(rows.nbytes, dtype=torch.uint8, device=device)
        copy_into(packed, [0], [rows.reshape(-1).view(np.uint8)])
        return PackedBatch(packed.view(to_torch_dtype(rows.dtype)), offsets, [shape] * count)
    return _upload_flats(device, [np.ascontiguousarray(rows).reshape(-1)], offsets, [shape] * count)


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
    with staged(device, max(total, 1) * dtype.itemsize) as (host, packed):
        np.concatenate(flats, out=host.view(dtype)[:total])
    return PackedBatch(packed.view(to_torch_dtype(dtype)), offsets, shapes)


def to_device(device, arrays: list) -> list[torch.Tensor]:
    """Numpy arrays as tensors on ``device``: on a GPU views into one copy from pinned memory,
    which does not wait for the work already queued there (a copy from pageable memory would);
    on the CPU the arrays themselves."""
    if device.type == "cuda":
        return upload_arrays(device, arrays)
    return [torch.from_numpy(array) for array in arrays]
