"""What the CPU workers hand the GPU decode engine for each image (``EncodedImage``: its encoded
bytes and window, or pixels they decoded themselves), as rows of ints in a RowColumn, and where
each image lies in the batch's buffer (``batch_layout``)."""
from __future__ import annotations

import operator

import numpy as np

from penstock.columns import RowColumn, RowPreparation

ALIGN = 256  # bytes between decoded images in the batch buffer

# an EncodedImage's columns in a RowColumn: address, size, then its ring_row()
TOP, LEFT, WINDOW_HEIGHT, WINDOW_WIDTH, IMAGE_HEIGHT, IMAGE_WIDTH, KIND = range(2, 9)
# what its bytes are (the KIND column): a JPEG for nvImageCodec, a JPEG the hardware decoders
# take, or pixels the CPU workers decoded
JPEG, HARDWARE_JPEG, PIXELS = range(3)


class EncodedImage(RowPreparation):
    """EncodedImage((data, window, height, width, hardware[, extent])): what the CPU workers hand
    the GPU decoder for one image. ``data``: its encoded bytes (1-D), or the image already decoded
    on the worker (HWC uint8, window None: a format the GPU decoders do not take, or the workers'
    share of the JPEGs); ``window``: (top, left, height, width) to decode, or None for the whole
    image; ``height``, ``width``: the whole image's size; ``hardware``: a JPEG the hardware decoders
    take; ``extent``: for a JPEG of the workers' share, the (height, width) the GPU's decoders would
    have made of it, which the batch buffer reserves for its pixels, so that the buffer's size does
    not move with which JPEGs the workers took (PyTorch's allocator keeps a block of every size it is
    asked for). A tuple without a __new__ of its own, so that it comes back from a worker process
    without running Python code per image; decoded pixels travel as rows too (kind PIXELS, the
    extent in the window's size), so that the GPU stage copies them without an object per image."""

    __slots__ = ()
    ROW_FIELDS = 7
    data = property(operator.itemgetter(0))

    def ring_row(self) -> tuple:
        if self[0].ndim == 3:
            return (-1, -1, *(self.extent or (-1, -1)), self[2], self[3], PIXELS)
        window = self[1] or (-1, -1, -1, -1)
        return (*window, self[2], self[3], HARDWARE_JPEG if self[4] else JPEG)

    @classmethod
    def from_ring_row(cls, data, row) -> "EncodedImage":
        top, left, height, width, image_height, image_width, kind = row
        if kind == PIXELS:
            pixels = data.reshape(image_height, image_width, -1)
            if height < 0:
                return cls((pixels, None, image_height, image_width, False))
            return cls((pixels, None, image_height, image_width, False, (height, width)))
        return cls((data, None if top < 0 else (top, left, height, width), image_height, image_width,
                    kind == HARDWARE_JPEG))

    window = property(operator.itemgetter(1))
    height = property(operator.itemgetter(2))
    width = property(operator.itemgetter(3))
    hardware = property(operator.itemgetter(4))

    @property
    def extent(self) -> tuple[int, int] | None:
        return self[5] if len(self) > 5 else None


def batch_layout(items: RowColumn, channels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(heights, widths, bytes kept in the batch buffer) of a column of EncodedImages: a window's
    size, or the whole image's; for pixels the workers decoded, their own size, but the room kept
    for the workers' share of the JPEGs is what the GPU's decoders would have made of them (their
    ``extent``), so that the buffer's size does not move with which JPEGs the workers took."""
    rows = items.rows
    windowed = rows[:, TOP] >= 0
    heights = np.where(windowed, rows[:, WINDOW_HEIGHT], rows[:, IMAGE_HEIGHT])
    widths = np.where(windowed, rows[:, WINDOW_WIDTH], rows[:, IMAGE_WIDTH])
    shared = (rows[:, RowColumn.NBYTES] >= 0) & (rows[:, KIND] == PIXELS) & (rows[:, WINDOW_HEIGHT] >= 0)
    extent_bytes = np.where(shared, rows[:, WINDOW_HEIGHT] * rows[:, WINDOW_WIDTH] * channels, 0)
    for index, item in items.others.items():  # decoded on the CPU workers: the image as it is
        heights[index], widths[index] = item.height, item.width
        extent_bytes[index] = item.extent[0] * item.extent[1] * channels if item.extent is not None else 0
    kept = -(-np.maximum(heights * widths * channels, extent_bytes) // ALIGN) * ALIGN
    return heights, widths, kept
