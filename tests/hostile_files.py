"""Hostile and unusual image files, made here so that every machine that runs the tests has them:
headers claiming billions of pixels in every format, JPEGs libjpeg-turbo decodes but most code
paths do not expect (CMYK, YCCK, 12-bit, arithmetic-coded, restart markers, progressive, EXIF
orientations), truncated and random data behind valid magic numbers, zero-size dimensions and huge
EXIF blocks. Each maker returns the file's bytes (a 1-D uint8 array)."""
from __future__ import annotations

import ctypes
import io
import struct
import zlib

import numpy as np
from PIL import Image

from penstock.kernels import turbojpeg3


def photo(height: int = 48, width: int = 64, seed: int = 0) -> np.ndarray:
    """Smooth RGB content (compresses well, and lossy codecs keep it close)."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, (max(1, height // 8), max(1, width // 8), 3), dtype=np.uint8)
    return np.asarray(Image.fromarray(coarse).resize((width, height), Image.BILINEAR))


def _bytes(buffer: io.BytesIO) -> np.ndarray:
    return np.frombuffer(buffer.getvalue(), np.uint8).copy()


def pillow_encoded(image: np.ndarray, fmt: str, mode: str = "RGB", **options) -> np.ndarray:
    buffer = io.BytesIO()
    Image.fromarray(image).convert(mode).save(buffer, format=fmt, **options)
    return _bytes(buffer)


def with_orientation(image: np.ndarray, orientation: int) -> np.ndarray:
    """A JPEG of ``image`` (as stored) whose EXIF says to show it with ``orientation`` (1 to 8)."""
    picture = Image.fromarray(image)
    exif = picture.getexif()
    exif[0x0112] = orientation
    buffer = io.BytesIO()
    picture.save(buffer, format="JPEG", quality=95, exif=exif.tobytes())
    return _bytes(buffer)


def with_huge_exif(image: np.ndarray) -> np.ndarray:
    """A JPEG whose APP1 segment is 64 KiB of EXIF padding (the largest a segment can be)."""
    encoded = pillow_encoded(image, "JPEG").tobytes()
    payload = b"Exif\x00\x00" + b"II*\x00\x08\x00\x00\x00\x00\x00" + b"\x00" * (65533 - 16)
    segment = b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload
    return np.frombuffer(encoded[:2] + segment + encoded[2:], np.uint8).copy()


# ---- TurboJPEG's compressor, for the JPEG kinds Pillow does not write ----------------------------
_PARAM_QUALITY, _PARAM_SUBSAMP, _PARAM_ARITHMETIC, _PARAM_RESTARTROWS = 3, 4, 14, 19
_PARAM_COLORSPACE = 8
_PF_RGB, _PF_CMYK = 0, 11
_CS_CMYK, _CS_YCCK = 3, 4


def turbojpeg_encoded(image: np.ndarray, arithmetic: bool = False, restart_rows: int = 0,
                      twelve_bit: bool = False, colorspace: int | None = None) -> np.ndarray:
    """A JPEG written by TurboJPEG 3: arithmetic-coded, with restart markers, 12-bit (samples scaled
    by 16), or CMYK/YCCK (``image`` then has 4 channels, C M Y K)."""
    library = turbojpeg3._library
    library.tj3Init.restype = ctypes.c_void_p
    handle = ctypes.c_void_p(library.tj3Init(0))  # TJINIT_COMPRESS
    try:
        for param, value in ((_PARAM_QUALITY, 95), (_PARAM_SUBSAMP, 0), (_PARAM_ARITHMETIC, int(arithmetic)),
                             (_PARAM_RESTARTROWS, restart_rows)):
            library.tj3Set(handle, param, value)
        if colorspace is not None:
            library.tj3Set(handle, _PARAM_COLORSPACE, colorspace)
        height, width, channels = image.shape
        pixel_format = _PF_CMYK if channels == 4 else _PF_RGB
        output, size = ctypes.c_void_p(), ctypes.c_size_t()
        if twelve_bit:
            source = np.ascontiguousarray(image.astype(np.int16) * 16)
            status = library.tj3Compress12(handle, source.ctypes.data_as(ctypes.c_void_p), width, 0, height,
                                           pixel_format, ctypes.byref(output), ctypes.byref(size))
        else:
            source = np.ascontiguousarray(image)
            status = library.tj3Compress8(handle, source.ctypes.data_as(ctypes.c_void_p), width, 0, height,
                                          pixel_format, ctypes.byref(output), ctypes.byref(size))
        if status != 0:
            library.tj3GetErrorStr.restype = ctypes.c_char_p
            raise RuntimeError(library.tj3GetErrorStr(handle).decode())
        encoded = np.frombuffer(ctypes.string_at(output, size.value), np.uint8).copy()
        library.tj3Free(output)
        return encoded
    finally:
        library.tj3Destroy(handle)


# ---- headers that claim far more pixels than the file holds ---------------------------------------
def png_bomb(height: int = 60000, width: int = 60000) -> np.ndarray:
    """A valid PNG header claiming height x width 8-bit RGB pixels, and one small IDAT chunk."""
    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return np.frombuffer(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00" * 4096))
                         + chunk(b"IEND", b""), np.uint8).copy()


def jpeg_bomb(height: int = 60000, width: int = 60000) -> np.ndarray:
    """A small JPEG whose frame header is rewritten to claim height x width pixels."""
    encoded = pillow_encoded(photo(16, 16), "JPEG").copy()
    frame = bytes(encoded).find(b"\xff\xc0")
    encoded[frame + 5:frame + 9] = np.frombuffer(struct.pack(">HH", height, width), np.uint8)
    return encoded


def gif_bomb() -> np.ndarray:
    encoded = pillow_encoded(photo(16, 16), "GIF", mode="P").copy()
    encoded[6:10] = np.frombuffer(struct.pack("<HH", 65535, 65535), np.uint8)
    frame = bytes(encoded).find(b"\x2c")  # image descriptor: its width and height too
    encoded[frame + 5:frame + 9] = np.frombuffer(struct.pack("<HH", 65535, 65535), np.uint8)
    return encoded


def bmp_bomb() -> np.ndarray:
    encoded = pillow_encoded(photo(16, 16), "BMP").copy()
    encoded[18:26] = np.frombuffer(struct.pack("<ii", 50000, 50000), np.uint8)
    return encoded


def tiff_bomb() -> np.ndarray:
    """A TIFF whose first directory claims 100000 x 100000 pixels."""
    encoded = bytearray(pillow_encoded(photo(16, 16), "TIFF").tobytes())
    offset = struct.unpack("<I", encoded[4:8])[0]
    count = struct.unpack("<H", encoded[offset:offset + 2])[0]
    for entry in range(count):
        at = offset + 2 + 12 * entry
        tag, kind = struct.unpack("<HH", encoded[at:at + 4])
        if tag in (256, 257):
            encoded[at + 2:at + 12] = struct.pack("<HII", 4, 1, 100000)
    return np.frombuffer(bytes(encoded), np.uint8).copy()


def pnm_bomb() -> np.ndarray:
    return np.frombuffer(b"P6\n# a comment\n70000 70000\n255\n" + b"\x80" * 300, np.uint8).copy()


def webp_bomb() -> np.ndarray:
    """An extended WebP (VP8X) claiming 16384 x 16384 pixels of canvas."""
    encoded = bytearray(pillow_encoded(photo(16, 16), "WEBP", lossless=True).tobytes())
    vp8x = b"VP8X" + struct.pack("<I", 10) + b"\x00\x00\x00\x00" + (16383).to_bytes(3, "little") * 2
    body = encoded[12:]
    data = b"WEBP" + vp8x + body
    return np.frombuffer(b"RIFF" + struct.pack("<I", len(data)) + data, np.uint8).copy()


def jpeg2000_bomb() -> np.ndarray:
    """A JPEG 2000 codestream whose SIZ marker claims 100000 x 100000 pixels."""
    encoded = pillow_encoded(photo(16, 16), "JPEG2000").copy()
    siz = bytes(encoded).find(b"\xff\x51")
    encoded[siz + 6:siz + 14] = np.frombuffer(struct.pack(">II", 100000, 100000), np.uint8)
    return encoded


BOMBS = {"jpeg": jpeg_bomb, "png": png_bomb, "gif": gif_bomb, "bmp": bmp_bomb, "tiff": tiff_bomb,
         "pnm": pnm_bomb, "webp": webp_bomb, "jpeg2000": jpeg2000_bomb}


def truncations(encoded: np.ndarray, count: int = 12) -> list[np.ndarray]:
    """The file cut at ``count`` offsets spread over its length (each keeps at least 3 bytes)."""
    offsets = np.unique(np.linspace(3, len(encoded) - 1, count).astype(int))
    return [encoded[:offset].copy() for offset in offsets]


def random_behind_magic(magic: bytes, size: int = 400, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.frombuffer(magic + rng.integers(0, 256, size, dtype=np.uint8).tobytes(), np.uint8).copy()


MAGICS = {"jpeg": b"\xff\xd8\xff", "png": b"\x89PNG\r\n\x1a\n", "gif": b"GIF89a", "bmp": b"BM",
          "tiff": b"II*\x00", "webp": b"RIFF\x00\x01\x00\x00WEBP", "pnm": b"P6\n", "jpeg2000": b"\xff\x4f\xff\x51"}


def zero_size_png() -> np.ndarray:
    return png_bomb(0, 16)


# ---- array, record and archive files whose headers claim what the file does not hold ------------------
def npy_file(header: str | dict, data: bytes = b"", version: tuple[int, int] = (1, 0),
             magic: bytes = b"\x93NUMPY") -> bytes:
    """A .npy file of ``header`` (a dict, written as np.save writes it, or any text) and ``data``."""
    text = repr(header) if isinstance(header, dict) else header
    prefix_size = 10 if version[0] == 1 else 12
    text += " " * (-(prefix_size + len(text) + 1) % 64) + "\n"
    size = len(text).to_bytes(2 if version[0] == 1 else 4, "little")
    return magic + bytes(version) + size + text.encode("latin1") + data


def npy_claiming(shape: tuple, descr: str = "<f4", held: int = 64) -> bytes:
    """A .npy file whose header claims ``shape`` and which holds ``held`` bytes of data."""
    return npy_file({"descr": descr, "fortran_order": False, "shape": shape}, bytes(held))


def varint(value: int) -> bytes:
    out = b""
    while True:
        byte, value = value & 0x7F, value >> 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def tfrecord_record(payload: bytes, length: int | None = None) -> bytes:
    """A TFRecord record framing ``payload`` (length, its CRC, data, its CRC; the CRCs are not checked),
    its length prefix saying ``length`` when given."""
    return (len(payload) if length is None else length).to_bytes(8, "little") + bytes(4) + payload + bytes(4)


def example_field_claiming(size: int) -> bytes:
    """A tf.train.Example whose first field (features, length-delimited) claims ``size`` bytes and holds 6."""
    return b"\x0a" + varint(size) + b"\x0a\x04\x0a\x02ab"


RECORDIO_MAGIC = 0xCED7230A


def recordio_part(payload: bytes, flag: int = 0, length: int | None = None, magic: int = RECORDIO_MAGIC) -> bytes:
    """One RecordIO part (magic, flag << 29 | length, payload, padding to 4 bytes), its length field
    saying ``length`` when given."""
    word = flag << 29 | (len(payload) if length is None else length)
    return struct.pack("<II", magic, word) + payload + bytes(-len(payload) % 4)


def image_record_payload(image: bytes, label_count: int = 0, labels: bytes = b"") -> bytes:
    """An ImageRecordIO payload: header (flag = label count, label, id, id2), labels, image."""
    return struct.pack("<IfQQ", label_count, 1.0, 0, 0) + labels + image


def tar_header(name: str, size: int, kind: bytes = b"0", checksum: bool = True) -> bytes:
    """A POSIX ustar member header for ``name`` claiming ``size`` bytes of data (any size: the file
    need not hold them), with a valid checksum unless ``checksum`` is False."""
    block = bytearray(512)
    block[:len(name)] = name.encode()
    block[100:108] = b"0000644\x00"
    block[108:116] = block[116:124] = b"0000000\x00"
    block[124:136] = b"%011o\x00" % size if size < 8 ** 11 else b"\x80" + size.to_bytes(11, "big")
    block[136:148] = b"00000000000\x00"
    block[156:157] = kind
    block[257:265] = b"ustar\x0000"
    block[148:156] = b" " * 8
    total = sum(block) if checksum else sum(block) + 1
    block[148:156] = b"%06o\x00 " % total
    return bytes(block)


def tar_member(name: str, data: bytes, kind: bytes = b"0") -> bytes:
    return tar_header(name, len(data), kind) + data + bytes(-len(data) % 512)


def tar_archive(members: list[tuple[str, bytes]]) -> bytes:
    """An uncompressed tar archive of (name, data) members, ended by tar's two zero blocks."""
    return b"".join(tar_member(name, data) for name, data in members) + bytes(1024)
