"""GPU image decoding through nvImageCodec: JPEG on the GPU's hardware decoding engines (A100,
H100, H200 class) for ``hw_decoder_load`` of each batch and on CUDA cores (Huffman on CPU threads)
for the rest; a window per image decodes only that region. Images nvImageCodec cannot decode on the
GPU (GIF, and whatever its GPU codecs reject) are decoded on the CPU and uploaded.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from penstock.kernels import image_codecs
from penstock.kernels.device_image import DeviceImage
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

    def __init__(self, device_id: int, cpu_threads: int, hw_decoder_load: float, output_type: DALIImageType):
        nvimgcodec = import_nvimgcodec()
        self._nvimgcodec = nvimgcodec
        kinds = nvimgcodec.BackendKind
        backends = []
        if hw_decoder_load > 0:
            backends.append(nvimgcodec.Backend(kinds.HW_GPU_ONLY, load_hint=float(hw_decoder_load)))
        # CUDA-core decoding: nvJPEG's hybrid path (Huffman on CPU threads, the rest on the GPU)
        backends.append(nvimgcodec.Backend(kinds.HYBRID_CPU_GPU, load_hint=1.0))
        self.backends = ["hardware JPEG engines"] * (hw_decoder_load > 0) + ["CUDA cores (hybrid)"]
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
        self.decoded_on_cpu = 0
        self.decoded_on_gpu = 0
        self.seconds = {"batch decode call": 0.0, "describing the results": 0.0}

    def decode(self, prepared: list["PreparedImage"], cuda_stream, describe=lambda index: f"sample {index}") -> list:
        """HWC uint8 images on the GPU (DeviceImage, or tensors for CPU-decoded ones), one per
        prepared image (its window when it has one)."""
        on_gpu = [(index, item.stream) for index, item in enumerate(prepared) if item.stream is not None]
        results: list = [None] * len(prepared)
        if on_gpu:
            started = time.perf_counter()
            images = self._decoder.decode([stream for _, stream in on_gpu], params=self._params,
                                          cuda_stream=cuda_stream.cuda_stream)
            decoded = time.perf_counter()
            for (index, _), image in zip(on_gpu, images):
                if image is not None:
                    results[index] = DeviceImage(image, self.device)
                    self.decoded_on_gpu += 1
            self.seconds["batch decode call"] += decoded - started
            self.seconds["describing the results"] += time.perf_counter() - decoded
        for index, tensor in enumerate(results):
            if tensor is None:  # the GPU codecs could not take it: decode on the CPU and upload
                item = prepared[index]
                try:
                    image = image_codecs.decode(item.data, self._output_type)
                except image_codecs.DecodeError as error:
                    raise image_codecs.DecodeError(f"{describe(index)}: {error}") from None
                if item.window is not None:
                    top, left, height, width = item.window
                    image = image[top:top + height, left:left + width]
                with torch.cuda.stream(cuda_stream):
                    results[index] = torch.from_numpy(np.ascontiguousarray(image)).pin_memory().to(
                        self.device, non_blocking=True)
                self.decoded_on_cpu += 1
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
