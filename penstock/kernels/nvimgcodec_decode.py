"""GPU image decoding through nvImageCodec: JPEG on the GPU's hardware decoding engines (A100,
H100, H200 class), or on CUDA cores (Huffman on CPU threads) where there are none or they refuse an
image; a window per image decodes only that region. Images nvImageCodec cannot decode on the
GPU (GIF, and whatever its GPU codecs reject) are decoded on the CPU and uploaded.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from penstock.kernels import image_codecs
from penstock.kernels.device_image import DeviceImage
from penstock.kernels.pinned import PinnedStaging, upload_arrays
from penstock.types import DALIImageType

INSTALL_HINT = ("device='mixed' decoding needs a CUDA GPU, PyTorch with CUDA and nvImageCodec: "
                "pip install 'penstock[gpu]' (nvidia-nvimgcodec-cu13 and nvidia-nvjpeg)")


def import_nvimgcodec():
    try:
        from nvidia import nvimgcodec
    except ImportError as error:
        raise ImportError(f"{INSTALL_HINT} ({error})") from None
    return nvimgcodec


class GpuImageDecoder:
    """One nvImageCodec decoder for one pipeline; call from one thread."""

    def __init__(self, device_id: int, cpu_threads: int, output_type: DALIImageType):
        nvimgcodec = import_nvimgcodec()
        self._nvimgcodec = nvimgcodec
        kinds = nvimgcodec.BackendKind
        # the hardware engines take every image they can; nvJPEG's hybrid path (Huffman on CPU
        # threads, the rest on CUDA cores) takes what they cannot, and every image on GPUs without them
        backends = [nvimgcodec.Backend(kinds.HW_GPU_ONLY, load_hint=1.0),
                    nvimgcodec.Backend(kinds.HYBRID_CPU_GPU, load_hint=1.0)]
        self._decoder = nvimgcodec.Decoder(device_id=device_id, max_num_cpu_threads=max(1, cpu_threads),
                                           backends=backends)
        sample_format = {DALIImageType.BGR: nvimgcodec.SampleFormat.I_BGR,
                         DALIImageType.GRAY: nvimgcodec.SampleFormat.I_Y}.get(output_type,
                                                                             nvimgcodec.SampleFormat.I_RGB)
        color_spec = nvimgcodec.ColorSpec.GRAY if output_type is DALIImageType.GRAY else nvimgcodec.ColorSpec.SRGB
        self._params = nvimgcodec.DecodeParams(apply_exif_orientation=False, color_spec=color_spec,
                                               allow_any_depth=False, sample_format=sample_format)
        self._output_type = output_type
        self.device = torch.device("cuda", device_id)
        self._staging = PinnedStaging()
        self.decoded_on_cpu = 0
        self.decoded_on_gpu = 0
        self.seconds = {"batch decode call": 0.0, "describing the results": 0.0}

    def decode(self, prepared: list, cuda_stream, describe=lambda index: f"sample {index}") -> list:
        """HWC uint8 images on the GPU (DeviceImage or tensor), one per item of ``prepared``: a
        PreparedImage is decoded here (its window when it has one), on the GPU when its format
        allows, else on the CPU and uploaded; an array is an image already decoded on the CPU, and
        is uploaded. Uploads share one copy through pinned memory."""
        on_gpu = [(index, item.stream) for index, item in enumerate(prepared)
                  if isinstance(item, PreparedImage) and item.stream is not None]
        results: list = [None] * len(prepared)
        if on_gpu:
            started = time.perf_counter()
            images = self._decoder.decode([stream for _, stream in on_gpu], params=self._params,
                                          cuda_stream=cuda_stream.cuda_stream)
            decoded = time.perf_counter()
            for (index, _), image in zip(on_gpu, images):
                if image is not None:
                    results[index] = DeviceImage(image, self.device)
            self.decoded_on_gpu += sum(result is not None for result in results)
            self.seconds["batch decode call"] += decoded - started
            self.seconds["describing the results"] += time.perf_counter() - decoded
        uploads = {}
        for index, (item, result) in enumerate(zip(prepared, results)):
            if result is not None:
                continue
            if isinstance(item, np.ndarray):
                uploads[index] = item
                continue
            # the GPU codecs could not take it: decode on the CPU
            try:
                image = image_codecs.decode(item.data, self._output_type)
            except image_codecs.DecodeError as error:
                raise image_codecs.DecodeError(f"{describe(index)}: {error}") from None
            if item.window is not None:
                top, left, height, width = item.window
                image = image[top:top + height, left:left + width]
            uploads[index] = image
        if uploads:
            with torch.cuda.stream(cuda_stream):
                tensors = upload_arrays(self._staging, self.device, list(uploads.values()))
            for index, tensor in zip(uploads, tensors):
                results[index] = tensor
            self.decoded_on_cpu += len(uploads)
        return results


class PreparedImage:
    """One image ready for the GPU decoder: its parsed stream (its window's sub-stream), or None when
    the GPU codecs do not take the format; the encoded data and the window, for the CPU fallback."""

    __slots__ = ("stream", "data", "window")

    def __init__(self, stream, data, window):
        self.stream, self.data, self.window = stream, data, window


GPU_FORMATS = ("jpeg", "jpeg2000", "png", "tiff", "bmp", "pnm", "webp")


def parse(nvimgcodec, data: np.ndarray):
    """(stream or None, height, width) of encoded data; the header is parsed once, here."""
    if image_codecs.image_format(data) in GPU_FORMATS:
        stream = nvimgcodec.CodeStream(data)
        return stream, stream.height, stream.width
    height, width = image_codecs.image_size(data)
    return None, height, width


def prepare(nvimgcodec, stream, data: np.ndarray, window) -> PreparedImage:
    if stream is not None and window is not None:
        top, left, height, width = window
        stream = stream.get_sub_code_stream(region=nvimgcodec.Region(int(top), int(left), int(top + height),
                                                                     int(left + width)))
    return PreparedImage(stream, data, window)
