"""Regions of HWC images: ``erase`` (rectangles set to a fill), ``grid_mask`` (a rotated grid of
dark squares), ``paste`` (each image on a larger canvas) and ``multi_paste`` (windows of the
batch's images pasted into each output), as DALI's.

The rules that turn arguments into pixel rectangles and grids are plain functions used by both
devices. erase and grid_mask run on the GPU as one Triton launch per batch
(penstock.kernels.triton_masks); paste and multi_paste copy windows with torch.
"""
from __future__ import annotations

import math

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.contract import BatchOperator, SampleOperator, WholeBatchOperator
from penstock.operators.geometry import check_hwc, declare_hwc
from penstock.operators.gpu_plan import tensors_of
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema

FILL_VALUE = Arg("fill_value", "floats", (0.0,), "The fill: one value, or one per channel.")
SPATIAL_AXES = "HW"

registry.register_schema(OpSchema(
    name="erase", class_name="Erase",
    doc="Sets rectangular regions of HWC images to ``fill_value``. ``anchor`` and ``shape`` hold one value per "
        "axis of ``axis_names`` for each region, regions one after another ((y0, x0, y1, x1) are two regions "
        "with 'HW'); an axis not named is covered whole. Regions are rounded to whole pixels (halves up) and "
        "cut to the image.",
    args=(Arg("anchor", "floats", (), "Where each region starts (or its centre, with centered_anchor); default 0.",
              per_sample=True),
          Arg("shape", "floats", REQUIRED, "The extent of each region.", per_sample=True, min=0.0),
          Arg("axis_names", "str", "HW", "The axes anchor and shape refer to: 'HW', 'WH', 'H' or 'W'."),
          Arg("axes", "ints", None, "The same axes as indices (0: H, 1: W), instead of axis_names.", min=0, max=1),
          Arg("normalized_anchor", "bool", False, "anchor is a fraction of the image's extent."),
          Arg("normalized_shape", "bool", False, "shape is a fraction of the image's extent."),
          Arg("normalized", "bool", False, "Both anchor and shape are fractions of the image's extent."),
          Arg("centered_anchor", "bool", False, "anchor is the centre of each region, not its start."),
          FILL_VALUE),
    checks=(lambda static, per_sample: _check_erase_static(static, per_sample),),
    input_names=("images",)))

registry.register_schema(OpSchema(
    name="grid_mask", class_name="GridMask",
    doc="GridMask: zeroes a grid of squares in HWC images, as DALI. Pixel (x, y) maps to grid coordinates "
        "u = (x cos a - y sin a - shift_x) / tile, v = (x sin a + y cos a - shift_y) / tile; it is zeroed where "
        "the fractional parts of u and v are both below ``ratio``.",
    args=(Arg("tile", "int", 100, "The length of the grid's period, in pixels.", per_sample=True, min=1),
          Arg("ratio", "float", 0.5, "The side of a dark square, as a fraction of tile.", per_sample=True,
              min=0.0, max=1.0),
          Arg("angle", "float", 0.0, "The grid's rotation, in radians.", per_sample=True),
          Arg("shift_x", "float", 0.0, "The grid's shift along x, in pixels.", per_sample=True),
          Arg("shift_y", "float", 0.0, "The grid's shift along y, in pixels.", per_sample=True)),
    input_names=("images",)))

registry.register_schema(OpSchema(
    name="paste", class_name="Paste",
    doc="Places each HWC image on a larger canvas filled with ``fill_value``: the canvas is int(ratio * "
        "height) x int(ratio * width), at least min_canvas_size on each side; the image's top-left corner "
        "goes to (int(paste_y * (canvas height - height)), int(paste_x * (canvas width - width))).",
    args=(Arg("ratio", "float", REQUIRED, "The canvas's size over the image's (at least 1).", per_sample=True,
              min=1.0),
          Arg("paste_x", "float", 0.5, "Horizontal place of the image: 0 left, 1 right.", per_sample=True,
              min=0.0, max=1.0),
          Arg("paste_y", "float", 0.5, "Vertical place of the image: 0 top, 1 bottom.", per_sample=True,
              min=0.0, max=1.0),
          Arg("min_canvas_size", "float", 0.0, "The least height and width of the canvas.", per_sample=True,
              min=0.0),
          Arg("n_channels", "int", 3, "Accepted for DALI compatibility: the images' own channels are kept.",
              min=1),
          FILL_VALUE),
    input_names=("images",)))

registry.register_schema(OpSchema(
    name="multi_paste", class_name="MultiPaste",
    doc="Output i is a canvas (zeros) of ``output_size`` (default: input i's size) onto which windows of the "
        "batch's images are pasted in order, later ones on top: paste k takes input in_ids[k]'s window at "
        "in_anchors[k] (y, x; default 0) of shapes[k] (height, width; default the rest of that image) and puts "
        "it at out_anchors[k] (default 0). Give the arguments per sample for a different recipe per output.",
    args=(Arg("in_ids", "ints", REQUIRED, "The batch positions of the images to paste from.", per_sample=True,
              min=0),
          Arg("in_anchors", "any", None, "Per paste, (y, x) of the window in its source.", per_sample=True),
          Arg("shapes", "any", None, "Per paste, (height, width) of the window.", per_sample=True),
          Arg("out_anchors", "any", None, "Per paste, (y, x) where the window goes in the output.", per_sample=True),
          Arg("output_size", "ints", None, "(height, width) of the output.", per_sample=True, length=(2,), min=1)),
    checks=(lambda static, per_sample: _check_paste_lists(static, per_sample),),
    input_names=("images",)))


# ---- erase: the regions, shared by both devices --------------------------------------------------
def _erase_axes(args: dict) -> list[int]:
    if args["axes"] is not None:
        axes = list(args["axes"])
    else:
        names = args["axis_names"]
        unknown = [name for name in names if name not in SPATIAL_AXES]
        if unknown or not names:
            raise ArgError(f"argument 'axis_names': expected axes of 'HW' (such as 'HW', 'W'), got {names!r}")
        axes = [SPATIAL_AXES.index(name) for name in names]
    if len(set(axes)) != len(axes):
        raise ArgError(f"the erased axes repeat: {axes}")
    return axes


def _check_erase_lengths(anchor, shape, count: int) -> None:
    if not shape or len(shape) % count:
        raise ArgError(f"argument 'shape': expected a multiple of {count} values (one per erased axis and region), "
                       f"got {len(shape)}")
    if anchor and len(anchor) != len(shape):
        raise ArgError(f"argument 'anchor': {len(anchor)} values for {len(shape)} values of 'shape'; give one per "
                       "value of shape")


def _check_erase_static(static: dict, per_sample: frozenset) -> None:
    axes = _erase_axes(static)
    if not per_sample & {"anchor", "shape"}:
        _check_erase_lengths(static["anchor"], static["shape"], len(axes))


def _round_half_up(value: float) -> int:
    return int(math.floor(value + 0.5))


def erase_regions(height: int, width: int, args: dict) -> list[tuple[int, int, int, int]]:
    """The (top, left, bottom, right) pixel rectangles erase sets, cut to the image."""
    axes = _erase_axes(args)
    anchor, shape = tuple(args["anchor"] or ()), tuple(args["shape"])
    _check_erase_lengths(anchor, shape, len(axes))
    extents = (height, width)
    normalized_anchor = args["normalized_anchor"] or args["normalized"]
    normalized_shape = args["normalized_shape"] or args["normalized"]
    regions = []
    for first in range(0, len(shape), len(axes)):
        bounds = [[0, height], [0, width]]
        for position, axis in enumerate(axes):
            extent = extents[axis]
            size = shape[first + position] * (extent if normalized_shape else 1)
            start = (anchor[first + position] if anchor else 0.0) * (extent if normalized_anchor else 1)
            if args["centered_anchor"]:
                start -= size / 2
            low, high = _round_half_up(start), _round_half_up(start + size)
            bounds[axis] = [min(max(low, 0), extent), min(max(high, 0), extent)]
        (top, bottom), (left, right) = bounds
        if bottom > top and right > left:
            regions.append((top, left, bottom, right))
    return regions


def fill_of(fill_value, channels: int, dtype, op_name: str) -> np.ndarray:
    """One fill value per channel, converted to the images' type (penstock.numeric's rule)."""
    values = np.asarray(fill_value, np.float64).ravel()
    if values.size not in (1, channels):
        raise ValueError(f"{op_name}: argument 'fill_value': {values.size} values for {channels}-channel images; give "
                         "one, or one per channel")
    return numeric.saturate(np.broadcast_to(values, (channels,)).astype(np.float32), dtype)


# ---- grid_mask: the grid, shared by both devices -------------------------------------------------
def grid_row(args: dict) -> np.ndarray:
    """(on, ratio, cos / tile, sin / tile, shift_x / tile, shift_y / tile) in float32, as DALI computes them."""
    tile = np.float32(args["tile"])
    angle = np.float32(args["angle"])
    return np.array([1.0, args["ratio"], np.cos(angle) / tile, np.sin(angle) / tile,
                     np.float32(args["shift_x"]) / tile, np.float32(args["shift_y"]) / tile], np.float32)


def grid_dark(height: int, width: int, row: np.ndarray) -> np.ndarray:
    """Where grid_mask zeroes, (height, width) booleans: float32 arithmetic in DALI's (and the kernel's) order."""
    _, ratio, cos, sin, shift_x, shift_y = (np.float32(value) for value in row)
    y = np.arange(height, dtype=np.float32)[:, None]
    x = np.arange(width, dtype=np.float32)[None, :]
    grid_x = (-shift_x + y * -sin) + x * cos
    grid_y = (-shift_y + y * cos) + x * sin
    return ((grid_x - np.floor(grid_x)) < ratio) & ((grid_y - np.floor(grid_y)) < ratio)


class SameShape:
    def declare_outputs(self, inputs):
        declare_hwc(inputs[0], self.name)
        return inputs[0]


@registry.register("erase", "cpu")
class Erase(SameShape, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        try:
            regions = erase_regions(image.shape[0], image.shape[1], args)
        except ArgError as error:
            raise ValueError(f"{self.name}: {error}") from None
        fill = fill_of(args["fill_value"], image.shape[2], image.dtype, self.name)
        result = image.copy()
        for top, left, bottom, right in regions:
            result[top:bottom, left:right] = fill
        return result


@registry.register("grid_mask", "cpu")
class GridMask(SameShape, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        dark = grid_dark(image.shape[0], image.shape[1], grid_row(args))
        return np.where(dark[..., None], np.zeros((), image.dtype), image)


class KeepOrFillGpu(SameShape, BatchOperator):
    """erase and grid_mask on the GPU: one kernel launch over the batch."""

    def run_batch(self, inputs, args, batch):
        from penstock.kernels.triton_masks import run_keep_or_fill
        samples = tensors_of(inputs[0])
        for sample in samples:
            if sample.dim() != 3:
                raise ValueError(f"{self.name}: expected an HWC image (3 dimensions), got shape {tuple(sample.shape)}")
        regions, grids, fills = [], [], []
        for sample, sample_args in zip(samples, args):
            height, width, channels = sample.shape
            dtype = _numpy_dtype(sample)
            if self.name == "erase":
                try:
                    regions.append(erase_regions(height, width, sample_args))
                except ArgError as error:
                    raise ValueError(f"{self.name}: {error}") from None
                grids.append(np.zeros(6, np.float32))
                fills.append(fill_of(sample_args["fill_value"], channels, dtype, self.name))
            else:
                regions.append([])
                grids.append(grid_row(sample_args))
                fills.append(np.zeros(channels, dtype))
        return run_keep_or_fill(samples, regions, np.stack(grids) if grids else np.zeros((0, 6)), fills, self.name)


def _numpy_dtype(tensor) -> np.dtype:
    return np.dtype(types.to_numpy_dtype(tensor.dtype))


registry.register("erase", "gpu", requires=devices.gpu_problem)(type("EraseGpu", (KeepOrFillGpu,), {}))
registry.register("grid_mask", "gpu", requires=devices.gpu_problem)(type("GridMaskGpu", (KeepOrFillGpu,), {}))


# ---- paste ----------------------------------------------------------------------------------------
def paste_placement(height: int, width: int, args: dict) -> tuple[int, int, int, int]:
    """(canvas height, canvas width, top, left) of paste, as DALI: sizes and places truncated."""
    least = int(args["min_canvas_size"])
    canvas_height = max(int(args["ratio"] * height), least)
    canvas_width = max(int(args["ratio"] * width), least)
    return (canvas_height, canvas_width, int(args["paste_y"] * (canvas_height - height)),
            int(args["paste_x"] * (canvas_width - width)))


class PasteDeclaration:
    def declare_outputs(self, inputs):
        declare_hwc(inputs[0], self.name)
        return inputs[0].but(shape=None)


@registry.register("paste", "cpu")
class Paste(PasteDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        height, width, channels = image.shape
        canvas_height, canvas_width, top, left = paste_placement(height, width, args)
        canvas = np.empty((canvas_height, canvas_width, channels), image.dtype)
        canvas[...] = fill_of(args["fill_value"], channels, image.dtype, self.name)
        canvas[top:top + height, left:left + width] = image
        return canvas


@registry.register("paste", "gpu", requires=devices.gpu_problem)
class PasteGpu(PasteDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        import torch
        results = []
        for image, sample_args in zip(tensors_of(inputs[0]), args):
            if image.dim() != 3:
                raise ValueError(f"{self.name}: expected an HWC image (3 dimensions), got shape {tuple(image.shape)}")
            height, width, channels = image.shape
            canvas_height, canvas_width, top, left = paste_placement(height, width, sample_args)
            fill = fill_of(sample_args["fill_value"], channels, _numpy_dtype(image), self.name)
            canvas = torch.from_numpy(fill).to(image.device).expand(canvas_height, canvas_width, channels).clone()
            canvas[top:top + height, left:left + width] = image
            results.append(canvas)
        return results


# ---- multi_paste ----------------------------------------------------------------------------------
def _pairs(value, count: int, name: str, default) -> np.ndarray:
    """A per-paste list of (y, x) pairs as an int array (count, 2); ``default`` when not given."""
    if value is None:
        return np.asarray(default, np.int64).reshape(count, 2)
    pairs = np.asarray(value, np.float64)
    if pairs.size != 2 * count:
        raise ArgError(f"argument '{name}': expected {count} pairs (one per id of in_ids), got {pairs.size} values")
    if np.any(pairs != np.round(pairs)):
        raise ArgError(f"argument '{name}': expected whole pixels, got {pairs.tolist()}")
    return pairs.astype(np.int64).reshape(count, 2)


def _check_paste_lists(static: dict, per_sample: frozenset) -> None:
    if "in_ids" in per_sample:
        return
    count = len(static["in_ids"])
    for name in ("in_anchors", "shapes", "out_anchors"):
        if name not in per_sample:
            pairs = _pairs(static[name], count, name, np.zeros((count, 2)))
            if name == "shapes" and static[name] is not None and np.any(pairs <= 0):
                raise ArgError(f"argument 'shapes': expected positive sizes, got {pairs.tolist()}")
            if name != "shapes" and np.any(pairs < 0):
                raise ArgError(f"argument '{name}': expected anchors of at least 0, got {pairs.tolist()}")


def paste_plan(sizes: list, index: int, args: dict, op_name: str):
    """((output height, width), [(source, (in_y, in_x), (height, width), (out_y, out_x))...]) of output
    ``index``; ``sizes`` are the (height, width) of the batch's images."""
    ids = list(args["in_ids"])
    try:
        in_anchors = _pairs(args["in_anchors"], len(ids), "in_anchors", np.zeros((len(ids), 2)))
        out_anchors = _pairs(args["out_anchors"], len(ids), "out_anchors", np.zeros((len(ids), 2)))
        for source in ids:
            if not 0 <= source < len(sizes):
                raise ArgError(f"argument 'in_ids': {source} is not a position in a batch of {len(sizes)}")
        rest = [np.subtract(sizes[source], anchor) for source, anchor in zip(ids, in_anchors)]
        shapes = _pairs(args["shapes"], len(ids), "shapes", rest)
    except ArgError as error:
        raise ValueError(f"{op_name}: {error}") from None
    output = tuple(args["output_size"]) if args["output_size"] else tuple(sizes[index])
    pastes = []
    for source, in_anchor, shape, out_anchor in zip(ids, in_anchors, shapes, out_anchors):
        in_end, out_end = in_anchor + shape, out_anchor + shape
        if np.any(shape <= 0) or np.any(in_anchor < 0) or np.any(in_end > sizes[source]) or np.any(out_anchor < 0) \
                or np.any(out_end > output):
            raise ValueError(f"{op_name}: output {index}: the window {tuple(shape)} at {tuple(in_anchor)} of input "
                             f"{source} ({tuple(sizes[source])}), put at {tuple(out_anchor)}, does not fit the source "
                             f"or the output {output}")
        pastes.append((source, tuple(in_anchor), tuple(shape), tuple(out_anchor)))
    return output, pastes


def _multi_paste(samples: list, args: list, zeros, op_name: str) -> list:
    """multi_paste over the batch; ``zeros(shape, like)`` makes a canvas (numpy or torch)."""
    sizes = [tuple(sample.shape[:2]) for sample in samples]
    if len({sample.shape[2] for sample in samples}) > 1 or len({sample.dtype for sample in samples}) > 1:
        raise ValueError(f"{op_name}: the batch's images differ in channels or type; multi_paste mixes images of one "
                         "kind")
    results = []
    for index, sample_args in enumerate(args):
        (height, width), pastes = paste_plan(sizes, index, sample_args, op_name)
        canvas = zeros((height, width, samples[0].shape[2]), samples[0])
        for source, (in_y, in_x), (rows, columns), (out_y, out_x) in pastes:
            canvas[out_y:out_y + rows, out_x:out_x + columns] = samples[source][in_y:in_y + rows, in_x:in_x + columns]
        results.append(canvas)
    return results


class MultiPasteDeclaration:
    def declare_outputs(self, inputs):
        declare_hwc(inputs[0], self.name)
        size = self.args.get("output_size")
        channels = inputs[0].known_channels
        return inputs[0].but(shape=(*size, channels) if size and channels else None)


@registry.register("multi_paste", "cpu")
class MultiPaste(MultiPasteDeclaration, WholeBatchOperator):
    def run_batch(self, inputs, args, params):
        for sample in inputs[0]:
            check_hwc(sample, self.name)
        return _multi_paste(inputs[0], args, lambda shape, like: np.zeros(shape, like.dtype), self.name)


@registry.register("multi_paste", "gpu", requires=devices.gpu_problem)
class MultiPasteGpu(MultiPasteDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        import torch
        samples = tensors_of(inputs[0])
        for sample in samples:
            if sample.dim() != 3:
                raise ValueError(f"{self.name}: expected an HWC image (3 dimensions), got shape {tuple(sample.shape)}")
        return _multi_paste(samples, args, lambda shape, like: torch.zeros(shape, dtype=like.dtype, device=like.device),
                            self.name)


__all__ = ["erase_regions", "fill_of", "grid_dark", "grid_row", "paste_placement", "paste_plan"]
