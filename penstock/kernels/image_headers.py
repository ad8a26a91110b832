"""What an image's header says, read before decoding: its size in pixels, for every format penstock
decodes (image_codecs reads JPEG's own), a few bytes each, so that a file claiming billions of
pixels is refused before any memory is allocated for it; and EXIF orientations, with the windows
and views that apply them.
"""
from __future__ import annotations

import io
import struct

import numpy as np

from penstock import limits

PILLOW_MAX_IMAGE_PIXELS = limits.DEFAULT_MAX_PIXELS  # Pillow's Image.MAX_IMAGE_PIXELS, the decoders' default limit


class HeaderError(ValueError):
    """The header cannot be read."""


def image_size(data: np.ndarray, kind: str) -> tuple[int, int]:
    """(height, width) from the header of an image of format ``kind`` (image_codecs.image_format)."""
    raw = bytes(data[:65536]) if kind != "tiff" else bytes(data)
    try:
        reader = _READERS.get(kind)
        if reader is not None:
            size = reader(raw)
            if size is not None:
                return size
        return _pillow_size(raw if kind != "jpeg2000" else bytes(data))
    except (struct.error, IndexError, ValueError) as error:
        raise HeaderError(f"cannot read the image size from its {kind.upper()} header ({error})") from None


def _png(raw: bytes):
    if raw[12:16] != b"IHDR":
        raise ValueError("no IHDR chunk first")
    width, height = struct.unpack(">II", raw[16:24])
    return height, width


def _gif(raw: bytes):
    width, height = struct.unpack("<HH", raw[6:10])
    return height, width


def _bmp(raw: bytes):
    header_size = struct.unpack("<I", raw[14:18])[0]
    if header_size == 12:  # OS/2 BITMAPCOREHEADER
        width, height = struct.unpack("<HH", raw[18:22])
    else:
        width, height = struct.unpack("<ii", raw[18:26])
    return abs(height), abs(width)


def _pnm(raw: bytes):
    fields, position = [], 2
    while len(fields) < 2:
        while raw[position:position + 1].isspace():
            position += 1
        if raw[position:position + 1] == b"#":
            position = raw.index(b"\n", position) + 1
            continue
        start = position
        while raw[position:position + 1].isdigit():
            position += 1
        if start == position:
            raise ValueError("no width and height")
        fields.append(int(raw[start:position]))
    width, height = fields
    return height, width


def _webp(raw: bytes):
    chunk = raw[12:16]
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", raw[26:30])
        return height & 0x3FFF, width & 0x3FFF
    if chunk == b"VP8L":
        bits = struct.unpack("<I", raw[21:25])[0]
        return ((bits >> 14) & 0x3FFF) + 1, (bits & 0x3FFF) + 1
    if chunk == b"VP8X":
        width = int.from_bytes(raw[24:27], "little") + 1
        height = int.from_bytes(raw[27:30], "little") + 1
        return height, width
    raise ValueError(f"unknown WebP chunk {chunk!r}")


def _tiff(raw: bytes):
    order = "<" if raw[:2] == b"II" else ">"
    offset = struct.unpack(order + "I", raw[4:8])[0]
    count = struct.unpack(order + "H", raw[offset:offset + 2])[0]
    found = {}
    for entry in range(count):
        at = offset + 2 + 12 * entry
        tag, kind = struct.unpack(order + "HH", raw[at:at + 4])
        if tag in (256, 257):  # ImageWidth, ImageLength: SHORT or LONG
            found[tag] = struct.unpack(order + ("H" if kind == 3 else "I"), raw[at + 8:at + (10 if kind == 3 else 12)])[0]
    if len(found) != 2:
        raise ValueError("no width and length tags in the first directory")
    return found[257], found[256]


def _jpeg2000(raw: bytes):
    siz = raw.find(b"\xff\x51")  # the codestream's SIZ marker: Xsiz, Ysiz, XOsiz, YOsiz after 4 bytes
    if siz < 0:
        return None
    width, height, left, top = struct.unpack(">IIII", raw[siz + 6:siz + 22])
    return height - top, width - left


def _pillow_size(raw: bytes) -> tuple[int, int]:
    """The size through Pillow, which reads only the header; its own bomb check is off here (the
    decoders compare the size with their limit and name the file)."""
    from PIL import Image
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(raw)) as image:
                width, height = image.size
        except Image.DecompressionBombError as error:
            raise ValueError(str(error)) from None
        except Exception as error:  # Pillow raises many types for bad headers
            raise ValueError(f"{type(error).__name__}: {error}") from None
    return height, width


def channels(data: np.ndarray) -> int:
    """The channels an image (not JPEG: image_codecs reads its own) stores, from its header through
    Pillow: 1 for gray, 2 for gray with alpha, 3 for colour (and palettes), 4 with alpha."""
    from PIL import Image
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(bytes(data))) as image:
                return 3 if image.mode == "P" else len(image.getbands())
        except Exception as error:  # Pillow raises many types for bad headers
            raise HeaderError(f"cannot read the channels from the header ({type(error).__name__}: {error})") from None


_READERS = {"png": _png, "gif": _gif, "bmp": _bmp, "pnm": _pnm, "webp": _webp, "tiff": _tiff,
            "jpeg2000": _jpeg2000}


def exif_orientation(tiff: bytes) -> int:
    """The orientation tag (1 to 8) of an EXIF block (a TIFF structure), 1 when it has none."""
    try:
        order = "<" if tiff[:2] == b"II" else ">"
        offset = struct.unpack(order + "I", tiff[4:8])[0]
        count = struct.unpack(order + "H", tiff[offset:offset + 2])[0]
        for entry in range(count):
            at = offset + 2 + 12 * entry
            tag, kind = struct.unpack(order + "HH", tiff[at:at + 4])
            if tag == 0x0112 and kind == 3:
                value = struct.unpack(order + "H", tiff[at + 8:at + 10])[0]
                return value if 1 <= value <= 8 else 1
    except (struct.error, IndexError):
        pass
    return 1


def stored_orientation(data: np.ndarray, kind: str) -> int:
    """The EXIF orientation (1 to 8) a PNG (an eXIf chunk before the pixels), WebP (its EXIF chunk)
    or TIFF (its first directory) gives; 1 for other formats and where there is none. These are the
    orientations OpenCV applies when it decodes them (JPEG's: image_codecs.jpeg_header)."""
    raw = memoryview(np.ascontiguousarray(data, np.uint8)).cast("B")
    try:
        if kind == "tiff":
            return exif_orientation(raw)
        block = _png_exif(raw) if kind == "png" else _webp_exif(raw) if kind == "webp" else None
    except struct.error:
        return 1
    return 1 if block is None else exif_orientation(block)


def _png_exif(raw: memoryview):
    position = 8
    while position + 8 <= len(raw):
        length = struct.unpack(">I", raw[position:position + 4])[0]
        chunk = bytes(raw[position + 4:position + 8])
        if chunk == b"eXIf":
            return bytes(raw[position + 8:position + 8 + length])
        if chunk in (b"IDAT", b"IEND"):
            return None
        position += 12 + length
    return None


def _webp_exif(raw: memoryview):
    position = 12
    while position + 8 <= len(raw):
        chunk = bytes(raw[position:position + 4])
        length = struct.unpack("<I", raw[position + 4:position + 8])[0]
        if chunk == b"EXIF":
            block = bytes(raw[position + 8:position + 8 + length])
            return block[6:] if block.startswith(b"Exif\x00\x00") else block
        position += 8 + length + (length & 1)
    return None


def orientation_swaps_axes(orientation: int) -> bool:
    return orientation >= 5


def inverse_orientation(orientation: int) -> int:
    """The orientation that undoes ``orientation``: the rotations by a quarter turn swap, the
    flips and transposes undo themselves."""
    return {6: 8, 8: 6}.get(orientation, orientation)


def stored_window(window: tuple, height: int, width: int, orientation: int) -> tuple:
    """The window of the stored image (``height`` x ``width``, as coded) that becomes ``window``
    (top, left, height, width, in the displayed image's coordinates) once oriented."""
    top, left, window_height, window_width = window
    corners = [_stored_point(y, x, height, width, orientation)
               for y, x in ((top, left), (top + window_height - 1, left + window_width - 1))]
    (y0, x0), (y1, x1) = corners
    return min(y0, y1), min(x0, x1), abs(y1 - y0) + 1, abs(x1 - x0) + 1


def _stored_point(y: int, x: int, height: int, width: int, orientation: int) -> tuple[int, int]:
    """Where the displayed pixel (y, x) is in the stored image (``height`` x ``width``)."""
    return {1: (y, x), 2: (y, width - 1 - x), 3: (height - 1 - y, width - 1 - x), 4: (height - 1 - y, x),
            5: (x, y), 6: (height - 1 - x, y), 7: (height - 1 - x, width - 1 - y),
            8: (x, width - 1 - y)}[orientation]


def orient(image: np.ndarray, orientation: int) -> np.ndarray:
    """The stored image (or a window of it) as displayed: EXIF orientation applied (views, no copy)."""
    if orientation in (5, 6, 7, 8):
        image = image.swapaxes(0, 1)  # then as 4, 2, 3 and 1 (the transposed image's flips)
        orientation = {5: 1, 6: 2, 7: 3, 8: 4}[orientation]
    if orientation == 2:
        return image[:, ::-1]
    if orientation == 3:
        return image[::-1, ::-1]
    if orientation == 4:
        return image[::-1]
    return image
