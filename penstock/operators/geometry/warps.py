"""Warps and random crops: ``warp_affine``, ``experimental.warp_perspective``,
``random_resized_crop`` and ``resize_crop_mirror`` over HWC images, and over the frames of
sequences alike (operators.shared.frames).

Every warp is a map from output pixel edges (x + 0.5, y + 0.5, 1) to the input's (a 3x3 matrix,
the convention of penstock.kernels.image_plan): the rules that build it from the arguments are
plain functions used by both devices. The CPU samples through it with OpenCV; the GPU folds it
into the batch's image plan, so a crop, a resize, a flip, a rotation and a warp in a row are one
resampling in one kernel launch.
"""
from __future__ import annotations

import numpy as np

from penstock import devices, registry, types
from penstock.contract import BatchOperator, OutputSpec, SampleOperator
from penstock.draws import UniformBlocks
from penstock.kernels import cpu_image
from penstock.kernels.volume_warp import affine_volume
from penstock.runtime import native
from penstock.operators.shared import crop_windows as crop_generator
from penstock.operators.shared.crop_windows import RANDOM_CROP_ARGS
from penstock.operators.geometry.crop_flip_transpose import fixed_crop_size
from penstock.operators.geometry.layouts import image_layout, layout_refused, spatial_axes
from penstock.operators.geometry.resize import (fixed_resize_size, resample_filters, resampled_dtype,
                                               resampled_on_device, resize_filter, resize_window,
                                               resize_windows_of_batch)
from penstock.operators.shared.resizing import INTERP_ARGS, RESIZE_ARGS, RESIZE_CHECKS
from penstock.operators.geometry.rotate import (WARP_INTERPOLATIONS, border_value, volume_output, volume_size,
                                                warped_dtype)
from penstock.operators.shared.images import (WINDOW_ARGS, WINDOW_CHECKS, check_hwc, crop_depth, crop_placement,
                                              crop_size, warp_size)
from penstock.operators.shared.frames import each_frame, frame_layout, run_on_frames
from penstock.operators.shared.gpu_plan import ExtendsImagePlan, geometry_plan, kernel_filter, plan_of, tensors_of
from penstock.schema import ArgError, Arg, OpSchema

BORDER_MODES = ("constant", "replicate", "reflect", "reflect_101", "wrap")


def _check_matrix(sizes: tuple, what: str):
    """A schema check: a static ``matrix`` argument has one of ``sizes`` values (or is missing)."""
    def check(static: dict, per_sample: frozenset) -> None:
        matrix = static.get("matrix")
        if matrix is None or "matrix" in per_sample:
            return
        values = np.asarray(matrix, np.float64)
        if values.size not in (0, *sizes):
            raise ArgError(f"argument 'matrix': expected {' or '.join(map(str, sizes))} values ({what}), got an "
                           f"array of shape {values.shape}")
    return check


WARP_ARGS = (
    Arg("size", "floats", None, "Output (height, width), or (depth, height, width) of volumes, rounded to the "
        "nearest pixel (given per sample: truncated, as DALI); default the input's.", per_sample=True,
        length=(2, 3), min=1.0),
    Arg("inverse_map", "bool", True, "True: the matrix maps output coordinates to input ones (as DALI); "
        "False: input to output (it is inverted)."),
    Arg("preserve", "bool", False, "Accepted for DALI compatibility."),
)

registry.register_schema(OpSchema(
    name="warp_affine", class_name="WarpAffine",
    doc="Samples HWC images (uint8, int16, int32 or float32), each frame of FHWC sequences alike, and DHWC volumes "
        "(a 3x4 matrix, 12 values, over (x, y, z); ``size`` (depth, height, width); trilinear) through an "
        "affine map: the output pixel at "
        "(x, y) takes the input at matrix @ (x, y, 1), in coordinates whose origin is the top-left corner of "
        "the top-left pixel (pixel centres at +0.5), as DALI. Give the matrix as 6 values (or a 2x3 array; "
        "per sample from fn.transforms.*), as ``matrix=`` or as the second input. Outside the input: "
        "fill_value, or without one the edge pixels repeated. The output type is the input's or float32 "
        "(of float32 images, any of the four).",
    args=(
        Arg("matrix", "any", None, "The 2x3 matrix (M11, M12, M13, M21, M22, M23); per sample, float32.",
            per_sample=True, input_types=(np.float32,)),
        Arg("fill_value", "float", None, "Value of samples outside the input; None repeats the edge pixels.",
            nullable=True),
        Arg("interp_type", "interp_type", types.INTERP_LINEAR, "INTERP_NN or INTERP_LINEAR.",
            choices=WARP_INTERPOLATIONS),
        Arg("dtype", "dtype", None, "Output type; default the input's."),
        *WARP_ARGS,
    ),
    checks=(_check_matrix((6, 12), "a 2x3 affine matrix, or 3x4 for volumes"),),
    argument_inputs=("matrix",),
    input_names=("images",)))

registry.register_schema(OpSchema(
    name="experimental.warp_perspective", class_name="experimental.WarpPerspective",
    doc="Samples HW, HWC or CHW images, and each frame of FHWC or FCHW sequences alike (up to 4 channels; uint8, "
        "uint16, int16 or float32; the output of "
        "the input's type) through a perspective map (a 3x3 homography; the output pixel at (x, y) takes the "
        "input at (u / w, v / w), (u, v, w) = matrix @ (x, y, 1)), as DALI (OpenCV's warpPerspective on the "
        "CPU). ``pixel_origin`` 'corner' (default) puts the origin at the top-left pixel's corner, 'center' at "
        "its centre (OpenCV's convention). Give the matrix as 9 values or a 3x3 array, per sample, as ``matrix=`` or "
        "the second input. An input without a layout is HW or HWC, by its number of dimensions.",
    args=(
        Arg("matrix", "any", None, "The 3x3 matrix, row by row; per sample, float32.", per_sample=True,
            input_types=(np.float32,)),
        Arg("border_mode", "str", "constant", "Samples outside the input: 'constant' (fill_value), "
            "'replicate', 'reflect', 'reflect_101' or 'wrap'.", choices=BORDER_MODES),
        Arg("fill_value", "floats", (), "Value(s) of samples outside the input with border_mode 'constant' "
            "(other modes ignore it); one, or one per channel of HWC images (default 0)."),
        Arg("pixel_origin", "str", "corner", "'corner' or 'center': where coordinate (0, 0) lies.",
            choices=("corner", "center")),
        Arg("interp_type", "interp_type", types.INTERP_LINEAR, "INTERP_NN, INTERP_LINEAR or INTERP_CUBIC.",
            choices=(*WARP_INTERPOLATIONS, types.INTERP_CUBIC)),
        *WARP_ARGS,
    ),
    checks=(_check_matrix((9,), "a 3x3 homography"),),
    argument_inputs=("matrix",),
    input_names=("images",)))


# ---- the rules, shared by both devices ----------------------------------------------------------
def _translation(dx: float, dy: float) -> np.ndarray:
    return np.array([[1.0, 0.0, dx], [0.0, 1.0, dy], [0.0, 0.0, 1.0]])


def given_matrix(op_name: str, args: dict) -> np.ndarray:
    """The matrix argument as given, as float32 (as DALI reads it): 3x3 (an affine one completed)."""
    if args.matrix is None:
        raise ValueError(f"{op_name}: give the matrix (argument 'matrix' or the second input)")
    values = np.asarray(args.matrix, np.float32)
    affine = op_name == "warp_affine"
    if values.size != (6 if affine else 9):
        raise ValueError(f"{op_name}: argument 'matrix': expected {6 if affine else 9} values, got an array of "
                         f"shape {values.shape}")
    return np.vstack([values.reshape(2, 3), [0.0, 0.0, 1.0]]).astype(np.float32) if affine else values.reshape(3, 3)


def warp_map(op_name: str, args: dict) -> np.ndarray:
    """The 3x3 map from output pixel edges to input ones that ``args`` ask for."""
    matrix = given_matrix(op_name, args).astype(np.float64)
    if args.get("pixel_origin") == "center":
        matrix = _translation(0.5, 0.5) @ matrix @ _translation(-0.5, -0.5)
    if not args.inverse_map:
        if abs(np.linalg.det(matrix)) < 1e-12:
            raise ValueError(f"{op_name}: argument 'matrix' cannot be inverted (inverse_map=False)")
        matrix = np.linalg.inv(matrix)
    return matrix


def warp_border(op_name: str, args: dict) -> tuple[str, float | tuple | None]:
    """(border mode, fill) of a warp: warp_affine repeats the edge without a fill_value."""
    if op_name == "warp_affine":
        return ("replicate", None) if args.fill_value is None else ("constant", args.fill_value)
    return args.border_mode, (args.fill_value or (0.0,))


def _border_values(fill, channels: int, count: int) -> np.ndarray:
    values = np.atleast_1d(np.asarray(fill, np.float64))
    if values.size not in (1, channels):
        raise ValueError(f"fill_value has {values.size} values for {channels}-channel images")
    return np.broadcast_to(values, (count, channels)).copy() if values.size == 1 else np.tile(values, (count, 1))


PERSPECTIVE_TYPES = tuple(np.dtype(name) for name in ("uint8", "uint16", "int16", "float32"))


PERSPECTIVE_LAYOUTS = ("HW", "HWC", "CHW", "FHWC", "FCHW")  # sequences: each frame warped alike


def perspective_layout(spec: OutputSpec, op_name: str) -> str:
    """The layout warp_perspective reads its input in: HW, HWC or CHW (each channel warped as an HW
    plane); without one, HW or HWC by the number of dimensions ('' while that is not known)."""
    if not spec.layout:
        return {2: "HW", 3: "HWC"}.get(spec.ndim, "")
    if spec.layout not in PERSPECTIVE_LAYOUTS:
        raise layout_refused(op_name, spec.layout, PERSPECTIVE_LAYOUTS)
    return spec.layout


AFFINE_LAYOUTS = ("HWC", "FHWC", "DHWC")  # each frame of a sequence warped alike; volumes in 3-D


class WarpDeclaration:
    _layout = "HWC"

    def declare_outputs(self, inputs):
        spec = inputs[0]
        if self.name == "warp_affine":
            self._layout = image_layout(spec.layout, spec.ndim, AFFINE_LAYOUTS, {3: "HWC"}, self.name) or "HWC"
            return spec.but(dtype=self.args.dtype.numpy if self.args.dtype else spec.dtype, layout=self._layout,
                            shape=self._shape(spec, self._layout))
        self._layout = perspective_layout(spec, self.name)
        return spec.but(layout=self._layout, shape=self._shape(spec, self._layout))

    def _shape(self, spec: OutputSpec, layout: str):
        """Every sample's output shape when a fixed size is given and the input's shape is known."""
        size = self.args.get("size")  # absent when per sample
        if not size or not spec.shape or not layout or "D" in layout:
            return None
        height, width = warp_size(0, 0, size, False)
        return tuple({"H": height, "W": width}.get(axis, extent) for axis, extent in zip(layout, spec.shape))


@registry.register("warp_affine", "cpu")
class WarpAffine(WarpDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        if "F" in self._layout and inputs[0].ndim == len(self._layout):
            return each_frame(lambda frame: self._warped(frame, args), inputs[0], self._layout)
        return self._warped(inputs[0], args)

    def _warped(self, image, args):
        if self._layout == "DHWC":
            return warped_volume(np, image, args, self.name, self.args.get("size") is None)
        check_hwc(image, self.name)
        dtype = warped_dtype(image.dtype, args.dtype, self.name)
        height, width = warp_size(image.shape[0], image.shape[1], args.size, self.args.get("size") is None)
        matrix = given_matrix(self.name, args)
        if not args.inverse_map:
            matrix = _inverted(matrix, self.name)
        return cpu_image.affine_sample(image, matrix[:2], height, width, args.interp_type is types.INTERP_NN,
                                       border_value(args.fill_value, dtype), dtype, native.affine_warp)


def warped_volume(xp, volume, args, op_name: str, size_per_sample: bool):
    """warp_affine of one DHWC volume (numpy or torch): a 3x4 matrix (12 values), the output of
    ``size`` (depth, height, width) or the input's."""
    if volume.ndim != 4:
        raise ValueError(f"{op_name}: expected a DHWC volume (4 dimensions), got shape {tuple(volume.shape)}")
    values = np.asarray(args.matrix if args.matrix is not None else (), np.float32)
    if values.size != 12:
        raise ValueError(f"{op_name}: argument 'matrix': a volume takes 12 values (a 3x4 affine matrix), got an "
                         f"array of shape {values.shape}")
    matrix = np.vstack([values.reshape(3, 4), [0.0, 0.0, 0.0, 1.0]]).astype(np.float32)
    if not args.inverse_map:
        matrix = _inverted(matrix, op_name)
    return affine_volume(xp, volume, matrix[:3], volume_size(volume, args, op_name, size_per_sample),
                         args.interp_type is types.INTERP_NN, *volume_output(xp, volume, args, op_name))


def _inverted(matrix: np.ndarray, op_name: str) -> np.ndarray:
    if abs(np.linalg.det(matrix.astype(np.float64))) < 1e-12:
        raise ValueError(f"{op_name}: argument 'matrix' cannot be inverted (inverse_map=False)")
    return np.linalg.inv(matrix.astype(np.float64)).astype(np.float32)


@registry.register("experimental.warp_perspective", "cpu")
class WarpPerspective(WarpDeclaration, SampleOperator):
    _layout = ""

    def run(self, inputs, args, sample, out=None):
        if "F" in self._layout and inputs[0].ndim == len(self._layout):
            frame = frame_layout(self._layout)
            return each_frame(lambda image: self._warped(image, frame, args), inputs[0], self._layout)
        return self._warped(inputs[0], self._layout, args)

    def _warped(self, image, layout, args):
        layout = layout or {2: "HW", 3: "HWC"}.get(image.ndim, "")
        if image.ndim != len(layout):
            raise ValueError(f"{self.name}: expected HW, HWC or CHW images, got shape {image.shape}")
        if image.dtype not in PERSPECTIVE_TYPES:
            raise ValueError(f"{self.name}: takes {', '.join(t.name for t in PERSPECTIVE_TYPES)} images, got "
                             f"{image.dtype}")
        channels = image.shape[2] if layout == "HWC" else 1  # CHW: each channel an HW plane
        if channels > 4:
            raise ValueError(f"{self.name}: takes images of up to 4 channels, got {channels}")
        fill = np.atleast_1d(np.asarray(args.fill_value or (0.0,), np.float64))
        if fill.size > 1 and fill.size != channels:
            raise ValueError(f"{self.name}: argument 'fill_value': {fill.size} values for "
                             f"{'HW planes' if layout != 'HWC' else f'{channels}-channel images'}")
        spatial = image.shape[1:] if layout == "CHW" else image.shape[:2]
        height, width = warp_size(*spatial, args.size, self.args.get("size") is None)
        matrix = given_matrix(self.name, args)
        if args.pixel_origin == "corner":  # to OpenCV's coordinates, in float32 as DALI
            matrix = _translation(-0.5, -0.5).astype(np.float32) @ matrix @ _translation(0.5, 0.5).astype(np.float32)
        planes = image if layout == "CHW" else [image]
        fills = np.broadcast_to(fill, (channels,))
        warped = [cpu_image.perspective_warp(plane, matrix, height, width, args.interp_type, args.border_mode,
                                             fills, args.inverse_map) for plane in planes]
        return np.stack(warped) if layout == "CHW" else warped[0]


class WarpGpu(ExtendsImagePlan, WarpDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        if "F" in self._layout:
            return run_on_frames(self._warped, tensors_of(inputs[0]), args, batch, self._layout)
        return self._warped(inputs[0], args, batch)

    def _warped(self, images, args, batch):
        if self._layout == "DHWC" and self.name == "warp_affine":
            import torch
            per_sample = self.args.get("size") is None
            return [warped_volume(torch, volume, args[index], self.name, per_sample)
                    for index, volume in enumerate(tensors_of(images))]
        if frame_layout(self._layout) not in ("", "HWC"):
            raise ValueError(f"{self.name}: the GPU form takes HWC images; got the layout {self._layout!r}")
        plan = plan_of(images)
        maps = np.stack([warp_map(self.name, a) for a in args]) if args else np.zeros((0, 3, 3))
        per_sample = self.args.get("size") is None
        sizes = [warp_size(h, w, a.size, per_sample) for (h, w), a in zip(plan.sizes, args)]
        border, fill = warp_border(self.name, args[0]) if args else ("replicate", None)
        borders = _border_values(fill, plan.channels, len(args)) if fill is not None else None
        plan = plan.with_warp(maps, sizes, kernel_filter(args[0].interp_type) if args else 0,
                              gpu_border(border), borders)
        if args and args[0].get("dtype") is not None:
            plan = plan.with_output(dtype=types.to_torch_dtype(args[0].dtype))
        return plan


def gpu_border(name: str) -> int:
    """The resample kernel's border rule for a border mode's name."""
    from penstock.kernels import image_plan
    return {"constant": image_plan.BORDER_CONSTANT, "replicate": image_plan.BORDER_CLAMP,
            "reflect": image_plan.BORDER_REFLECT, "reflect_101": image_plan.BORDER_REFLECT_101,
            "wrap": image_plan.BORDER_WRAP}[name]


for _name, _suffix in (("warp_affine", "WarpAffine"), ("experimental.warp_perspective", "WarpPerspective")):
    registry.register(_name, "gpu", requires=devices.gpu_problem)(type(_suffix + "Gpu", (WarpGpu,), {}))


# ---- random_resized_crop and resize_crop_mirror ------------------------------------------------
registry.register_schema(OpSchema(
    name="random_resized_crop", class_name="RandomResizedCrop",
    doc="Cuts a random window of each HWC or CHW image (of FHWC, FCHW or CFHW sequences: one window for every frame "
        "of a sample; its area a random share of the image's, its aspect "
        "ratio random, chosen as DALI's random_crop_generator chooses it) and resizes it to ``size``; the "
        "filter reads past the window's edges where the image goes on.",
    args=(
        Arg("size", "floats", None, "Output (height, width), truncated; one value means a square.", length=(1, 2),
            min=1.0, nullable=False),
        *RANDOM_CROP_ARGS,
        *INTERP_ARGS,
        Arg("dtype", "dtype", None, "Output type; default the input's.", choices=(None, types.UINT8, types.FLOAT)),
    ),
    checks=(lambda static, per_sample: _require_size(static), crop_generator.ordered_ranges),
    input_names=("images",)))


def _require_size(static: dict) -> None:
    if not static.get("size"):
        raise ArgError("argument 'size' is required: the output (height, width)")


def _output_size(args: dict) -> tuple[int, int]:
    """The output (height, width): ``size`` truncated, as DALI reads it."""
    size = args.size
    return int(size[0]), int(size[-1])


RANDOM_RESIZED_CROP_LAYOUTS = ("HWC", "CHW", "FHWC", "FCHW", "CFHW")  # sequences: one window for every frame


def random_window(height: int, width: int, draws, args: dict) -> tuple[int, int, int, int]:
    """(top, left, height, width) of random_resized_crop's window: DALI's RandomCropGenerator's."""
    (top, left), (crop_height, crop_width) = crop_generator.crop_window(
        height, width, draws, args.num_attempts, crop_generator.value_range(args.random_area),
        crop_generator.value_range(args.random_aspect_ratio))
    return top, left, crop_height, crop_width


class RandomResizedCropDeclaration:
    _layout = "HWC"

    def declare_outputs(self, inputs):
        spec = inputs[0]
        self._layout = image_layout(spec.layout, spec.ndim, RANDOM_RESIZED_CROP_LAYOUTS, {3: "HWC"}, self.name) \
            or "HWC"
        return spec.but(dtype=self.args.dtype.numpy if self.args.dtype else spec.dtype, layout=self._layout,
                        shape=_resized_shape(spec, self._layout, _output_size(self.args)))

    def draw(self, rng, count):
        return UniformBlocks.draw(rng, count, self.args.num_attempts)


def _resized_shape(spec: OutputSpec, layout: str, size) -> tuple | None:
    """Every sample's output shape, where the input's shape and the output (height, width) are fixed."""
    if not size or not spec.shape or len(spec.shape) != len(layout) or "D" in layout:
        return None
    return tuple({"H": size[0], "W": size[1]}.get(axis, extent) for axis, extent in zip(layout, spec.shape))


def _image_of(op_name: str, image: np.ndarray, layout: str) -> None:
    if image.ndim != len(layout):
        raise ValueError(f"{op_name}: expected {layout} samples ({len(layout)} dimensions), got shape {image.shape}")


@registry.register("random_resized_crop", "cpu")
class RandomResizedCrop(RandomResizedCropDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        _image_of(self.name, inputs[0], self._layout)
        if "F" in self._layout:
            frame = frame_layout(self._layout)
            return each_frame(lambda image: self._cropped(image, frame, args, sample), inputs[0], self._layout)
        return self._cropped(inputs[0], self._layout, args, sample)

    def _cropped(self, image, layout, args, sample):
        axes = spatial_axes(layout)
        top, left, height, width = random_window(image.shape[axes[0]], image.shape[axes[1]], sample.params, args)
        # the window is the source region of the resampling: its filter reads past the window's edges
        return cpu_image.resample(image, axes, _output_size(args), (top, left), (top + height, left + width),
                                  *resample_filters(args), args.antialias, resampled_dtype(image, args, self.name),
                                  native.resample_axis)


@registry.register("random_resized_crop", "gpu", requires=devices.gpu_problem)
class RandomResizedCropGpu(ExtendsImagePlan, RandomResizedCropDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        if frame_layout(self._layout) != "HWC":
            raise ValueError(f"{self.name}: the GPU form takes HWC images and FHWC sequences; got the layout "
                             f"{self._layout!r}")
        if "F" in self._layout:
            return run_on_frames(self._cropped, tensors_of(inputs[0]), args, batch, self._layout)
        return self._cropped(inputs[0], args, batch)

    def _cropped(self, images, args, batch):
        plan = geometry_plan(images)
        if plan.resized:
            plan = plan_of(plan.materialize()[0])
        first = args[0] if args else None
        windows = [random_window(h, w, batch.params[i], a) for i, ((h, w), a) in enumerate(zip(plan.sizes, args))]
        size = _output_size(first) if first else (0, 0)
        shrinking = bool(windows) and size[0] * size[1] < windows[0][2] * windows[0][3]
        plan = plan.with_crop(windows).with_resize([size] * len(windows),
                                                   kernel_filter(resize_filter(first, shrinking)) if first else 0,
                                                   first.antialias if first else True)
        if first and first.dtype is not None:
            plan = plan.with_output(dtype=types.to_torch_dtype(first.dtype))
        return plan


registry.register_schema(OpSchema(
    name="resize_crop_mirror", class_name="ResizeCropMirror",
    doc="Resizes HWC or CHW images, FHWC, FCHW or CFHW sequences (every frame alike) and DHWC or CDHW volumes "
        "(resize_x / resize_y / resize_z / resize_shorter / resize_longer / size, as resize), "
        "cuts a window (crop, crop_pos_x, crop_pos_y, as crop) and mirrors it (``mirror``: bit 1 "
        "horizontally, bit 2 vertically): one resampling of the input region under the window, as DALI, so "
        "a window reaching outside the resized image repeats its edge.",
    args=(
        *RESIZE_ARGS,
        *WINDOW_ARGS,
        Arg("mirror", "int", 0, "Bit mask of the flips: 1 horizontal, 2 vertical, 3 both. (As DALI, the bits "
            "count the layout's axes from the innermost spatial one: of a CHW image, 1 flips it vertically.)",
            per_sample=True, min=0),
        Arg("dtype", "dtype", None, "Output type; default the input's.", choices=(None, types.UINT8, types.FLOAT)),
        *INTERP_ARGS,
    ),
    checks=(*RESIZE_CHECKS, *WINDOW_CHECKS),
    input_names=("images",)))

# sequences: every frame alike; volumes: resized and cut in depth too (resize_z, crop_d, crop_pos_z)
RESIZE_CROP_MIRROR_LAYOUTS = ("HWC", "CHW", "FHWC", "FCHW", "CFHW", "DHWC", "CDHW")


def _crop_after_resize(height: int, width: int, args: dict) -> tuple[int, int, int, int]:
    """(top, left, height, width) of the window in the resized image (the whole of it without crop)."""
    return crop_placement(height, width, args) or (0, 0, height, width)


def _window_after_resize(sizes: list, args: dict) -> list[tuple[int, int]]:
    """(start, size) of the window along each spatial axis of the resized sample (outermost first):
    crop's (height, width) and, of volumes, its depth placed by crop_pos_z."""
    top, left, height, width = _crop_after_resize(sizes[-2], sizes[-1], args)
    window = [(top, height), (left, width)]
    if len(sizes) == 3:
        depth = crop_depth(args) or sizes[0]
        window.insert(0, (cpu_image.crop_anchor(sizes[0], depth, args.crop_pos_z, args.rounding), depth))
    return window


def mirrored_axes(layout: str, mirror: int) -> tuple[bool, ...]:
    """Whether each spatial axis of ``layout`` (outermost first) is flipped by resize_crop_mirror's
    ``mirror``: DALI tests bit (spatial count - 1 - the axis's place in the layout)."""
    axes = spatial_axes(layout)
    return tuple(len(axes) - 1 - axis >= 0 and bool(mirror >> (len(axes) - 1 - axis) & 1) for axis in axes)


def resize_crop_mirror_window(in_sizes, args: dict, layout: str) -> tuple[list, list, list]:
    """DALI's fused resize_crop_mirror: (output size, source start, source end) per spatial axis: the
    window, placed in the resized image, mapped back onto the resize's source region; flipped axes
    (by the mirror's bits over ``layout``, the sample's) swap their start and end."""
    sizes, lo, hi = resize_window(in_sizes, args)
    lo, hi = ([float(np.float32(value)) for value in ends] for ends in (lo, hi))  # DALI keeps them as float32
    flips = mirrored_axes(layout, args.mirror)
    out, starts, ends = [], [], []
    for d, (anchor, extent) in enumerate(_window_after_resize(sizes, args)):
        ratio = (hi[d] - lo[d]) / sizes[d]
        start, end = anchor * ratio + lo[d], (anchor + extent) * ratio + lo[d]
        if flips[d]:
            start, end = end, start
        out.append(extent)
        starts.append(start)
        ends.append(end)
    return out, starts, ends


class ResizeCropMirrorDeclaration:
    _layout = "HWC"

    def declare_outputs(self, inputs):
        spec = inputs[0]
        self._layout = image_layout(spec.layout, spec.ndim, RESIZE_CROP_MIRROR_LAYOUTS, {3: "HWC"}, self.name) \
            or "HWC"
        return spec.but(dtype=self.args.dtype.numpy if self.args.dtype else spec.dtype, layout=self._layout,
                        shape=_resized_shape(spec, self._layout, self._fixed_size()))

    def _fixed_size(self):
        """The output (height, width) when it does not depend on the input or on per-sample values."""
        if any(name not in self.args for name in ("crop", "crop_h", "crop_w")):  # given per sample
            return None
        if crop_size(self.args) is not None:
            return fixed_crop_size(self.args)
        return fixed_resize_size(self.args)


@registry.register("resize_crop_mirror", "cpu")
class ResizeCropMirror(ResizeCropMirrorDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        _image_of(self.name, inputs[0], self._layout)
        if "F" in self._layout:
            frame = frame_layout(self._layout)
            return each_frame(lambda image: self._resized(image, frame, args), inputs[0], self._layout)
        return self._resized(inputs[0], self._layout, args)

    def _resized(self, image, layout, args):
        axes = spatial_axes(layout)
        # the mirror's bits count the sample's layout, frames included (DALI's: of FHWC, 1 flips H)
        sizes, lo, hi = resize_crop_mirror_window([image.shape[axis] for axis in axes], args, self._layout)
        return cpu_image.resample(image, axes, sizes, lo, hi, *resample_filters(args), args.antialias,
                                  resampled_dtype(image, args, self.name), native.resample_axis)


@registry.register("resize_crop_mirror", "gpu", requires=devices.gpu_problem)
class ResizeCropMirrorGpu(ExtendsImagePlan, ResizeCropMirrorDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        if self._layout == "FHWC":
            return run_on_frames(self._resized, tensors_of(inputs[0]), args, batch, self._layout)
        if self._layout != "HWC":
            return self._resampled_one_by_one(tensors_of(inputs[0]), args)
        return self._resized(inputs[0], args, batch)

    def _resampled_one_by_one(self, samples: list, args) -> list:
        """Planar images, other sequences and volumes: each sample through the CPU form's resampling
        passes (the frames' axis carried along), run on the device."""
        axes = spatial_axes(self._layout)
        results = []
        for index, sample in enumerate(samples):
            sample_args = args[index]
            if sample.dim() != len(self._layout):
                raise ValueError(f"{self.name}: a sample of shape {tuple(sample.shape)} in the layout "
                                 f"{self._layout!r}")
            sizes, lo, hi = resize_crop_mirror_window([sample.shape[axis] for axis in axes], sample_args, self._layout)
            results.append(resampled_on_device(sample, axes, sizes, lo, hi, sample_args))
        return results

    def _resized(self, images, args, batch):
        plan = geometry_plan(images)
        if plan.resized:
            plan = plan_of(plan.materialize()[0])
        sizes, starts, ends = resize_windows_of_batch(plan.sizes, args)
        first = args[0] if args else None
        shrinking = bool(sizes) and sizes[0][0] * sizes[0][1] < plan.sizes[0][0] * plan.sizes[0][1]
        plan = plan.with_resize_windows(sizes, starts, ends, kernel_filter(resize_filter(first, shrinking)) if first
                                        else 0, first.antialias if first else True)
        windows = [_crop_after_resize(h, w, a) for (h, w), a in zip(sizes, args)]
        for (top, left, height, width), (full_h, full_w) in zip(windows, sizes):
            if top < 0 or left < 0 or top + height > full_h or left + width > full_w:
                raise ValueError(f"{self.name}: the window {height}x{width} at ({top}, {left}) reaches outside the "
                                 f"{full_h}x{full_w} resized image")
        plan = plan.with_crop(windows).with_flips([mirrored_axes(self._layout, a.mirror) for a in args])
        if first and first.dtype is not None:
            plan = plan.with_output(dtype=types.to_torch_dtype(first.dtype))
        return plan


__all__ = ["gpu_border", "warp_border", "warp_map"]
