"""Warps and random crops: ``warp_affine``, ``experimental.warp_perspective``,
``random_resized_crop`` and ``resize_crop_mirror`` over HWC images.

Every warp is a map from output pixel edges (x + 0.5, y + 0.5, 1) to the input's (a 3x3 matrix,
the convention of penstock.kernels.image_plan): the rules that build it from the arguments are
plain functions used by both devices. The CPU samples through it with OpenCV; the GPU folds it
into the batch's image plan, so a crop, a resize, a flip, a rotation and a warp in a row are one
resampling in one kernel launch.
"""
from __future__ import annotations

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.contract import BatchOperator, SampleOperator
from penstock.draws import UniformBlocks
from penstock.kernels import cpu_image
from penstock.operators.decoders import RANDOM_CROP_ARGS, random_crop_window
from penstock.operators.geometry import (INTERP_ARGS, _one_size_form, check_hwc, crop_placement, declare_hwc, resample_filters,
                                         resampled_dtype, resize_filter, resize_window, resized_shape, RESIZE_ARGS, WINDOW_ARGS,
                                         fixed_resize_size)
from penstock.operators.gpu_plan import ExtendsImagePlan, geometry_plan, kernel_filter, plan_of
from penstock.schema import ArgError, Arg, OpSchema

BORDER_MODES = ("constant", "replicate", "reflect", "reflect_101", "wrap")


def _check_matrix(size: int, what: str):
    """A schema check: a static ``matrix`` argument has ``size`` values (or is missing)."""
    def check(static: dict, per_sample: frozenset) -> None:
        matrix = static.get("matrix")
        if matrix is None or "matrix" in per_sample:
            return
        values = np.asarray(matrix, np.float64)
        if values.size not in (0, size):
            raise ArgError(f"argument 'matrix': expected {size} values ({what}), got an array of shape "
                           f"{values.shape}")
    return check


def _check_fill_for_border(static: dict, per_sample: frozenset) -> None:
    if static.get("fill_value") and static.get("border_mode", "constant") != "constant":
        raise ArgError("argument 'fill_value' applies to border_mode='constant' only, not "
                       f"{static['border_mode']!r}")


WARP_ARGS = (
    Arg("size", "floats", None, "Output (height, width); default the input's.", per_sample=True, length=(2,),
        min=1.0),
    Arg("inverse_map", "bool", True, "True: the matrix maps output coordinates to input ones (as DALI); "
        "False: input to output (it is inverted)."),
    Arg("interp_type", "interp_type", types.INTERP_LINEAR, "INTERP_NN, INTERP_LINEAR or INTERP_CUBIC."),
    Arg("dtype", "dtype", None, "Output type; default the input's."),
    Arg("preserve", "bool", False, "Accepted for DALI compatibility."),
)

registry.register_schema(OpSchema(
    name="warp_affine", class_name="WarpAffine",
    doc="Samples HWC images through an affine map: the output pixel at (x, y) takes the input at "
        "matrix @ (x, y, 1), in coordinates whose origin is the top-left corner of the top-left pixel "
        "(pixel centres at +0.5), as DALI. Give the matrix as 6 values (or a 2x3 array; per sample "
        "from fn.transforms.*), as ``matrix=`` or as the second input. Outside the input: fill_value, "
        "or without one the edge pixels repeated.",
    args=(
        Arg("matrix", "any", None, "The 2x3 matrix (M11, M12, M13, M21, M22, M23).", per_sample=True),
        Arg("fill_value", "float", None, "Value of samples outside the input; None repeats the edge pixels.",
            nullable=True),
        *WARP_ARGS,
    ),
    checks=(_check_matrix(6, "a 2x3 affine matrix"),),
    argument_inputs=("matrix",),
    input_names=("images",)))

registry.register_schema(OpSchema(
    name="experimental.warp_perspective", class_name="experimental.WarpPerspective",
    doc="Samples HWC images through a perspective map (a 3x3 homography; the output pixel at (x, y) "
        "takes the input at (u / w, v / w), (u, v, w) = matrix @ (x, y, 1)). ``pixel_origin`` 'corner' "
        "(default, as DALI) puts the origin at the top-left pixel's corner, 'center' at its centre "
        "(OpenCV's convention). Give the matrix as 9 values or a 3x3 array, per sample, as ``matrix=`` "
        "or the second input.",
    args=(
        Arg("matrix", "any", None, "The 3x3 matrix, row by row.", per_sample=True),
        Arg("border_mode", "str", "constant", "Samples outside the input: 'constant' (fill_value), "
            "'replicate', 'reflect', 'reflect_101' or 'wrap'.", choices=BORDER_MODES),
        Arg("fill_value", "floats", (), "Value(s) of samples outside the input with border_mode 'constant'; "
            "one, or one per channel (default 0)."),
        Arg("pixel_origin", "str", "corner", "'corner' or 'center': where coordinate (0, 0) lies.",
            choices=("corner", "center")),
        *WARP_ARGS,
    ),
    checks=(_check_matrix(9, "a 3x3 homography"), _check_fill_for_border),
    argument_inputs=("matrix",),
    input_names=("images",)))


# ---- the rules, shared by both devices ----------------------------------------------------------
def _translation(dx: float, dy: float) -> np.ndarray:
    return np.array([[1.0, 0.0, dx], [0.0, 1.0, dy], [0.0, 0.0, 1.0]])


def warp_map(op_name: str, args: dict) -> np.ndarray:
    """The 3x3 map from output pixel edges to input ones that ``args`` ask for."""
    if args["matrix"] is None:
        raise ValueError(f"{op_name}: give the matrix (argument 'matrix' or the second input)")
    values = np.asarray(args["matrix"], np.float64)
    affine = op_name == "warp_affine"
    if values.size != (6 if affine else 9):
        raise ValueError(f"{op_name}: argument 'matrix': expected {6 if affine else 9} values, got an array of "
                         f"shape {values.shape}")
    matrix = np.vstack([values.reshape(2, 3), [0.0, 0.0, 1.0]]) if affine else values.reshape(3, 3)
    if args.get("pixel_origin") == "center":
        matrix = _translation(0.5, 0.5) @ matrix @ _translation(-0.5, -0.5)
    if not args["inverse_map"]:
        if abs(np.linalg.det(matrix)) < 1e-12:
            raise ValueError(f"{op_name}: argument 'matrix' cannot be inverted (inverse_map=False)")
        matrix = np.linalg.inv(matrix)
    return matrix


def warp_size(height: int, width: int, args: dict) -> tuple[int, int]:
    size = args["size"]
    return (int(round(size[0])), int(round(size[1]))) if size else (height, width)


def warp_border(op_name: str, args: dict) -> tuple[str, float | tuple | None]:
    """(border mode, fill) of a warp: warp_affine repeats the edge without a fill_value."""
    if op_name == "warp_affine":
        return ("replicate", None) if args["fill_value"] is None else ("constant", args["fill_value"])
    return args["border_mode"], (args["fill_value"] or (0.0,))


def _border_values(fill, channels: int, count: int) -> np.ndarray:
    values = np.atleast_1d(np.asarray(fill, np.float64))
    if values.size not in (1, channels):
        raise ValueError(f"fill_value has {values.size} values for {channels}-channel images")
    return np.broadcast_to(values, (count, channels)).copy() if values.size == 1 else np.tile(values, (count, 1))


class WarpDeclaration:
    def declare_outputs(self, inputs):
        declare_hwc(inputs[0], self.name)
        size = self.args.get("size")  # absent when per sample
        channels = inputs[0].shape[2] if inputs[0].shape else None
        shape = (int(round(size[0])), int(round(size[1])), channels) if size and channels else None
        return inputs[0].but(dtype=self.args["dtype"].numpy if self.args["dtype"] else inputs[0].dtype, ndim=3,
                             shape=shape)


class Warp(WarpDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        height, width = warp_size(image.shape[0], image.shape[1], args)
        border, fill = warp_border(self.name, args)
        result = cpu_image.warp(image, warp_map(self.name, args), height, width, args["interp_type"], border,
                                _border_values(fill, image.shape[2], 1)[0] if fill is not None else None)
        return numeric.saturate(result, args["dtype"].numpy if args["dtype"] else image.dtype)


class WarpGpu(ExtendsImagePlan, WarpDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        plan = plan_of(inputs[0])
        maps = np.stack([warp_map(self.name, a) for a in args]) if args else np.zeros((0, 3, 3))
        sizes = [warp_size(h, w, a) for (h, w), a in zip(plan.sizes, args)]
        border, fill = warp_border(self.name, args[0]) if args else ("replicate", None)
        borders = _border_values(fill, plan.channels, len(args)) if fill is not None else None
        plan = plan.with_warp(maps, sizes, kernel_filter(args[0]["interp_type"]) if args else 0,
                              gpu_border(border), borders)
        if args and args[0]["dtype"] is not None:
            plan = plan.with_output(dtype=types.to_torch_dtype(args[0]["dtype"]))
        return plan


def gpu_border(name: str) -> int:
    """The resample kernel's border rule for a border mode's name."""
    from penstock.kernels import image_plan
    return {"constant": image_plan.BORDER_CONSTANT, "replicate": image_plan.BORDER_CLAMP,
            "reflect": image_plan.BORDER_REFLECT, "reflect_101": image_plan.BORDER_REFLECT_101,
            "wrap": image_plan.BORDER_WRAP}[name]


for _name, _suffix in (("warp_affine", "WarpAffine"), ("experimental.warp_perspective", "WarpPerspective")):
    registry.register(_name, "cpu")(type(_suffix, (Warp,), {}))
    registry.register(_name, "gpu", requires=devices.gpu_problem)(type(_suffix + "Gpu", (WarpGpu,), {}))


# ---- random_resized_crop and resize_crop_mirror ------------------------------------------------
registry.register_schema(OpSchema(
    name="random_resized_crop", class_name="RandomResizedCrop",
    doc="Cuts a random window of each HWC image (its area a random share of the image's, its aspect "
        "ratio random, as torchvision's RandomResizedCrop and DALI) and resizes it to ``size``.",
    args=(
        Arg("size", "floats", None, "Output (height, width); one value means a square.", length=(1, 2), min=1.0,
            nullable=False),
        *RANDOM_CROP_ARGS,
        *INTERP_ARGS,
        Arg("dtype", "dtype", None, "Output type; default the input's.", choices=(None, types.UINT8, types.FLOAT)),
    ),
    checks=(lambda static, per_sample: _require_size(static),),
    input_names=("images",)))


def _require_size(static: dict) -> None:
    if not static.get("size"):
        raise ArgError("argument 'size' is required: the output (height, width)")


def _output_size(args: dict) -> tuple[int, int]:
    size = args["size"]
    return int(round(size[0])), int(round(size[-1]))


class RandomResizedCropDeclaration:
    def declare_outputs(self, inputs):
        declare_hwc(inputs[0], self.name)
        channels = inputs[0].shape[2] if inputs[0].shape else None
        return inputs[0].but(dtype=self.args["dtype"].numpy if self.args["dtype"] else inputs[0].dtype, ndim=3,
                             shape=(*_output_size(self.args), channels) if channels else None)

    def draw(self, rng, count):
        return UniformBlocks.draw(rng, count, self.args["num_attempts"])


@registry.register("random_resized_crop", "cpu")
class RandomResizedCrop(RandomResizedCropDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        top, left, height, width = random_crop_window(image.shape[0], image.shape[1], sample.params,
                                                      args["random_aspect_ratio"], args["random_area"])
        # the window is the source region of the resampling: its filter reads past the window's edges
        return cpu_image.resample(image, (0, 1), _output_size(args), (top, left), (top + height, left + width),
                                  *resample_filters(args), args["antialias"], resampled_dtype(image, args, self.name))


@registry.register("random_resized_crop", "gpu", requires=devices.gpu_problem)
class RandomResizedCropGpu(ExtendsImagePlan, RandomResizedCropDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        plan = geometry_plan(inputs[0])
        if plan.resized:
            plan = plan_of(plan.materialize()[0])
        first = args[0] if args else None
        windows = [random_crop_window(h, w, batch.params[i], a["random_aspect_ratio"], a["random_area"])
                   for i, ((h, w), a) in enumerate(zip(plan.sizes, args))]
        size = _output_size(first) if first else (0, 0)
        shrinking = bool(windows) and size[0] * size[1] < windows[0][2] * windows[0][3]
        plan = plan.with_crop(windows).with_resize([size] * len(windows),
                                                   kernel_filter(resize_filter(first, shrinking)) if first else 0,
                                                   first["antialias"] if first else True)
        if first and first["dtype"] is not None:
            plan = plan.with_output(dtype=types.to_torch_dtype(first["dtype"]))
        return plan


registry.register_schema(OpSchema(
    name="resize_crop_mirror", class_name="ResizeCropMirror",
    doc="Resizes HWC images (resize_x / resize_y / resize_shorter / resize_longer / size, as resize), "
        "cuts a window (crop, crop_pos_x, crop_pos_y) and mirrors it horizontally where ``mirror`` is 1: "
        "one resampling on both devices.",
    args=(
        *RESIZE_ARGS,
        *WINDOW_ARGS,
        Arg("mirror", "int", 0, "1 flips the sample left-right.", per_sample=True, choices=(0, 1)),
        Arg("dtype", "dtype", None, "Output type; default the input's.", choices=(None, types.UINT8, types.FLOAT)),
        *INTERP_ARGS,
    ),
    checks=(_one_size_form,),
    input_names=("images",)))


def _crop_after_resize(height: int, width: int, args: dict) -> tuple[int, int, int, int]:
    """(top, left, height, width) of the window in the resized image (the whole of it without crop)."""
    return crop_placement(height, width, args) or (0, 0, height, width)


class ResizeCropMirrorDeclaration:
    def declare_outputs(self, inputs):
        declare_hwc(inputs[0], self.name)
        channels = inputs[0].shape[2] if inputs[0].shape else None
        crop = self.args.get("crop")  # absent when per sample
        size = (int(round(crop[0])), int(round(crop[-1]))) if crop else fixed_resize_size(self.args)
        return inputs[0].but(dtype=self.args["dtype"].numpy if self.args["dtype"] else inputs[0].dtype, ndim=3,
                             shape=(*size, channels) if size and channels else None)


@registry.register("resize_crop_mirror", "cpu")
class ResizeCropMirror(ResizeCropMirrorDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        sizes, lo, hi = resize_window(image.shape[:2], args)
        resized = cpu_image.resample(image, (0, 1), sizes, lo, hi, *resample_filters(args), args["antialias"],
                                     resampled_dtype(image, args, self.name))
        height, width = sizes
        top, left, crop_height, crop_width = _crop_after_resize(height, width, args)
        window = resized[max(top, 0):top + crop_height, max(left, 0):left + crop_width]
        if window.shape[:2] != (crop_height, crop_width):
            raise ValueError(f"{self.name}: the window {crop_height}x{crop_width} at ({top}, {left}) reaches "
                             f"outside the {height}x{width} resized image")
        return np.ascontiguousarray(window[:, ::-1] if args["mirror"] else window)


@registry.register("resize_crop_mirror", "gpu", requires=devices.gpu_problem)
class ResizeCropMirrorGpu(ExtendsImagePlan, ResizeCropMirrorDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        plan = geometry_plan(inputs[0])
        if plan.resized:
            plan = plan_of(plan.materialize()[0])
        sizes = [resized_shape(size, a) for size, a in zip(plan.sizes, args)]
        first = args[0] if args else None
        shrinking = bool(sizes) and sizes[0][0] * sizes[0][1] < plan.sizes[0][0] * plan.sizes[0][1]
        plan = plan.with_resize(sizes, kernel_filter(resize_filter(first, shrinking)) if first else 0,
                                first["antialias"] if first else True)
        windows = [_crop_after_resize(h, w, a) for (h, w), a in zip(sizes, args)]
        for (top, left, height, width), (full_h, full_w) in zip(windows, sizes):
            if top < 0 or left < 0 or top + height > full_h or left + width > full_w:
                raise ValueError(f"{self.name}: the window {height}x{width} at ({top}, {left}) reaches outside the "
                                 f"{full_h}x{full_w} resized image")
        plan = plan.with_crop(windows).with_flips([(0, a["mirror"]) for a in args])
        if first and first["dtype"] is not None:
            plan = plan.with_output(dtype=types.to_torch_dtype(first["dtype"]))
        return plan


__all__ = ["gpu_border", "warp_border", "warp_map", "warp_size"]
