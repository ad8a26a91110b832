"""Bounding-box and coordinate operators: ``bb_flip``, ``bbox_paste``, ``coord_flip``,
``coord_transform`` and ``box_encoder`` (SSD's matching of boxes to anchors).

Each is one function of (array module, arguments, samples), run by numpy on the CPU and by torch
on the GPU (shared.arrays.register_array_operator). Boxes are float arrays [N, 4] (2-D: x, y, width,
height, or left, top, right, bottom with ``ltrb``), in coordinates relative to the image unless
said otherwise, as in DALI.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.contract import BatchOperator, OutputSpec, SampleOperator
from penstock.draws import SampleStreams
from penstock.numeric import round_halves_away
from penstock.operators.shared.arrays import register_array_operator
from penstock.schema import REQUIRED, Arg, ArgError, Arguments, OpSchema


def _copy(xp, array):
    return array.copy() if xp is np else array.clone()


def _float32(xp, array):
    return array.astype(np.float32) if xp is np else array.float()


def check_boxes(xp, boxes, op_name: str, columns: int = 4):
    """``boxes`` as float32 [N, columns]; a single box [columns] is taken as [1, columns]."""
    if boxes.ndim == 1 and boxes.shape[0] == columns:
        boxes = boxes.reshape(1, columns)
    if boxes.ndim != 2 or boxes.shape[1] != columns:
        raise ValueError(f"{op_name}: takes boxes as a [N, {columns}] array, got shape {tuple(boxes.shape)}")
    return _float32(xp, boxes)


class BoxesDeclaration:
    """Outputs shaped as the first input, float32."""

    def declare_outputs(self, inputs):
        return OutputSpec(np.dtype(np.float32), 2, "")


class PastedBoxesDeclaration:
    """bbox_paste: float32 outputs of the input's shape."""

    def declare_outputs(self, inputs):
        if inputs[0].dtype is not None and inputs[0].dtype != np.float32:
            raise TypeError(f"{self.name}: expected float32 boxes, got {inputs[0].dtype}")
        return OutputSpec(np.dtype(np.float32), inputs[0].ndim, "")


# ---- bb_flip --------------------------------------------------------------------------------------
def _bb_flip(xp, args, boxes):
    """Boxes of 4 values one after another in a float32 array of any shape (kept), flipped as DALI
    flips them: read as corners (x, y, x + w, y + h without ltrb), each flipped axis's corners
    become 1 - the other's, written back (w = right - left), all in float32. Values past the last
    whole box are no box: zeros."""
    if boxes.dtype != (np.float32 if xp is np else xp.float32):
        raise TypeError(f"bb_flip: expected float32 boxes, got {boxes.dtype}")
    count = (boxes.size if xp is np else boxes.numel()) // 4
    flat = boxes.reshape(-1)
    corners = flat[:count * 4].reshape(count, 4)
    low, high = corners[:, :2], corners[:, 2:] if args.ltrb else corners[:, :2] + corners[:, 2:]
    low, high = _copy(xp, low), _copy(xp, high)
    for axis, flip in ((0, args.horizontal), (1, args.vertical)):
        if flip:
            low[:, axis], high[:, axis] = 1.0 - high[:, axis], 1.0 - low[:, axis]
    out = xp.zeros_like(flat)
    out[:count * 4] = (xp.concatenate if xp is np else xp.cat)(
        [low, high if args.ltrb else high - low], 1).reshape(-1)
    return out.reshape(boxes.shape)


register_array_operator(
    "bb_flip", _bb_flip, (1, 1),
    (Arg("horizontal", "int", 1, "Flip horizontally (per sample: 0 or 1).", per_sample=True, min=0, max=1),
     Arg("vertical", "int", 0, "Flip vertically (per sample: 0 or 1).", per_sample=True, min=0, max=1),
     Arg("ltrb", "bool", False, "Boxes as [left, top, right, bottom]; else [x, y, width, height].")),
    "Flips boxes in relative coordinates ([0, 1]) horizontally and/or vertically, as flip does to the image: "
    "float32 boxes, 4 values each, one after another (any shape, kept).",
    declaration=PastedBoxesDeclaration, input_names=("boxes",))


# ---- bbox_paste -----------------------------------------------------------------------------------
def _paste_offset(place: float, ratio: np.float32, scale: np.float32) -> np.float32:
    """Where the image's corner lands in the canvas, relative, in float32 as DALI computes it: kept
    so that boxes inside [0, 1] stay inside (for ratios below 1 too)."""
    offset = np.float32(place) * ((ratio - np.float32(1)) / ratio)
    if scale + offset > 1:
        offset = np.float32(1) - scale
        while scale + offset > 1:
            offset = np.nextafter(offset, np.float32(-1))
    return offset


def _bbox_paste(xp, args, boxes):
    """Any float32 array of a multiple of 4 values (boxes one after another), shape kept."""
    if boxes.dtype != (np.float32 if xp is np else xp.float32):
        raise TypeError(f"bbox_paste: expected float32 boxes, got {boxes.dtype}")
    if boxes.numel() % 4 if xp is not np else boxes.size % 4:
        raise ValueError(f"bbox_paste: expected boxes of 4 values each, got shape {tuple(boxes.shape)}")
    ratio = np.float32(args.ratio)
    scale = np.float32(1) / ratio
    offsets = [float(_paste_offset(args[name], ratio, scale)) for name in ("paste_x", "paste_y")]
    flat = boxes.reshape(-1, 4) * float(scale)
    flat[:, 0] += offsets[0]
    flat[:, 1] += offsets[1]
    if args.ltrb:
        flat[:, 2] += offsets[0]
        flat[:, 3] += offsets[1]
    return flat.reshape(boxes.shape)


register_array_operator(
    "bbox_paste", _bbox_paste, (1, 1),
    (Arg("ratio", "float", REQUIRED, "How many times larger the canvas is than the image, as paste's ratio.",
         per_sample=True),
     Arg("paste_x", "float", 0.5, "Where the image goes across the canvas: 0 left, 1 right (as DALI, values "
         "outside [0, 1] are taken: boxes are kept inside the canvas on the right and bottom only).",
         per_sample=True),
     Arg("paste_y", "float", 0.5, "Where the image goes down the canvas: 0 top, 1 bottom (outside [0, 1] as "
         "paste_x).", per_sample=True),
     Arg("ltrb", "bool", False, "Boxes as [left, top, right, bottom]; else [x, y, width, height].")),
    "Moves relative boxes to where paste puts their image in its larger canvas: float32 boxes, 4 values each, "
    "one after another (any shape of a multiple of 4 values, kept).",
    declaration=PastedBoxesDeclaration, input_names=("boxes",))
# DALI's ops spelling, where the name's capitalized words would give BboxPaste
registry.get_schema("bbox_paste").class_name = "BBoxPaste"


# ---- coord_flip and coord_transform -----------------------------------------------------------------
def _coord_flip(xp, args, coordinates):
    """Points [N, D] (float32, D up to 3) flipped as DALI flips them: x, y and z are the columns the
    layout names (without one: x, xy or xyz), an axis the points have too few coordinates for keeps
    its place in 'xyz' (so a layout may name more axes than the points have), and where two axes
    land on one column the later one's flip and centre win."""
    if coordinates.dtype != (np.float32 if xp is np else xp.float32):
        raise TypeError(f"coord_flip: expected float32 points, got {coordinates.dtype}")
    if coordinates.ndim != 2 or coordinates.shape[1] > 3:
        raise ValueError(f"coord_flip: takes points as a [N, D] array (D: up to 3), got shape "
                         f"{tuple(coordinates.shape)}")
    dimensions = coordinates.shape[1]
    layout = args.layout or "xyz"[:dimensions]
    flips, centres = {}, {}
    for rank, name in enumerate("xyz"):
        column = layout.find(name) if dimensions > rank else rank
        if column < 0:
            raise ValueError(f"coord_flip: layout {layout!r} has no '{name}' for points of {dimensions} coordinates")
        flips[column], centres[column] = args[f"flip_{name}"], 2.0 * np.float32(args[f"center_{name}"])
    out = _copy(xp, coordinates)
    for column in range(dimensions):
        if flips.get(column, False):  # a column no axis lands on stays
            out[:, column] = float(centres[column]) - coordinates[:, column]
    return out


register_array_operator(
    "coord_flip", _coord_flip, (1, 1),
    (Arg("layout", "str", "", "The coordinates' order, e.g. 'xy' (default: 'x', 'xy' or 'xyz' by their count; "
         "it may name more axes than the points have)."),
     *(Arg(f"flip_{name}", "int", 1 if name == "x" else 0, f"Flip the {name} coordinate (per sample: 0 or 1).",
           per_sample=True, min=0, max=1) for name in "xyz"),
     *(Arg(f"center_{name}", "float", 0.5, f"The {name} coordinate of the flip's centre.", per_sample=True)
       for name in "xyz")),
    "Flips float32 points [N, D] (D up to 3) about a centre on the chosen axes: x becomes 2 * center - x.",
    declaration=BoxesDeclaration, input_names=("coordinates",))


def _matrix_and_offset(args, dimensions: int):
    """(M [out, in], T [out]) from the arguments M, T and MT."""
    if args.MT is not None:
        combined = np.asarray(args.MT, np.float64).reshape(-1)
        if combined.size % (dimensions + 1):
            raise ValueError(f"coord_transform: MT of {combined.size} values for points of {dimensions} coordinates "
                             f"(it takes [D_out, {dimensions + 1}])")
        combined = combined.reshape(-1, dimensions + 1)
        return combined[:, :dimensions], combined[:, dimensions]
    matrix = np.asarray(args.M if args.M is not None else [1.0], np.float64).reshape(-1)
    if matrix.size == 1:
        matrix = np.eye(dimensions) * matrix[0]
    elif matrix.size % dimensions:
        raise ValueError(f"coord_transform: M of {matrix.size} values for points of {dimensions} coordinates "
                         f"(it takes [D_out, {dimensions}] or one value)")
    else:
        matrix = matrix.reshape(-1, dimensions)
    offset = np.asarray(args.T if args.T is not None else [0.0], np.float64).reshape(-1)
    if offset.size == 1:
        offset = np.full(matrix.shape[0], offset[0])
    if offset.size != matrix.shape[0]:
        raise ValueError(f"coord_transform: T has {offset.size} values for {matrix.shape[0]} output coordinates")
    return matrix, offset


COORD_TRANSFORM_TYPES = tuple(np.dtype(name) for name in ("uint8", "int16", "uint16", "int32", "float32"))


def _coord_transform_dtype(input_dtype, output_dtype) -> None:
    """DALI's rule: points of uint8, int16, uint16, int32 or float32, to their own type or float32."""
    if input_dtype is None:
        return
    if input_dtype not in COORD_TRANSFORM_TYPES:
        raise TypeError(f"coord_transform: expected points of uint8, int16, uint16, int32 or float32, got {input_dtype}")
    if output_dtype not in (input_dtype, np.dtype(np.float32)):
        raise TypeError(f"coord_transform: argument 'dtype': the output type is the points' ({input_dtype}) or float32, "
                        f"got {output_dtype}")


def _coord_transform(xp, args, coordinates):
    """Points [..., D] (the last axis the coordinates) mapped to [..., D_out]; integer outputs rounded
    halves away from zero and saturated, as DALI converts."""
    input_dtype = np.dtype(coordinates.dtype.name if xp is np else types.to_numpy_dtype(coordinates.dtype))
    output_dtype = np.dtype(args.dtype.numpy)
    _coord_transform_dtype(input_dtype, output_dtype)
    if coordinates.ndim < 2 or not 1 <= coordinates.shape[-1] <= 6:
        raise ValueError(f"coord_transform: takes points as a [..., D] array (at least 2 dimensions, D: 1 to 6), got "
                         f"shape {tuple(coordinates.shape)}")
    points = _float32(xp, coordinates.reshape(-1, coordinates.shape[-1]))
    matrix, offset = (array.astype(np.float32) for array in _matrix_and_offset(args, coordinates.shape[-1]))
    if xp is not np:
        matrix, offset = xp.from_numpy(matrix).to(coordinates.device), xp.from_numpy(offset).to(coordinates.device)
    result = (points @ matrix.T + offset).reshape(*coordinates.shape[:-1], matrix.shape[0])
    if output_dtype.kind == "f":
        return result
    result = round_halves_away(xp, result)
    if xp is np:
        return numeric.saturate(result, output_dtype)
    return numeric.saturate_tensor(result, types.to_torch_dtype(args.dtype))


class TransformDeclaration:
    def declare_outputs(self, inputs):
        output_dtype = np.dtype(self.args.dtype.numpy)
        _coord_transform_dtype(inputs[0].dtype, output_dtype)
        return inputs[0].but(dtype=output_dtype, shape=None, channels=None)


def _check_transform(static: dict, per_sample: frozenset) -> None:
    def given(name):
        return name in per_sample or static.get(name) is not None
    if given("MT") and (given("M") or given("T")):
        raise ArgError("give either 'MT' or 'M' and 'T', not both")


register_array_operator(
    "coord_transform", _coord_transform, (1, 1),
    (Arg("M", "any", None, "The matrix [D_out, D_in] (row-major, flat or 2-D), or one value times the identity.",
         per_sample=True),
     Arg("T", "any", None, "The translation [D_out], or one value for every coordinate.", per_sample=True),
     Arg("MT", "any", None, "The matrix and translation side by side, [D_out, D_in + 1].", per_sample=True),
     Arg("dtype", "dtype", types.FLOAT, "Element type of the output: float32, or the points' own type.")),
    "Applies an affine map to points [..., D] (uint8, int16, uint16, int32 or float32; D from 1 to 6): out = M @ "
    "point + T (for example a transforms.* matrix). The output keeps the input's layout.",
    declaration=TransformDeclaration, input_names=("coordinates",), checks=(_check_transform,))


# ---- box_encoder ------------------------------------------------------------------------------------
class AnchorTable:
    """The anchors as the CPU encoding reads them, made once per operator: every quantity a
    contiguous [M] array (operations then run over contiguous [..., N, M] or [B, M] arrays, a
    tenth of the time of slicing pairs out of [..., M, 2] ones): the coordinates (left, top,
    right, bottom), the areas, and the centre and size (x, y, width, height)."""

    def __init__(self, anchors: np.ndarray):
        left, top, right, bottom = (np.ascontiguousarray(anchors[:, index]) for index in range(4))
        areas = (right - left) * (bottom - top)
        self.count = len(anchors)
        self.all_positive = bool((areas > 0).all())  # then no union is 0: nothing to guard against
        centre, extent = _centre_extent(anchors)
        self.columns, self.areas = (left, top, right, bottom), areas
        self.centre_columns = tuple(np.ascontiguousarray(column) for column in (*centre.T, *extent.T))
        self.indices = np.arange(self.count)


def box_iou(boxes: np.ndarray, anchors: AnchorTable) -> np.ndarray:
    """IoU [..., N, M] of ltrb boxes [..., N, 4] with the anchors."""
    left, top, right, bottom = (boxes[..., index, None] for index in range(4))  # [..., N, 1]
    anchor_left, anchor_top, anchor_right, anchor_bottom = anchors.columns
    width = np.minimum(right, anchor_right) - np.maximum(left, anchor_left)
    height = np.minimum(bottom, anchor_bottom) - np.maximum(top, anchor_top)
    inter = np.maximum(width, 0.0, out=width) * np.maximum(height, 0.0, out=height)
    union = (right - left) * (bottom - top) + anchors.areas - inter
    if anchors.all_positive:
        return inter / union
    return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0 * inter)


def _last_argmax(values: np.ndarray, axis: int) -> np.ndarray:
    """The index of the last maximum along ``axis`` (ties go to the later box or anchor, as DALI's)."""
    return values.shape[axis] - 1 - np.flip(values, axis).argmax(axis)


def _centre_extent(boxes):
    return (boxes[..., :2] + boxes[..., 2:]) * 0.5, boxes[..., 2:] - boxes[..., :2]


def encode_boxes(boxes: np.ndarray, valid: np.ndarray, labels: np.ndarray, anchors: AnchorTable, args: dict):
    """SSD's encoding of a batch: ``boxes`` float32 [B, N, 4] ltrb (rows past a sample's boxes
    padding, ``valid`` [B, N] False there), ``labels`` [B, N]. Returns boxes [B, M, 4] and labels
    [B, M]. Each box claims its best anchor; each anchor then takes the box it overlaps most when
    their IoU exceeds criteria (ties to the later box and anchor, DALI's). The GPU form
    (kernels.triton_boxes) follows this operation by operation."""
    iou = box_iou(boxes, anchors)
    iou = np.where(valid[..., None], iou, -1.0)  # padding rows never win an anchor
    best_anchor = _last_argmax(iou, 2)  # [B, N]
    claimed = anchors.indices == best_anchor[..., None]
    iou = np.where(claimed & valid[..., None], 2.0, iou)
    best_box = _last_argmax(iou, 1)  # [B, M]
    best_iou = np.take_along_axis(iou, best_box[:, None, :], 1)[:, 0]
    matched = best_iou > args.criteria
    left, top, right, bottom = (boxes[..., index] for index in range(4))  # [B, N]
    # per anchor, the centre and size of the box it took: [B, M] each
    chosen = [np.take_along_axis(column, best_box, 1)
              for column in ((left + right) * 0.5, (top + bottom) * 0.5, right - left, bottom - top)]
    if args.offset:
        scale, means, stds = args.scale, args.means, args.stds
        anchor_x, anchor_y, anchor_width, anchor_height = anchors.centre_columns
        with np.errstate(divide="ignore", invalid="ignore"):  # unmatched anchors' values are replaced below
            columns = [((chosen[0] * scale - anchor_x * scale) / (anchor_width * scale) - means[0]) / stds[0],
                       ((chosen[1] * scale - anchor_y * scale) / (anchor_height * scale) - means[1]) / stds[1],
                       (np.log((chosen[2] * scale) / (anchor_width * scale)) - means[2]) / stds[2],
                       (np.log((chosen[3] * scale) / (anchor_height * scale)) - means[3]) / stds[3]]
        unmatched = (0.0,) * 4
    else:
        columns, unmatched = chosen, anchors.centre_columns
    encoded = np.stack([np.where(matched, column, fill) for column, fill in zip(columns, unmatched)], -1)
    return encoded.astype(np.float32), np.where(matched, np.take_along_axis(labels, best_box, 1), 0)


def _encoder_inputs(xp, boxes, labels):
    boxes = check_boxes(xp, boxes, "box_encoder")
    labels = labels.reshape(-1)
    if labels.shape[0] != boxes.shape[0]:
        raise ValueError(f"box_encoder: {boxes.shape[0]} boxes with {labels.shape[0]} labels")
    return boxes, labels


class EncoderDeclaration:
    def declare_outputs(self, inputs):
        return OutputSpec(np.dtype(np.float32), 2, "", (len(self.args.anchors) // 4, 4)), \
            OutputSpec(inputs[1].dtype, 1, "", (len(self.args.anchors) // 4,))

    def anchors(self) -> np.ndarray:
        """float32 [M, 4]."""
        return np.asarray(self.args.anchors, np.float32).reshape(-1, 4)


def _check_encoder(static: dict, per_sample: frozenset) -> None:
    anchors = static.get("anchors")
    if anchors is not None and (len(anchors) == 0 or len(anchors) % 4):
        raise ArgError(f"argument 'anchors': {len(anchors)} values; it takes 4 (left, top, right, bottom) per anchor")
    for name in ("means", "stds"):
        if static.get(name) is not None and len(static[name]) != 4:
            raise ArgError(f"argument '{name}': {len(static[name])} values; it takes 4 (x, y, w, h)")
    if static.get("stds") is not None and any(value == 0 for value in static.stds):
        raise ArgError("argument 'stds': a standard deviation of 0")


registry.register_schema(OpSchema(
    name="box_encoder", class_name="BoxEncoder",
    doc="SSD's encoding of a sample's ltrb boxes and labels against a set of anchors: each box takes its best "
        "anchor, and each other anchor the box it overlaps most when their IoU exceeds criteria. Outputs the "
        "boxes [anchors, 4] (centre x, y, width, height, or offsets) and labels [anchors] (0: background).",
    args=(Arg("anchors", "floats", REQUIRED, "The anchors (default boxes), 4 values each: left, top, right, bottom."),
          Arg("criteria", "float", 0.5, "An anchor takes the box it overlaps most when their IoU is above this.",
              min=0.0, max=1.0),
          Arg("offset", "bool", False, "Output the matched boxes as offsets from their anchors, normalized by "
              "means and stds (unmatched anchors: zeros); else as centre and size (unmatched: the anchor)."),
          Arg("scale", "float", 1.0, "Boxes and anchors are multiplied by this before the offsets are computed."),
          Arg("means", "floats", (0.0, 0.0, 0.0, 0.0), "Subtracted from the offsets (x, y, w, h)."),
          Arg("stds", "floats", (1.0, 1.0, 1.0, 1.0), "The offsets are divided by these (x, y, w, h).")),
    num_inputs=(2, 2), num_outputs=2, input_names=("boxes", "labels"), checks=(_check_encoder,)))


@registry.register("box_encoder", "cpu")
class BoxEncoder(EncoderDeclaration, SampleOperator):
    _anchor_table = None

    def run(self, inputs, args, sample, out=None):
        boxes, labels = _encoder_inputs(np, *inputs)
        valid = np.ones((1, len(boxes)), bool)
        if len(boxes) == 0:  # one padding row: every anchor is background
            boxes, labels, valid = np.zeros((1, 4), np.float32), np.zeros(1, labels.dtype), np.zeros((1, 1), bool)
        if self._anchor_table is None:  # made once: the argument is a tuple of thousands of numbers
            self._anchor_table = AnchorTable(self.anchors())
        encoded, encoded_labels = encode_boxes(boxes[None], valid, labels[None], self._anchor_table, args)
        return encoded[0], encoded_labels[0]


@registry.register("box_encoder", "gpu", requires=devices.gpu_problem)
class BoxEncoderGpu(EncoderDeclaration, BatchOperator):
    """The whole batch in two kernel launches (kernels.triton_boxes), reading the boxes and labels
    where ``.gpu()`` packed them."""

    _anchor_rows = None

    def run_batch(self, inputs, args, batch):
        from penstock.batch import PackedBatch
        from penstock.kernels import triton_boxes
        from penstock.runtime.pinned import to_device
        if not len(inputs[0]):
            return [], []
        boxes, labels, table = _packed_encoder_inputs(inputs[0], inputs[1])
        if self._anchor_rows is None or self._anchor_rows.device != boxes.device:
            self._anchor_rows = to_device(boxes.device, [triton_boxes.anchor_rows(self.anchors())])[0]
        # one set of arguments per batch: box_encoder's are all fixed for the pipeline
        encoded, encoded_labels = triton_boxes.encode_batch(boxes, labels, table, self._anchor_rows, args[0])
        return PackedBatch.of_dense(encoded), PackedBatch.of_dense(encoded_labels)


def _packed_encoder_inputs(boxes, labels):
    """(boxes float32 flat, labels flat, table int64 [N, 3]: each sample's first box element, box
    count and first label element) of a batch's boxes [N, 4] (or a single box [4]) and labels
    ([N] or [N, 1]): the buffers .gpu() packed them in, or the per-sample tensors joined."""
    import torch

    from penstock.batch import PackedBatch
    from penstock.operators.shared.gpu_plan import tensors_of
    if not (isinstance(boxes, PackedBatch) and isinstance(labels, PackedBatch)):
        boxes, labels = (_packed_tensors(torch, tensors_of(value)) for value in (boxes, labels))
    if len(boxes) != len(labels):
        raise ValueError(f"box_encoder: {len(boxes)} samples of boxes with {len(labels)} of labels")
    counts = np.empty(len(boxes), np.int64)
    for index, (shape, label_shape) in enumerate(zip(boxes.shapes, labels.shapes)):
        if len(shape) == 1 and shape[0] == 4:
            shape = (1, 4)
        if len(shape) != 2 or shape[1] != 4:
            raise ValueError(f"box_encoder: takes boxes as a [N, 4] array, got shape {tuple(shape)} (sample {index})")
        if math.prod(label_shape) != shape[0]:
            raise ValueError(f"box_encoder: {shape[0]} boxes with {math.prod(label_shape)} labels (sample {index})")
        counts[index] = shape[0]
    table = np.empty((len(counts), 3), np.int64)
    table[:, 0], table[:, 1], table[:, 2] = boxes.offsets, counts, labels.offsets
    buffer = boxes.buffer if boxes.buffer.dtype == torch.float32 else boxes.buffer.float()
    return buffer, labels.buffer, table


def _packed_tensors(torch, tensors: list):
    """Per-sample tensors of one type as one PackedBatch (joined with one copy)."""
    from penstock.batch import PackedBatch
    sizes = [tensor.numel() for tensor in tensors]
    offsets = np.cumsum([0, *sizes[:-1]]).tolist()
    flat = [tensor.reshape(-1) for tensor in tensors]
    return PackedBatch(torch.cat(flat) if flat else torch.empty(0), offsets, [tuple(t.shape) for t in tensors])


# ---- random_bbox_crop -------------------------------------------------------------------------------
AXES = "xyz"
HIGH = "XYZ"
# random_bbox_crop draws and scores several rounds at once, up to this many windows (and rounds)
WINDOWS_AT_ONCE = 256
MOST_ROUNDS_AT_ONCE = 8
EXTENT = "WHD"


def _layout(args: dict, columns: int) -> str:
    dimensions = columns // 2
    ltrb = args.ltrb is not False
    layout = args.bbox_layout or (("xyXY", "xyzXYZ") if ltrb else ("xyWH", "xyzWHD"))[dimensions - 2]
    expected = set(AXES[:dimensions]) | (set(HIGH[:dimensions]) if set(layout) & set(HIGH) else set(EXTENT[:dimensions]))
    if len(layout) != columns or set(layout) != expected:
        raise ValueError(f"random_bbox_crop: bbox_layout {layout!r} does not describe boxes of {columns} values "
                         f"(use e.g. 'xyXY' or 'xyWH', or 'xyzXYZ' / 'xyzWHD' in 3-D)")
    return layout


def boxes_to_corners(boxes: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """(low [N, D], high [N, D]) corners of boxes in ``layout`` (x, y, z order)."""
    dimensions = len(layout) // 2
    if HIGH[0] not in layout:
        low = boxes[:, [layout.index(AXES[d]) for d in range(dimensions)]].astype(np.float64)
        return low, low + boxes[:, [layout.index(EXTENT[d]) for d in range(dimensions)]]
    if layout == AXES[:dimensions] + HIGH[:dimensions]:
        corners = boxes.astype(np.float64)
    else:
        corners = boxes[:, [layout.index(axis) for axis in AXES[:dimensions] + HIGH[:dimensions]]].astype(np.float64)
    return corners[:, :dimensions], corners[:, dimensions:]


def corners_to_boxes(low: np.ndarray, high: np.ndarray, layout: str) -> np.ndarray:
    dimensions = low.shape[1]
    if layout == AXES[:dimensions] + HIGH[:dimensions]:
        return np.concatenate([low, high], 1).astype(np.float32)
    names = AXES[:dimensions] + HIGH[:dimensions] + EXTENT[:dimensions]  # the columns stacked below
    return np.concatenate([low, high, high - low], 1)[:, [names.index(name) for name in layout]].astype(np.float32)


def _product(values: np.ndarray) -> np.ndarray:
    """The product over the first axis (of 2 or 3): written out, as numpy's reduction over so short
    an axis costs several times the arithmetic; the same order of multiplications as np.prod."""
    product = values[0] * values[1]
    return product * values[2] if len(values) == 3 else product


class BoxCropper:
    """random_bbox_crop's draws for one set of arguments (DALI's rules: an option per round,
    num_attempts candidate windows per round, the last valid one kept; docs/operators.md). Its
    cost is numpy's per-call overhead on small arrays, so each step is as few calls as it can be."""

    def __init__(self, args: dict, dimensions: int):
        self.args, self.dimensions = args, dimensions
        self.pairs = [(0, 1), (0, 2), (1, 2)][:1 if dimensions == 2 else 3]
        ratios = list(args.aspect_ratio or (1.0, 1.0))
        self.ratios = [ratios[2 * k:2 * k + 2] if len(ratios) >= 2 * k + 2 else ratios[:2] for k in range(3)]
        self.input_shape = self._xyz(args.input_shape)
        self.crop_shape = self._xyz(args.crop_shape)
        self.pixels = self.input_shape if self.input_shape is not None else np.ones(dimensions)
        self.fixed = [(i, j, r[0]) for (i, j), r in zip(self.pairs, self.ratios) if r[0] == r[1]]
        self.thresholds = np.array(args.thresholds, np.float64)
        # the last option, when allowed, is no crop at all
        # without allow_no_crop, a fixed crop_shape takes a crop every time (as DALI)
        allow_no_crop = args.allow_no_crop if args.allow_no_crop is not None else self.crop_shape is None
        self.options = len(self.thresholds) + allow_no_crop
        self.no_crop = len(self.thresholds) if allow_no_crop else -1
        self.per_round, self.total = args.num_attempts, args.total_num_attempts
        self.rounds = max(1, min(MOST_ROUNDS_AT_ONCE, WINDOWS_AT_ONCE // self.per_round))
        self.iou = args.threshold_type == "iou"
        self.all_boxes = args.all_boxes_above_threshold
        self.prune = args.bbox_prune_threshold

    def _xyz(self, values):
        """A shape given in shape_layout order ('WH' by default) in x, y, z order."""
        if values is None or not len(values):
            return None
        if len(values) != self.dimensions or min(values) < 0:
            raise ValueError(f"random_bbox_crop: a shape of {self.dimensions} non-negative values for "
                             f"{self.dimensions}-D boxes, got {list(values)}")
        layout = self.args.shape_layout or "WHD"[:self.dimensions]
        return np.array([values[layout.index(EXTENT[d])] for d in range(self.dimensions)], np.float64)

    def windows(self, rng, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``count`` candidate windows at once: (anchors [A, D], extents [A, D], allowed [A]),
        relative to the image; a window the aspect ratios reject is not allowed."""
        dimensions = self.dimensions
        if self.crop_shape is not None:
            span = self.input_shape - self.crop_shape
            anchors = rng.integers(np.minimum(0, span), np.maximum(0, span) + 1, (count, dimensions))
            return anchors / self.input_shape, np.tile(self.crop_shape / self.input_shape, (count, 1)), \
                np.ones(count, bool)
        low, high = self.args.scaling or (1.0, 1.0)
        draws = rng.uniform(low, high, (count, dimensions))
        extents, pixels = draws, self.pixels
        if self.fixed:  # one side follows another at the fixed ratio, in random order; the longest is the largest draw
            extents = draws.copy()
            for i, j, ratio in self.fixed:
                first = rng.integers(2, size=count).astype(bool)
                extents[:, j] = np.where(first, extents[:, i] * pixels[i] / (ratio * pixels[j]), extents[:, j])
                extents[:, i] = np.where(first, extents[:, i], extents[:, j] * ratio * pixels[j] / pixels[i])
            extents *= (draws.max(1) / extents.max(1))[:, None]
        sizes = extents * pixels if self.input_shape is not None else extents
        allowed = None
        for (i, j), (least, most) in zip(self.pairs, self.ratios):
            ratio = sizes[:, i] / sizes[:, j]
            fits = (least <= ratio) & (ratio <= most)
            allowed = fits if allowed is None else allowed & fits
        # uniform between 0 and 1 - extent, on whichever side of 0 that is
        anchors = (1.0 - extents) * rng.random((count, dimensions))
        return anchors, extents, allowed

    def evaluate(self, boxes: "_CropBoxes", anchors, extents) -> tuple[np.ndarray, np.ndarray]:
        """(each window's score against the boxes [A], which windows keep each box [N, A]). The
        tables put the windows on the last axis: numpy's loops run along it, and are slow on a
        last axis of 2 or 3."""
        # [D, A], contiguous: numpy's broadcasting loops are several times slower on strided rows
        anchors, extents = np.ascontiguousarray(anchors.T), np.ascontiguousarray(extents.T)
        far = anchors + extents
        overlap = np.minimum(boxes.high, far[:, None])  # [D, N, A]
        overlap -= np.maximum(boxes.low, anchors[:, None])
        np.maximum(overlap, 0.0, out=overlap)
        inter = _product(overlap)  # [N, A]
        if self.iou:
            union = _product(extents) + boxes.volumes - inter
        else:
            union = np.broadcast_to(boxes.volumes, inter.shape)
        # 0 / 0 (a box of no area) never passes
        table = np.divide(inter, union, out=np.full(inter.shape, -np.inf), where=union > 0)
        scores = table.min(0) if self.all_boxes else table.max(0)
        if self.prune is None:  # the box's centre inside the window (the far side open)
            inside = (boxes.centres >= anchors[:, None]) & (boxes.centres < far[:, None])
            kept = _product(inside)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                kept = (inter > 0) & (inter / boxes.volumes >= self.prune)
        return scores, kept

    def crop(self, boxes: "_CropBoxes", rng):
        """(anchor, extent, indices of the kept boxes). Rounds are drawn and scored several at a
        time (their windows as one array), then taken in order: the first round that ends the
        search decides, exactly as one round after another would, for a fraction of the calls."""
        per_round, total, attempts, rounds = self.per_round, self.total, 0, self.rounds
        any_boxes = boxes.count > 0
        best, best_score = None, -np.inf
        while True:
            if total > 0:  # the rounds the attempt limit leaves
                rounds = min(rounds, -(-(total - attempts) // per_round))
            options = rng.integers(self.options, size=rounds).tolist()
            scored = options.index(self.no_crop) if self.no_crop in options else rounds  # the rounds before a no-crop one
            if scored:
                anchors, extents, allowed = self.windows(rng, scored * per_round)
                if any_boxes:
                    scores, kept = self.evaluate(boxes, anchors, extents)
                    passing = scores.reshape(scored, per_round) >= self.thresholds[options[:scored]][:, None]
                    valid = allowed & passing.reshape(-1) & kept.any(0)
                else:  # nothing to keep in view: the first window the ratios allow
                    valid = allowed
                found = np.flatnonzero(valid)
                if len(found):
                    if not any_boxes:
                        chosen = int(found[0])
                        return anchors[chosen], extents[chosen], np.arange(0)
                    # the last valid window of the first round with one
                    round_end = (int(found[0]) // per_round + 1) * per_round
                    chosen = int(found[int(np.searchsorted(found, round_end)) - 1])
                    return anchors[chosen], extents[chosen], np.flatnonzero(kept[:, chosen])
                if any_boxes:
                    scores = np.where(allowed, scores, -np.inf)
                    top = int(np.argmax(scores))  # the first window of the best score
                    if scores[top] > best_score:
                        best, best_score = (anchors[top], extents[top], np.flatnonzero(kept[:, top])), scores[top]
            if scored < rounds:  # a no-crop round: the whole image
                return np.zeros(self.dimensions), np.ones(self.dimensions), np.arange(boxes.count)
            attempts += rounds * per_round
            if total > 0 and attempts >= total:
                # on stderr as DALI's warning (a Python warning would stop programs that make warnings errors)
                print(f"[random_bbox_crop] Could not find a valid cropping window to satisfy the specified "
                      f"requirements (attempted {min(attempts, total)} times). Using the best cropping window so far "
                      f"(best_metric={best_score:g})", file=sys.stderr, flush=True)
                return best if best is not None else (np.zeros(self.dimensions), np.zeros(self.dimensions),
                                                      np.arange(0))


class _CropBoxes:
    """One sample's boxes as random_bbox_crop scores them: corners, volumes and centres, shaped
    [D, N, 1] ([N, 1]) to meet windows [D, A]."""

    __slots__ = ("count", "low", "high", "volumes", "centres")

    def __init__(self, low: np.ndarray, high: np.ndarray):
        self.count = len(low)
        self.low, self.high = np.ascontiguousarray(low.T)[:, :, None], np.ascontiguousarray(high.T)[:, :, None]
        self.volumes = _product(self.high - self.low)
        self.centres = (self.low + self.high) / 2


def _random_bbox_crop(args: dict, boxes: np.ndarray, labels, rng, cropper_of=BoxCropper) -> tuple:
    boxes = np.asarray(boxes, np.float32)
    if boxes.ndim == 1 and boxes.size in (0, 4, 6):
        boxes = boxes.reshape(-1, 4 if boxes.size != 6 else 6)
    if boxes.ndim != 2 or boxes.shape[1] not in (4, 6):
        raise ValueError(f"random_bbox_crop: takes boxes as a [N, 4] (or 3-D [N, 6]) array, got shape {boxes.shape}")
    layout = _layout(args, boxes.shape[1])
    low, high = boxes_to_corners(boxes, layout)
    cropper = cropper_of(args, boxes.shape[1] // 2)
    # as DALI: each start at least 0 and each end at most 1 (in float32: x + w as DALI adds them), the
    # corners in any order; NaN fails every comparison, so it is refused
    inside = ((low >= 0) & (high.astype(np.float32) <= 1)).all(1)
    if not inside.all():
        bad = int(np.flatnonzero(~inside)[0])
        raise ValueError(f"random_bbox_crop: box {bad} {boxes[bad].tolist()} is out of bounds [0, 1] ({layout}); it "
                         "takes boxes relative to the image")
    anchor, extent, kept = cropper.crop(_CropBoxes(low, high), rng)
    far = anchor + extent
    safe = np.where(extent > 0, extent, 1.0)
    # clipped to [0, 1] by ufuncs: np.clip's Python wrapper costs twice the work here
    new_low = np.minimum(np.maximum((np.maximum(low[kept], anchor) - anchor) / safe, 0.0), 1.0)
    new_high = np.minimum(np.maximum((np.minimum(high[kept], far) - anchor) / safe, 0.0), 1.0)
    scale = cropper.input_shape if cropper.crop_shape is not None else None
    outputs = [(anchor * scale if scale is not None else anchor).astype(np.float32),
               (extent * scale if scale is not None else extent).astype(np.float32),
               corners_to_boxes(new_low, new_high, layout)]
    if labels is not None:
        outputs.append(np.asarray(labels)[kept])
    if args.output_bbox_indices:
        outputs.append(kept.astype(np.int32))
    return tuple(outputs)


def _check_crop(static: dict, per_sample: frozenset) -> None:
    if not static.thresholds or any(not 0 <= t <= 1 for t in static.thresholds):
        raise ArgError(f"argument 'thresholds': {list(static.thresholds)}; give values in [0, 1]")
    for name, lengths in (("aspect_ratio", (2, 6)), ("scaling", (2,))):
        values = list(static[name] or (1.0, 1.0))
        if len(values) not in lengths:
            raise ArgError(f"argument '{name}': {values}; give {' or '.join(map(str, lengths))} values ((min, max) "
                           "pairs; 6 for the xy, xz and yz aspect ratios of 3-D boxes)")
        if any(v < 0 for v in values) or \
                any(values[k] > values[k + 1] for k in range(0, len(values), 2)):
            raise ArgError(f"argument '{name}': {values}; give (min, max) pairs with 0 <= min <= max")
    def given(name):  # per sample, or a non-empty list
        return name in per_sample or bool(static.get(name))
    if given("crop_shape") and not given("input_shape"):
        raise ArgError("argument 'crop_shape' needs 'input_shape'")
    if given("crop_shape") and static.allow_no_crop:
        raise ArgError("argument 'crop_shape' takes a crop every time: leave allow_no_crop out, or False")
    for name in ("aspect_ratio", "scaling"):
        if given("crop_shape") and static[name] is not None:
            raise ArgError(f"argument '{name}' is incompatible with providing the crop shape explicitly (crop_shape)")
    if static.ltrb is not None and static.bbox_layout is not None:
        raise ArgError("arguments 'ltrb' and 'bbox_layout' exclude each other; give bbox_layout")
    if static.total_num_attempts == 0 or static.total_num_attempts < -1:
        raise ArgError("argument 'total_num_attempts': give a positive number, or -1 for no limit")
    if static.bbox_prune_threshold is not None and not 0 <= static.bbox_prune_threshold <= 1:
        raise ArgError("argument 'bbox_prune_threshold': give a value in [0, 1]")


class RandomBBoxCropDeclaration:
    def declare_outputs(self, inputs):
        specs = [OutputSpec(np.dtype(np.float32), 1, ""), OutputSpec(np.dtype(np.float32), 1, ""),
                 OutputSpec(np.dtype(np.float32), 2, "")]
        if len(inputs) > 1:
            specs.append(inputs[1].but(layout=""))
        if self.args.output_bbox_indices:
            specs.append(OutputSpec(np.dtype(np.int32), 1, ""))
        return tuple(specs)


registry.register_schema(OpSchema(
    name="random_bbox_crop", class_name="RandomBBoxCrop",
    doc="Chooses a random crop window that keeps the boxes (relative coordinates) as asked, and gives the "
        "window and the boxes in it. Each round draws one of ``thresholds`` (or no crop at all, with "
        "``allow_no_crop``) and ``num_attempts`` windows of a size from ``scaling`` and ``aspect_ratio``; "
        "the last window whose IoU (or overlap) with every box (or any box) reaches the threshold, keeping "
        "a box, wins; else the next round. Boxes whose centre (or overlap, with ``bbox_prune_threshold``) "
        "leaves the window are dropped; the others are clipped and made relative to the window. Outputs: "
        "anchor and shape of the window (relative, x y [z] order; in pixels with ``crop_shape``), the boxes, "
        "the labels of the kept boxes (when given) and their indices (``output_bbox_indices``).",
    args=(Arg("thresholds", "floats", (0.0,), "The minimum IoU or overlap an option asks of the window."),
          Arg("threshold_type", "str", "iou", "'iou' or 'overlap' (the part of the box inside the window).",
              choices=("iou", "overlap")),
          Arg("aspect_ratio", "floats", None, "(min, max) of the window's width / height (3-D: xy, xz, yz; "
              "default (1, 1); not with crop_shape)."),
          Arg("scaling", "floats", None, "(min, max) of the window's sides relative to the image's (default "
              "(1, 1); not with crop_shape)."),
          Arg("num_attempts", "int", 1, "Windows drawn per round.", min=1),
          Arg("total_num_attempts", "int", -1, "Stop after this many windows (-1: no limit) and take the best.",
              min=-1),
          Arg("all_boxes_above_threshold", "bool", True, "Every box must reach the threshold; else one box."),
          Arg("allow_no_crop", "bool", None, "Taking the whole image is one of the options (default: True, "
              "False with crop_shape, which it must not be given True with)."),
          Arg("bbox_layout", "str", None, "The boxes' layout, e.g. 'xyXY' or 'xyWH' (default from ltrb).",
              nullable=True),
          Arg("ltrb", "bool", None, "Boxes as [left, top, right, bottom] (default True; not with bbox_layout)."),
          Arg("bbox_prune_threshold", "float", None, "Keep a box when this part of it is inside the window "
              "(default: when its centre is).", nullable=True),
          Arg("output_bbox_indices", "bool", False, "Also output the indices of the kept boxes."),
          Arg("input_shape", "ints", None, "The image's size (shape_layout order), for aspect ratios in pixels "
              "and for crop_shape.", per_sample=True, input_types=(np.dtype(np.int32),)),
          Arg("crop_shape", "ints", None, "A fixed window size in pixels (shape_layout order).", per_sample=True,
              input_types=(np.dtype(np.int32),)),
          Arg("shape_layout", "str", None, "Order of input_shape and crop_shape (default 'WH' / 'WHD').",
              nullable=True),
          Arg("quiet", "bool", False, "Accepted for DALI compatibility: as DALI 2.4, the line on stderr when no "
              "window meets the thresholds within total_num_attempts (and the best one drawn is taken) is written "
              "whatever it says.")),
    num_inputs=(1, 2), num_outputs=lambda static, inputs: 3 + (inputs > 1) + bool(static.output_bbox_indices),
    outputs_follow_inputs=True, input_names=("boxes", "labels"), checks=(_check_crop,)))


@registry.register("random_bbox_crop", "cpu")
class RandomBBoxCrop(SampleStreams, RandomBBoxCropDeclaration, SampleOperator):
    _last_cropper = (None, 0, None)  # (arguments, dimensions, their BoxCropper): made once, not per sample

    def run(self, inputs, args, sample, out=None):
        rng = self.stream(sample)
        return _random_bbox_crop(args, inputs[0], inputs[1] if len(inputs) > 1 else None, rng, self._cropper_of)

    def _cropper_of(self, args: dict, dimensions: int) -> BoxCropper:
        made_for, made_dimensions, cropper = self._last_cropper
        if made_for is not args or made_dimensions != dimensions:
            cropper = BoxCropper(args, dimensions)
            self._last_cropper = (args, dimensions, cropper)
        return cropper


# ---- bbox_rotate --------------------------------------------------------------------------------------
def _bbox_rotate(args: dict, boxes: np.ndarray, labels) -> tuple:
    from penstock.operators.shared.images import rotated_size
    boxes = check_boxes(np, np.asarray(boxes), "bbox_rotate")
    shape, layout = list(args.input_shape), args.shape_layout or "HW"
    if "H" not in layout or "W" not in layout or len(shape) < len(layout):
        raise ValueError(f"bbox_rotate: input_shape {shape} with shape_layout {layout!r} does not give a height "
                         "and a width")
    height, width = int(shape[layout.index("H")]), int(shape[layout.index("W")])
    angle = float(args.angle)
    out_height, out_width = rotated_size(height, width, angle, args)
    low, high = boxes_to_corners(boxes, "xyXY" if args.bbox_layout == "xyXY" else "xyWH")
    scale = np.array([width, height], np.float64) if args.bbox_normalized else np.ones(2)
    low, high = low * scale, high * scale
    corners = np.stack([low, np.stack([high[:, 0], low[:, 1]], 1), high, np.stack([low[:, 0], high[:, 1]], 1)], 1)
    radians = np.radians(angle)
    cos, sin = np.cos(radians), np.sin(radians)
    centred = corners - [width / 2, height / 2]  # pixel edges about the image's centre, as rotate turns it
    turned = np.stack([centred[..., 0] * cos + centred[..., 1] * sin, -centred[..., 0] * sin + centred[..., 1] * cos],
                      -1) + [out_width / 2, out_height / 2]
    new_low, new_high = turned.min(1), turned.max(1)
    if args.mode != "expand" and len(boxes):  # shrink the hull toward the box's own size (sides swapped if turned)
        sizes, hulls = high - low, new_high - new_low
        swap = (sizes[:, 0] < sizes[:, 1]) ^ (hulls[:, 0] < hulls[:, 1])
        target = np.where(swap[:, None], sizes[:, ::-1], sizes)
        shrink = (hulls - target) / 2 * (0.5 if args.mode == "halfway" else 1.0)
        new_low, new_high = new_low + shrink, new_high - shrink
    canvas = np.array([out_width, out_height], np.float64)
    clipped_low, clipped_high = np.clip(new_low, 0, canvas), np.clip(new_high, 0, canvas)
    with np.errstate(divide="ignore", invalid="ignore"):
        kept_part = np.prod(clipped_high - clipped_low, 1) / np.prod(new_high - new_low, 1)
    keep = np.flatnonzero(kept_part >= args.remove_threshold)  # 0 / 0 (a box of no area) is never kept
    divide = canvas if args.bbox_normalized else np.ones(2)
    result = corners_to_boxes(clipped_low[keep] / divide, clipped_high[keep] / divide,
                              "xyXY" if args.bbox_layout == "xyXY" else "xyWH")
    return (result,) if labels is None else (result, np.asarray(labels)[keep])


class BBoxRotateDeclaration:
    def declare_outputs(self, inputs):
        box_spec = OutputSpec(np.dtype(np.float32), 2, "")
        return (box_spec, inputs[1].but(layout="")) if len(inputs) > 1 else box_spec


registry.register_schema(OpSchema(
    name="bbox_rotate", class_name="BBoxRotate",
    doc="Turns boxes with their image as rotate turns it (about the image's centre, a positive angle "
        "counter-clockwise, the output canvas rotate's), giving each the box around its turned corners "
        "('expand'), or that box shrunk toward the original size ('fixed') or halfway there ('halfway'); "
        "boxes clipped to the canvas, and dropped (with their labels) when less than remove_threshold of "
        "them stays on it.",
    args=(Arg("angle", "float", REQUIRED, "Degrees, counter-clockwise, as rotate's.", per_sample=True),
          Arg("input_shape", "ints", REQUIRED, "The image's shape (shape_layout order), e.g. fn.shapes(images).",
              per_sample=True),
          Arg("shape_layout", "str", "HW", "Which entries of input_shape are the height and the width ('HWC'...)."),
          Arg("bbox_layout", "str", "xyXY", "'xyXY' (ltrb) or 'xyWH'.", choices=("xyXY", "xyWH")),
          Arg("bbox_normalized", "bool", True, "Boxes relative to the image (else in pixels)."),
          Arg("keep_size", "bool", False, "The canvas keeps the image's size (as rotate's keep_size)."),
          Arg("size", "floats", None, "The canvas's (height, width), as rotate's size."),
          Arg("mode", "str", "expand", "'expand', 'halfway' or 'fixed'.", choices=("expand", "halfway", "fixed")),
          Arg("remove_threshold", "float", 0.1, "Drop a box when less than this part of it stays on the canvas.",
              min=0.0, max=1.0)),
    num_inputs=(1, 2), num_outputs=lambda static, inputs: inputs, outputs_follow_inputs=True,
    input_names=("boxes", "labels"),
    checks=(lambda static, per_sample: _exclusive_size(static),)))


def _exclusive_size(static: dict) -> None:
    if static.keep_size and static.size:
        raise ArgError("give either 'keep_size' or 'size', not both")


@registry.register("bbox_rotate", "cpu")
class BBoxRotate(BBoxRotateDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        result = _bbox_rotate(args, inputs[0], inputs[1] if len(inputs) > 1 else None)
        return result if len(result) > 1 else result[0]


# ---- ssd_random_crop (DALI's older, fixed form of random_bbox_crop, cropping the image itself) ---------
SSD_CROP = {"thresholds": (0.1, 0.3, 0.5, 0.7, 0.9, 0.0), "threshold_type": "iou", "aspect_ratio": (0.5, 2.0),
            "scaling": (0.3, 1.0), "total_num_attempts": -1, "all_boxes_above_threshold": True,
            "allow_no_crop": True, "bbox_prune_threshold": None, "input_shape": None, "crop_shape": None,
            "shape_layout": None}


def _ssd_random_crop(image: np.ndarray, boxes: np.ndarray, labels: np.ndarray, num_attempts: int, rng) -> tuple:
    boxes = check_boxes(np, np.asarray(boxes), "ssd_random_crop")
    if image.ndim != 3:
        raise ValueError(f"ssd_random_crop: takes HWC images, got shape {image.shape}")
    low, high = boxes[:, :2].astype(np.float64), boxes[:, 2:].astype(np.float64)
    anchor, extent, kept = BoxCropper(Arguments({**SSD_CROP, "num_attempts": num_attempts}), 2).crop(_CropBoxes(low, high), rng)
    height, width = image.shape[:2]
    x0, y0 = int(round(anchor[0] * width)), int(round(anchor[1] * height))
    x1, y1 = int(round((anchor[0] + extent[0]) * width)), int(round((anchor[1] + extent[1]) * height))
    new_low = np.clip((np.maximum(low[kept], anchor) - anchor) / extent, 0.0, 1.0)
    new_high = np.clip((np.minimum(high[kept], anchor + extent) - anchor) / extent, 0.0, 1.0)
    return (np.ascontiguousarray(image[y0:max(y1, y0 + 1), x0:max(x1, x0 + 1)]),
            np.concatenate([new_low, new_high], 1).astype(np.float32).reshape(-1, 4), np.asarray(labels)[kept])


registry.register_schema(OpSchema(
    name="ssd_random_crop", class_name="SSDRandomCrop",
    doc="SSD's random crop (DALI's older operator; random_bbox_crop is its general form): each round draws "
        "no crop or a minimum IoU of 0.1, 0.3, 0.5, 0.7, 0.9 or 0, and num_attempts windows of sides 0.3-1 "
        "of the image's with an aspect ratio of 0.5-2, until one reaches the IoU with every box and keeps "
        "a box whose centre it holds; outputs the cropped image, its boxes (ltrb, relative to the crop) "
        "and their labels.",
    args=(Arg("num_attempts", "int", 1, "Windows drawn per round.", min=1),),
    num_inputs=(3, 3), num_outputs=3, input_names=("images", "boxes", "labels")))


@registry.register("ssd_random_crop", "cpu")
class SSDRandomCrop(SampleStreams, SampleOperator):
    def declare_outputs(self, inputs):
        return inputs[0].but(shape=None), OutputSpec(np.dtype(np.float32), 2, ""), inputs[2].but(layout="")


    def run(self, inputs, args, sample, out=None):
        rng = self.stream(sample)
        return _ssd_random_crop(inputs[0], inputs[1], inputs[2], args.num_attempts, rng)
