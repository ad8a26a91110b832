"""HWC images of one batch in one flat buffer, as a batch decode writes them."""
from __future__ import annotations

import numpy as np


class PackedImages:
    """Reads as a sequence of HWC tensors (each a view made when asked for), and tells where its
    images are without making the views: a batch has hundreds, and each view costs microseconds
    of the thread that launches the GPU work."""

    def __init__(self, buffer, offsets: list, shapes: list):
        self.buffer = buffer  # flat tensor; offsets in its elements; each image's rows contiguous
        self.offsets = offsets
        self.shapes = shapes  # (height, width, channels) per image

    def __len__(self) -> int:
        return len(self.shapes)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        offset, (height, width, channels) = self.offsets[index], self.shapes[index]
        return self.buffer[offset:offset + height * width * channels].view(height, width, channels)

    def __iter__(self):
        return (self[index] for index in range(len(self)))

    def facts(self) -> tuple:
        """(channels, dtype, device) of every image, without making a view."""
        return (self.shapes[0][2] if self.shapes else 0), self.buffer.dtype, self.buffer.device

    @property
    def sizes(self) -> list:
        return [(height, width) for height, width, _ in self.shapes]

    def layouts(self) -> np.ndarray:
        """Per image: (address, height, width, row stride in elements)."""
        table = np.empty((len(self.shapes), 4), np.int64)
        if len(self.shapes):
            table[:, 1:3] = [shape[:2] for shape in self.shapes]
            table[:, 3] = table[:, 2] * self.shapes[0][2]
            table[:, 0] = np.asarray(self.offsets, np.int64) * self.buffer.element_size() + self.buffer.data_ptr()
        return table


def source_facts(sources) -> tuple:
    """(channels, dtype, device) of a batch's HWC sources, a PackedImages or a list of tensors
    (read from the first: the kernels take one of each per batch)."""
    if isinstance(sources, PackedImages):
        return sources.facts()
    first = sources[0]
    return first.shape[2], first.dtype, first.device
