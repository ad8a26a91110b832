"""Host-to-GPU copies (runtime.pinned): arrays in memory pinned where it is (the worker processes'
rings) are copied straight to the GPU, the others through one staged upload; both give the bytes."""
import mmap

import numpy as np
import pytest
from conftest import CUDA

from penstock.runtime import pinned


def test_nothing_is_pinned_unless_pinned():
    memory = mmap.mmap(-1, 1 << 16)
    assert not pinned.is_pinned(np.frombuffer(memory, np.uint8)[100:200])
    if not CUDA:
        assert pinned.pin(memory) is False  # no CUDA: arrays in it go through staged uploads
        assert not pinned.is_pinned(np.frombuffer(memory, np.uint8))


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_copies_from_pinned_and_pageable_arrays_give_the_same_bytes():
    import torch
    memory = mmap.mmap(-1, 1 << 20)
    assert pinned.pin(memory)
    try:
        ring = np.frombuffer(memory, np.uint8)
        rng = np.random.default_rng(0)
        inside = ring[4096:4096 + 30 * 40 * 3].reshape(30, 40, 3)
        inside[:] = rng.integers(0, 256, inside.shape, dtype=np.uint8)
        outside = rng.integers(0, 256, (20, 10, 3), dtype=np.uint8)
        assert pinned.is_pinned(inside) and not pinned.is_pinned(outside)
        assert not pinned.is_pinned(ring[-10:].reshape(1, 10)[:, ::2])  # not contiguous
        buffer = torch.zeros(8192, dtype=torch.uint8, device="cuda")
        offsets = [4096, 256]
        assert pinned.copy_into(buffer, offsets, [inside, outside]) == 1
        torch.cuda.synchronize()
        for offset, array in zip(offsets, (inside, outside)):
            np.testing.assert_array_equal(buffer[offset:offset + array.nbytes].cpu().numpy(), array.reshape(-1))
        assert not buffer[:256].any() and not buffer[256 + outside.nbytes:4096].any()
    finally:
        pinned.unpin(memory)
    assert not pinned.is_pinned(np.frombuffer(memory, np.uint8))


@pytest.mark.parametrize("shapes", [[(3, 4), (0, 4), (1, 4)], [(0,)], [(2,), (5,), (1,)]])
def test_arrays_of_one_type_upload_as_one_packed_batch(shapes):
    import torch
    device = torch.device("cuda", 0) if CUDA else torch.device("cpu")
    rng = np.random.default_rng(1)
    arrays = [rng.normal(size=shape).astype(np.float32) for shape in shapes]
    arrays[-1] = arrays[-1].T if arrays[-1].ndim == 2 else arrays[-1]  # not contiguous: copied as its elements
    packed = pinned.upload_packed(device, arrays)
    assert packed.buffer.device.type == device.type and len(packed) == len(arrays)
    for array, sample in zip(arrays, packed):
        np.testing.assert_array_equal(sample.cpu().numpy(), array)


@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_staging_buffers_are_reused_only_after_their_copies_ran():
    """Uploads queued behind long GPU work: each staging buffer is refilled only once the copy
    that read it has run, so every upload arrives as it was sent."""
    import torch
    device = torch.device("cuda", 0)
    rng = np.random.default_rng(0)
    sent, arrived = [], []
    for round_ in range(40):
        if round_ % 10 == 0:
            torch.cuda._sleep(50_000_000)  # the copies below wait behind this
        arrays = [rng.integers(0, 255, size, dtype=np.uint8) for size in rng.integers(1, 5000, 3)]
        sent.append(arrays)
        arrived.append(pinned.upload_arrays(device, arrays))
    torch.cuda.synchronize()
    for arrays, tensors in zip(sent, arrived):
        for array, tensor in zip(arrays, tensors):
            np.testing.assert_array_equal(tensor.cpu().numpy(), array)
    pinned.upload_arrays(device, [np.zeros(3, np.uint8)])  # finished buffers beyond KEPT are freed
    assert len(pinned._staging_for(device)._free) <= pinned._Staging.KEPT + 1


def test_bytes_given_by_address_are_copied_to_their_offsets():
    """copy_bytes_into: sources given as (address, size), as the rows of the worker processes'
    replies give them, land at their offsets (on the GPU where there is one, else on the CPU)."""
    import torch
    device = torch.device("cuda", 0) if CUDA else torch.device("cpu")
    rng = np.random.default_rng(2)
    arrays = [rng.integers(0, 256, size, dtype=np.uint8) for size in (300, 17, 4096)]
    buffer = torch.zeros(8192, dtype=torch.uint8, device=device)
    offsets = [0, 512, 1024]
    in_place = pinned.copy_bytes_into(buffer, offsets, [array.ctypes.data for array in arrays],
                                      [array.nbytes for array in arrays])
    assert in_place == 0  # none of them lies in pinned memory
    if CUDA:
        torch.cuda.synchronize()
    for offset, array in zip(offsets, arrays):
        np.testing.assert_array_equal(buffer[offset:offset + array.nbytes].cpu().numpy(), array)
    assert not buffer[300:512].any() and not buffer[529:1024].any()


def test_staging_buffers_dropped_beyond_those_kept_free_their_events(monkeypatch):
    """Past KEPT free buffers, finished ones are dropped: their memory goes back through PyTorch,
    their driver events are destroyed (busy ones stay, however many)."""
    import torch

    class Calls:  # the driver's event calls: events 0-3 are still in use
        destroyed = []

        def finished(self, event):
            return event >= 4

        def destroy_event(self, event):
            self.destroyed.append(event)
    monkeypatch.setattr(pinned, "_driver_calls", lambda: Calls())
    staging = pinned._Staging(torch.device("cpu"))
    buffers = [pinned._StagingBuffer(torch.empty(8, dtype=torch.uint8), event)
               for event in range(pinned._Staging.KEPT + 5)]
    for buffer in buffers:
        staging.give_back(buffer)
    kept = {buffer.event for buffer in staging._free}
    assert len(kept) == pinned._Staging.KEPT and {0, 1, 2, 3} <= kept
    assert sorted(kept | set(Calls.destroyed)) == list(range(len(buffers)))
    assert not kept & set(Calls.destroyed)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_rows_in_a_pinned_region_upload_in_place_as_the_staged_rows_do():
    """upload_rows of rows that lie in a pinned region (the shared arena's upload region) copies
    them from where they are; rows elsewhere go through the staging buffer: the same batch."""
    import torch
    memory = mmap.mmap(-1, 1 << 22)
    region = memoryview(memory)[:1 << 21]
    assert pinned.pin(region)
    try:
        rows = np.ndarray((64, 4096), np.float32, buffer=memory, offset=0)  # 1 MiB, inside the region
        rows[:] = np.random.default_rng(1).random(rows.shape, dtype=np.float32)
        outside = np.ndarray((64, 8), np.float32, buffer=memory, offset=1 << 21)
        assert pinned.is_pinned(rows) and not pinned.is_pinned(outside)
        device = torch.device("cuda", 0)
        uploaded, staged = pinned.upload_rows(device, rows), pinned.upload_rows(device, rows.copy())
        torch.cuda.synchronize()
        assert torch.equal(uploaded.dense(), staged.dense())
        np.testing.assert_array_equal(uploaded.dense().cpu().numpy(), rows)
    finally:
        pinned.unpin(region)
        del region
