"""GPU image decoding: JPEG on the GPU's hardware decoding engines (A100, H100, H200 class)
through nvJPEG's batched call, the JPEGs they do not take (or all, where there are none) through
nvImageCodec on CUDA cores (Huffman on CPU threads); a window per image decodes only that region,
straight into one buffer for the batch. Images the GPU decoders do not take are decoded on the CPU
workers and uploaded: other formats before the batch reaches the GPU stage, and any JPEG the
decoders refuse when the GPU stage finds out.
"""
from __future__ import annotations

import ctypes
import functools
import itertools
import math
import threading
import time

import numpy as np
import torch

from penstock.kernels import image_codecs
from penstock.kernels import nvimgcodec_capi as capi
from penstock.kernels import nvjpeg_hardware
from penstock.runtime.encoded_images import (HARDWARE_JPEG, IMAGE_HEIGHT, IMAGE_WIDTH, KIND, PIXELS, TOP, EncodedImage,
                                             batch_layout)
from penstock.runtime.nvimgcodec_library import library
from penstock.runtime.nvjpeg_decoder import HardwareJpegDecoder
from penstock.batch import PackedBatch
from penstock.columns import RowColumn
from penstock.runtime.pinned import copy_bytes_into, copy_into
from penstock.types import DALIImageType

def buffer_bytes(nbytes: int, steps: int) -> int:
    """The size asked of the allocator for a batch buffer of ``nbytes``: rounded up to one of
    ``steps`` sizes per power of two (0: the exact size). Its size changes with every batch, and
    PyTorch's caching allocator keeps a block of each size it was asked for (per stream), where a
    few sizes that repeat are reused."""
    if steps <= 0 or nbytes <= 1 << 20:
        return max(nbytes, 1)
    step = (1 << (nbytes.bit_length() - 1)) // steps
    return -(-nbytes // step) * step


def default_backends(hw_decoder_load: float) -> list[tuple[int, float]]:
    """(backend kind, share of each batch) in nvImageCodec's order of preference, DALI's order:
    ``hw_decoder_load`` of each batch for the hardware engines, the rest (and what they refuse) for
    nvJPEG on CUDA cores, then nvJPEG's hybrid path (Huffman on CPU threads) for what those refuse."""
    loads = ((capi.BACKEND_HW_GPU_ONLY, hw_decoder_load), (capi.BACKEND_GPU_ONLY, 1.0),
             (capi.BACKEND_HYBRID_CPU_GPU, 1.0))
    return [(kind, load) for kind, load in loads if load > 0]


class _Handles:
    """nvImageCodec handles for one batch in flight: per image its code stream, the sub-stream of
    its window and the image it decodes into. Kept for the next batch: a create call given a
    handle that is not NULL reuses it instead of allocating another."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.wholes = (ctypes.c_void_p * capacity)()
        self.windows = (ctypes.c_void_p * capacity)()
        self.images = (ctypes.c_void_p * capacity)()
        self.decoded = (ctypes.c_void_p * capacity)()  # what each decode reads: a whole stream or a window's

    def destroy(self, quick) -> None:
        for handles, destroy in ((self.images, quick.nvimgcodecImageDestroy),
                                 (self.windows, quick.nvimgcodecCodeStreamDestroy),
                                 (self.wholes, quick.nvimgcodecCodeStreamDestroy)):
            for handle in handles:
                if handle:
                    destroy(handle)
        self.capacity = 0


# the decode calls' lane and how many threads serve it: the hardware decoders' share of one batch
# and the CUDA decoders' share of another (or the same) decode at once, each decoder one call at a
# time. Two threads taking either share, not one thread per decoder: with one per decoder, each
# thread's next call waited for it to take the interpreter lock back, and the training pipeline
# ran about 10% slower on an H200 (BENCHMARKS.md).
LANES = (("GPU decode", 2),)
DECODE_LANE = LANES[0][0]


def run_now(lane: str, call) -> None:
    """A ``run_call`` that makes the decode call in the calling thread."""
    call()


def run_all_now(calls: list) -> None:
    """A ``run_on_workers`` that decodes refused images in the calling thread."""
    for call in calls:
        call()


class GpuImageDecoder:
    """The GPU decoders of one pipeline; ``submit`` from one thread. ``submit`` describes a batch to
    the decoders and hands their blocking decode calls (which release the interpreter lock) to
    ``run_call(lane, call)``: the executor's decode stage runs them on the threads of the lane
    (LANES), and the caller goes on with other work and ``wait``s for the batch later. The threads
    that make its calls have its device as their current CUDA device. The hardware decoders' calls
    go to their own native thread instead where it is built (runtime/hardware_lane.py), which
    never waits for the interpreter lock between one batch's call and the next.
    """

    def __init__(self, device_id: int, cpu_threads: int, output_type: DALIImageType, hw_decoder_load: float,
                 batch_size_hint: int = 0, run_call=run_now, *, buffer_steps: int):
        self._library = library()
        self._buffer_steps = buffer_steps  # buffer_bytes' rounding of the batch buffer
        self._channels = 1 if output_type is DALIImageType.GRAY else 3
        self._output_type = output_type
        self.device = torch.device("cuda", device_id)
        self._instance = ctypes.c_void_p()
        self._decoder = ctypes.c_void_p()
        self._hardware = self._hardware_decoder(device_id, output_type, hw_decoder_load, batch_size_hint)
        self._hardware_load = hw_decoder_load
        # nvImageCodec's decoder, for what the hardware decoders do not take, takes about a second
        # to make: it is made by a call handed to the decode lane (the executor's threads), and the
        # first batch that needs it waits for it
        self._opening_error: BaseException | None = None
        self._opened = threading.Event()
        run_call(DECODE_LANE, functools.partial(self._open_nvimgcodec, device_id, cpu_threads, hw_decoder_load,
                                                batch_size_hint))
        if self._hardware is None:  # every image goes there: its errors are raised here
            self._wait_for_nvimgcodec()
        self._params = capi.new(capi.DecodeParams, apply_exif_orientation=0)
        self._image_info = info = capi.new(capi.ImageInfo, num_planes=1, buffer_kind=capi.BUFFER_STRIDED_DEVICE)
        info.color_spec = capi.COLORSPEC_GRAY if self._channels == 1 else capi.COLORSPEC_SRGB
        info.sample_format = {DALIImageType.BGR: capi.SAMPLEFORMAT_I_BGR,
                              DALIImageType.GRAY: capi.SAMPLEFORMAT_I_Y}.get(output_type, capi.SAMPLEFORMAT_I_RGB)
        plane = info.plane_info[0]
        plane.num_channels, plane.sample_type = self._channels, capi.SAMPLE_UINT8  # precision 0: all 8 bits
        self._view = capi.new(capi.CodeStreamView)
        self._view.region.ndim = 2
        self._plane, self._region_start, self._region_end = plane, self._view.region.start, self._view.region.end
        self._free_handles: list[_Handles] = []
        # each decoder takes one call at a time: two calls to the same decoder at once were slower
        # than one after the other (25,500 against 29,800 windows/s on an H200)
        self._hardware_lock = threading.Lock()
        self._nvimgcodec_lock = threading.Lock()
        self.decoded_on_cpu = 0
        self.decoded_on_gpu = 0
        self.refused_by_hardware = 0  # images of batches nvJPEG's hardware backend refused
        self.copied_in_place = 0  # images decoded on the CPU workers copied from pinned rings
        self.seconds = {"code streams and images": 0.0, "waiting for the decoders": 0.0,
                        "decode call (decode stage)": 0.0,
                        "uploading what the CPU workers decoded": 0.0}

    def _open_nvimgcodec(self, device_id: int, cpu_threads: int, hw_decoder_load: float, batch_size_hint: int):
        lib = self._library
        try:
            create_info = capi.new(capi.InstanceCreateInfo, load_builtin_modules=1, load_extension_modules=1,
                                   extension_modules_path=lib.extensions)
            lib.check(lib.slow.nvimgcodecInstanceCreate(ctypes.byref(self._instance), ctypes.byref(create_info)),
                      "nvimgcodecInstanceCreate")
            # the hardware decoders' share goes to nvJPEG directly, when they are there
            backends = default_backends(0.0 if self._hardware is not None else hw_decoder_load)
            self._backends = (capi.Backend * len(backends))(*[
                capi.new(capi.Backend, kind=kind, params=capi.new(capi.BackendParams, load_hint=float(load),
                                                                  load_hint_policy=capi.LOAD_HINT_FIXED))
                for kind, load in backends])
            execution = capi.new(capi.ExecutionParams, max_num_cpu_threads=max(1, cpu_threads), device_id=device_id,
                                 num_backends=len(backends), backends=self._backends)
            # the hardware decoder sizes its buffers for this many images up front, not batch by batch
            options = f"nvjpeg_hw_decoder:preallocate_batch_size={batch_size_hint}".encode() if batch_size_hint \
                else None
            lib.check(lib.slow.nvimgcodecDecoderCreate(self._instance, ctypes.byref(self._decoder),
                                                       ctypes.byref(execution), options), "nvimgcodecDecoderCreate")
        except BaseException as error:  # raised by the batch that needs the decoder
            self._opening_error = error
        finally:
            self._opened.set()

    def _wait_for_nvimgcodec(self) -> None:
        self._opened.wait()
        if self._opening_error is not None:
            raise self._opening_error

    @staticmethod
    def _hardware_decoder(device_id: int, output_type: DALIImageType, load: float, batch_size_hint: int):
        """nvJPEG's hardware backend, or None where the GPU has no hardware JPEG decoder."""
        if load <= 0:
            return None
        output_format = {DALIImageType.BGR: nvjpeg_hardware.OUTPUT_BGRI,
                         DALIImageType.GRAY: nvjpeg_hardware.OUTPUT_Y}.get(output_type, nvjpeg_hardware.OUTPUT_RGBI)
        try:
            with torch.cuda.device(device_id):
                return HardwareJpegDecoder(output_format, batch_size_hint, device_id)
        except (OSError, RuntimeError):
            return None

    def submit(self, items, cuda_stream, describe=lambda index: f"sample {index}",
               run_call=run_now, run_on_workers=run_all_now) -> "PendingDecode":
        """Starts decoding a batch into one new buffer on the GPU; the PendingDecode's images (a
        PackedBatch of that buffer: HWC uint8, one per EncodedImage, its window when it has one)
        are to be read (by work queued on ``cuda_stream``) once its wait() returned. ``items``: the
        batch's EncodedImages, a list or a RowColumn (as the worker processes' replies arrive),
        read as columns. The decode calls go to ``run_call(lane, call)`` (see the class); the
        images the GPU decoders refuse are decoded by the calls given to ``run_on_workers(calls)``,
        which returns once they ran."""
        started = time.perf_counter()
        items = RowColumn.of(EncodedImage, items)
        rows, channels = items.rows, self._channels
        heights, widths, aligned = batch_layout(items, channels)
        in_rows = rows[:, RowColumn.NBYTES] >= 0
        pixels = in_rows & (rows[:, KIND] == PIXELS)
        offsets = np.zeros(len(rows), np.int64)
        np.cumsum(aligned[:-1], out=offsets[1:])
        with torch.cuda.stream(cuda_stream):
            packed = torch.empty(buffer_bytes(int(aligned.sum()), self._buffer_steps), dtype=torch.uint8,
                                 device=self.device)
        shapes = list(zip(heights.tolist(), widths.tolist(), itertools.repeat(channels)))
        pending = PendingDecode(self, items, PackedBatch(packed, offsets.tolist(), shapes), cuda_stream, describe,
                                run_call, run_on_workers)
        # encoded data is a JPEG whose header the CPU workers read (anything else comes decoded);
        # one the decoders cannot parse after all is decoded on the CPU, which says why
        on_gpu = np.flatnonzero(in_rows & ~pixels)
        pending.pixel_rows = np.flatnonzero(pixels)
        if len(pending.pixel_rows):
            _check_pixel_sizes(rows[pending.pixel_rows], heights[pending.pixel_rows] * widths[pending.pixel_rows]
                               * channels, pending.pixel_rows, describe)
        base = packed.data_ptr()
        if self._hardware is not None and len(on_gpu):
            on_gpu = self._describe_hardware(pending, rows, on_gpu, offsets + base, widths * channels)
        if len(on_gpu):
            self._describe_nvimgcodec(pending, on_gpu, rows, heights, widths, offsets + base, cuda_stream)
        pending.to_upload = sorted(items.others)
        self._queue(pending)
        begun = time.perf_counter()
        pending.upload_decoded()
        self.seconds["uploading what the CPU workers decoded"] += time.perf_counter() - begun
        self.seconds["code streams and images"] += time.perf_counter() - started
        return pending

    def _describe_nvimgcodec(self, pending: "PendingDecode", on_gpu: np.ndarray, rows: np.ndarray,
                             heights: np.ndarray, widths: np.ndarray, outputs: np.ndarray, cuda_stream) -> None:
        """nvImageCodec's handles for the images of ``on_gpu``: a code stream, its window, the image
        to decode into (each a call here, on the thread that also launches the kernels)."""
        self._wait_for_nvimgcodec()
        quick = self._library.quick
        handles = pending.handles = self._handles(len(on_gpu))
        # plain addresses and the structures' field arrays, looked up once: this loop runs per image
        wholes, windows, targets, decoded = handles.wholes, handles.windows, handles.images, handles.decoded
        wholes_at, windows_at, targets_at = (ctypes.addressof(a) for a in (wholes, windows, targets))
        channels = self._channels
        info, plane, start, end = self._image_info, self._plane, self._region_start, self._region_end
        info.cuda_stream = cuda_stream.cuda_stream
        instance, view_at, info_at = self._instance.value, ctypes.addressof(self._view), ctypes.addressof(info)
        create_stream, sub_stream = quick.nvimgcodecCodeStreamCreateFromHostMem, quick.nvimgcodecCodeStreamGetSubCodeStream
        create_image, success = quick.nvimgcodecImageCreate, capi.STATUS_SUCCESS
        decoding = pending.decoding
        for index, row, height, width, output in zip(on_gpu.tolist(), rows[on_gpu].tolist(), heights[on_gpu].tolist(),
                                                     widths[on_gpu].tolist(), outputs[on_gpu].tolist()):
            address, nbytes, top, left = row[:4]
            position = len(decoding)
            slot = position * 8  # byte offset of this image's handles in the arrays
            if create_stream(instance, wholes_at + slot, address, nbytes, None) != success:
                continue  # not a stream nvImageCodec can parse: the CPU decoder says why
            if top < 0:
                decoded[position] = wholes[position]
            else:
                start[0], start[1], end[0], end[1] = top, left, top + height, left + width
                if sub_stream(wholes[position], windows_at + slot, view_at) != success:
                    continue
                decoded[position] = windows[position]
            plane.width, plane.height, plane.row_stride = width, height, width * channels
            info.buffer = output
            if create_image(instance, targets_at + slot, info_at) != success:
                continue
            decoding.append(index)  # its handles stay at this position
            if position & 31 == 31:
                time.sleep(0)  # lets the decode stage (and the workers' dispatcher) take the lock now

    def _describe_hardware(self, pending: "PendingDecode", rows: np.ndarray, on_gpu: np.ndarray,
                           outputs: np.ndarray, row_bytes: np.ndarray) -> np.ndarray:
        """Gives the hardware decoders their share of the JPEGs they take; returns the rest."""
        share = math.ceil(len(on_gpu) * self._hardware_load)
        chosen = on_gpu[rows[on_gpu, KIND] == HARDWARE_JPEG][:share]
        if not len(chosen):
            return on_gpu
        pending.hardware = chosen.tolist()
        pending.hardware_batch = self._hardware.describe(
            rows[chosen, RowColumn.ADDRESS], rows[chosen, RowColumn.NBYTES], outputs[chosen].astype(np.uint64),
            row_bytes[chosen].astype(np.uint64), rows[chosen, TOP:TOP + 4])
        taken = np.zeros(len(rows), bool)
        taken[chosen] = True
        return on_gpu[~taken[on_gpu]]

    def _queue(self, pending: "PendingDecode") -> None:
        if pending.hardware and self._hardware.lane is not None:  # its own thread, without the interpreter lock
            self._hardware.submit(pending.hardware_batch, pending._stream.cuda_stream)
            pending.on_lane = True
        shares = (["hardware"] if pending.hardware and not pending.on_lane else []) + \
            (["nvimgcodec"] if pending.decoding else [])
        if shares:
            pending.decoded = threading.Event()
            pending.calls_left = len(shares)
            for share in shares:
                pending.run_call(DECODE_LANE, functools.partial(self._decode_share, pending, share))
            time.sleep(0)  # hands the lock over: the decode stage starts now, not at the next switch

    def _decode_share(self, pending: "PendingDecode", share: str) -> None:
        """One decoder's share of a batch (the hardware decoders' share to nvJPEG, the rest to
        nvImageCodec), without the interpreter lock while it works; returns once the share is
        decoded or queued on the GPU. Errors are raised by the batch's wait(). The statuses are
        read by the thread that waits: each hand-over of the interpreter lock between threads can
        take a switch interval (5 ms), so the decode stage takes it little."""
        lib = self._library
        try:
            started = time.perf_counter()
            if share == "hardware":
                with self._hardware_lock:
                    _decode_on_hardware(self._hardware, pending.hardware_batch, pending._stream)
            else:
                count = len(pending.decoding)
                handles = pending.handles
                if count == handles.capacity:
                    decoded, images = handles.decoded, handles.images
                else:
                    decoded = (ctypes.c_void_p * count).from_buffer(handles.decoded)
                    images = (ctypes.c_void_p * count).from_buffer(handles.images)
                future = ctypes.c_void_p()
                with self._nvimgcodec_lock:
                    status = lib.slow.nvimgcodecDecoderDecode(self._decoder, decoded, images, count,
                                                              ctypes.byref(self._params), ctypes.byref(future))
                lib.check(status, "nvimgcodecDecoderDecode")
                pending.future = future
            self.seconds["decode call (decode stage)"] += time.perf_counter() - started
        except BaseException as error:  # raised by wait(), in the thread that submitted the batch
            pending.error = error
        finally:
            pending.share_done()

    def _handles(self, count: int) -> _Handles:
        handles = self._free_handles.pop() if self._free_handles else _Handles(count)
        if handles.capacity < count:
            handles.destroy(self._library.quick)
            handles = _Handles(count)
        return handles

    def close(self) -> None:
        """Frees the decoder's handles; its decode calls have all been made (the decode stage has
        stopped)."""
        for handles in self._free_handles:
            handles.destroy(self._library.quick)
        self._free_handles = []
        if self._hardware is not None:
            self._hardware.close()
            self._hardware = None

    def __del__(self):
        try:
            self.close()
            if self._decoder:
                self._library.slow.nvimgcodecDecoderDestroy(self._decoder)
            if self._instance:
                self._library.slow.nvimgcodecInstanceDestroy(self._instance)
        except Exception:  # interpreter shutdown: the library may be gone already
            pass


def _check_pixel_sizes(rows: np.ndarray, expected: np.ndarray, indices: np.ndarray, describe) -> None:
    """Pixels the CPU workers decoded have the size their rows give (the output type's channels)."""
    wrong = np.flatnonzero(rows[:, RowColumn.NBYTES] != expected)
    if len(wrong):
        row = rows[wrong[0]]
        raise image_codecs.DecodeError(
            f"{describe(int(indices[wrong[0]]))}: decoded on the CPU to {int(row[RowColumn.NBYTES])} bytes, "
            f"but {int(row[IMAGE_HEIGHT])} x {int(row[IMAGE_WIDTH])} pixels of the output type take "
            f"{int(expected[wrong[0]])}")


def _decode_on_hardware(hardware: HardwareJpegDecoder, batch, stream) -> None:
    # its nvJPEG state's buffers were in use by an earlier batch, which has usually finished: asked
    # first, because waiting releases the interpreter lock, and retaking it can take a switch interval
    if batch.finished is None:
        batch.finished = torch.cuda.Event()
    elif not batch.finished.query():
        batch.finished.synchronize()
    hardware.decode(batch, stream.cuda_stream)
    batch.finished.record(stream)


class PendingDecode:
    """One batch's decode in flight (GpuImageDecoder.submit)."""

    def __init__(self, decoder: GpuImageDecoder, items: list, images: list, cuda_stream, describe, run_call,
                 run_on_workers):
        self.images = images
        self._decoder, self._items, self._stream, self._describe = decoder, items, cuda_stream, describe
        self.run_call = run_call
        self._run_on_workers = run_on_workers
        self.handles: _Handles | None = None
        self.decoding: list = []  # indices of the images given to nvImageCodec, in handle order
        self.hardware: list = []  # indices of the images given to the hardware decoders through nvJPEG
        self.hardware_batch = None
        self.on_lane = False  # the hardware share went to the hardware lane (not the decode stage)
        self.calls_left = 0  # decoder calls of this batch not yet made
        self.lock = threading.Lock()
        self.decoded: threading.Event | None = None  # set when the decode stage made the last call
        self.statuses: list = []
        self.future = None  # nvImageCodec's future of the batch, once the decode stage made the call
        self.error: BaseException | None = None
        self.to_upload: list = []  # indices of images decoded on the CPU workers held as arrays, to upload
        self.pixel_rows = np.zeros(0, np.int64)  # indices of those that came as rows (kind PIXELS)
        self.uploaded: list = []  # both, once their copies are queued

    def upload_decoded(self) -> None:
        """Queues the upload of the images the CPU workers decoded, while the decoders work (this
        thread would otherwise only wait for them)."""
        indices = self.to_upload
        if indices:
            arrays = [self._items[index].data for index in indices]
            self._upload(indices, lambda buffer, offsets: copy_into(buffer, offsets, arrays))
        pixel_rows = self.pixel_rows.tolist()
        if pixel_rows:  # their bytes lie in the workers' rings (or in arrays this process holds)
            rows = self._items.rows[self.pixel_rows]
            addresses, sizes = rows[:, RowColumn.ADDRESS].tolist(), rows[:, RowColumn.NBYTES].tolist()
            self._upload(pixel_rows, lambda buffer, offsets: copy_bytes_into(buffer, offsets, addresses, sizes))
        self.uploaded = indices + pixel_rows

    def share_done(self) -> None:
        """One of the batch's decode-stage calls returned: the last one sets ``decoded``."""
        with self.lock:
            self.calls_left -= 1
            finished = self.calls_left == 0
        if finished:
            self.decoded.set()

    def wait(self) -> None:
        """Returns once every image is decoded or queued on the stream: the JPEGs the GPU decoders
        refuse are decoded on the CPU workers (``run_on_workers``) and uploaded."""
        if self._items is None:
            return
        decoder = self._decoder
        started = time.perf_counter()
        if self.decoded is not None:
            self.decoded.wait()
        if self.on_lane:
            self._wait_for_lane()
        items, self._items = self._items, None
        hardware_refused = self.hardware_batch is not None and \
            self.hardware_batch.status != nvjpeg_hardware.STATUS_SUCCESS
        try:
            if self.future is not None:
                lib = decoder._library
                statuses = (ctypes.c_uint32 * len(self.decoding))()
                size = ctypes.c_size_t(len(self.decoding))
                # keeps the lock (releasing it costs a hand-over): the decode call returned once its
                # batch was done, so this does not wait
                lib.check(lib.quick.nvimgcodecFutureGetProcessingStatus(self.future, statuses, ctypes.byref(size)),
                          "nvimgcodecFutureGetProcessingStatus")
                self.statuses = list(statuses)
        finally:
            self._release_future(finished=self.statuses != [])
            self._return_handles()
        decoder.seconds["waiting for the decoders"] += time.perf_counter() - started
        if self.error is not None:
            raise self.error
        succeeded = {index for index, status in zip(self.decoding, self.statuses)
                     if status == capi.PROCESSING_SUCCESS}
        if not hardware_refused:
            succeeded.update(self.hardware)
        decoder.decoded_on_gpu += len(succeeded)
        if hardware_refused:
            self._decode_again(items, self.hardware)
            succeeded.update(self.hardware)
        succeeded.update(self.uploaded)
        refused = [index for index in range(len(items)) if index not in succeeded]
        if refused:
            self._decode_on_cpu(items, refused)

    def _wait_for_lane(self) -> None:
        """Waits for the hardware lane's decode call of this batch (the interpreter lock released)."""
        self.on_lane = False
        try:
            self._decoder.seconds["decode call (decode stage)"] += self._decoder._hardware.wait(self.hardware_batch)
        except BaseException as error:  # raised with the batch's other errors
            self.error = self.error or error

    def _decode_again(self, items: list, indices: list) -> None:
        """nvJPEG refuses a whole batch for one image it cannot decode: its images go through
        nvImageCodec instead, which says image by image what it refuses (then decoded on the CPU)."""
        self._decoder.refused_by_hardware += len(indices)
        again = self._decoder.submit([EncodedImage((*items[index][:4], False)) for index in indices], self._stream,
                                     lambda position: self._describe(indices[position]), self.run_call,
                                     self._run_on_workers)
        again.wait()
        with torch.cuda.stream(self._stream):
            for position, index in enumerate(indices):
                self.images[index].copy_(again.images[position])

    def _release_future(self, finished: bool = True) -> None:
        if self.future is not None:
            lib = self._decoder._library
            if not finished:
                lib.slow.nvimgcodecFutureWaitForAll(self.future)
            lib.quick.nvimgcodecFutureDestroy(self.future)
            self.future = None

    def _return_handles(self) -> None:
        if self.handles is not None:
            self._decoder._free_handles.append(self.handles)
            self.handles = None
        if self.hardware_batch is not None and self._decoder._hardware is not None:
            # reusable once its decode has run on the GPU: its lane waits for that
            self._decoder._hardware.release(self.hardware_batch)
        self.hardware_batch = None

    def _decode_on_cpu(self, items: list, indices: list) -> None:
        """Images the GPU decoders refused, decoded by the executor's CPU workers and uploaded."""
        arrays = [None] * len(indices)

        def decode(position: int, index: int):
            def call():
                arrays[position] = self._decoded_on_cpu(items[index], index)
            return call
        self._run_on_workers([decode(position, index) for position, index in enumerate(indices)])
        self._upload(indices, lambda buffer, offsets: copy_into(buffer, offsets, arrays))

    def _decoded_on_cpu(self, item: EncodedImage, index: int) -> np.ndarray:
        """The CPU decoders' pixels of the image (image_codecs: a JPEG's window only, where it has one;
        other formats whole, then cut)."""
        output_type, window = self._decoder._output_type, item.window
        try:
            if window is not None and image_codecs.is_jpeg(item.data):
                image = image_codecs.decode_jpeg_window(item.data, output_type, window)
            else:
                image = image_codecs.decode(item.data, output_type)
                if window is not None:
                    top, left, height, width = window
                    image = image[top:top + height, left:left + width]
        except image_codecs.DecodeError as error:
            raise image_codecs.DecodeError(f"{self._describe(index)}: {error}") from None
        if image.ndim == 2:
            image = image[:, :, None]
        if tuple(image.shape) != tuple(self.images[index].shape):
            raise image_codecs.DecodeError(
                f"{self._describe(index)}: decoded to {tuple(image.shape)}, but its header gave "
                f"{tuple(self.images[index].shape)}")
        return image

    def _upload(self, indices: list, copy) -> None:
        """Queues ``copy(buffer, offsets)`` of the images ``indices`` (runtime.pinned's copies)."""
        with torch.cuda.stream(self._stream):
            in_place = copy(self.images.buffer, [self.images.offsets[index] for index in indices])
        self._decoder.decoded_on_cpu += len(indices)
        self._decoder.copied_in_place += in_place

    def __del__(self):
        # never waited for (an error elsewhere in the batch): the handles go back once the decoder
        # thread is done with them
        if self._items is not None and (self.decoded is not None or self.on_lane):
            try:
                if self.decoded is not None:
                    self.decoded.wait()
                if self.on_lane:
                    self._wait_for_lane()
                self._release_future(finished=False)
                self._return_handles()
            except Exception:
                pass
