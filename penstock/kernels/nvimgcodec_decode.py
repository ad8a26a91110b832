"""GPU image decoding through nvImageCodec: JPEG on the GPU's hardware decoding engines (A100,
H100, H200 class), or on CUDA cores (Huffman on CPU threads) where there are none or they refuse an
image; a window per image decodes only that region, straight into one buffer for the batch.
Images the GPU decoders do not take (other formats, and any JPEG they refuse) are decoded on the
CPU and uploaded.
"""
from __future__ import annotations

import ctypes
import threading
import time

import numpy as np
import torch

from penstock.kernels import image_codecs
from penstock.kernels import nvimgcodec_capi as capi
from penstock.kernels.pinned import PinnedStaging, upload_arrays
from penstock.types import DALIImageType

INSTALL_HINT = ("device='mixed' decoding needs a CUDA GPU, PyTorch with CUDA and nvImageCodec: "
                "pip install 'penstock[gpu]' (nvidia-nvimgcodec-cu13 and nvidia-nvjpeg)")
_ALIGN = 256  # bytes between decoded images in the batch buffer
_library: capi.Library | None = None
_library_lock = threading.Lock()


def library() -> capi.Library:
    """nvImageCodec's library, loaded once; ImportError with what to install when it cannot be."""
    global _library
    with _library_lock:
        if _library is None:
            try:
                _library = capi.Library()
            except (ImportError, OSError) as error:
                raise ImportError(f"{INSTALL_HINT} ({error})") from None
        return _library


class EncodedImage(tuple):
    """(data, window or None, height, width): what the CPU workers hand the GPU decoder for one
    image; plain data, so that it can come from a worker process."""

    __slots__ = ()

    def __new__(cls, data: np.ndarray, window, height: int, width: int):
        return super().__new__(cls, (data, window, height, width))

    def __getnewargs__(self):  # unpickled (from a worker process) through __new__ above
        return tuple(self)


class GpuImageDecoder:
    """One nvImageCodec decoder for one pipeline; call from one thread."""

    def __init__(self, device_id: int, cpu_threads: int, output_type: DALIImageType, hw_decoder_load: float):
        self._library = lib = library()
        self._channels = 1 if output_type is DALIImageType.GRAY else 3
        self._output_type = output_type
        self.device = torch.device("cuda", device_id)
        self._instance = ctypes.c_void_p()
        self._decoder = ctypes.c_void_p()
        create_info = capi.new(capi.InstanceCreateInfo, load_builtin_modules=1, load_extension_modules=1,
                               extension_modules_path=lib.extensions)
        lib.check(lib.slow.nvimgcodecInstanceCreate(ctypes.byref(self._instance), ctypes.byref(create_info)),
                  "nvimgcodecInstanceCreate")
        # hw_decoder_load of each batch for the hardware engines, the rest (and what they refuse)
        # for nvJPEG's hybrid path (Huffman on CPU threads, the rest on CUDA cores), and every JPEG
        # on CUDA cores where there are no engines
        loads = ((capi.BACKEND_HW_GPU_ONLY, hw_decoder_load), (capi.BACKEND_HYBRID_CPU_GPU, 1.0),
                 (capi.BACKEND_GPU_ONLY, 1.0))
        loads = [(kind, load) for kind, load in loads if load > 0]
        self._backends = (capi.Backend * len(loads))(*[
            capi.new(capi.Backend, kind=kind, params=capi.new(capi.BackendParams, load_hint=float(load),
                                                              load_hint_policy=capi.LOAD_HINT_FIXED))
            for kind, load in loads])
        execution = capi.new(capi.ExecutionParams, max_num_cpu_threads=max(1, cpu_threads), device_id=device_id,
                             num_backends=len(loads), backends=self._backends)
        lib.check(lib.slow.nvimgcodecDecoderCreate(self._instance, ctypes.byref(self._decoder),
                                                   ctypes.byref(execution), None), "nvimgcodecDecoderCreate")
        self._params = capi.new(capi.DecodeParams, apply_exif_orientation=0)
        self._image_info = info = capi.new(capi.ImageInfo, num_planes=1, buffer_kind=capi.BUFFER_STRIDED_DEVICE)
        info.color_spec = capi.COLORSPEC_GRAY if self._channels == 1 else capi.COLORSPEC_SRGB
        info.sample_format = {DALIImageType.BGR: capi.SAMPLEFORMAT_I_BGR,
                              DALIImageType.GRAY: capi.SAMPLEFORMAT_I_Y}.get(output_type, capi.SAMPLEFORMAT_I_RGB)
        plane = info.plane_info[0]
        plane.num_channels, plane.sample_type = self._channels, capi.SAMPLE_UINT8  # precision 0: all 8 bits
        self._view = capi.new(capi.CodeStreamView)
        self._view.region.ndim = 2
        self._staging = PinnedStaging()
        self.decoded_on_cpu = 0
        self.decoded_on_gpu = 0
        self.seconds = {"batch decode call": 0.0, "code streams and images": 0.0}

    def decode(self, items: list, cuda_stream, describe=lambda index: f"sample {index}") -> list:
        """HWC uint8 images on the GPU, one per EncodedImage (its window when it has one)."""
        results: list = [None] * len(items)
        on_gpu = [index for index, item in enumerate(items) if image_codecs.is_jpeg(item[0])]
        if on_gpu:
            self._decode_on_gpu(items, on_gpu, results, cuda_stream)
        uploads = {}
        for index, (item, result) in enumerate(zip(items, results)):
            if result is not None:
                continue
            data, window = item[0], item[1]
            try:  # a format the GPU decoders do not take, or an image they refused
                image = image_codecs.decode(data, self._output_type)
            except image_codecs.DecodeError as error:
                raise image_codecs.DecodeError(f"{describe(index)}: {error}") from None
            if window is not None:
                top, left, height, width = window
                image = image[top:top + height, left:left + width]
            uploads[index] = image
        if uploads:
            with torch.cuda.stream(cuda_stream):
                tensors = upload_arrays(self._staging, self.device, list(uploads.values()))
            for index, tensor in zip(uploads, tensors):
                results[index] = tensor
            self.decoded_on_cpu += len(uploads)
        return results

    def _decode_on_gpu(self, items: list, indices: list, results: list, cuda_stream) -> None:
        lib, quick = self._library, self._library.quick
        started = time.perf_counter()
        channels = self._channels
        shapes, offsets, total = [], [], 0
        for index in indices:
            _, window, height, width = items[index]
            if window is not None:
                height, width = window[2], window[3]
            shapes.append((height, width, channels))
            offsets.append(total)
            total += -(-height * width * channels // _ALIGN) * _ALIGN
        with torch.cuda.stream(cuda_stream):
            packed = torch.empty(max(total, 1), dtype=torch.uint8, device=self.device)
        base = packed.data_ptr()
        info, view, plane = self._image_info, self._view, self._image_info.plane_info[0]
        info.cuda_stream = cuda_stream.cuda_stream
        count = len(indices)
        wholes = (ctypes.c_void_p * count)()  # each image's stream
        streams = (ctypes.c_void_p * count)()  # what is decoded: the whole stream, or its window's sub-stream
        images = (ctypes.c_void_p * count)()
        decodable = []  # positions whose code stream and image were made
        for position, (index, (height, width, _), offset) in enumerate(zip(indices, shapes, offsets)):
            data, window = items[index][0], items[index][1]
            # (a handle slot that is not NULL would be reused by these calls: every slot starts NULL)
            status = quick.nvimgcodecCodeStreamCreateFromHostMem(
                self._instance, ctypes.byref(wholes, position * 8), data.ctypes.data, data.nbytes, None)
            if status != capi.STATUS_SUCCESS:
                continue  # not a stream nvImageCodec can parse: the CPU decoder says why
            if window is None:
                streams[position] = wholes[position]
            else:  # the window's sub-stream is decoded
                top, left = window[0], window[1]
                view.region.start[0], view.region.start[1] = top, left
                view.region.end[0], view.region.end[1] = top + height, left + width
                if quick.nvimgcodecCodeStreamGetSubCodeStream(wholes[position], ctypes.byref(streams, position * 8),
                                                              ctypes.byref(view)) != capi.STATUS_SUCCESS:
                    continue
            plane.width, plane.height, plane.row_stride = width, height, width * channels
            info.buffer = base + offset
            if quick.nvimgcodecImageCreate(self._instance, ctypes.byref(images, position * 8),
                                           ctypes.byref(info)) != capi.STATUS_SUCCESS:
                continue
            decodable.append(position)
        prepared = time.perf_counter()
        statuses = (ctypes.c_uint32 * count)()
        if decodable:
            if len(decodable) < count:  # pack the ones that can be decoded to the front
                streams_in = (ctypes.c_void_p * len(decodable))(*[streams[p] for p in decodable])
                images_in = (ctypes.c_void_p * len(decodable))(*[images[p] for p in decodable])
            else:
                streams_in, images_in = streams, images
            future = ctypes.c_void_p()
            lib.check(lib.slow.nvimgcodecDecoderDecode(self._decoder, streams_in, images_in, len(decodable),
                                                       ctypes.byref(self._params), ctypes.byref(future)),
                      "nvimgcodecDecoderDecode")
            lib.check(lib.slow.nvimgcodecFutureWaitForAll(future), "nvimgcodecFutureWaitForAll")
            done = (ctypes.c_uint32 * len(decodable))()
            size = ctypes.c_size_t(len(decodable))
            lib.check(quick.nvimgcodecFutureGetProcessingStatus(future, done, ctypes.byref(size)),
                      "nvimgcodecFutureGetProcessingStatus")
            quick.nvimgcodecFutureDestroy(future)
            for position, status in zip(decodable, done):
                statuses[position] = status
        decoded = time.perf_counter()
        for position in range(count):
            if images[position]:
                quick.nvimgcodecImageDestroy(images[position])
            if streams[position] and streams[position] != wholes[position]:
                quick.nvimgcodecCodeStreamDestroy(streams[position])
            if wholes[position]:
                quick.nvimgcodecCodeStreamDestroy(wholes[position])
        for position, (index, shape, offset) in enumerate(zip(indices, shapes, offsets)):
            if statuses[position] == capi.PROCESSING_SUCCESS:
                results[index] = packed[offset:offset + shape[0] * shape[1] * shape[2]].view(shape)
                self.decoded_on_gpu += 1
        self.seconds["code streams and images"] += prepared - started + time.perf_counter() - decoded
        self.seconds["batch decode call"] += decoded - prepared

    def __del__(self):
        try:
            if self._decoder:
                self._library.slow.nvimgcodecDecoderDestroy(self._decoder)
            if self._instance:
                self._library.slow.nvimgcodecInstanceDestroy(self._instance)
        except Exception:  # interpreter shutdown: the library may be gone already
            pass
