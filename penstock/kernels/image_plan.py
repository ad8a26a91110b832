"""Deferred image work on the GPU: consecutive geometry steps (crop, resize, flip, rotate, affine
and perspective warps) compose into one per-sample sampling map, consecutive colour steps
(brightness, contrast, saturation, hue, colour twists, normalization) into one per-sample colour
matrix and offset, and both run with the cast and the layout as one pass of the resample kernel
when a result is needed.

``ImagePlan`` is what a GPU image operator returns; the next operator extends it when it can
(``with_crop``, ``with_resize``, ``with_warp``, ``with_color``, ...), or calls ``materialize()``
and starts from tensors. Every per-sample quantity is a numpy array with one row per sample, so
that extending a plan of a whole batch costs a few vectorized operations, not a loop.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from penstock.kernels import triton_resample
from penstock.batch import DeferredBatch, PackedBatch, hwc_facts, one_value
from penstock.kernels.triton_resample import (BORDER_CLAMP, BORDER_CONSTANT, BORDER_FILL_OUTSIDE, BORDER_REFLECT,
                                              BORDER_REFLECT_101, BORDER_WRAP, ResamplePlan, run_resample)


@dataclass
class ImagePlan(DeferredBatch):
    """Per sample: a source HWC tensor, the map from output pixel edges to source ones, the output
    size, the colour matrix and offset and the fill; for the batch: the filter, the border rule,
    the output dtype and layout."""

    sources: list
    maps: np.ndarray  # [N, 3, 3]: (x + 0.5, y + 0.5, 1) of an output pixel -> source coordinates
    sizes: list  # (height, width)
    color_matrices: np.ndarray = None  # [N, K, C]: values become matrix @ value + offset
    color_offsets: np.ndarray = None  # [N, K]
    fills: np.ndarray = None  # [N, K]: outputs whose centre falls outside the source (crops with padding)
    borders: np.ndarray | None = None  # [N, C]: what samples outside the source read (warps with a fill)
    border: int = BORDER_FILL_OUTSIDE
    bounds: np.ndarray | None = None  # [N, 4] (top, left, height, width) of each source that warps see
    tables: torch.Tensor | None = None  # uint8 [N, C, 256]: each source value is looked up first
    filter: int = triton_resample.FILTER_LINEAR
    antialias: bool = False
    resized: bool = False  # a filtered step (resize, warp) is planned; else pixels are copied (nearest)
    dtype: torch.dtype | None = None  # None keeps the sources' dtype
    chw: bool = False
    pad_channels: bool = False
    pending: object = None  # a decode in flight that writes the sources: waited for before they are read
    # (device, arrays) -> tensors there: how the kernel's tables reach the sources' device
    # (runtime.pinned.to_device: from pinned memory, without waiting for the work queued there)
    upload: object = None
    source_sizes: list = None  # (height, width) of each source, read once (a plan's steps keep its sources)

    @classmethod
    def of(cls, sources: list, *, upload) -> "ImagePlan":
        count = len(sources)
        channels = hwc_facts(sources)[0] if count else 3
        packed = isinstance(sources, PackedBatch)  # kept packed: no view per image
        source_sizes = _source_sizes(sources)
        return cls(sources=sources if packed else list(sources), maps=np.tile(np.eye(3), (count, 1, 1)),
                   sizes=list(source_sizes), color_matrices=np.tile(np.eye(channels), (count, 1, 1)),
                   color_offsets=np.zeros((count, channels)), fills=np.zeros((count, channels)),
                   source_sizes=source_sizes, upload=upload)

    def __len__(self) -> int:
        return len(self.sources)

    def _sizes_of_sources(self) -> list:
        return self.source_sizes if self.source_sizes is not None else _source_sizes(self.sources)

    @property
    def channels(self) -> int:
        """Channels of the values after the planned colour steps."""
        return self.color_matrices.shape[1] if self.color_matrices is not None else 0

    @property
    def source_channels(self) -> int:
        return hwc_facts(self.sources)[0] if len(self.sources) else 0

    @property
    def color_identity(self) -> bool:
        channels = self.source_channels
        return self.channels == channels and np.array_equal(self.color_matrices, np.broadcast_to(
            np.eye(channels), self.color_matrices.shape)) and not np.any(self.color_offsets)

    @property
    def identity(self) -> bool:
        return (self.tables is None and not self.resized and self.dtype in (None, hwc_facts(self.sources)[1] if len(self.sources) else None)
                and not self.chw and not self.pad_channels and self.color_identity
                and np.array_equal(self.maps, np.broadcast_to(np.eye(3), self.maps.shape))
                and all(tuple(s) == tuple(size) for s, size in zip(self.sizes, self._sizes_of_sources())))

    def with_tables(self, tables: torch.Tensor) -> "ImagePlan":
        """Each source value v of channel c of sample i becomes tables[i, c, v] (uint8 [N, C, 256] on
        the sources' device) before anything planned; a plan that already transformed its values or
        geometry, or has tables, runs first."""
        plan = self
        if self.tables is not None or not self.color_identity or self.resized or self.dtype not in (None, torch.uint8) \
                or not np.array_equal(self.maps, np.broadcast_to(np.eye(3), self.maps.shape)):
            plan = ImagePlan.of(self.materialize()[0], upload=self.upload)
        return replace(plan, tables=tables)

    @property
    def geometry_final(self) -> bool:
        """Steps after which geometry can no longer be folded in (the layout or values changed)."""
        return self.chw or self.pad_channels or \
            (self.dtype is not None and not self.dtype.is_floating_point and self.dtype != torch.uint8)

    # ---- geometry: each step maps its output pixels into the current output's ----------------
    def _then_map(self, step: np.ndarray, sizes: list) -> "ImagePlan":
        """The plan whose output pixel edges map through ``step`` ([N, 3, 3], new output -> current
        output) and then through the current map."""
        if sizes is not self.sizes:
            same = one_value(sizes)
            sizes = [(int(same[0]), int(same[1]))] * len(sizes) if same is not None else \
                [(int(h), int(w)) for h, w in sizes]
        return replace(self, maps=self.maps @ step, sizes=sizes)

    def size_array(self) -> np.ndarray:
        """The output sizes as float64 [N, 2] (height, width)."""
        return _float_pairs(self.sizes)

    def with_crop(self, windows: list) -> "ImagePlan":
        """Keeps the (top, left, height, width) window of each current output; may reach outside
        (those pixels take the fill values)."""
        if not len(windows):
            return self
        window = _float_pairs(windows, 4)
        if self.border != BORDER_FILL_OUTSIDE and (np.any(window[:, :2] < 0) or
                                                   np.any(window[:, :2] + window[:, 2:] > self.size_array())):
            # the fill outside is read from the current output as it is, not through another border rule
            return ImagePlan.of(self.materialize()[0], upload=self.upload).with_crop(windows)
        step = np.tile(np.eye(3), (len(window), 1, 1))
        step[:, 0, 2] = window[:, 1]
        step[:, 1, 2] = window[:, 0]
        return self._then_map(step, window[:, 2:].astype(int).tolist())

    def with_resize(self, sizes: list, filter_id: int, antialias: bool) -> "ImagePlan":
        if not len(sizes):
            return self
        new = _float_pairs(sizes)
        old = self.size_array()
        step = np.zeros((len(new), 3, 3))
        step[:, 0, 0] = old[:, 1] / new[:, 1]
        step[:, 1, 1] = old[:, 0] / new[:, 0]
        step[:, 2, 2] = 1.0
        plan = self._then_map(step, sizes)
        return replace(plan, filter=filter_id, antialias=antialias or self.antialias, resized=True)

    def with_resize_windows(self, sizes: list, starts: np.ndarray, ends: np.ndarray, filter_id: int,
                            antialias: bool) -> "ImagePlan":
        """Resamples each current output's window from ``starts`` to ``ends`` ([N, 2] (y, x), in the
        current output's coordinates; an end before its start flips that axis) into ``sizes``: a
        resize whose region of interest, sub-pixel scale or negative size moves its window."""
        if not len(sizes):
            return self
        new = _float_pairs(sizes)
        starts, ends = np.asarray(starts, np.float64), np.asarray(ends, np.float64)
        plan = self
        if np.any(np.minimum(starts, ends) < 0) or np.any(np.maximum(starts, ends) > self.size_array()):
            # a window reaching outside reads the edge pixels there (the CPU resampling's rule)
            plan = self.bounds_for_border(BORDER_CLAMP, None) or \
                ImagePlan.of(self.materialize()[0], upload=self.upload).bounds_for_border(BORDER_CLAMP, None)
            plan = replace(plan, border=BORDER_CLAMP)
        step = np.zeros((len(new), 3, 3))
        step[:, 0, 0] = (ends[:, 1] - starts[:, 1]) / new[:, 1]
        step[:, 1, 1] = (ends[:, 0] - starts[:, 0]) / new[:, 0]
        step[:, 0, 2] = starts[:, 1]
        step[:, 1, 2] = starts[:, 0]
        step[:, 2, 2] = 1.0
        plan = plan._then_map(step, sizes)
        return replace(plan, filter=filter_id, antialias=antialias or plan.antialias, resized=True)

    def with_flips(self, flips: list) -> "ImagePlan":
        """Mirrors each current output: flips are (vertical, horizontal) per sample."""
        flip = np.asarray(flips, bool).reshape(-1, 2)
        if not flip.any():
            return self
        size = self.size_array()
        step = np.tile(np.eye(3), (len(flip), 1, 1))
        step[:, 1, 1] = np.where(flip[:, 0], -1.0, 1.0)
        step[:, 1, 2] = np.where(flip[:, 0], size[:, 0], 0.0)
        step[:, 0, 0] = np.where(flip[:, 1], -1.0, 1.0)
        step[:, 0, 2] = np.where(flip[:, 1], size[:, 1], 0.0)
        return self._then_map(step, self.sizes)

    def with_warp(self, maps: np.ndarray, sizes: list, filter_id: int, border: int,
                  border_values: np.ndarray | None = None, antialias: bool = False) -> "ImagePlan":
        """Samples each current output through ``maps`` ([N, 3, 3]: the new output's pixel edges
        (x + 0.5, y + 0.5, 1) -> the current output's) into outputs of ``sizes``; outside the
        current output a constant (``BORDER_CONSTANT`` with ``border_values`` [N, C] in the current
        output's values), the edge pixels (``BORDER_CLAMP``), or the reflected or wrapped image. Plans this cannot extend
        exactly run first (see bounds_for_border); a crop before it bounds the source it reads."""
        plan = self.bounds_for_border(border, border_values)
        if plan is None:
            plan = ImagePlan.of(self.materialize()[0], upload=self.upload)
        plan = plan._then_map(np.asarray(maps, np.float64), sizes)
        if border_values is not None:
            plan = replace(plan, borders=np.asarray(border_values, np.float64))
        return replace(plan, border=border, resized=True, antialias=antialias or plan.antialias,
                       filter=max(filter_id, plan.filter) if plan.resized else filter_id)

    def bounds_for_border(self, border: int, border_values):
        """The plan with the bounds a step whose outside reads ``border`` needs, or None when the
        step cannot fold in exactly: the values are transformed already (a constant border is read
        before the colour steps), or the current output is not a whole-pixel rectangle of the
        source (rotated, or cut at fractions of a pixel), or the plan reads another border."""
        if self.geometry_final or not self.color_identity:
            return None
        if self.border == border and (border != BORDER_CONSTANT or np.array_equal(self.borders, border_values)):
            return self
        if self.border != BORDER_FILL_OUTSIDE:
            return None
        rectangle = self._output_rectangle()
        return None if rectangle is None else replace(self, bounds=rectangle)

    def _output_rectangle(self) -> np.ndarray | None:
        """[N, 4] (top, left, height, width): the source pixels the current output covers, when it
        is a whole-pixel rectangle inside the source (a crop, resized or mirrored); else None."""
        if not len(self.sizes):
            return np.zeros((0, 4), np.int64)
        maps = self.maps
        if np.any(maps[:, 2] != (0.0, 0.0, 1.0)) or np.any(maps[:, 0, 1]) or np.any(maps[:, 1, 0]):
            return None
        size = self.size_array()
        starts = maps[:, :2, 2]  # where output edge 0 lands, (x, y)
        ends = starts + maps[:, [0, 1], [0, 1]] * size[:, ::-1]  # where the far edge lands
        low, high = np.minimum(starts, ends), np.maximum(starts, ends)
        whole_low, whole_high = np.rint(low), np.rint(high)
        source = np.asarray(self._sizes_of_sources(), np.float64)[:, ::-1]  # (w, h)
        if not (np.allclose(low, whole_low, atol=1e-6) and np.allclose(high, whole_high, atol=1e-6)) or \
                np.any(whole_low < 0) or np.any(whole_high > source) or np.any(whole_high <= whole_low):
            return None
        extent = whole_high - whole_low
        return np.stack([whole_low[:, 1], whole_low[:, 0], extent[:, 1], extent[:, 0]], axis=1).astype(np.int64)

    # ---- values --------------------------------------------------------------------------------
    def with_color(self, matrices: np.ndarray, offsets: np.ndarray) -> "ImagePlan":
        """Values become matrix @ value + offset after what is planned (``matrices`` [N, K', K],
        ``offsets`` [N, K'], K the current channels)."""
        matrices = np.asarray(matrices, np.float64)
        offsets = np.asarray(offsets, np.float64)
        if matrices.shape[2] != self.channels:
            raise ValueError(f"a colour transform of {matrices.shape[2]} channels for {self.channels}-channel images")
        color = matrices @ self.color_matrices
        offset = (matrices @ self.color_offsets[:, :, None])[:, :, 0] + offsets
        fills = self.fills if matrices.shape[1] == self.fills.shape[1] else np.zeros(offsets.shape)
        return replace(self, color_matrices=color, color_offsets=offset, fills=fills)

    def with_affine(self, multipliers: list, addends: list) -> "ImagePlan":
        """Values become value * multiplier + addend (per sample, per channel), after what is planned."""
        channels = self.channels
        if multipliers and all(m is multipliers[0] for m in multipliers) and all(a is addends[0] for a in addends):
            scale = np.broadcast_to(_per_channel(multipliers[0], channels), (len(multipliers), channels))
            shift = np.broadcast_to(_per_channel(addends[0], channels), (len(addends), channels))
        else:
            scale = np.array([_per_channel(m, channels) for m in multipliers]).reshape(-1, channels)
            shift = np.array([_per_channel(a, channels) for a in addends]).reshape(-1, channels)
        return replace(self, color_matrices=self.color_matrices * scale[:, :, None],
                       color_offsets=self.color_offsets * scale + shift)

    def with_fills(self, fills: list) -> "ImagePlan":
        if fills and all(fill is fills[0] for fill in fills):  # one argument for the batch: worked out once
            values = np.tile(_per_channel(fills[0], self.channels), (len(fills), 1))
        else:
            values = np.array([_per_channel(f, self.channels) for f in fills]).reshape(-1, self.channels)
        return replace(self, fills=values)

    def with_output(self, dtype: torch.dtype | None = None, chw: bool | None = None,
                    pad_channels: bool | None = None) -> "ImagePlan":
        return replace(self, dtype=self.dtype if dtype is None else dtype,
                       chw=self.chw if chw is None else chw,
                       pad_channels=self.pad_channels if pad_channels is None else pad_channels)

    def stretches(self) -> np.ndarray:
        """[N, 2]: how much the filter widens along (y, x) of the source (antialias when shrinking):
        the length of the source step per output pixel, at the output's centre."""
        if not self.antialias or not self.resized:
            return np.ones((len(self.sources), 2))
        maps = self.maps
        size = self.size_array()
        depth = maps[:, 2, 0] * size[:, 1] / 2 + maps[:, 2, 1] * size[:, 0] / 2 + maps[:, 2, 2]
        step_x = np.hypot(maps[:, 0, 0], maps[:, 0, 1]) / np.abs(depth)
        step_y = np.hypot(maps[:, 1, 0], maps[:, 1, 1]) / np.abs(depth)
        return np.maximum(np.stack([step_y, step_x], axis=1), 1.0)

    def materialize(self, block: int = 256, per_sample: bool = True):
        """Runs the plan: (per-sample tensors, dense [N, ...] tensor or None); the per-sample
        tensors are a list, or with ``per_sample=False`` the PackedBatch of a ragged result (its
        views made when asked for), or None when the dense tensor is there."""
        if self.pending is not None:
            self.pending.wait()
        if not len(self.sources):
            return [], None
        if self.identity:
            if per_sample or not isinstance(self.sources, PackedBatch):
                return list(self.sources), None
            return self.sources, self.sources.dense()
        packed = run_resample(self._resample_plan(), block=block, upload=self.upload)
        dense = packed.dense()
        if dense is not None:
            return (list(dense) if per_sample else None), dense
        return (list(packed) if per_sample else packed), None

    def output_shapes(self) -> list:
        """Each sample's output shape, HWC or CHW as planned."""
        channels = self.channels + (1 if self.pad_channels else 0)
        return [(channels, h, w) if self.chw else (h, w, channels) for h, w in self.sizes]

    def materialize_on_canvas(self, canvas_sizes: list, fills: np.ndarray) -> PackedBatch:
        """Runs the plan with each output at the top left of a canvas of ``canvas_sizes[i]``
        (height, width; at least the output's), the rest of it ``fills[i]`` (one value per output
        channel): ``pad`` of the plan's outputs in the same pass, the padded batch in one buffer."""
        if self.pending is not None:
            self.pending.wait()
        if not len(self.sources):
            return PackedBatch(torch.empty(0), [], [])
        plan = replace(self._resample_plan(), canvas_sizes=[(int(h), int(w)) for h, w in canvas_sizes],
                       canvas_fills=np.asarray(fills, np.float64))
        return run_resample(plan, upload=self.upload)

    def _resample_plan(self) -> ResamplePlan:
        borders = self.borders if self.borders is not None else np.zeros((len(self.sources), self.source_channels))
        return ResamplePlan(self.sources, self.maps, self.sizes, self.stretches(), self.color_matrices,
                            self.color_offsets, self.fills, borders,
                            self.filter if self.resized else triton_resample.FILTER_NEAREST, self.border,
                            self.bounds, self.tables, self.dtype or hwc_facts(self.sources)[1], self.chw,
                            self.pad_channels)


def _source_sizes(sources) -> list:
    """(height, width) tuples of a batch's HWC sources, without a view per packed image."""
    return sources.sizes if isinstance(sources, PackedBatch) else [tuple(source.shape[:2]) for source in sources]


def _float_pairs(values: list, width: int = 2) -> np.ndarray:
    """float64 [N, width] of a list of N tuples (sizes, windows): one row broadcast when they are all
    the same, which skips converting hundreds of tuples."""
    same = one_value(values)
    if same is not None:
        return np.broadcast_to(np.asarray(same, np.float64).reshape(1, -1), (len(values), len(same)))
    return np.asarray(values, np.float64).reshape(len(values), width)


def _per_channel(values, channels: int) -> tuple:
    values = tuple(float(v) for v in (values if hasattr(values, "__len__") else (values,)))
    if len(values) == 1:
        return values * channels
    if len(values) != channels:
        raise ValueError(f"{len(values)} values for {channels} channels")
    return values


__all__ = ["BORDER_CLAMP", "BORDER_CONSTANT", "BORDER_FILL_OUTSIDE", "BORDER_REFLECT", "BORDER_REFLECT_101",
           "BORDER_WRAP", "ImagePlan"]
