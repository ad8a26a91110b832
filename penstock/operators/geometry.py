"""Geometry: ``resize``, ``crop``, ``flip``, ``transpose`` over HWC images (and other layouts where
the operator's doc says so)."""
from __future__ import annotations

import math

import numpy as np

from penstock import registry, types
from penstock.kernels import cpu_image
from penstock.operators.base import SampleOperator
from penstock.schema import REQUIRED, Arg, OpSchema

# Window arguments shared by crop, crop_mirror_normalize and decoders.image_crop, documented once.
WINDOW_ARGS = (
    Arg("crop", "floats", None, "Window size (height, width) in pixels; one value means a square.",
        per_sample=True, length=(1, 2)),
    Arg("crop_w", "float", 0.0, "Window width in pixels (with crop_h, instead of crop).", per_sample=True, min=0.0),
    Arg("crop_h", "float", 0.0, "Window height in pixels (with crop_w, instead of crop).", per_sample=True, min=0.0),
    Arg("crop_pos_x", "float", 0.5, "Horizontal window position, 0 (left edge) to 1 (right edge).",
        per_sample=True, min=0.0, max=1.0),
    Arg("crop_pos_y", "float", 0.5, "Vertical window position, 0 (top edge) to 1 (bottom edge).",
        per_sample=True, min=0.0, max=1.0),
)
CROP_ARGS = (
    *WINDOW_ARGS,
    Arg("out_of_bounds_policy", "str", "error", "A window reaching outside the image: 'error', 'pad' "
        "(with fill_values) or 'trim_to_shape'.", choices=("error", "pad", "trim_to_shape")),
    Arg("fill_values", "floats", (0.0,), "Padding value, one or one per channel."),
)

INTERP_ARGS = (
    Arg("interp_type", "interp_type", types.INTERP_LINEAR, "Resampling filter: INTERP_NN, INTERP_LINEAR, "
        "INTERP_CUBIC, INTERP_TRIANGULAR, INTERP_LANCZOS3."),
    Arg("min_filter", "interp_type", None, "Filter when shrinking (default interp_type)."),
    Arg("mag_filter", "interp_type", None, "Filter when enlarging (default interp_type)."),
    Arg("antialias", "bool", True, "Average over the covered source pixels when shrinking."),
)

registry.register_schema(OpSchema(
    name="resize", class_name="Resize",
    doc="Resizes HWC images. Give the output size as resize_x / resize_y (one of them 0 or missing "
        "keeps the aspect ratio), size=(height, width), resize_shorter or resize_longer; ``mode`` "
        "and ``max_size`` as in DALI. Sizes are rounded to the nearest pixel, halves up (as DALI).",
    args=(
        Arg("resize_x", "float", 0.0, "Output width.", per_sample=True, min=0.0),
        Arg("resize_y", "float", 0.0, "Output height.", per_sample=True, min=0.0),
        Arg("size", "floats", None, "Output (height, width); a 0 keeps the aspect ratio.", per_sample=True,
            length=(1, 2), min=0.0),
        Arg("resize_shorter", "float", 0.0, "Length of the shorter side; keeps the aspect ratio.",
            per_sample=True, min=0.0),
        Arg("resize_longer", "float", 0.0, "Length of the longer side; keeps the aspect ratio.",
            per_sample=True, min=0.0),
        Arg("mode", "str", "default", "'default' (a missing size keeps the aspect ratio), 'stretch' (a "
            "missing size keeps the input's), 'not_larger' (fit inside), 'not_smaller' (cover).",
            choices=("default", "stretch", "not_larger", "not_smaller")),
        Arg("max_size", "floats", None, "Upper limit (height, width) of the output: with 'not_larger', "
            "'not_smaller', resize_shorter and resize_longer it lowers the scale, keeping the aspect "
            "ratio; otherwise it caps each side on its own.", length=(1, 2), min=0.0),
        Arg("dtype", "dtype", None, "Output type; default the input's.",
            choices=(None, types.UINT8, types.FLOAT)),
        Arg("save_attrs", "bool", False, "Accepted for DALI compatibility."),
        Arg("minibatch_size", "int", 32, "Accepted for DALI compatibility.", min=1),
        Arg("image_type", "image_type", None, "Accepted for DALI compatibility."),
        *INTERP_ARGS,
    ),
    input_names=("images",)))

registry.register_schema(OpSchema(
    name="crop", class_name="Crop",
    doc="Cuts a (height, width) window out of HWC images, placed by crop_pos_x / crop_pos_y.",
    args=(*CROP_ARGS, Arg("image_type", "image_type", None, "Accepted for DALI compatibility."),
          Arg("dtype", "dtype", None, "Output type; default the input's.")),
    input_names=("images",)))

registry.register_schema(OpSchema(
    name="flip", class_name="Flip",
    doc="Mirrors HWC images horizontally and/or vertically (per sample).",
    args=(Arg("horizontal", "int", 1, "1 flips left-right.", per_sample=True, choices=(0, 1)),
          Arg("vertical", "int", 0, "1 flips top-bottom.", per_sample=True, choices=(0, 1)),
          Arg("depthwise", "int", 0, "1 flips the depth axis (volumes only).", per_sample=True, choices=(0, 1))),
    input_names=("images",)))

registry.register_schema(OpSchema(
    name="transpose", class_name="Transpose",
    doc="Permutes the axes of each sample.",
    args=(Arg("perm", "ints", None, "The new order of the axes, e.g. (2, 0, 1) for HWC -> CHW; default "
              "reverses them.", min=0),
          Arg("output_layout", "layout", "", "Layout of the result; default permutes the input's."),
          Arg("transpose_layout", "bool", True, "Permute the layout string with the axes.")),
    input_names=("input",)))


def resized_shape(image_shape, args) -> tuple[int, int]:
    size = args["size"]
    resize_y, resize_x = (size[0], size[-1]) if size else (args["resize_y"], args["resize_x"])
    return cpu_image.output_size(image_shape[0], image_shape[1], resize_x, resize_y, args["resize_shorter"],
                                 args["resize_longer"], args["mode"], args["max_size"])


def check_hwc(image: np.ndarray, op_name: str) -> None:
    if image.ndim != 3:
        raise ValueError(f"{op_name}: expected an HWC image (3 dimensions), got shape {image.shape}")


def fixed_resize_size(args: dict) -> tuple[int, int] | None:
    """The output (height, width) when it does not depend on the input, else None."""
    size = args.get("size")
    height, width = (size[0], size[-1]) if size else (args.get("resize_y"), args.get("resize_x"))
    if height and width and args.get("mode") in ("default", "stretch") and not args.get("max_size"):
        return int(round(height)), int(round(width))
    return None


@registry.register("resize", "cpu")
class Resize(SampleOperator):
    def output_spec(self, inputs, args):
        image = inputs[0]
        if image.ndim != 3:
            return None
        height, width = resized_shape(image.shape, args)
        return (height, width, image.shape[2]), (args["dtype"].numpy if args["dtype"] else image.dtype)

    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        if not any((args["size"], args["resize_x"], args["resize_y"], args["resize_shorter"], args["resize_longer"])):
            raise ValueError("resize: give resize_x / resize_y, size, resize_shorter or resize_longer")
        height, width = resized_shape(image.shape, args)
        shrinking = height * width < image.shape[0] * image.shape[1]
        interp = (args["min_filter"] if shrinking else args["mag_filter"]) or args["interp_type"]
        dtype = args["dtype"].numpy if args["dtype"] else image.dtype
        if dtype != image.dtype:
            result = cpu_image.resize(image.astype(dtype), height, width, interp, args["antialias"], out)
        else:
            result = cpu_image.resize(image, height, width, interp, args["antialias"], out)
        return result


def crop_size(args) -> tuple[int, int] | None:
    crop = args["crop"]
    if crop:
        return int(round(crop[0])), int(round(crop[-1]))
    if args["crop_h"] and args["crop_w"]:
        return int(round(args["crop_h"])), int(round(args["crop_w"]))
    return None


def crop_placement(image_height: int, image_width: int, args: dict) -> tuple[int, int, int, int] | None:
    """(top, left, height, width) of the window crop / crop_mirror_normalize ask for, or None."""
    size = crop_size(args)
    if size is None:
        return None
    height, width = size
    top = cpu_image.crop_anchor(image_height, height, args["crop_pos_y"])
    left = cpu_image.crop_anchor(image_width, width, args["crop_pos_x"])
    return top, left, height, width


def crop_image(image: np.ndarray, args: dict, op_name: str) -> np.ndarray:
    """The window of crop / crop_mirror_normalize; the image itself when no window is asked for."""
    placement = crop_placement(image.shape[0], image.shape[1], args)
    if placement is None:
        return image
    return cpu_image.crop_window(image, *placement, args["fill_values"], args["out_of_bounds_policy"], op_name)


@registry.register("crop", "cpu")
class Crop(SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        if crop_size(args) is None:
            raise ValueError("crop: give crop=(height, width), or crop_h and crop_w")
        result = crop_image(image, args, self.name)
        dtype = args["dtype"].numpy if args["dtype"] else image.dtype
        return np.array(result, dtype=dtype, copy=True)


@registry.register("flip", "cpu")
class Flip(SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        layout_axes = {"horizontal": -2, "vertical": -3, "depthwise": -4}
        result = image
        for name, axis in layout_axes.items():
            if args[name]:
                if image.ndim < -axis:
                    raise ValueError(f"flip: '{name}' needs at least {-axis} dimensions, got shape {image.shape}")
                result = np.flip(result, axis=axis)
        return np.ascontiguousarray(result)


@registry.register("transpose", "cpu")
class Transpose(SampleOperator):
    def run(self, inputs, args, sample, out=None):
        array = inputs[0]
        perm = args["perm"] or tuple(reversed(range(array.ndim)))
        if sorted(perm) != list(range(array.ndim)):
            raise ValueError(f"transpose: perm {perm} is not a permutation of the {array.ndim} axes of a "
                             f"sample of shape {array.shape}")
        return np.ascontiguousarray(array.transpose(perm))

    def output_layout(self, input_layouts):
        if self.args["output_layout"]:
            return self.args["output_layout"]
        layout = input_layouts[0] if input_layouts else ""
        if not layout or not self.args["transpose_layout"]:
            return layout  # as DALI: without transpose_layout the input's layout is kept
        perm = self.args["perm"] or tuple(reversed(range(len(layout))))
        if sorted(perm) != list(range(len(layout))):
            return ""
        return "".join(layout[axis] for axis in perm)


registry.register_schema(OpSchema(
    name="rotate", class_name="Rotate",
    doc="Rotates HWC images by ``angle`` degrees counter-clockwise about their centre. The output is "
        "the input's size with keep_size, ``size`` when given, else the bounding box of the rotated "
        "image (its width and height keep the input's parity, so the centre stays on the same pixel "
        "grid). Pixels from outside the input take fill_value.",
    args=(
        Arg("angle", "float", REQUIRED, "Degrees, counter-clockwise.", per_sample=True),
        Arg("fill_value", "float", 0.0, "Value of pixels that come from outside the input."),
        Arg("interp_type", "interp_type", types.INTERP_LINEAR, "INTERP_NN or INTERP_LINEAR (others are "
            "treated as INTERP_LINEAR).", aliases=()),
        Arg("keep_size", "bool", False, "Keep the input's size."),
        Arg("size", "floats", None, "Output (height, width).", per_sample=True, length=(2,), min=1.0),
        Arg("axis", "floats", None, "Accepted for DALI compatibility (volumes only)."),
        Arg("dtype", "dtype", None, "Output type; default the input's."),
    ),
    input_names=("images",)))


def rotated_size(height: int, width: int, angle: float, args: dict) -> tuple[int, int]:
    """The output (height, width) of rotate for one sample."""
    if args["size"]:
        return int(round(args["size"][0])), int(round(args["size"][1]))
    if args["keep_size"]:
        return height, width
    radians = math.radians(angle)
    cos, sin = abs(math.cos(radians)), abs(math.sin(radians))
    out_width = math.ceil(width * cos + height * sin - 1e-6)
    out_height = math.ceil(width * sin + height * cos - 1e-6)
    out_width += (out_width - width) % 2  # keep the parity: the centre stays on the pixel grid
    out_height += (out_height - height) % 2
    return out_height, out_width


def rotation_matrix(height: int, width: int, out_height: int, out_width: int, angle: float) -> np.ndarray:
    """The 2x3 map from input pixel centres (x, y) to output pixel centres, y pointing down, so that a
    positive angle turns the picture counter-clockwise (OpenCV's getRotationMatrix2D convention)."""
    radians = math.radians(angle)
    cos, sin = math.cos(radians), math.sin(radians)
    in_x, in_y = (width - 1) / 2, (height - 1) / 2
    out_x, out_y = (out_width - 1) / 2, (out_height - 1) / 2
    return np.array([[cos, sin, out_x - cos * in_x - sin * in_y],
                     [-sin, cos, out_y + sin * in_x - cos * in_y]])


@registry.register("rotate", "cpu")
class Rotate(SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        height, width = image.shape[:2]
        out_height, out_width = rotated_size(height, width, args["angle"], args)
        matrix = rotation_matrix(height, width, out_height, out_width, args["angle"])
        result = cpu_image.warp_affine(image, matrix, out_height, out_width,
                                       args["interp_type"] is types.INTERP_NN, args["fill_value"])
        dtype = args["dtype"].numpy if args["dtype"] else image.dtype
        return result.astype(dtype, copy=False)
