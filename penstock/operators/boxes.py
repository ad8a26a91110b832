"""Bounding-box and coordinate operators: ``bb_flip``, ``bbox_paste``, ``coord_flip``,
``coord_transform`` and ``box_encoder`` (SSD's matching of boxes to anchors).

Each is one function of (array module, arguments, samples), run by numpy on the CPU and by torch
on the GPU (tensors.register_array_operator). Boxes are float arrays [N, 4] (2-D: x, y, width,
height, or left, top, right, bottom with ``ltrb``), in coordinates relative to the image unless
said otherwise, as in DALI.
"""
from __future__ import annotations

import numpy as np

from penstock import types
from penstock.contract import OutputSpec
from penstock.operators.tensors import register_array_operator
from penstock.schema import REQUIRED, Arg, ArgError


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


# ---- bb_flip --------------------------------------------------------------------------------------
def _bb_flip(xp, args, boxes):
    boxes = check_boxes(xp, boxes, "bb_flip")
    out = _copy(xp, boxes)
    for axis, flip in ((0, args["horizontal"]), (1, args["vertical"])):
        if not flip:
            continue
        if args["ltrb"]:  # the far edge becomes the near one
            out[:, axis] = 1.0 - boxes[:, axis + 2]
            out[:, axis + 2] = 1.0 - boxes[:, axis]
        else:
            out[:, axis] = 1.0 - boxes[:, axis] - boxes[:, axis + 2]
    return out


register_array_operator(
    "bb_flip", _bb_flip, (1, 1),
    (Arg("horizontal", "int", 1, "Flip horizontally (per sample: 0 or 1).", per_sample=True, min=0, max=1),
     Arg("vertical", "int", 0, "Flip vertically (per sample: 0 or 1).", per_sample=True, min=0, max=1),
     Arg("ltrb", "bool", False, "Boxes as [left, top, right, bottom]; else [x, y, width, height].")),
    "Flips boxes in relative coordinates ([0, 1]) horizontally and/or vertically, as flip does to the image.",
    declaration=BoxesDeclaration, input_names=("boxes",))


# ---- bbox_paste -----------------------------------------------------------------------------------
def _bbox_paste(xp, args, boxes):
    boxes = check_boxes(xp, boxes, "bbox_paste")
    ratio = args["ratio"]
    scale = 1.0 / ratio
    # the image lands at paste * (canvas - image) in a canvas ``ratio`` times its size
    offsets = [args["paste_x"] * (1.0 - scale), args["paste_y"] * (1.0 - scale)]
    out = boxes * scale
    out[:, 0] += offsets[0]
    out[:, 1] += offsets[1]
    if args["ltrb"]:
        out[:, 2] += offsets[0]
        out[:, 3] += offsets[1]
    return out


register_array_operator(
    "bbox_paste", _bbox_paste, (1, 1),
    (Arg("ratio", "float", REQUIRED, "How many times larger the canvas is than the image (at least 1), as "
         "paste's ratio.", per_sample=True, min=1.0),
     Arg("paste_x", "float", 0.5, "Where the image goes across the canvas: 0 left, 1 right.", per_sample=True,
         min=0.0, max=1.0),
     Arg("paste_y", "float", 0.5, "Where the image goes down the canvas: 0 top, 1 bottom.", per_sample=True,
         min=0.0, max=1.0),
     Arg("ltrb", "bool", False, "Boxes as [left, top, right, bottom]; else [x, y, width, height].")),
    "Moves relative boxes to where paste puts their image in its larger canvas.",
    declaration=BoxesDeclaration, input_names=("boxes",))


# ---- coord_flip and coord_transform -----------------------------------------------------------------
def _coordinates(xp, coordinates, op_name: str, most: int):
    if coordinates.ndim == 1:
        coordinates = coordinates.reshape(1, -1)
    if coordinates.ndim != 2 or not 1 <= coordinates.shape[1] <= most:
        raise ValueError(f"{op_name}: takes points as a [N, D] array (D: 1 to {most}), got shape "
                         f"{tuple(coordinates.shape)}")
    return _float32(xp, coordinates)


def _coord_flip(xp, args, coordinates):
    coordinates = _coordinates(xp, coordinates, "coord_flip", 3)
    dimensions = coordinates.shape[1]
    layout = args["layout"] or "xyz"[:dimensions]
    if len(layout) != dimensions or set(layout) - set("xyz"):
        raise ValueError(f"coord_flip: layout {layout!r} does not describe points of {dimensions} coordinates "
                         "(use 'x', 'xy', 'xyz' or a permutation)")
    out = _copy(xp, coordinates)
    for name in "xyz":
        if name in layout and args[f"flip_{name}"]:
            axis = layout.index(name)
            out[:, axis] = 2.0 * args[f"center_{name}"] - coordinates[:, axis]
    return out


register_array_operator(
    "coord_flip", _coord_flip, (1, 1),
    (Arg("layout", "str", "", "The coordinates' order, e.g. 'xy' (default: 'x', 'xy' or 'xyz' by their count)."),
     *(Arg(f"flip_{name}", "int", 1 if name == "x" else 0, f"Flip the {name} coordinate (per sample: 0 or 1).",
           per_sample=True, min=0, max=1) for name in "xyz"),
     *(Arg(f"center_{name}", "float", 0.5, f"The {name} coordinate of the flip's centre.", per_sample=True)
       for name in "xyz")),
    "Flips points [N, D] about a centre on the chosen axes: x becomes 2 * center - x.",
    declaration=BoxesDeclaration, input_names=("coordinates",))


def _matrix_and_offset(args, dimensions: int):
    """(M [out, in], T [out]) from the arguments M, T and MT."""
    if args["MT"] is not None:
        combined = np.asarray(args["MT"], np.float64).reshape(-1)
        if combined.size % (dimensions + 1):
            raise ValueError(f"coord_transform: MT of {combined.size} values for points of {dimensions} coordinates "
                             f"(it takes [D_out, {dimensions + 1}])")
        combined = combined.reshape(-1, dimensions + 1)
        return combined[:, :dimensions], combined[:, dimensions]
    matrix = np.asarray(args["M"] if args["M"] is not None else [1.0], np.float64).reshape(-1)
    if matrix.size == 1:
        matrix = np.eye(dimensions) * matrix[0]
    elif matrix.size % dimensions:
        raise ValueError(f"coord_transform: M of {matrix.size} values for points of {dimensions} coordinates "
                         f"(it takes [D_out, {dimensions}] or one value)")
    else:
        matrix = matrix.reshape(-1, dimensions)
    offset = np.asarray(args["T"] if args["T"] is not None else [0.0], np.float64).reshape(-1)
    if offset.size == 1:
        offset = np.full(matrix.shape[0], offset[0])
    if offset.size != matrix.shape[0]:
        raise ValueError(f"coord_transform: T has {offset.size} values for {matrix.shape[0]} output coordinates")
    return matrix, offset


def _coord_transform(xp, args, coordinates):
    coordinates = _coordinates(xp, coordinates, "coord_transform", 6)
    matrix, offset = (array.astype(np.float32) for array in _matrix_and_offset(args, coordinates.shape[1]))
    if xp is not np:
        matrix, offset = xp.from_numpy(matrix).to(coordinates.device), xp.from_numpy(offset).to(coordinates.device)
    result = coordinates @ matrix.T + offset
    return result.astype(args["dtype"].numpy) if xp is np else result.to(types.to_torch_dtype(args["dtype"]))


class TransformDeclaration:
    def declare_outputs(self, inputs):
        return OutputSpec(np.dtype(self.args["dtype"].numpy), 2, "")


def _check_transform(static: dict, per_sample: frozenset) -> None:
    if static.get("MT") is not None and (static.get("M") is not None or static.get("T") is not None):
        raise ArgError("give either 'MT' or 'M' and 'T', not both")


register_array_operator(
    "coord_transform", _coord_transform, (1, 1),
    (Arg("M", "floats", None, "The matrix [D_out, D_in] (row-major), or one value times the identity.",
         per_sample=True),
     Arg("T", "floats", None, "The translation [D_out], or one value for every coordinate.", per_sample=True),
     Arg("MT", "floats", None, "The matrix and translation side by side, [D_out, D_in + 1].", per_sample=True),
     Arg("dtype", "dtype", types.FLOAT, "Element type of the output.")),
    "Applies an affine map to points [N, D]: out = M @ point + T (for example a transforms.* matrix).",
    declaration=TransformDeclaration, input_names=("coordinates",), checks=(_check_transform,))


# ---- box_encoder ------------------------------------------------------------------------------------
def box_iou(xp, boxes, anchors):
    """IoU [N, M] of ltrb boxes with ltrb anchors."""
    left = xp.maximum(boxes[:, None, 0], anchors[None, :, 0])
    top = xp.maximum(boxes[:, None, 1], anchors[None, :, 1])
    right = xp.minimum(boxes[:, None, 2], anchors[None, :, 2])
    bottom = xp.minimum(boxes[:, None, 3], anchors[None, :, 3])
    zero = 0.0
    inter = (right - left).clip(zero) * (bottom - top).clip(zero) if xp is np else \
        (right - left).clamp(min=0) * (bottom - top).clamp(min=0)
    area_boxes = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    area_anchors = (anchors[:, 2] - anchors[:, 0]) * (anchors[:, 3] - anchors[:, 1])
    union = area_boxes[:, None] + area_anchors[None, :] - inter
    return xp.where(union > 0, inter / xp.where(union > 0, union, 1.0), 0.0 * inter)


def _last_argmax(xp, values, axis: int):
    """The index of the last maximum along ``axis`` (ties go to the later box or anchor, as DALI's)."""
    size = values.shape[axis]
    flipped = xp.flip(values, axis) if xp is np else values.flip(axis)
    return size - 1 - flipped.argmax(axis)


def _centre_extent(boxes):
    return (boxes[:, :2] + boxes[:, 2:]) * 0.5, boxes[:, 2:] - boxes[:, :2]


def _box_encoder(xp, args, boxes, labels):
    boxes = check_boxes(xp, boxes, "box_encoder")
    labels = labels.reshape(-1)
    if labels.shape[0] != boxes.shape[0]:
        raise ValueError(f"box_encoder: {boxes.shape[0]} boxes with {labels.shape[0]} labels")
    anchors = np.asarray(args["anchors"], np.float32).reshape(-1, 4)
    if xp is not np:
        anchors = xp.as_tensor(anchors, device=boxes.device)
    count = anchors.shape[0]
    anchor_centre, anchor_extent = _centre_extent(anchors)
    if args["offset"]:
        out = xp.zeros((count, 4), dtype=np.float32) if xp is np else \
            xp.zeros((count, 4), dtype=xp.float32, device=boxes.device)
    else:
        out = xp.concatenate([anchor_centre, anchor_extent], 1) if xp is np else xp.cat([anchor_centre, anchor_extent], 1)
    out_labels = xp.zeros(count, dtype=labels.dtype) if xp is np else \
        xp.zeros(count, dtype=labels.dtype, device=boxes.device)
    if boxes.shape[0] == 0:
        return out, out_labels
    iou = box_iou(xp, boxes, anchors)
    rows = xp.arange(boxes.shape[0]) if xp is np else xp.arange(boxes.shape[0], device=boxes.device)
    iou[rows, _last_argmax(xp, iou, 1)] = 2.0  # every box keeps its best anchor, whatever the criteria
    best_box = _last_argmax(xp, iou, 0)
    columns = xp.arange(count) if xp is np else xp.arange(count, device=boxes.device)
    matched = iou[best_box, columns] > args["criteria"]
    box_centre, box_extent = _centre_extent(boxes[best_box])
    if args["offset"]:
        scale, means, stds = args["scale"], np.asarray(args["means"], np.float32), np.asarray(args["stds"], np.float32)
        if xp is not np:
            means, stds = xp.as_tensor(means, device=boxes.device), xp.as_tensor(stds, device=boxes.device)
        log = np.log if xp is np else xp.log
        centre = ((box_centre * scale - anchor_centre * scale) / (anchor_extent * scale) - means[:2]) / stds[:2]
        extent = (log((box_extent * scale) / (anchor_extent * scale)) - means[2:]) / stds[2:]
    else:
        centre, extent = box_centre, box_extent
    encoded = xp.concatenate([centre, extent], 1) if xp is np else xp.cat([centre, extent], 1)
    out[matched] = _float32(xp, encoded[matched])
    out_labels[matched] = labels[best_box][matched]
    return out, out_labels


class EncoderDeclaration:
    def declare_outputs(self, inputs):
        return OutputSpec(np.dtype(np.float32), 2, "", (len(self.args["anchors"]) // 4, 4)), \
            OutputSpec(inputs[1].dtype, 1, "", (len(self.args["anchors"]) // 4,))


def _check_encoder(static: dict, per_sample: frozenset) -> None:
    anchors = static.get("anchors")
    if anchors is not None and (len(anchors) == 0 or len(anchors) % 4):
        raise ArgError(f"argument 'anchors': {len(anchors)} values; it takes 4 (left, top, right, bottom) per anchor")
    for name in ("means", "stds"):
        if static.get(name) is not None and len(static[name]) != 4:
            raise ArgError(f"argument '{name}': {len(static[name])} values; it takes 4 (x, y, w, h)")
    if static.get("stds") is not None and any(value == 0 for value in static["stds"]):
        raise ArgError("argument 'stds': a standard deviation of 0")


register_array_operator(
    "box_encoder", _box_encoder, (2, 2),
    (Arg("anchors", "floats", REQUIRED, "The anchors (default boxes), 4 values each: left, top, right, bottom."),
     Arg("criteria", "float", 0.5, "An anchor takes the box it overlaps most when their IoU is above this.",
         min=0.0, max=1.0),
     Arg("offset", "bool", False, "Output the matched boxes as offsets from their anchors, normalized by "
         "means and stds (unmatched anchors: zeros); else as centre and size (unmatched: the anchor)."),
     Arg("scale", "float", 1.0, "Boxes and anchors are multiplied by this before the offsets are computed."),
     Arg("means", "floats", (0.0, 0.0, 0.0, 0.0), "Subtracted from the offsets (x, y, w, h)."),
     Arg("stds", "floats", (1.0, 1.0, 1.0, 1.0), "The offsets are divided by these (x, y, w, h).")),
    "SSD's encoding of a sample's ltrb boxes and labels against a set of anchors: each box takes its best "
    "anchor, and each other anchor the box it overlaps most when their IoU exceeds criteria. Outputs the "
    "boxes [anchors, 4] (centre x, y, width, height, or offsets) and labels [anchors] (0: background).",
    declaration=EncoderDeclaration, input_names=("boxes", "labels"), checks=(_check_encoder,), num_outputs=2)
