"""Deferred image work on the GPU: consecutive crop, resize, flip, normalize, cast and layout steps
are collected in a plan and run as one pass of the resample kernel when a result is needed.

``ImagePlan`` is what a GPU image operator returns; the next operator extends it when it can
(``with_crop``, ``with_resize``, ...), or calls ``materialize()`` and starts from tensors.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from penstock.kernels import triton_resample
from penstock.batch import DeferredBatch, PackedBatch, hwc_facts
from penstock.kernels.triton_resample import ResamplePlan, run_resample


@dataclass
class ImagePlan(DeferredBatch):
    """Per sample: a source HWC tensor, the window of it that is sampled (top, left, scale_y,
    scale_x), the output size, flips, and a per-channel affine map of the values; for the batch:
    the filter, output dtype and layout."""

    sources: list
    windows: list  # (top, left, scale_y, scale_x): output (y, x) samples source (top + (y+.5)*sy - .5, ...)
    sizes: list  # (height, width)
    flips: list = field(default_factory=list)  # (vertical, horizontal)
    multipliers: list = field(default_factory=list)
    addends: list = field(default_factory=list)
    fills: list = field(default_factory=list)
    filter: int = triton_resample.FILTER_LINEAR
    antialias: bool = True
    resized: bool = False
    dtype: torch.dtype | None = None  # None keeps the sources' dtype
    chw: bool = False
    pad_channels: bool = False
    pending: object = None  # a decode in flight that writes the sources: waited for before they are read

    @classmethod
    def of(cls, sources: list) -> "ImagePlan":
        count = len(sources)
        channels = hwc_facts(sources)[0] if count else 3
        packed = isinstance(sources, PackedBatch)  # kept packed: no view per image
        return cls(sources=sources if packed else list(sources), windows=[(0.0, 0.0, 1.0, 1.0)] * count,
                   sizes=_source_sizes(sources), flips=[(0, 0)] * count,
                   multipliers=[(1.0,) * channels] * count, addends=[(0.0,) * channels] * count,
                   fills=[(0.0,) * channels] * count)

    def __len__(self) -> int:
        return len(self.sources)

    @property
    def channels(self) -> int:
        return hwc_facts(self.sources)[0] if len(self.sources) else 0

    @property
    def identity(self) -> bool:
        return (not self.resized and self.dtype in (None, hwc_facts(self.sources)[1] if len(self.sources) else None)
                and not self.chw and not self.pad_channels
                and all(w == (0.0, 0.0, 1.0, 1.0) for w in self.windows)
                and all(tuple(s) == size for s, size in zip(self.sizes, _source_sizes(self.sources)))
                and all(f == (0, 0) for f in self.flips)
                and all(all(m == 1.0 for m in ms) for ms in self.multipliers)
                and all(all(a == 0.0 for a in ad) for ad in self.addends))

    @property
    def geometry_final(self) -> bool:
        """Steps after which geometry can no longer be folded in (the layout or values changed)."""
        return self.chw or self.pad_channels or any(f != (0, 0) for f in self.flips) or \
            (self.dtype is not None and not self.dtype.is_floating_point and self.dtype != torch.uint8)

    def with_crop(self, windows: list) -> "ImagePlan":
        """Keeps the (top, left, height, width) window of each current output; may reach outside
        (those pixels take the fill values)."""
        new_windows, sizes = [], []
        for (top, left, scale_y, scale_x), (y, x, height, width) in zip(self.windows, windows):
            new_windows.append((top + y * scale_y, left + x * scale_x, scale_y, scale_x))
            sizes.append((int(height), int(width)))
        return replace(self, windows=new_windows, sizes=sizes)

    def with_resize(self, sizes: list, filter_id: int, antialias: bool) -> "ImagePlan":
        new_windows = []
        for (top, left, scale_y, scale_x), (old_h, old_w), (height, width) in zip(self.windows, self.sizes, sizes):
            new_windows.append((top, left, scale_y * old_h / height, scale_x * old_w / width))
        return replace(self, windows=new_windows, sizes=[(int(h), int(w)) for h, w in sizes],
                       filter=filter_id, antialias=antialias, resized=True)

    def with_flips(self, flips: list) -> "ImagePlan":
        return replace(self, flips=[(a ^ c, b ^ d) if c or d else (a, b)
                                    for (a, b), (c, d) in zip(self.flips, flips)])

    def with_affine(self, multipliers: list, addends: list) -> "ImagePlan":
        """Values become value * multiplier + addend (per sample, per channel), after what is planned."""
        channels = self.channels
        combined: dict = {}  # a batch usually has one map for all its samples: each is worked out once
        new_multipliers, new_addends = [], []
        for key in zip(self.multipliers, self.addends, multipliers, addends):
            result = combined.get(key)
            if result is None:
                m0, a0, m1, a1 = key
                m1 = _per_channel(m1, channels)
                a1 = _per_channel(a1, channels)
                result = combined[key] = (tuple(x * y for x, y in zip(m0, m1)),
                                          tuple(a * m + b for a, m, b in zip(a0, m1, a1)))
            new_multipliers.append(result[0])
            new_addends.append(result[1])
        return replace(self, multipliers=new_multipliers, addends=new_addends)

    def with_fills(self, fills: list) -> "ImagePlan":
        if fills and all(fill is fills[0] for fill in fills):  # one argument for the batch: worked out once
            return replace(self, fills=[_per_channel(fills[0], self.channels)] * len(fills))
        return replace(self, fills=[_per_channel(f, self.channels) for f in fills])

    def with_output(self, dtype: torch.dtype | None = None, chw: bool | None = None,
                    pad_channels: bool | None = None) -> "ImagePlan":
        return replace(self, dtype=self.dtype if dtype is None else dtype,
                       chw=self.chw if chw is None else chw,
                       pad_channels=self.pad_channels if pad_channels is None else pad_channels)

    def materialize(self, block: int = 256, per_sample: bool = True):
        """Runs the plan: (per-sample tensors, dense [N, ...] tensor or None); the per-sample
        tensors are a list, or with ``per_sample=False`` the PackedBatch of a ragged result (its
        views made when asked for), or None when the dense tensor is there."""
        if self.pending is not None:
            self.pending.wait()
        if not len(self.sources):
            return [], None
        if self.identity:
            return list(self.sources), None
        plan = ResamplePlan(self.sources, self.windows, self.sizes, self.flips, self.multipliers, self.addends,
                            self.fills, self.filter if self.resized else triton_resample.FILTER_NEAREST,
                            self.antialias and self.resized, self.dtype or hwc_facts(self.sources)[1], self.chw,
                            self.pad_channels)
        packed = run_resample(plan, block=block)
        dense = packed.dense()
        if dense is not None:
            return (list(dense) if per_sample else None), dense
        return (list(packed) if per_sample else packed), None


def _source_sizes(sources) -> list:
    """(height, width) tuples of a batch's HWC sources, without a view per packed image."""
    return sources.sizes if isinstance(sources, PackedBatch) else [tuple(source.shape[:2]) for source in sources]


def _per_channel(values, channels: int) -> tuple:
    values = tuple(float(v) for v in (values if hasattr(values, "__len__") else (values,)))
    if len(values) == 1:
        return values * channels
    if len(values) != channels:
        raise ValueError(f"{len(values)} values for {channels} channels")
    return values
