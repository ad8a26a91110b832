"""Region-of-interest JPEG decode through TurboJPEG 3 (tj3SetCroppingRegion + tj3SetScalingFactor),
called with ctypes; only the decompression releases the GIL.

libjpeg-turbo skips the IDCT and colour conversion of everything outside the window, and with a
scaling factor decodes the window at 1/2, 1/4 or 1/8 size in the DCT domain. The library is found
in the ``turbojpeg`` wheel (``pip install penstock[roi]``), or at $PENSTOCK_TURBOJPEG, or as the
system's libturbojpeg if it is version 3 or later. Without it, ``available()`` is False and the
decoders decode whole images (still DCT-scaled) and cut the window out.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os
import threading

import numpy as np

_INIT_DECOMPRESS = 1
_PARAM_SUBSAMP, _PARAM_JPEGWIDTH, _PARAM_JPEGHEIGHT = 4, 5, 6
_PIXEL_FORMATS = {"RGB": (0, 3), "BGR": (1, 3), "GRAY": (6, 1)}
# width and height of an iMCU for each TJSAMP value (444, 422, 420, GRAY, 440, 411, 441)
_MCU_WIDTH = (8, 16, 16, 8, 8, 32, 8)


class _Region(ctypes.Structure):
    _fields_ = [("x", ctypes.c_int), ("y", ctypes.c_int), ("w", ctypes.c_int), ("h", ctypes.c_int)]


class _ScalingFactor(ctypes.Structure):
    _fields_ = [("num", ctypes.c_int), ("denom", ctypes.c_int)]


def _candidate_paths() -> list[str]:
    paths = []
    if os.environ.get("PENSTOCK_TURBOJPEG"):
        paths.append(os.environ["PENSTOCK_TURBOJPEG"])
    spec = importlib.util.find_spec("turbojpeg")
    if spec is not None and spec.origin:
        site = os.path.dirname(os.path.dirname(spec.origin)) if spec.submodule_search_locations else \
            os.path.dirname(spec.origin)
        paths.extend(sorted(glob.glob(os.path.join(site, "turbojpeg.libs", "libturbojpeg*.so*"))))
    system = ctypes.util.find_library("turbojpeg")
    if system:
        paths.append(system)
    return paths


def _load():
    """The library twice over: as PyDLL for the quick calls, which keep the GIL (each release and
    re-acquisition is a hand-off between the worker threads, which costs more than these calls),
    and as CDLL for the decompression itself, which releases it."""
    for path in _candidate_paths():
        try:
            library = ctypes.PyDLL(path)
            releasing = ctypes.CDLL(path)
        except OSError:
            continue
        if not hasattr(library, "tj3SetCroppingRegion"):
            continue  # TurboJPEG 2.x has no cropped decode
        library.decompress = releasing.tj3Decompress8
        library.tj3Init.restype = ctypes.c_void_p
        library.tj3Init.argtypes = [ctypes.c_int]
        library.tj3DecompressHeader.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        library.tj3Get.argtypes = [ctypes.c_void_p, ctypes.c_int]
        library.tj3SetScalingFactor.argtypes = [ctypes.c_void_p, _ScalingFactor]
        library.tj3SetCroppingRegion.argtypes = [ctypes.c_void_p, _Region]
        library.decompress.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                                       ctypes.c_int, ctypes.c_int]
        library.tj3Destroy.argtypes = [ctypes.c_void_p]
        library.tj3GetErrorStr.restype = ctypes.c_char_p
        library.tj3GetErrorStr.argtypes = [ctypes.c_void_p]
        return library
    return None


_library = _load()
# one decompressor per thread (a TurboJPEG handle serves one call at a time), destroyed with the
# thread's locals when the thread ends: a pipeline's worker threads end when it closes
_decompressors = threading.local()


class _Decompressor:
    def __init__(self):
        self.handle = _library.tj3Init(_INIT_DECOMPRESS)

    def __del__(self):
        if self.handle and _library is not None:
            _library.tj3Destroy(self.handle)


def available() -> bool:
    return _library is not None


def _handle():
    decompressor = getattr(_decompressors, "decompressor", None)
    if decompressor is None:
        decompressor = _decompressors.decompressor = _Decompressor()
    return decompressor.handle


def _check(handle, status: int) -> None:
    if status != 0:
        raise ValueError(_library.tj3GetErrorStr(handle).decode(errors="replace"))


def decode_window(data: np.ndarray, window: tuple[int, int, int, int], scale: int, colorspace: str) -> np.ndarray | None:
    """Decodes ``window`` = (top, left, height, width) of a JPEG, in full-resolution pixels, at
    1/``scale`` size; returns HWC uint8, or None for files TurboJPEG cannot crop (then decode whole)."""
    handle = _handle()
    _check(handle, _library.tj3DecompressHeader(handle, data.ctypes.data, data.size))
    subsampling = _library.tj3Get(handle, _PARAM_SUBSAMP)
    if not 0 <= subsampling < len(_MCU_WIDTH):
        return None
    _check(handle, _library.tj3SetScalingFactor(handle, _ScalingFactor(1, scale)))
    top, left, height, width = window
    top, left = top // scale, left // scale
    height, width = max(1, -(-height // scale)), max(1, -(-width // scale))
    scaled_height = -(-_library.tj3Get(handle, _PARAM_JPEGHEIGHT) // scale)
    scaled_width = -(-_library.tj3Get(handle, _PARAM_JPEGWIDTH) // scale)
    height, width = min(height, scaled_height - top), min(width, scaled_width - left)
    mcu_width = max(1, _MCU_WIDTH[subsampling] // scale)
    # TurboJPEG crops from an iMCU boundary; one more iMCU on each side gives the edge columns the
    # same chroma upsampling context as a whole-image decode
    aligned_left = max(0, left // mcu_width * mcu_width - mcu_width)
    right = min(scaled_width, left + width + mcu_width)
    _check(handle, _library.tj3SetCroppingRegion(handle, _Region(aligned_left, top, right - aligned_left, height)))
    pixel_format, channels = _PIXEL_FORMATS[colorspace]
    decoded = np.empty((height, right - aligned_left, channels), np.uint8)
    _check(handle, _library.decompress(handle, data.ctypes.data, data.size, decoded.ctypes.data,
                                       decoded.strides[0], pixel_format))
    return decoded[:, left - aligned_left:left - aligned_left + width]
