"""Batches of JPEGs on the GPU's hardware JPEG decoders through nvJPEG's batched API
(penstock.kernels.nvjpeg_hardware): the decoder, its batches in flight and their states, reused
from batch to batch, and the hardware lane that makes their decode calls where it is built."""
from __future__ import annotations

import ctypes
from ctypes import c_size_t, c_uint, c_void_p

import numpy as np

from penstock.kernels.nvjpeg_hardware import (BACKEND_HARDWARE, CSS_444, FLAGS_UPSAMPLING_WITH_INTERPOLATION,
                                              IMAGE_FIELDS, OUTPUT_RGBI, STATUS_SUCCESS, Image, Library)
from penstock.runtime import hardware_lane

PREPARED_BATCHES = 2  # a batch decoding and the next one described


def _job_field(name: str) -> property:
    return property(lambda batch: getattr(batch.job, name), lambda batch, value: setattr(batch.job, name, value))


class HardwareBatch:
    """What one batch in flight needs: its own decoding state (nvJPEG's buffers for the batch) and
    the arrays that describe it, gathered in its ``job`` (what the hardware lane reads). Reused for
    later batches, once its decode has finished on the GPU."""

    count = _job_field("count")  # images in the batch
    status = _job_field("status")  # nvJPEG's status of its decode
    initialized_for = _job_field("initialized_for")  # the batch size nvJPEG's state is set up for (0: not set up)

    def __init__(self, decoder: "HardwareJpegDecoder", capacity: int):
        self._lib = lib = decoder.library
        self.state = c_void_p()
        # made while the CPU stage prepares the first batch: a tenth of a second, without the lock
        lib.check(lib.slow.nvjpegJpegStateCreate(decoder.handle, ctypes.byref(self.state)), "nvjpegJpegStateCreate")
        self.job = hardware_lane.Job(state=self.state.value)
        self._lane = decoder.lane
        if self._lane is not None:  # recorded by the lane after each decode
            self.job.event = self._lane.driver.new_event()
        if decoder.batch_size_hint:  # nvJPEG sizes its memory pool up front rather than batch by batch
            lib.check(lib.slow.nvjpegDecodeBatchedPreAllocate(decoder.handle, self.state, decoder.batch_size_hint,
                                                              1, 1, CSS_444, OUTPUT_RGBI),
                      "nvjpegDecodeBatchedPreAllocate")
        self.capacity = 0
        self.params = (c_void_p * 0)()
        self.grow(decoder, capacity)
        self.count = 0
        self.finished = None  # a CUDA event recorded after the batch's decode (decoded from Python)
        self.status = STATUS_SUCCESS
        self.initialized_for = 0
        if capacity and capacity == decoder.batch_size_hint and lib.slow.nvjpegDecodeBatchedInitialize(
                decoder.handle, self.state, capacity, 1, decoder.output_format) == STATUS_SUCCESS:
            self.initialized_for = capacity  # set up for whole batches, the usual case, before the first

    def grow(self, decoder: "HardwareJpegDecoder", capacity: int) -> None:
        if capacity <= self.capacity:
            return
        lib = self._lib
        params = (c_void_p * capacity)()
        for index in range(capacity):
            if index < self.capacity:
                params[index] = self.params[index]
            else:
                handle = c_void_p()
                lib.check(lib.quick.nvjpegDecodeParamsCreate(decoder.handle, ctypes.byref(handle)),
                          "nvjpegDecodeParamsCreate")
                params[index] = handle.value
        self.params, self.capacity = params, capacity
        self.data = (c_void_p * capacity)()
        self.lengths = (c_size_t * capacity)()
        self.images = (Image * capacity)()
        self.image_fields = np.frombuffer(self.images, IMAGE_FIELDS)
        self.data_fields = np.frombuffer(self.data, np.uint64)
        self.length_fields = np.frombuffer(self.lengths, np.uint64)
        job = self.job
        job.data, job.lengths, job.images, job.params = (ctypes.addressof(array) for array in (
            self.data, self.lengths, self.images, self.params))

    def destroy(self) -> None:
        lib = self._lib
        for handle in self.params:
            if handle:
                lib.quick.nvjpegDecodeParamsDestroy(handle)
        if self.state:
            lib.quick.nvjpegJpegStateDestroy(self.state)
        if self.job.event:
            self._lane.driver.destroy_event(self.job.event)
        self.params, self.capacity, self.state = (c_void_p * 0)(), 0, c_void_p()
        self.job = hardware_lane.Job()


class HardwareJpegDecoder:
    """nvJPEG's hardware backend on CUDA device ``device_id`` (the current device). ``describe``
    (any thread) fills a HardwareBatch; where the hardware lane is built (``lane``), ``submit`` queues
    it there and ``wait`` waits for its decode call; otherwise ``decode`` (the thread that decodes,
    without the interpreter lock while nvJPEG works) queues it on a CUDA stream."""

    def __init__(self, output_format: int, batch_size_hint: int = 0, device_id: int = 0):
        self.library = lib = Library()
        self.handle = c_void_p()
        # fails where the GPU has no hardware JPEG decoder: the caller then does without it. About
        # 0.6 s, made while the CPU stage prepares the first batch, whose thread needs the lock
        lib.check(lib.slow.nvjpegCreateEx(BACKEND_HARDWARE, None, None, FLAGS_UPSAMPLING_WITH_INTERPOLATION,
                                          ctypes.byref(self.handle)),
                  "nvjpegCreateEx(hardware backend)")
        engines, cores = c_uint(), c_uint()
        if lib.quick.nvjpegGetHardwareDecoderInfo(self.handle, ctypes.byref(engines), ctypes.byref(cores)) == 0:
            self.engines = (engines.value, cores.value)
        else:
            self.engines = None
        self.output_format = output_format
        self.batch_size_hint = batch_size_hint
        self.lane = hardware_lane.for_nvjpeg(self.handle.value, output_format, lib.slow, device_id)
        # the states of the first batches in flight are made with the decoder (which the GPU stage
        # makes while the CPU stage works on the first batch): about a second, not paid by the first batch
        self._free: list[HardwareBatch] = [HardwareBatch(self, batch_size_hint)
                                           for _ in range(PREPARED_BATCHES if batch_size_hint else 0)]

    def describe(self, addresses: np.ndarray, lengths: np.ndarray, outputs: np.ndarray, row_bytes: np.ndarray,
                 windows: np.ndarray) -> HardwareBatch:
        """A batch: per image the address and length of its encoded data, the address of its output
        (interleaved, rows of ``row_bytes``) and its window (top, left, height, width; top -1 for
        the whole image)."""
        count = len(addresses)
        batch = self._free.pop() if self._free else HardwareBatch(self, count)
        batch.grow(self, count)
        batch.count = count
        batch.status = -1  # until decode() sets nvJPEG's
        batch.data_fields[:count] = addresses
        batch.length_fields[:count] = lengths
        fields = batch.image_fields[:count]
        fields["channel"][:, 0] = outputs
        fields["pitch"][:, 0] = row_bytes
        set_window, params = self.library.quick.nvjpegDecodeParamsSetROI, batch.params
        for handle, (top, left, height, width) in zip(params, windows.tolist()):
            if top < 0:
                set_window(handle, 0, 0, -1, -1)
            else:
                set_window(handle, left, top, width, height)
        return batch

    def decode(self, batch: HardwareBatch, cuda_stream: int) -> int:
        """Queues the batch's decode on the stream; nvJPEG's status (0: success). Call where the
        batch's previous use has finished on the GPU (``batch.finished``).

        The state is set up for a batch size once, as nvJPEG's header allows ("called once for
        decoding batches of this specific size, also used to reset failed batches"), not for every
        batch: each call here is one more wait for the interpreter lock when it returns, and the
        decode stage's hardware lane makes the calls that keep the hardware busy."""
        slow = self.library.slow
        status = STATUS_SUCCESS
        if batch.initialized_for != batch.count:
            status = slow.nvjpegDecodeBatchedInitialize(self.handle, batch.state, batch.count, 1, self.output_format)
            batch.initialized_for = batch.count if status == STATUS_SUCCESS else 0
        if status == STATUS_SUCCESS:
            status = slow.nvjpegDecodeBatchedEx(self.handle, batch.state, batch.data, batch.lengths, batch.images,
                                                batch.params, cuda_stream)
            if status != STATUS_SUCCESS:  # set up again before the state's next batch
                batch.initialized_for = 0
        batch.status = status
        return status

    def submit(self, batch: HardwareBatch, cuda_stream: int) -> None:
        """Queues the batch's decode on the lane, on the stream, after the state's last decode has
        run on the GPU (the lane waits for it)."""
        batch.job.stream = cuda_stream
        self.lane.submit(batch.job)

    def wait(self, batch: HardwareBatch) -> float:
        """Waits for a submitted batch's decode call; its time on the lane (seconds)."""
        self.lane.wait(batch.job)
        return batch.job.seconds

    def release(self, batch: HardwareBatch) -> None:
        self._free.append(batch)

    def close(self) -> None:
        if self.lane is not None:  # its jobs run first: their states are still to be destroyed
            self.lane.close()
        for batch in self._free:
            batch.destroy()
        self._free = []
        if self.lane is not None:
            self.lane.driver.closed()
            self.lane = None
        if self.handle:
            self.library.quick.nvjpegDestroy(self.handle)
            self.handle = c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass
