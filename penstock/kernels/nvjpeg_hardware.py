"""nvJPEG's batched API through ctypes, for batches of JPEGs on the GPU's hardware JPEG decoders
(A100, H100, H200 class): the library, its structures and constants (the decoder that keeps their
states is penstock.runtime.nvjpeg_decoder).

Why beside nvImageCodec: through nvImageCodec each image costs three handle calls in this process
(code stream, window, image), about 15 us each image and far more while other Python threads want
the interpreter lock. nvJPEG's batched call takes arrays of addresses, lengths and output
descriptions, so describing a batch is a few numpy assignments and one quick call per image (its
window). Only the images the hardware takes come here (``image_codecs.jpeg_header``, decided
on the CPU workers); the rest go to nvImageCodec.
"""
from __future__ import annotations

import ctypes
import glob
import os
from ctypes import POINTER, c_int, c_size_t, c_uint, c_void_p

import numpy as np

from penstock.kernels.c_library import load_twice

BACKEND_HARDWARE = 3
OUTPUT_Y, OUTPUT_RGBI, OUTPUT_BGRI = 2, 5, 6
CSS_444 = 0
STATUS_SUCCESS = 0
# chroma upsampled by interpolation, as libjpeg-turbo does ("fancy upsampling"): the hardware's
# output then matches the CPU decoders' to within a grey level
FLAGS_UPSAMPLING_WITH_INTERPOLATION = 1 << 5
_MAX_COMPONENTS = 4


class Image(ctypes.Structure):
    """nvjpegImage_t: a plane pointer and row pitch per component (interleaved output: plane 0)."""

    _fields_ = [("channel", c_void_p * _MAX_COMPONENTS), ("pitch", c_size_t * _MAX_COMPONENTS)]


IMAGE_FIELDS = np.dtype([("channel", np.uint64, _MAX_COMPONENTS), ("pitch", np.uint64, _MAX_COMPONENTS)])

_SIGNATURES = {
    "nvjpegCreateEx": [c_int, c_void_p, c_void_p, c_uint, POINTER(c_void_p)],
    "nvjpegDestroy": [c_void_p],
    "nvjpegGetHardwareDecoderInfo": [c_void_p, POINTER(c_uint), POINTER(c_uint)],
    "nvjpegJpegStateCreate": [c_void_p, POINTER(c_void_p)],
    "nvjpegJpegStateDestroy": [c_void_p],
    "nvjpegDecodeBatchedPreAllocate": [c_void_p, c_void_p, c_int, c_int, c_int, c_int, c_int],
    "nvjpegDecodeBatchedInitialize": [c_void_p, c_void_p, c_int, c_int, c_int],
    "nvjpegDecodeBatchedEx": [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p],
    "nvjpegDecodeParamsCreate": [c_void_p, POINTER(c_void_p)],
    "nvjpegDecodeParamsDestroy": [c_void_p],
    "nvjpegDecodeParamsSetROI": [c_void_p, c_int, c_int, c_int, c_int],
}


def load_nvjpeg_globally() -> None:
    """Loads nvJPEG with its symbols visible to libraries loaded later (nvImageCodec's JPEG
    extension, which looks for it by name); a missing nvJPEG is left for them to report."""
    try:
        ctypes.CDLL(_library_path(), mode=ctypes.RTLD_GLOBAL)
    except OSError:
        pass


def _library_path() -> str:
    """libnvjpeg from the nvidia-nvjpeg wheel (or an older CUDA's), else the system's."""
    try:
        import nvidia
        for directory in nvidia.__path__:
            for pattern in ("cu*/lib/libnvjpeg.so.*", "nvjpeg/lib/libnvjpeg.so.*"):
                found = sorted(glob.glob(os.path.join(directory, pattern)))
                if found:
                    return found[-1]
    except ImportError:
        pass
    return "libnvjpeg.so"


class Library:
    """``quick`` calls keep the interpreter lock (setting a window), ``slow`` ones release it."""

    def __init__(self):
        self.quick, self.slow = load_twice(_library_path(), _SIGNATURES)

    @staticmethod
    def check(status: int, call: str) -> None:
        if status != STATUS_SUCCESS:
            raise RuntimeError(f"nvJPEG: {call} failed with status {status}")
