"""CPU image decoding: JPEG through libjpeg-turbo (simplejpeg: DCT-domain down-scaling, decode into
a given buffer, GIL released), every other format through OpenCV, GIF's first frame through Pillow.

Errors say what is wrong with the data; the decoder operator adds the file's path.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

import cv2
import simplejpeg

from penstock.kernels import turbojpeg3
from penstock.types import DALIImageType

_JPEG_MAGIC = b"\xff\xd8\xff"
_MAGIC = (
    (_JPEG_MAGIC, "jpeg"),
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"GIF87a", "gif"), (b"GIF89a", "gif"),
    (b"BM", "bmp"),
    (b"II*\x00", "tiff"), (b"MM\x00*", "tiff"),
    (b"\x00\x00\x00\x0cjP  \r\n\x87\n", "jpeg2000"), (b"\xff\x4f\xff\x51", "jpeg2000"),
)


class DecodeError(ValueError):
    """The data is not a decodable image."""


def is_jpeg(data: np.ndarray) -> bool:
    # three element comparisons: a quarter of the time of making bytes (this runs for every image)
    return len(data) >= 3 and data[0] == _JPEG_MAGIC[0] and data[1] == _JPEG_MAGIC[1] and data[2] == _JPEG_MAGIC[2]


def image_format(data: np.ndarray) -> str:
    head = bytes(data[:16])
    if not head:
        raise DecodeError("the file is empty")
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if len(head) >= 2 and head[0:1] == b"P" and head[1:2] in b"123456":
        return "pnm"
    raise DecodeError(f"not a supported image format (first bytes {head[:8].hex(' ')}); supported: "
                      "JPEG, PNG, GIF, BMP, TIFF, PNM, WebP, JPEG 2000")


def jpeg_size(data: np.ndarray) -> tuple[int, int]:
    """(height, width) from a JPEG header, without decoding."""
    try:
        height, width, _, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError as error:
        raise DecodeError(f"corrupt JPEG header: {error}") from None
    return height, width


# (horizontal, vertical) sampling factors of the luma component, with both chroma components at
# (1, 1): 4:4:4, 4:2:2, 4:2:0 and 4:4:0, the subsamplings the GPU's hardware JPEG decoders take
_HARDWARE_SAMPLINGS = {(1, 1), (2, 1), (2, 2), (1, 2)}


class JpegHeader(NamedTuple):
    height: int
    width: int
    hardware: bool  # whether the GPU's hardware JPEG decoders take it


def jpeg_header(data: np.ndarray) -> JpegHeader:
    """A JPEG's size, and whether the GPU's hardware JPEG decoders take it: baseline (SOF0), 8-bit,
    gray or three components in a supported subsampling, all components in the first scan.

    Reads only the markers before the first scan, a few microseconds a file. A baseline JPEG codes
    each component in exactly one scan, so a first scan with every component is the only one.
    Headers this walk cannot read (a height given after the scan, bytes between markers) are left
    to libjpeg-turbo, which reads the size or says what is wrong."""
    raw = memoryview(np.ascontiguousarray(data, np.uint8)).cast("B")
    size, position, frame = len(raw), 2, None
    while position + 4 <= size and raw[position] == 0xFF:
        marker = raw[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        length = raw[position + 2] << 8 | raw[position + 3]
        if marker == 0xDA:  # start of scan
            if frame is None or not frame[0]:
                break
            height, width, components, hardware = frame
            return JpegHeader(height, width, hardware and position + 4 < size and raw[position + 4] == components)
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame
            if position + 10 + 3 * raw[position + 9] > size:
                break
            components = raw[position + 9]
            factors = [(raw[position + 11 + 3 * index] >> 4, raw[position + 11 + 3 * index] & 15)
                       for index in range(components)]
            hardware = marker == 0xC0 and raw[position + 4] == 8 and (
                components == 1 or components == 3 and factors[0] in _HARDWARE_SAMPLINGS
                and factors[1] == (1, 1) and factors[2] == (1, 1))
            frame = (raw[position + 5] << 8 | raw[position + 6], raw[position + 7] << 8 | raw[position + 8],
                     components, hardware)
        position += 2 + length
    return JpegHeader(*jpeg_size(data), False)


def image_size(data: np.ndarray) -> tuple[int, int]:
    """(height, width) of any supported image; cheap for JPEG, a full decode otherwise."""
    if image_format(data) == "jpeg":
        return jpeg_size(data)
    return decode(data, DALIImageType.RGB).shape[:2]


def decode(data: np.ndarray, output_type: DALIImageType, min_height: int = 0, min_width: int = 0) -> np.ndarray:
    """Decodes to HWC uint8 (C = 3, or 1 for GRAY).

    For JPEG, a non-zero min_height / min_width lets libjpeg-turbo scale down by 1/2, 1/4 or 1/8 in
    the DCT domain while keeping at least that size, which skips most of the decoding work.
    """
    kind = image_format(data)
    if kind == "jpeg":
        return _decode_jpeg(data, output_type, min_height, min_width)
    flag = cv2.IMREAD_GRAYSCALE if output_type is DALIImageType.GRAY else cv2.IMREAD_COLOR
    image = cv2.imdecode(data, flag)
    if image is None and kind == "gif":  # OpenCV before 4.11 has no GIF decoder
        return _decode_with_pillow(data, output_type)
    if image is None:
        raise DecodeError(f"corrupt or truncated {kind.upper()} data")
    if image.dtype != np.uint8:
        image = (image >> 8).astype(np.uint8) if image.dtype == np.uint16 else image.astype(np.uint8)
    if image.ndim == 2:
        return image[:, :, None]
    if output_type is DALIImageType.RGB:
        return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    return image


def _colorspace(output_type: DALIImageType) -> str:
    return {DALIImageType.BGR: "BGR", DALIImageType.GRAY: "GRAY"}.get(output_type, "RGB")


def decode_jpeg_window(data: np.ndarray, output_type: DALIImageType, window: tuple[int, int, int, int],
                       scale: int = 1) -> np.ndarray:
    """The (top, left, height, width) window of a JPEG, at 1/scale size (scale 1, 2, 4 or 8).

    With TurboJPEG 3 only the window is decoded; otherwise the whole image is (DCT-scaled) and the
    window cut out of it. The window is clipped to the image.
    """
    if turbojpeg3.available():
        try:
            image = turbojpeg3.decode_window(data, window, scale, _colorspace(output_type))
        except ValueError as error:
            raise DecodeError(f"corrupt or truncated JPEG data ({error})") from None
        if image is not None:
            return image
    height, width = jpeg_size(data)
    image = decode(data, output_type, min_height=-(-height // scale) if scale > 1 else 0,
                   min_width=-(-width // scale) if scale > 1 else 0)
    factor_y, factor_x = image.shape[0] / height, image.shape[1] / width
    top, left, window_height, window_width = window
    top, left = int(top * factor_y), int(left * factor_x)
    return image[top:top + max(1, int(round(window_height * factor_y))),
                 left:left + max(1, int(round(window_width * factor_x)))]


def _decode_jpeg(data, output_type, min_height, min_width) -> np.ndarray:
    colorspace = _colorspace(output_type)
    try:
        image = simplejpeg.decode_jpeg(data, colorspace=colorspace, min_height=min_height, min_width=min_width)
    except ValueError as error:
        return _decode_jpeg_fallback(data, output_type, error)
    return image


def _decode_jpeg_fallback(data, output_type, error) -> np.ndarray:
    # libjpeg-turbo's strict mode rejects CMYK and some rare files that OpenCV still reads;
    # truncated or corrupt data fails in both.
    message = str(error)
    if "Corrupt" in message or "Premature" in message or "truncated" in message.lower():
        raise DecodeError(f"corrupt or truncated JPEG data ({message})") from None
    flag = cv2.IMREAD_GRAYSCALE if output_type is DALIImageType.GRAY else cv2.IMREAD_COLOR
    image = cv2.imdecode(data, flag)
    if image is None:
        raise DecodeError(f"corrupt or truncated JPEG data ({message})") from None
    if image.ndim == 2:
        return image[:, :, None]
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB) if output_type is DALIImageType.RGB else image


def _decode_with_pillow(data, output_type) -> np.ndarray:
    import io

    from PIL import Image

    try:
        with Image.open(io.BytesIO(data.tobytes())) as image:
            image.seek(0)
            mode = "L" if output_type is DALIImageType.GRAY else "RGB"
            array = np.asarray(image.convert(mode))
    except Exception as error:  # Pillow raises many types for bad data
        raise DecodeError(f"corrupt or truncated GIF data ({error})") from None
    if array.ndim == 2:
        return array[:, :, None]
    return array[:, :, ::-1].copy() if output_type is DALIImageType.BGR else array
