"""Operators that move boxes and points with their image: ``bb_flip``, ``bbox_paste``, ``coord_flip``,
``coord_transform`` and ``bbox_rotate``.

All but bbox_rotate are one function of (array module, arguments, samples), run by numpy on the CPU
and by torch on the GPU (shared.arrays.register_array_operator). Boxes are float arrays [N, 4] (2-D:
x, y, width, height, or left, top, right, bottom with ``ltrb``), in coordinates relative to the image
unless said otherwise, as in DALI.
"""
from __future__ import annotations

import numpy as np

from penstock import numeric, registry, types
from penstock.contract import OutputSpec, SampleOperator
from penstock.numeric import round_halves_away
from penstock.operators.detection.box_arrays import as_float32, boxes_to_corners, check_boxes, corners_to_boxes
from penstock.operators.shared.arrays import register_array_operator
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema


def _copy(xp, array):
    return array.copy() if xp is np else array.clone()


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
    points = as_float32(xp, coordinates.reshape(-1, coordinates.shape[-1]))
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
