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
_PARAM_SUBSAMP, _PARAM_JPEGWIDTH, _PARAM_JPEGHEIGHT, _PARAM_PRECISION, _PARAM_LOSSLESS = 4, 5, 6, 7, 15
# pixel formats: CMYK is the stored components as they are (image_codecs converts them)
_PIXEL_FORMATS = {"RGB": (0, 3), "BGR": (1, 3), "GRAY": (6, 1), "CMYK": (11, 4)}
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
        library.decompress12 = releasing.tj3Decompress12  # 9 to 12-bit samples
        library.decompress16 = releasing.tj3Decompress16  # lossless JPEG, 13 to 16 bits
        library.tj3Init.restype = ctypes.c_void_p
        library.tj3Init.argtypes = [ctypes.c_int]
        library.tj3DecompressHeader.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        library.tj3Get.argtypes = [ctypes.c_void_p, ctypes.c_int]
        library.tj3SetScalingFactor.argtypes = [ctypes.c_void_p, _ScalingFactor]
        library.tj3SetCroppingRegion.argtypes = [ctypes.c_void_p, _Region]
        for decompress in (library.decompress, library.decompress12, library.decompress16):
            decompress.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
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


def decode_window(data: np.ndarray, window: tuple[int, int, int, int], scale: int, pixel_format: str) -> np.ndarray:
    """Decodes ``window`` = (top, left, height, width) of a JPEG, in full-resolution pixels, at
    1/``scale`` size, as HWC uint8 in ``pixel_format`` (RGB, BGR, GRAY, or CMYK: the stored
    components of a CMYK or YCCK JPEG). Samples of more than 8 bits (12-bit and lossless JPEGs)
    are scaled to 8. Where TurboJPEG cannot crop (an unusual subsampling) or scale (lossless), the
    whole image is decoded, at full size when it cannot be scaled, and the window cut out."""
    handle = _handle()
    _check(handle, _library.tj3DecompressHeader(handle, data.ctypes.data, data.size))
    subsampling = _library.tj3Get(handle, _PARAM_SUBSAMP)
    precision = _library.tj3Get(handle, _PARAM_PRECISION)
    if _library.tj3Get(handle, _PARAM_LOSSLESS):
        scale = 1  # lossless JPEGs have no DCT to scale in
    _check(handle, _library.tj3SetScalingFactor(handle, _ScalingFactor(1, scale)))
    top, left, height, width = window
    top, left = top // scale, left // scale
    height, width = max(1, -(-height // scale)), max(1, -(-width // scale))
    scaled_height = -(-_library.tj3Get(handle, _PARAM_JPEGHEIGHT) // scale)
    scaled_width = -(-_library.tj3Get(handle, _PARAM_JPEGWIDTH) // scale)
    height, width = min(height, scaled_height - top), min(width, scaled_width - left)
    if 0 <= subsampling < len(_MCU_WIDTH):
        mcu_width = max(1, _MCU_WIDTH[subsampling] // scale)
        # TurboJPEG crops from an iMCU boundary; one more iMCU on each side gives the edge columns
        # the same chroma upsampling context as a whole-image decode
        first_row, rows = top, height
        aligned_left = max(0, left // mcu_width * mcu_width - mcu_width)
        right = min(scaled_width, left + width + mcu_width)
    else:
        first_row, rows, aligned_left, right = 0, scaled_height, 0, scaled_width
    region = _Region(aligned_left, first_row, right - aligned_left, rows) if (rows, right - aligned_left) != \
        (scaled_height, scaled_width) else _Region(0, 0, 0, 0)  # (0, 0, 0, 0): uncropped
    _check(handle, _library.tj3SetCroppingRegion(handle, region))
    format_code, channels = _PIXEL_FORMATS[pixel_format]
    if precision <= 8:
        decoded = np.empty((rows, right - aligned_left, channels), np.uint8)
        _check(handle, _library.decompress(handle, data.ctypes.data, data.size, decoded.ctypes.data,
                                           decoded.strides[0], format_code))
    else:
        wide = np.empty((rows, right - aligned_left, channels), np.uint16)
        decompress = _library.decompress12 if precision <= 12 else _library.decompress16
        _check(handle, decompress(handle, data.ctypes.data, data.size, wide.ctypes.data, wide.strides[0] // 2,
                                  format_code))
        top_value = (1 << precision) - 1  # to 8 bits, rounding to nearest
        decoded = ((wide.astype(np.uint32) * 255 + top_value // 2) // top_value).astype(np.uint8)
    return decoded[top - first_row:top - first_row + height, left - aligned_left:left - aligned_left + width]
