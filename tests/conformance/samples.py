"""Small ragged batches the cases share: images of several dtypes and layouts, boxes, coordinates."""
from __future__ import annotations

import numpy as np

from conformance.harness import Data

SIZES = ((6, 8), (9, 7), (5, 5))  # (height, width): ragged, one odd, one square


def _values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "f":
        return rng.uniform(0, 255, shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -1000), min(info.max, 1000) + 1, shape, dtype=dtype) \
        if dtype.itemsize > 1 else rng.integers(info.min, info.max + 1, shape, dtype=dtype)


def images(dtype="uint8", layout="HWC", channels=3, sizes=SIZES, frames=2, seed=0) -> Data:
    """A batch of images: layout HWC, CHW, HW, FHWC (``frames`` frames) or DHWC (depth = height)."""
    samples = []
    for index, (height, width) in enumerate(sizes):
        shape = {"HWC": (height, width, channels), "CHW": (channels, height, width), "HW": (height, width),
                 "FHWC": (frames, height, width, channels), "DHWC": (height, height, width, channels),
                 "FCHW": (frames, channels, height, width)}[layout]
        samples.append(_values(shape, dtype, seed + index))
    return Data(samples, layout)


def tensors(shapes, dtype="float32", layout=None, seed=0) -> Data:
    """A batch of random tensors of the given shapes."""
    return Data([_values(shape, dtype, seed + index) for index, shape in enumerate(shapes)], layout)


def constant_images(value, dtype="uint8", shape=(32, 32, 3), count=3) -> Data:
    """Flat images: what random operators add shows in the outputs' statistics."""
    return Data([np.full(shape, value, dtype) for _ in range(count)], "HWC")


def boxes(counts=(3, 1, 2), ltrb=True, seed=0) -> Data:
    """Per sample, ``count`` boxes inside the unit square: [l, t, r, b] or [x, y, w, h], float32."""
    samples = []
    for index, count in enumerate(counts):
        rng = np.random.default_rng(seed + index)
        start = rng.uniform(0.0, 0.5, (count, 2))
        size = rng.uniform(0.1, 0.5, (count, 2))
        samples.append(np.hstack([start, start + size if ltrb else size]).astype(np.float32))
    return Data(samples)


def f32(*values):
    return np.asarray(values, np.float32)
