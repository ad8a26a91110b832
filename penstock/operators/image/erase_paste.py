"""Regions of HWC images: ``erase`` (rectangles set to a fill), ``grid_mask`` (a rotated grid of
dark squares), ``paste`` (each image on a larger canvas) and ``multi_paste`` (windows of the
batch's images pasted into each output), as DALI's.

The rules that turn arguments into pixel rectangles and grids are plain functions used by both
devices. erase and grid_mask run on the GPU as one Triton launch per batch
(penstock.kernels.triton_masks); paste and multi_paste copy windows with torch.
"""
from __future__ import annotations

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.contract import BatchOperator, OutputSpec, SampleOperator, WholeBatchOperator
from penstock.operators.shared.images import check_hwc, declare_hwc
from penstock.operators.shared.gpu_plan import tensors_of
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema
from penstock.numeric import cast_as_cpp, round_halves_away

ERASE_TYPES = tuple(np.dtype(name) for name in ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64",
                                                 "int64", "float32", "float16"))
ERASE_MAX_NDIM = 5

registry.register_schema(OpSchema(
    name="erase", class_name="Erase",
    doc="Sets box regions of the samples (1 to 5 dimensions) to ``fill_value``. ``anchor`` and ``shape`` hold one "
        "value per erased axis for each region, regions one after another ((y0, x0, y1, x1) are two regions with "
        "'HW'); an axis not named is covered whole. The erased axes are ``axis_names`` (letters of the input's "
        "layout), else ``axes``, else every axis but the layout's C. A region's start and end are truncated "
        "towards zero, then cut to the sample; an empty one erases nothing. Types: (u)int8 to (u)int64, float32 "
        "and float16.",
    args=(Arg("anchor", "floats", (), "Where each region starts (or its centre, with centered_anchor); default 0.",
              per_sample=True),
          Arg("shape", "floats", (), "The extent of each region.", per_sample=True),
          Arg("axis_names", "str", None, "The axes anchor and shape refer to, as letters of the input's layout "
              "(before axes); default every axis but C."),
          Arg("axes", "ints", None, "The axes anchor and shape refer to, as indices (when axis_names is not given).",
              min=0),
          Arg("normalized_anchor", "bool", None, "anchor is a fraction of the sample's extent (default False)."),
          Arg("normalized_shape", "bool", None, "shape is a fraction of the sample's extent (default False)."),
          Arg("normalized", "bool", None, "Both anchor and shape are fractions of the sample's extent (not with "
              "normalized_anchor or normalized_shape)."),
          Arg("centered_anchor", "bool", False, "anchor is the centre of each region, not its start."),
          Arg("fill_value", "floats", (0.0,), "The fill: one value, or one per channel (the layout's C axis); "
              "converted to the input's type by truncation, as DALI.", per_sample=True)),
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
    doc="Places each uint8 HWC image on a larger canvas filled with ``fill_value``: the canvas is int(ratio * "
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
          Arg("n_channels", "int", 3, "The images' channels: fill_value has one value, or this many.", min=1,
              max=1024),
          Arg("fill_value", "floats", REQUIRED, "The canvas's colour: one value, or one per channel; whole numbers, "
              "truncated and cast to uint8 as DALI (-1 is 255).")),
    checks=(lambda static, per_sample: _check_paste_fill(static),),
    input_names=("images",)))

MULTI_PASTE_TYPES = tuple(np.dtype(name) for name in ("uint8", "int16", "int32", "float32"))
MULTI_PASTE_INPUTS = 64
# per region argument: its absolute (integer) form and its relative (fraction) form
REGION_ARGS = (("in_anchors", "in_anchors_rel"), ("shapes", "shapes_rel"), ("out_anchors", "out_anchors_rel"))


def _region_arg(name: str, doc: str) -> Arg:
    relative = name.endswith("_rel")
    kind = "fractions in [0, 1] of the source's" if relative else "whole pixels,"
    return Arg(name, "any", None, f"{doc}: a (number of regions) x 2 tensor of (y, x) pairs, {kind} "
               + ("(or the output's, for out_anchors_rel) size." if relative else "per output sample."),
               per_sample=True)


registry.register_schema(OpSchema(
    name="multi_paste", class_name="MultiPaste",
    doc="Output i is a canvas (zeros) of ``output_size`` onto which regions of HWC images are pasted in order, later "
        "ones on top. With ``in_ids`` (one input), region k comes from sample in_ids[k] of the batch; without it, "
        f"region k comes from sample i of input k (1 to {MULTI_PASTE_INPUTS} inputs of one type). Region k is the "
        "window at in_anchors[k] (default 0) of shapes[k] (default: the rest of its source), put at out_anchors[k] "
        "(default 0); the _rel forms give them as fractions of the source's (or the canvas's) size, anchors rounded "
        "down and shapes up. Without ``output_size``, every input sample must have one height and width, the "
        "canvas's. Types: uint8, int16, int32 and float32, in and out (``dtype``, converted with rounding and "
        "saturation). Give the arguments per sample for a different recipe per output.",
    args=(Arg("in_ids", "ints", None, "Per output, the batch positions of the samples to paste from (one input only).",
              per_sample=True),
          _region_arg("in_anchors", "Per region, the top-left corner of the window in its source"),
          _region_arg("in_anchors_rel", "in_anchors as fractions"),
          _region_arg("shapes", "Per region, the window's (height, width)"),
          _region_arg("shapes_rel", "shapes as fractions"),
          _region_arg("out_anchors", "Per region, where the window's top-left corner goes on the canvas"),
          _region_arg("out_anchors_rel", "out_anchors as fractions"),
          Arg("output_size", "ints", None, "(height, width) of the canvas (values after these two are not read).",
              per_sample=True),
          Arg("dtype", "dtype", None, "The output type: uint8, int16, int32 or float32; default the input's.")),
    checks=(lambda static, per_sample: _check_paste_args(static, per_sample),),
    num_inputs=(1, MULTI_PASTE_INPUTS), input_names=tuple(f"images{i}" if i else "images"
                                                          for i in range(MULTI_PASTE_INPUTS))))


# ---- erase: the regions, shared by both devices --------------------------------------------------
def erase_axes(args: dict, layout: str, ndim: int) -> list[int]:
    """The axes anchor and shape refer to, in their order (DALI's: axis_names, else axes, else every
    axis but C; an axis may repeat, the later value winning)."""
    if args.axis_names is not None:
        missing = [name for name in args.axis_names if name not in layout]
        if missing or not args.axis_names:
            raise ArgError(f"argument 'axis_names': {args.axis_names!r} names axes that are not in the input's "
                           f"layout {layout!r}")
        return [layout.index(name) for name in args.axis_names]
    if args.axes is not None:
        axes = list(args.axes)
        if not axes or max(axes) >= ndim:
            raise ArgError(f"argument 'axes': expected axes of a {ndim}-dimensional input, got {tuple(axes)}")
        return axes
    return [axis for axis in range(ndim) if axis >= len(layout) or layout[axis] != "C"]


def _check_erase_lengths(anchor, shape, count: int) -> None:
    if len(shape) % max(count, 1):
        raise ArgError(f"argument 'shape': expected a multiple of {count} values (one per erased axis and region), "
                       f"got {len(shape)}")
    if len(anchor) and len(anchor) != len(shape):
        raise ArgError(f"argument 'anchor': {len(anchor)} values for {len(shape)} values of 'shape'; give one per "
                       "value of shape")


def _check_erase_static(static: dict, per_sample: frozenset) -> None:
    if static.normalized is not None and (static.normalized_anchor is not None
                                             or static.normalized_shape is not None):
        raise ArgError("argument 'normalized' cannot be given with 'normalized_anchor' or 'normalized_shape'")
    if not per_sample & {"anchor", "shape"}:
        count = len(static.axis_names) if static.axis_names is not None else \
            len(static.axes) if static.axes is not None else None
        _check_erase_lengths(static.anchor, static.shape, count or 1)


def _normalized(args: dict, which: str) -> bool:
    return bool(args.normalized if args.normalized is not None else args[which])


def erase_boxes(shape: tuple, layout: str, args: dict) -> list[tuple[slice, ...]]:
    """The regions erase sets, each a slice per axis, cut to the sample (empty ones left out). As
    DALI: float32 arithmetic, start and end truncated towards zero."""
    axes = erase_axes(args, layout, len(shape))
    anchor = np.ravel(np.asarray(args.anchor, np.float32))
    extent = np.ravel(np.asarray(args.shape, np.float32))
    _check_erase_lengths(anchor, extent, len(axes))
    if not anchor.size:
        anchor = np.zeros_like(extent)
    anchor_scale = np.float32(1) if not _normalized(args, "normalized_anchor") else None
    shape_scale = np.float32(1) if not _normalized(args, "normalized_shape") else None
    boxes = []
    for first in range(0, extent.size, len(axes)):
        bounds = [[0, size] for size in shape]
        for position, axis in enumerate(axes):
            size = np.float32(shape[axis])
            start = anchor[first + position] * (anchor_scale or size)
            length = extent[first + position] * (shape_scale or size)
            if args.centered_anchor:
                start -= length / np.float32(2)
            bounds[axis] = [int(start), int(start + length)]
        cut = [(max(low, 0), min(high, size)) for (low, high), size in zip(bounds, shape)]
        if all(high > low for low, high in cut):
            boxes.append(tuple(slice(low, high) for low, high in cut))
    return boxes


def erase_fill(fill_value, shape: tuple, layout: str, dtype) -> np.ndarray:
    """The fill, broadcastable to the sample: one value, or one per channel along the layout's C axis;
    converted to ``dtype`` as DALI's static_cast (truncated towards zero; integers out of range wrap)."""
    values = np.ravel(np.asarray(fill_value, np.float64))
    if values.size > 1:
        if "C" not in layout:
            raise ArgError(f"argument 'fill_value': {values.size} values need an input layout with a C axis, got "
                           f"{layout!r}")
        channels_axis = layout.index("C")
        if values.size != shape[channels_axis]:
            raise ArgError(f"argument 'fill_value': {values.size} values for {shape[channels_axis]} channels; give "
                           "one, or one per channel")
        values = values.reshape([-1 if axis == channels_axis else 1 for axis in range(len(shape))])
    else:
        values = values.reshape(())
    return cast_as_cpp(values, dtype)


def check_erase_input(ndim: int | None, dtype, op_name: str) -> None:
    """DALI's erase takes these dimensions and types (None: not known yet)."""
    if ndim is not None and not 1 <= ndim <= ERASE_MAX_NDIM:
        raise ValueError(f"{op_name}: takes samples of 1 to {ERASE_MAX_NDIM} dimensions, got {ndim}")
    if dtype is not None and np.dtype(dtype) not in ERASE_TYPES:
        raise TypeError(f"{op_name}: takes {', '.join(t.name for t in ERASE_TYPES)} data, got {np.dtype(dtype)}")


# ---- grid_mask: the grid, shared by both devices -------------------------------------------------
def grid_row(args: dict) -> np.ndarray:
    """(on, ratio, cos / tile, sin / tile, shift_x / tile, shift_y / tile) in float32, as DALI computes them."""
    tile = np.float32(args.tile)
    angle = np.float32(args.angle)
    return np.array([1.0, args.ratio, np.cos(angle) / tile, np.sin(angle) / tile,
                     np.float32(args.shift_x) / tile, np.float32(args.shift_y) / tile], np.float32)


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


class EraseDeclaration:
    """erase keeps the input's shape, type and layout; the layout names the erased axes."""

    layout = ""

    def declare_outputs(self, inputs):
        spec = inputs[0]
        check_erase_input(spec.ndim, spec.dtype, self.name)
        self.layout = spec.layout
        if spec.ndim is not None:
            try:
                axes = erase_axes(self.args, spec.layout, spec.ndim)
                if "anchor" in self.args and "shape" in self.args:  # not per sample
                    _check_erase_lengths(self.args.anchor, self.args.shape, len(axes))
            except ArgError as error:
                raise ValueError(f"{self.name}: {error}") from None
        return spec

    def boxes_and_fill(self, shape: tuple, dtype, args: dict):
        """The sample's regions (slices) and its fill in its type."""
        check_erase_input(len(shape), dtype, self.name)
        try:
            return erase_boxes(shape, self.layout, args), erase_fill(args.fill_value, shape, self.layout, dtype)
        except ArgError as error:
            raise ValueError(f"{self.name}: {error}") from None


@registry.register("erase", "cpu")
class Erase(EraseDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        data = inputs[0]
        boxes, fill = self.boxes_and_fill(data.shape, data.dtype, args)
        result = data.copy()
        for box in boxes:
            result[box] = fill if fill.ndim == 0 else fill[tuple(slice(None) if size == 1 else part
                                                                 for size, part in zip(fill.shape, box))]
        return result


@registry.register("erase", "gpu", requires=devices.gpu_problem)
class EraseGpu(EraseDeclaration, BatchOperator):
    """HWC-like batches (regions that cover every channel) in one kernel launch; others region by
    region with torch."""

    def run_batch(self, inputs, args, batch):
        import torch

        from penstock.kernels.triton_masks import run_keep_or_fill
        from penstock.runtime.pinned import to_device
        samples = tensors_of(inputs[0])
        plans = [self.boxes_and_fill(tuple(sample.shape), _numpy_dtype(sample), sample_args)
                 for sample, sample_args in zip(samples, args)]
        channels_last = self.layout[2:] in ("", "C")
        if all(sample.dim() == 3 and channels_last and all(box[2] == slice(0, sample.shape[2]) for box in boxes)
               for sample, (boxes, _) in zip(samples, plans)):
            regions = [[(box[0].start, box[1].start, box[0].stop, box[1].stop) for box in boxes] for boxes, _ in plans]
            fills = [np.broadcast_to(fill, (1, 1, sample.shape[2])).ravel() for sample, (_, fill) in zip(samples, plans)]
            return run_keep_or_fill(samples, regions, np.zeros((len(samples), 6), np.float32), fills, self.name,
                                    upload=to_device)
        results = []
        for sample, (boxes, fill) in zip(samples, plans):
            result = sample.clone()
            fill = torch.from_numpy(np.ascontiguousarray(fill)).to(sample.device)
            for box in boxes:
                result[box] = fill if fill.dim() == 0 else fill[tuple(slice(None) if size == 1 else part
                                                                      for size, part in zip(fill.shape, box))]
            results.append(result)
        return results


@registry.register("grid_mask", "cpu")
class GridMask(SameShape, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        dark = grid_dark(image.shape[0], image.shape[1], grid_row(args))
        return np.where(dark[..., None], np.zeros((), image.dtype), image)


@registry.register("grid_mask", "gpu", requires=devices.gpu_problem)
class GridMaskGpu(SameShape, BatchOperator):
    """grid_mask on the GPU: one kernel launch over the batch."""

    def run_batch(self, inputs, args, batch):
        from penstock.kernels.triton_masks import run_keep_or_fill
        from penstock.runtime.pinned import to_device
        samples = tensors_of(inputs[0])
        for sample in samples:
            if sample.dim() != 3:
                raise ValueError(f"{self.name}: expected an HWC image (3 dimensions), got shape {tuple(sample.shape)}")
        grids = np.stack([grid_row(sample_args) for sample_args in args]) if args else np.zeros((0, 6), np.float32)
        return run_keep_or_fill(samples, [[] for _ in samples], grids,
                                [np.zeros(sample.shape[2], _numpy_dtype(sample)) for sample in samples], self.name,
                                upload=to_device)


def _numpy_dtype(tensor) -> np.dtype:
    return np.dtype(types.to_numpy_dtype(tensor.dtype))


# ---- paste ----------------------------------------------------------------------------------------
def paste_placement(height: int, width: int, args: dict) -> tuple[int, int, int, int]:
    """(canvas height, canvas width, top, left) of paste, as DALI: sizes and places truncated."""
    least = int(args.min_canvas_size)
    canvas_height = max(int(args.ratio * height), least)
    canvas_width = max(int(args.ratio * width), least)
    return (canvas_height, canvas_width, int(args.paste_y * (canvas_height - height)),
            int(args.paste_x * (canvas_width - width)))


def _check_paste_fill(static: dict) -> None:
    if len(static.fill_value) not in (1, static.n_channels):
        raise ArgError(f"argument 'fill_value': {len(static.fill_value)} values for n_channels="
                       f"{static.n_channels}; give one, or one per channel")


def paste_fill(fill_value, channels: int, op_name: str) -> np.ndarray:
    """One uint8 fill value per channel."""
    values = np.ravel(np.asarray(fill_value, np.float64))
    if values.size not in (1, channels):
        raise ValueError(f"{op_name}: argument 'fill_value': {values.size} values for {channels}-channel images; give "
                         "one, or one per channel")
    return cast_as_cpp(np.broadcast_to(values, (channels,)), np.uint8)


def check_paste_image(ndim: int | None, dtype, op_name: str) -> None:
    if ndim is not None and ndim != 3:
        raise ValueError(f"{op_name}: expected HWC images (3 dimensions), got {ndim}")
    if dtype is not None and np.dtype(dtype) != np.uint8:
        raise TypeError(f"{op_name}: takes uint8 images, got {np.dtype(dtype)}")


class PasteDeclaration:
    """paste takes uint8 HWC images (or images without a layout) and gives HWC ones."""

    def declare_outputs(self, inputs):
        spec = inputs[0]
        check_paste_image(spec.ndim, spec.dtype, self.name)
        if spec.layout not in ("", "HWC"):
            raise ValueError(f"{self.name}: expected HWC images, got layout '{spec.layout}'")
        return spec.but(shape=None, layout="HWC")


@registry.register("paste", "cpu")
class Paste(PasteDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_paste_image(image.ndim, image.dtype, self.name)
        height, width, channels = image.shape
        canvas_height, canvas_width, top, left = paste_placement(height, width, args)
        canvas = np.empty((canvas_height, canvas_width, channels), image.dtype)
        canvas[...] = paste_fill(args.fill_value, channels, self.name)
        canvas[top:top + height, left:left + width] = image
        return canvas


@registry.register("paste", "gpu", requires=devices.gpu_problem)
class PasteGpu(PasteDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        import torch
        results = []
        for image, sample_args in zip(tensors_of(inputs[0]), args):
            check_paste_image(image.dim(), _numpy_dtype(image), self.name)
            height, width, channels = image.shape
            canvas_height, canvas_width, top, left = paste_placement(height, width, sample_args)
            fill = paste_fill(sample_args.fill_value, channels, self.name)
            canvas = torch.from_numpy(fill).to(image.device).expand(canvas_height, canvas_width, channels).clone()
            canvas[top:top + height, left:left + width] = image
            results.append(canvas)
        return results


# ---- multi_paste ----------------------------------------------------------------------------------
def _check_paste_args(static: dict, per_sample: frozenset) -> None:
    for absolute, relative in REGION_ARGS:
        if all(name in per_sample or static[name] is not None for name in (absolute, relative)):
            raise ArgError(f"arguments '{absolute}' and '{relative}' cannot be given together")
    if static.dtype is not None and np.dtype(types.to_numpy_dtype(static.dtype)) not in MULTI_PASTE_TYPES:
        raise ArgError(f"argument 'dtype': expected uint8, int16, int32 or float32, got {static.dtype}")
    if "output_size" not in per_sample and static.output_size is not None:
        _check_output_size(static.output_size)
    if "in_ids" not in per_sample and static.in_ids is not None:
        for name in (name for pair in REGION_ARGS for name in pair if name not in per_sample):
            _region_values(static, name, len(static.in_ids))


def _check_output_size(size) -> tuple[int, int]:
    if len(size) < 2:
        raise ArgError(f"argument 'output_size': expected (height, width), got {tuple(size)}")
    if min(size[:2]) < 0:
        raise ArgError(f"argument 'output_size': expected sizes of at least 0, got {tuple(size)}")
    return int(size[0]), int(size[1])


def _region_values(args: dict, name: str, count: int) -> np.ndarray | None:
    """A region argument as a (count, 2) array, or None when not given."""
    value = args[name]
    if value is None:
        return None
    values = np.asarray(value)
    if values.size == 0 and count == 0:
        return np.zeros((0, 2))
    if values.shape != (count, 2) or values.dtype.kind not in "iuf":
        raise ArgError(f"argument '{name}': expected a {count} x 2 tensor (a (y, x) pair per pasted region), got "
                       f"{value!r}")
    if name.endswith("_rel"):
        if np.any((values < 0) | (values > 1)):
            raise ArgError(f"argument '{name}': expected fractions in [0, 1], got {values.tolist()}")
        return values.astype(np.float32)
    if values.dtype.kind == "f":
        raise ArgError(f"argument '{name}': expected whole pixels (integers), got {values.tolist()}")
    if np.any(values < 0):
        raise ArgError(f"argument '{name}': expected values of at least 0, got {values.tolist()}")
    return values.astype(np.int64)


def _scaled(extents, fractions, rounding) -> np.ndarray:
    """Pixels from fractions of ``extents``, in float32 as DALI computes them."""
    return rounding(np.float32(1) * np.asarray(extents, np.float32) * fractions).astype(np.int64)


def paste_plan(batches: list, index: int, args: dict, op_name: str):
    """((output height, width), channels, [(input, sample, (in_y, in_x), (height, width), (out_y, out_x))...]) of
    output ``index``; ``batches`` are the inputs' lists of samples (HWC)."""
    if args.in_ids is not None:
        sources = [(0, int(source)) for source in args.in_ids]
        for _, source in sources:
            if not 0 <= source < len(batches[0]):
                raise ArgError(f"argument 'in_ids': {source} is not a position in a batch of {len(batches[0])}")
    else:
        sources = [(position, index) for position in range(len(batches))]
    if args.output_size is not None:
        output = np.array(_check_output_size(args.output_size))
    else:
        output = np.array(batches[0][0].shape[:2])
    channels = {batches[position][sample].shape[2] for position, sample in sources}
    if len(channels) > 1:
        raise ArgError(f"output {index}: the pasted regions have {sorted(channels)} channels; regions of one output "
                       "must have the same number")
    channels = channels.pop() if channels else batches[0][index].shape[2]
    count = len(sources)
    (in_anchors, in_rel), (shapes, shapes_rel), (out_anchors, out_rel) = (
        (_region_values(args, absolute, count), _region_values(args, relative, count))
        for absolute, relative in REGION_ARGS)
    pastes = []
    for k, (position, sample) in enumerate(sources):
        source = np.array(batches[position][sample].shape[:2])
        anchor = in_anchors[k] if in_anchors is not None else \
            _scaled(source, in_rel[k], np.floor) if in_rel is not None else np.zeros(2, np.int64)
        shape = shapes[k] if shapes is not None else \
            _scaled(source, shapes_rel[k], np.ceil) if shapes_rel is not None else source - anchor
        out_anchor = out_anchors[k] if out_anchors is not None else \
            _scaled(output, out_rel[k], np.floor) if out_rel is not None else np.zeros(2, np.int64)
        if np.any(anchor < 0) or np.any(shape < 0) or np.any(anchor + shape > source):
            raise ArgError(f"output {index}: region {k}, the window {tuple(shape.tolist())} at "
                           f"{tuple(anchor.tolist())}, is not within its source of size {tuple(source.tolist())}")
        if np.any(out_anchor < 0) or np.any(out_anchor + shape > output):
            raise ArgError(f"output {index}: region {k} of size {tuple(shape.tolist())} put at "
                           f"{tuple(out_anchor.tolist())} is not within the canvas of size {tuple(output.tolist())}")
        pastes.append((position, sample, tuple(anchor.tolist()), tuple(shape.tolist()), tuple(out_anchor.tolist())))
    return tuple(output.tolist()), channels, pastes


def _check_paste_batches(batches: list, args: list, dims, dtypes, op_name: str) -> None:
    """DALI's rules on multi_paste's inputs: HWC samples of one type, a supported one; without
    output_size, every sample of one height and width."""
    if args and args[0].in_ids is not None and len(batches) > 1:
        raise ValueError(f"{op_name}: with 'in_ids', it takes one input, got {len(batches)}")
    for batch in batches:
        for sample in batch:
            if dims(sample) != 3:
                raise ValueError(f"{op_name}: expected HWC images (3 dimensions), got a sample of {dims(sample)}")
    kinds = {dtype for batch in batches for dtype in map(dtypes, batch)}
    if len(kinds) > 1:
        raise TypeError(f"{op_name}: the inputs differ in type ({', '.join(sorted(map(str, kinds)))}); they must share "
                        "one")
    if kinds and kinds.pop() not in MULTI_PASTE_TYPES:
        raise TypeError(f"{op_name}: expected uint8, int16, int32 or float32 images, got "
                        f"{dtypes(batches[0][0])}")
    if len({len(sample_args.output_size or ()) for sample_args in args}) > 1:
        raise ValueError(f"{op_name}: argument 'output_size': the samples give different numbers of values")
    if any(sample_args.output_size is None for sample_args in args):
        sizes = {tuple(sample.shape[:2]) for batch in batches for sample in batch}
        if len(sizes) > 1:
            raise ValueError(f"{op_name}: without 'output_size', every input sample must have one height and width, "
                             f"got {sorted(sizes)}")


def _multi_paste(batches: list, args: list, canvas, convert, op_name: str) -> list:
    """multi_paste over the batch; ``canvas(shape, like)`` makes a canvas of the output type (numpy
    or torch) and ``convert(window)`` converts a window to it."""
    results = []
    for index, sample_args in enumerate(args):
        try:
            (height, width), channels, pastes = paste_plan(batches, index, sample_args, op_name)
        except ArgError as error:
            raise ValueError(f"{op_name}: {error}") from None
        result = canvas((height, width, channels), batches[0][0])
        for position, sample, (in_y, in_x), (rows, columns), (out_y, out_x) in pastes:
            window = batches[position][sample][in_y:in_y + rows, in_x:in_x + columns]
            result[out_y:out_y + rows, out_x:out_x + columns] = convert(window)
        results.append(result)
    return results


def _rounded(xp, window, integer_output: bool):
    """A window going to an integer type rounded as DALI's paste kernels convert."""
    return round_halves_away(xp, window) if integer_output else window


def _output_dtype(args: dict, input_dtype):
    return np.dtype(types.to_numpy_dtype(args.dtype)) if args.dtype is not None else input_dtype


class MultiPasteDeclaration:
    def declare_outputs(self, inputs):
        if self.args.get("in_ids") is not None and len(inputs) > 1:
            raise ValueError(f"{self.name}: with 'in_ids', it takes one input, got {len(inputs)}")
        for spec in inputs:
            declare_hwc(spec, self.name)
            if spec.layout not in ("", "HWC"):
                raise ValueError(f"{self.name}: expected HWC images, got layout '{spec.layout}'")
            if spec.dtype is not None and spec.dtype not in MULTI_PASTE_TYPES:
                raise TypeError(f"{self.name}: expected uint8, int16, int32 or float32 images, got {spec.dtype}")
        dtypes = {spec.dtype for spec in inputs} - {None}
        if len(dtypes) > 1:
            raise TypeError(f"{self.name}: the inputs differ in type ({', '.join(sorted(map(str, dtypes)))}); they "
                            "must share one")
        dtype = _output_dtype(self.args, inputs[0].dtype)
        size = self.args.get("output_size")
        channels = inputs[0].known_channels if len(inputs) == 1 else None
        return OutputSpec(dtype, 3, "HWC", (*size[:2], channels) if size and channels else None)


@registry.register("multi_paste", "cpu")
class MultiPaste(MultiPasteDeclaration, WholeBatchOperator):
    def run_batch(self, inputs, args, params):
        _check_paste_batches(inputs, args, np.ndim, lambda sample: sample.dtype, self.name)
        dtype = _output_dtype(args[0], inputs[0][0].dtype) if inputs[0] else None
        integer = dtype is not None and dtype.kind in "iu"
        return _multi_paste(inputs, args, lambda shape, like: np.zeros(shape, dtype),
                            lambda window: numeric.saturate(_rounded(np, window, integer), dtype), self.name)


@registry.register("multi_paste", "gpu", requires=devices.gpu_problem)
class MultiPasteGpu(MultiPasteDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        import torch
        batches = [tensors_of(batch_input) for batch_input in inputs]
        _check_paste_batches(batches, args, lambda sample: sample.dim(), _numpy_dtype, self.name)
        dtype = _output_dtype(args[0], _numpy_dtype(batches[0][0])) if batches[0] else None
        torch_dtype = getattr(torch, dtype.name) if dtype is not None else None
        return _multi_paste(batches, args,
                            lambda shape, like: torch.zeros(shape, dtype=torch_dtype, device=like.device),
                            lambda window: numeric.saturate_tensor(
                                _rounded(torch, window, dtype.kind in "iu"), torch_dtype), self.name)


__all__ = ["cast_as_cpp", "erase_boxes", "erase_fill", "paste_fill", "grid_dark", "grid_row", "paste_placement", "paste_plan"]
