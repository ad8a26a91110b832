"""CPU image decoding: JPEG through libjpeg-turbo (simplejpeg: DCT-domain down-scaling, decode into
a given buffer, GIL released), every other format through OpenCV, GIF's first frame through Pillow.

Errors say what is wrong with the data; the decoder operator adds the file's path.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

import cv2
import simplejpeg

from penstock import limits
from penstock.kernels import image_headers, turbojpeg3
from penstock.types import DALIDataType, DALIImageType

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


class ImageTooLarge(DecodeError, limits.SizeClaimError):
    """The image's header claims more pixels than the decoder's limit (``max_pixels``)."""


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
    hardware: bool  # the GPU's hardware JPEG decoders take it
    gpu: bool = False  # the GPU's CUDA decoders take it: Huffman-coded 8-bit, gray or three components
    cmyk: bool = False  # four components, CMYK or YCCK
    adobe: bool = False  # an Adobe APP14 marker: four components are stored inverted
    orientation: int = 1  # the EXIF orientation, 1 to 8
    gray: bool = False  # one component


def jpeg_header_for_cpu(data: np.ndarray) -> JpegHeader:
    """``jpeg_header`` without the GPU decoders' flags (False), for the CPU decoders: the size and
    colour model from libjpeg-turbo's header reader (in C), and the markers before the frame read
    for EXIF orientation and Adobe's marker. A third of the time of the whole walk."""
    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError:  # headers libjpeg-turbo's reader does not take: the walk says more
        return jpeg_header(data)
    raw = memoryview(np.ascontiguousarray(data, np.uint8)).cast("B")
    size, position, orientation, adobe = len(raw), 2, 1, False
    while position + 4 <= size and raw[position] == 0xFF:
        marker = raw[position + 1]
        if marker == 0xFF:
            position += 1
            continue
        if 0xC0 <= marker <= 0xCF or marker == 0xDA:  # the frame: what follows holds neither
            break
        length = raw[position + 2] << 8 | raw[position + 3]
        if marker == 0xE1 and bytes(raw[position + 4:position + 10]) == b"Exif\x00\x00":
            orientation = image_headers.exif_orientation(bytes(raw[position + 10:position + 2 + length]))
        elif marker == 0xEE and bytes(raw[position + 4:position + 9]) == b"Adobe":
            adobe = True
        position += 2 + length
    return JpegHeader(height, width, False, False, colorspace in ("CMYK", "YCCK"), adobe, orientation,
                      colorspace == "Gray")


def jpeg_header(data: np.ndarray) -> JpegHeader:
    """A JPEG's size, EXIF orientation, colour model, and which GPU decoders take it: the hardware
    decoders baseline (SOF0), 8-bit, gray or three components in a supported subsampling, all
    components in the first scan.

    Reads only the markers before the first scan, a few microseconds a file. A baseline JPEG codes
    each component in exactly one scan, so a first scan with every component is the only one.
    Headers this walk cannot read (a height given after the scan, bytes between markers) are left
    to libjpeg-turbo, which reads the size or says what is wrong."""
    raw = memoryview(np.ascontiguousarray(data, np.uint8)).cast("B")
    size, position, frame = len(raw), 2, None
    orientation, adobe = 1, False
    while position + 4 <= size and raw[position] == 0xFF:
        marker = raw[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        length = raw[position + 2] << 8 | raw[position + 3]
        if marker == 0xDA:  # start of scan
            if frame is None or not frame[0]:
                break
            height, width, components, hardware, gpu = frame
            hardware = hardware and position + 4 < size and raw[position + 4] == components
            return JpegHeader(height, width, hardware, gpu, components == 4, adobe, orientation, components == 1)
        if marker == 0xE1 and bytes(raw[position + 4:position + 10]) == b"Exif\x00\x00":
            orientation = image_headers.exif_orientation(bytes(raw[position + 10:position + 2 + length]))
        elif marker == 0xEE and bytes(raw[position + 4:position + 9]) == b"Adobe":
            adobe = True
        elif 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame
            if position + 10 > size or position + 10 + 3 * raw[position + 9] > size:  # cut inside the frame
                break
            components, precision = raw[position + 9], raw[position + 4]
            factors = [(raw[position + 11 + 3 * index] >> 4, raw[position + 11 + 3 * index] & 15)
                       for index in range(components)]
            hardware = marker == 0xC0 and precision == 8 and (
                components == 1 or components == 3 and factors[0] in _HARDWARE_SAMPLINGS
                and factors[1] == (1, 1) and factors[2] == (1, 1))
            gpu = marker in (0xC0, 0xC1, 0xC2) and precision == 8 and components in (1, 3)
            frame = (raw[position + 5] << 8 | raw[position + 6], raw[position + 7] << 8 | raw[position + 8],
                     components, hardware, gpu)
        position += 2 + length
    return JpegHeader(*jpeg_size(data), False)


def image_size(data: np.ndarray) -> tuple[int, int]:
    """(height, width) of any supported image as stored, from its header."""
    kind = image_format(data)
    if kind == "jpeg":
        return jpeg_size(data)
    try:
        return image_headers.image_size(data, kind)
    except image_headers.HeaderError as error:
        raise DecodeError(str(error)) from None


def decoded_size(data: np.ndarray, adjust_orientation: bool) -> tuple[int, int]:
    """(height, width) of the image ``decode`` gives, from the header alone: the EXIF orientation of
    JPEG, PNG, WebP and TIFF applied with ``adjust_orientation``."""
    kind = image_format(data)
    if kind == "jpeg":
        header = jpeg_header_for_cpu(data)
        height, width, orientation = header.height, header.width, header.orientation if adjust_orientation else 1
    else:
        height, width = image_size(data)
        orientation = image_headers.stored_orientation(data, kind) if adjust_orientation else 1
    return (width, height) if image_headers.orientation_swaps_axes(orientation) else (height, width)


def stored_channels(data: np.ndarray) -> int:
    """The channels an image stores (what ANY_DATA decodes to), from its header: JPEG's components
    (1, 3, or 4 for CMYK), the others' as Pillow reads them."""
    kind = image_format(data)
    if kind == "jpeg":
        header = jpeg_header_for_cpu(data)
        return 1 if header.gray else 4 if header.cmyk else 3
    try:
        return image_headers.channels(data)
    except image_headers.HeaderError as error:
        raise DecodeError(f"{kind.upper()}: {error}") from None


def check_pixels(height: int, width: int, max_pixels: int | None) -> None:
    """Raises ImageTooLarge when an image of that size holds more than ``max_pixels`` (None: any)."""
    try:
        limits.checked_pixels("its header", height, width, max_pixels, limit_name="the decoder's max_pixels")
    except limits.SizeClaimError as error:
        raise ImageTooLarge(str(error)) from None


def decode(data: np.ndarray, output_type: DALIImageType, min_height: int = 0, min_width: int = 0,
           adjust_orientation: bool = False, header: JpegHeader | None = None,
           dtype: DALIDataType = DALIDataType.UINT8) -> np.ndarray:
    """Decodes to HWC ``dtype`` in ``output_type`` (C = 3; 1 for GRAY; ANY_DATA: the file's own
    channels), as stored, or as displayed with ``adjust_orientation`` (the EXIF orientation
    applied); ``convert`` says how the values are scaled.

    For JPEG, a non-zero min_height / min_width (of the image as stored) lets libjpeg-turbo scale
    down by 1/2, 1/4 or 1/8 in the DCT domain while keeping at least that size, which skips most
    of the decoding work. ``header``: the JPEG's, when the caller has read it already.
    """
    kind = "jpeg" if header is not None else image_format(data)
    if kind == "jpeg":
        header = header or jpeg_header_for_cpu(data)
        image = _decode_jpeg(data, _jpeg_colour(output_type, header), min_height, min_width, header)
        orientation = header.orientation if adjust_orientation else 1
        image = image if orientation == 1 else np.ascontiguousarray(image_headers.orient(image, orientation))
    else:
        image = _decode_other(data, kind, output_type, adjust_orientation)
    return convert(image, output_type, dtype)


def _jpeg_colour(output_type: DALIImageType, header: JpegHeader) -> DALIImageType:
    """What libjpeg-turbo decodes a JPEG to: YCbCr is made from RGB (or from gray), and a file's
    own channels are gray or RGB (CMYK files are converted)."""
    if output_type in (DALIImageType.YCbCr, DALIImageType.ANY_DATA):
        return DALIImageType.GRAY if header.gray else DALIImageType.RGB
    return output_type


def _decode_other(data: np.ndarray, kind: str, output_type: DALIImageType, adjust_orientation: bool) -> np.ndarray:
    """Any format but JPEG through OpenCV, at the file's bit depth (8 or 16). TIFF's gray is made
    from its colours with JPEG's weights, as DALI's TIFF decoder makes it; the file's own channels
    (ANY_DATA, and YCbCr's source) come unchanged, oriented here (OpenCV leaves them as stored)."""
    own_channels = output_type in (DALIImageType.YCbCr, DALIImageType.ANY_DATA) or \
        (kind == "tiff" and output_type is DALIImageType.GRAY)
    flag = cv2.IMREAD_UNCHANGED if own_channels else \
        cv2.IMREAD_GRAYSCALE if output_type is DALIImageType.GRAY else cv2.IMREAD_COLOR
    if not adjust_orientation:
        flag |= cv2.IMREAD_IGNORE_ORIENTATION
    image = cv2.imdecode(data, flag | cv2.IMREAD_ANYDEPTH if not own_channels else flag)
    if image is None and kind == "gif":  # OpenCV before 4.11 has no GIF decoder
        return _decode_with_pillow(data, output_type)
    if image is None:
        raise DecodeError(f"corrupt or truncated {kind.upper()} data")
    if image.dtype not in (np.uint8, np.uint16):
        raise DecodeError(f"{kind.upper()} data of {image.dtype} samples; the decoders take 8- and 16-bit images")
    if image.ndim == 2:
        image = image[:, :, None]
    # OpenCV orients TIFF always, the others as its flags ask (never with IMREAD_UNCHANGED)
    oriented = kind == "tiff" or (adjust_orientation and not own_channels)
    if oriented != adjust_orientation:
        orientation = image_headers.stored_orientation(data, kind)
        image = image_headers.orient(image, orientation if adjust_orientation else
                                     image_headers.inverse_orientation(orientation))
    if own_channels:
        if image.shape[2] >= 3:  # OpenCV's BGR(A) to RGB(A)
            image = np.concatenate([image[:, :, 2::-1], image[:, :, 3:]], axis=2)
        if output_type is DALIImageType.GRAY:
            return image if image.shape[2] < 3 else _rgb_to_gray(image[:, :, :3])
        return np.ascontiguousarray(image)
    if output_type is DALIImageType.RGB and image.shape[2] == 3:
        return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    return np.ascontiguousarray(image)


# DALI's conversions after the decode (dali/kernels/imgproc/color_manipulation and dali/core/
# convert.h), in float32 as there: values scale by the ranges of their types (uint8 0..255, uint16
# 0..65535, int16 0..32767, float 0..1, ...) and round half away from zero; YCbCr is ITU-R BT.601's
# (Y in 16..235 of 255, biases 16/256 and 128/256 of the type's range: 0.0625 and 0.5 in float).
_F32 = np.float32


def _range(dtype: np.dtype) -> int:
    return 1 if dtype.kind == "f" else int(np.iinfo(dtype).max)


def _bias_scale(dtype: np.dtype) -> float:
    """2 to the power of the type's value bits (256 for uint8, 32768 for int16); 1 for float."""
    return 1.0 if dtype.kind == "f" else 2.0 ** (np.iinfo(dtype).bits - (dtype.kind == "i"))


_GRAY_WEIGHTS = (0.299, 0.587, 0.114)
_YCBCR_WEIGHTS = ((0.25678823529, 0.50412941176, 0.09790588235, 0.0625),
                  (-0.14822289945, -0.29099278682, 0.43921568627, 0.5),
                  (0.43921568627, -0.36778831435, -0.07142737192, 0.5))


def convert(image: np.ndarray, output_type: DALIImageType, dtype: DALIDataType) -> np.ndarray:
    """A decoded image (uint8 or uint16: RGB, gray, or the file's own channels) as ``dtype`` in
    ``output_type``: as DALI converts it."""
    out = np.dtype(dtype.numpy)
    if output_type is DALIImageType.YCbCr:
        return _ycbcr(image, out)
    if image.dtype == out:
        return image
    source = image.astype(_F32)
    if out.kind == "f":
        return source * _F32(1 / _range(image.dtype))
    return _round(source * (_F32(_range(out)) / _F32(_range(image.dtype))), out)


def _round(values: np.ndarray, out: np.dtype) -> np.ndarray:
    """Half away from zero, saturated (DALI's ConvertSat); float stays float."""
    if out.kind == "f":
        return values.astype(out)
    whole = np.floor(values)
    whole += values - whole >= 0.5
    limits = np.iinfo(out)
    return np.clip(whole.astype(np.float64), limits.min, limits.max).astype(out)


def _rgb_to_gray(rgb: np.ndarray) -> np.ndarray:
    source = rgb.astype(_F32)
    gray = sum(_F32(weight) * source[:, :, index] for index, weight in enumerate(_GRAY_WEIGHTS))
    return _round(gray, rgb.dtype)[:, :, None]


def _ycbcr(image: np.ndarray, out: np.dtype) -> np.ndarray:
    """RGB (the first three channels) to YCbCr; a gray image (one channel, or two with alpha) is
    made RGB first, as DALI makes it."""
    rgb = image[:, :, :3] if image.shape[2] >= 3 else np.repeat(image[:, :, :1], 3, axis=2)
    factor = _F32(_range(out) / _range(image.dtype))
    bias = _F32(_bias_scale(out))
    source = rgb.astype(_F32)
    planes = [_F32(r) * factor * source[:, :, 0] + _F32(g) * factor * source[:, :, 1] + _F32(b) * factor * source[:, :, 2]
              + _F32(offset) * bias for r, g, b, offset in _YCBCR_WEIGHTS]
    return np.stack([_round(plane, out) for plane in planes], axis=2)


def _colorspace(output_type: DALIImageType) -> str:
    return {DALIImageType.BGR: "BGR", DALIImageType.GRAY: "GRAY"}.get(output_type, "RGB")


def decode_jpeg_window(data: np.ndarray, output_type: DALIImageType, window: tuple[int, int, int, int],
                       scale: int = 1, adjust_orientation: bool = False, header: JpegHeader | None = None,
                       dtype: DALIDataType = DALIDataType.UINT8) -> np.ndarray:
    """The (top, left, height, width) window of a JPEG, at 1/scale size (scale 1, 2, 4 or 8); with
    ``adjust_orientation``, a window of the image as displayed (EXIF orientation applied).

    With TurboJPEG 3 only the window is decoded; otherwise the whole image is (DCT-scaled) and the
    window cut out of it. The window is clipped to the image.
    """
    header = header or jpeg_header_for_cpu(data)
    orientation = header.orientation if adjust_orientation else 1
    if orientation != 1:
        window = image_headers.stored_window(window, header.height, header.width, orientation)
    if turbojpeg3.available():
        image = _turbojpeg_window(data, _jpeg_colour(output_type, header), window, scale, header)
    else:
        image = decode(data, _jpeg_colour(output_type, header), min_height=-(-header.height // scale) if scale > 1 else 0,
                       min_width=-(-header.width // scale) if scale > 1 else 0, header=header)
        factor_y, factor_x = image.shape[0] / header.height, image.shape[1] / header.width
        top, left, window_height, window_width = window
        top, left = int(top * factor_y), int(left * factor_x)
        image = image[top:top + max(1, int(round(window_height * factor_y))),
                      left:left + max(1, int(round(window_width * factor_x)))]
    image = image if orientation == 1 else np.ascontiguousarray(image_headers.orient(image, orientation))
    return convert(image, output_type, dtype)


def _turbojpeg_window(data, output_type, window, scale, header: JpegHeader) -> np.ndarray:
    try:
        if header.cmyk:
            return cmyk_to(turbojpeg3.decode_window(data, window, scale, "CMYK"), header.adobe, output_type)
        return turbojpeg3.decode_window(data, window, scale, _colorspace(output_type))
    except ValueError as error:
        raise DecodeError(f"corrupt or truncated JPEG data ({error})") from None


def cmyk_to(cmyk: np.ndarray, adobe: bool, output_type: DALIImageType) -> np.ndarray:
    """The stored components of a CMYK (or YCCK, converted by libjpeg) JPEG as RGB, BGR or gray:
    Adobe's marker says the ink values are stored inverted; the conversion is Pillow's
    (R = (255 - K) - C (255 - K) / 255, rounded)."""
    ink = 255 - cmyk.astype(np.uint16) if adobe else cmyk.astype(np.uint16)
    white = 255 - ink[:, :, 3:]
    product = ink[:, :, :3] * white + 128
    rgb = (white - ((product + (product >> 8)) >> 8)).astype(np.uint8)
    if output_type is DALIImageType.GRAY:
        return cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)[:, :, None]
    return np.ascontiguousarray(rgb[:, :, ::-1]) if output_type is DALIImageType.BGR else rgb


def _decode_jpeg(data, output_type, min_height, min_width, header: JpegHeader) -> np.ndarray:
    message = "CMYK"
    if not header.cmyk:  # simplejpeg converts CMYK itself, as if every file had Adobe's marker
        try:
            return simplejpeg.decode_jpeg(data, colorspace=_colorspace(output_type), min_height=min_height,
                                          min_width=min_width)
        except ValueError as error:
            # libjpeg-turbo through simplejpeg takes 8-bit samples only: TurboJPEG 3 decodes the
            # rest (12-bit, lossless), or OpenCV where it is missing
            message = str(error)
            if "Corrupt" in message or "Premature" in message or "truncated" in message.lower():
                raise DecodeError(f"corrupt or truncated JPEG data ({message})") from None
    if turbojpeg3.available():
        scale = 1
        while scale < 8 and -(-header.height // (2 * scale)) >= min_height and \
                -(-header.width // (2 * scale)) >= min_width and (min_height or min_width):
            scale *= 2
        return _turbojpeg_window(data, output_type, (0, 0, header.height, header.width), scale, header)
    flag = (cv2.IMREAD_GRAYSCALE if output_type is DALIImageType.GRAY else cv2.IMREAD_COLOR) | \
        cv2.IMREAD_IGNORE_ORIENTATION
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
