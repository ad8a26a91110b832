"""Sizes that files claim, checked before anything is allocated for them.

Image headers, array headers, record and archive headers, annotation files and frame headers all say
how large the data they describe is. A broken or hostile file claims more than it holds (a 691-byte
frame claiming 60000 x 60000 pixels) and, trusted, makes the reader allocate gigabytes. Every place
where a size read from a file becomes an allocation calls one of the functions below first:

- ``checked_pixels``: decoded images, frames and masks, whose data is compressed, so the file's size
  says nothing; their size is limited by a pixel count (the decoders' ``max_pixels``);
- ``checked_bytes``: raw data stored in the file (arrays, records, archive members, strings), which
  cannot be larger than what the file holds past the header.

Both raise ``SizeClaimError`` (a ValueError) whose message says what claimed how much and why that is
refused; the caller's error names the file.
"""
from __future__ import annotations

from collections.abc import Sequence

# Pillow's Image.MAX_IMAGE_PIXELS: the decoders' default limit, and the limit of every other decoded
# image (frames, masks) that has no max_pixels argument of its own
DEFAULT_MAX_PIXELS = 89_478_485


class SizeClaimError(ValueError):
    """A file claims more data than it holds, or more pixels than the limit: refused before allocating."""


def checked_pixels(what: str, height: int, width: int, max_pixels: int | None = DEFAULT_MAX_PIXELS,
                   limit_name: str = "max_pixels", remedy: str = "give a larger max_pixels, or None, to decode it") -> int:
    """height x width, after checking that ``what`` (e.g. "its header") claims a non-negative size of
    at most ``max_pixels`` pixels (None: any); ``limit_name`` and ``remedy`` word the error."""
    height, width = int(height), int(width)
    if height < 0 or width < 0:
        raise SizeClaimError(f"{what} claims a negative size, {height} x {width}")
    pixels = height * width
    if max_pixels is not None and pixels > max_pixels:
        raise SizeClaimError(f"{what} claims {height} x {width} = {pixels:,} pixels, more than "
                             f"{limit_name}={max_pixels:,}" + (f" ({remedy})" if remedy else ""))
    return pixels


def checked_bytes(what: str, shape: Sequence[int] | int, itemsize: int, available: int) -> int:
    """The byte count of ``shape`` elements of ``itemsize`` bytes, after checking that ``what`` (e.g.
    "its header") claims a non-negative shape whose data fits in the ``available`` bytes that
    follow it in the file."""
    dims = (shape,) if isinstance(shape, int) else tuple(int(extent) for extent in shape)
    if any(extent < 0 for extent in dims):
        raise SizeClaimError(f"{what} claims a negative size, {dims}")
    count = 1
    for extent in dims:
        count *= extent
    size = count * int(itemsize)
    if size > available:
        claim = f"shape {dims} = {size:,} bytes" if not isinstance(shape, int) else f"{size:,} bytes"
        raise SizeClaimError(f"{what} claims {claim}, more than the {max(available, 0):,} bytes the file "
                             "holds there (the file is truncated or its header is wrong)")
    return size
