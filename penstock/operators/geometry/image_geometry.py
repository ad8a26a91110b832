"""Geometry: ``resize``, ``crop``, ``flip``, ``transpose`` and ``rotate`` over HWC images (and other
layouts where the operator's doc says so): each operator's schema, its rules (output sizes, crop
windows, filter choice: one function each, used by both devices), its CPU implementation (per
sample, OpenCV and numpy) and its GPU implementation (per batch, folded into the fused image plan)."""
from __future__ import annotations

import math

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.capabilities import Resamples
from penstock.contract import BatchOperator, OutputSpec, SampleOperator
from penstock.kernels import cpu_image
from penstock.operators.shared.gpu_plan import ExtendsImagePlan, geometry_plan, kernel_filter, plan_of, tensors_of
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema, given, require_one_of
from penstock.operators.shared.images import CROP_ARGS, WINDOW_CHECKS, check_hwc, crop_placement, crop_size, declare_hwc, rotated_size, rotation_edge_map, with_crop_of


INTERP_ARGS = (
    Arg("interp_type", "interp_type", types.INTERP_LINEAR, "Resampling filter: INTERP_NN, INTERP_LINEAR, "
        "INTERP_CUBIC, INTERP_LANCZOS3, INTERP_TRIANGULAR or INTERP_GAUSSIAN."),
    Arg("min_filter", "interp_type", None, "Filter along axes that shrink (default interp_type)."),
    Arg("mag_filter", "interp_type", None, "Filter along axes that keep their size or grow (default interp_type)."),
    Arg("antialias", "bool", True, "Widen the filter by the shrink factor along axes that shrink (not for "
        "INTERP_NN)."),
    Arg("minibatch_size", "int", 32, "Accepted for DALI compatibility.", min=1),
    Arg("temp_buffer_hint", "int", 0, "Accepted for DALI compatibility.", min=0),
)

# The output size of resize and resize_crop_mirror, documented once; sizes follow the layout's
# spatial axes, outermost first (D, H, W).
RESIZE_ARGS = (
    Arg("resize_x", "float", 0.0, "Output width; negative flips the image horizontally.", per_sample=True),
    Arg("resize_y", "float", 0.0, "Output height; negative flips the image vertically.", per_sample=True),
    Arg("resize_z", "float", 0.0, "Output depth of volumes; negative flips them.", per_sample=True),
    Arg("size", "floats", None, "Output size, one value per spatial axis ((height, width) or (depth, height, "
        "width)); a 0 is a missing size; one value stands for every axis.", per_sample=True, length=(1, 2, 3)),
    Arg("resize_shorter", "float", 0.0, "Length of the shorter side; keeps the aspect ratio (mode 'not_smaller' "
        "with this size along every axis).", per_sample=True, min=0.0),
    Arg("resize_longer", "float", 0.0, "Length of the longer side; keeps the aspect ratio (mode 'not_larger' "
        "with this size along every axis).", per_sample=True, min=0.0),
    Arg("mode", "str", None, "'default' (missing sizes scale by the average scale of the given ones), "
        "'stretch' (missing sizes keep the input's), 'not_larger' (fit inside), 'not_smaller' (cover).",
        choices=(None, "default", "stretch", "not_larger", "not_smaller")),
    Arg("max_size", "floats", None, "Upper limit of the output size, one value or one per axis; with "
        "'not_larger', 'not_smaller', resize_shorter and resize_longer it lowers the common scale; otherwise "
        "it caps each axis on its own.", length=(1, 2, 3), min=0.0),
    Arg("roi_start", "floats", None, "Start of the input region to resize, per spatial axis (with roi_end); "
        "a start past the end flips that axis.", per_sample=True, length=(1, 2, 3)),
    Arg("roi_end", "floats", None, "End of the input region to resize, per spatial axis.", per_sample=True,
        length=(1, 2, 3)),
    Arg("roi_relative", "bool", False, "roi_start and roi_end are fractions of the input size (0 to 1)."),
    Arg("subpixel_scale", "bool", True, "Keep the exact scale of a fractional output size (the input region "
        "moves about its centre); False stretches the input onto the rounded size."),
)


def _one_size_form(static: dict, per_sample: frozenset) -> None:
    forms = [any(given(static, per_sample, name) for name in ("resize_x", "resize_y", "resize_z")),
             given(static, per_sample, "size"), given(static, per_sample, "resize_shorter"),
             given(static, per_sample, "resize_longer")]
    if sum(forms) > 1:
        raise ArgError("give the output size one way: resize_x / resize_y / resize_z, size, resize_shorter "
                       "or resize_longer")
    if given(static, per_sample, "mode") and (forms[2] or forms[3]):
        raise ArgError("resize_shorter, resize_longer and mode exclude each other")
    if given(static, per_sample, "roi_start") != given(static, per_sample, "roi_end"):
        raise ArgError("give roi_start and roi_end together")


RESIZE_CHECKS = (require_one_of("size", "resize_x", "resize_y", "resize_z", "resize_shorter", "resize_longer",
                                what="the output size"), _one_size_form)

# the layouts resize takes, and those it reads an input without a layout as (by its dimensions)
RESIZE_LAYOUTS = ("HWC", "CHW", "FHWC", "FCHW", "DHWC", "CDHW", "FDHWC", "FCDHW")
RESIZE_DEFAULT_LAYOUTS = {3: "HWC", 4: "FHWC", 5: "FDHWC"}

registry.register_schema(OpSchema(
    name="resize", class_name="Resize",
    doc="Resizes images, sequences of them and volumes, as DALI: the layouts " + ", ".join(RESIZE_LAYOUTS) +
        " (without a layout, HWC, FHWC or FDHWC by the number of dimensions); every frame of a sequence alike. "
        "Give the output size as resize_x / resize_y / resize_z (a missing one follows ``mode``), "
        "size, resize_shorter or resize_longer. Sizes are rounded to the nearest pixel, halves away from "
        "zero; with subpixel_scale the scale stays the fractional one. Resampling is separable, axis by "
        "axis, with DALI's filters.",
    args=(
        *RESIZE_ARGS,
        Arg("dtype", "dtype", None, "Output type: the input's (default) or FLOAT.",
            choices=(None, types.UINT8, types.FLOAT)),
        Arg("save_attrs", "bool", False, "Also output each sample's input shape (int32)."),
        Arg("image_type", "image_type", None, "Accepted for DALI compatibility."),
        *INTERP_ARGS,
    ),
    checks=RESIZE_CHECKS,
    num_outputs=lambda static: 2 if static.get("save_attrs") else 1,
    input_names=("images",)))

registry.register_schema(OpSchema(
    name="crop", class_name="Crop",
    doc="Cuts a (height, width) window out of HWC or CHW images (without a layout: HWC), placed by "
        "crop_pos_x / crop_pos_y; without a window the image is kept whole.",
    args=(*CROP_ARGS, Arg("image_type", "image_type", None, "Accepted for DALI compatibility."),
          Arg("dtype", "dtype", None, "Output type; default the input's.")),
    checks=WINDOW_CHECKS,
    input_names=("images",)))

registry.register_schema(OpSchema(
    name="flip", class_name="Flip",
    doc="Mirrors images, sequences and volumes along their W (horizontal), H (vertical) and D (depthwise) axes, "
        "per sample, whatever the layout DALI takes: FDHWC, FHWC, DHWC, HWC, FCDHW, FCHW, CDHW or CHW (an input "
        "without a layout is read as the first of these with its number of dimensions). A flip of an axis the "
        "layout does not have does nothing.",
    args=(Arg("horizontal", "int", 1, "1 flips left-right (the W axis).", per_sample=True, choices=(0, 1)),
          Arg("vertical", "int", 0, "1 flips top-bottom (the H axis).", per_sample=True, choices=(0, 1)),
          Arg("depthwise", "int", 0, "1 flips the D axis of volumes.", per_sample=True, choices=(0, 1))),
    input_names=("images",)))

registry.register_schema(OpSchema(
    name="transpose", class_name="Transpose",
    doc="Permutes the axes of each sample.",
    args=(Arg("perm", "ints", None, "The new order of the axes, e.g. (2, 0, 1) for HWC -> CHW; default "
              "reverses them.", min=0),
          Arg("output_layout", "layout", "", "Layout of the result; default permutes the input's."),
          Arg("transpose_layout", "bool", True, "Permute the layout string with the axes.")),
    checks=(lambda static, per_sample: _check_permutation(static.perm),),
    input_names=("input",)))


def _check_permutation(perm) -> None:
    if perm is not None and sorted(perm) != list(range(len(perm))):
        raise ArgError(f"argument 'perm': {tuple(perm)} is not a permutation of 0..{len(perm) - 1}")


def layout_refused(op_name: str, layout: str, accepted: tuple) -> ValueError:
    """The error of an image operator given a layout it does not take (worded as DALI's)."""
    return ValueError(f'{op_name}: the layout "{layout}" does not match any of the allowed layouts '
                      f'({", ".join(accepted)})')


def image_layout(layout: str, ndim: int | None, accepted: tuple, defaults: dict, op_name: str) -> str:
    """The layout an image operator reads its input in: its own, one of ``accepted``, or for none
    the default for its number of dimensions (DALI's); '' while the dimensions are not known."""
    if not layout:
        if ndim is None:
            return ""
        if ndim not in defaults:
            raise ValueError(f"{op_name}: takes samples of {' or '.join(map(str, sorted(defaults)))} dimensions "
                             f"without a layout, got {ndim}")
        return defaults[ndim]
    if layout not in accepted:
        raise layout_refused(op_name, layout, accepted)
    if ndim is not None and ndim != len(layout):
        raise ValueError(f"{op_name}: a sample of {ndim} dimensions in the layout {layout!r}")
    return layout


def spatial_axes(layout: str) -> tuple[int, ...]:
    """The positions of the spatial axes (D, H, W) of ``layout``, outermost first."""
    return tuple(index for index, name in enumerate(layout) if name in "DHW")


def _resize_request(args: dict, spatial: int) -> tuple[list, str]:
    """The requested size per spatial axis (0: not given) and the mode, from resize's arguments."""
    if args.resize_shorter:
        return [float(args.resize_shorter)] * spatial, "not_smaller"
    if args.resize_longer:
        return [float(args.resize_longer)] * spatial, "not_larger"
    mode = args.mode or "default"
    if args.size is not None and len(args.size):
        size = [float(value) for value in np.ravel(args.size)]
        if len(size) == 1:
            return size * spatial, mode
        if len(size) != spatial:
            raise ValueError(f"argument 'size': {len(size)} values for {spatial} spatial dimensions")
        return size, mode
    return [float(args[name]) for name in ("resize_z", "resize_y", "resize_x")[3 - spatial:]], mode


def _adjust_output_size(requested: list, in_sizes: list, mode: str, max_size) -> list:
    """DALI's AdjustOutputSize: the (fractional, signed) output size along each axis."""
    count = len(in_sizes)
    out = list(requested)
    given_axes = [size != 0 and extent != 0 for size, extent in zip(out, in_sizes)]
    scales = [size / extent if extent else 1.0 for size, extent in zip(out, in_sizes)]
    if not any(given_axes):
        return list(in_sizes)
    if mode in ("default", "stretch"):
        missing = [d for d in range(count) if not given_axes[d]]
        if mode == "default" and missing:
            scale = 1.0
            for d in range(count):
                if given_axes[d]:
                    scale *= abs(scales[d])
            if sum(given_axes) > 1:
                scale = scale ** (1.0 / sum(given_axes))
            for d in missing:
                out[d] = float(np.float32(in_sizes[d] * scale))
        elif missing:
            for d in missing:
                out[d] = in_sizes[d]
        if max_size is not None:
            for d in range(count):
                if max_size[d] > 0 and abs(out[d]) > max_size[d]:
                    out[d] = math.copysign(max_size[d], out[d])
        return out
    final = None
    for d in range(count):
        if given_axes[d]:
            scale = float(np.float32(abs(scales[d])))
            if final is None or (mode == "not_smaller" and scale > final) or (mode == "not_larger" and scale < final):
                final = scale
    if max_size is not None:
        for d in range(count):
            if max_size[d] > 0:
                final = min(final, max_size[d] / in_sizes[d])
    for d in range(count):
        if not given_axes[d] or abs(scales[d]) != final:
            out[d] = float(np.float32(in_sizes[d] * math.copysign(final, scales[d])))
    return out


def resize_window(in_shape, args: dict) -> tuple[list, list, list]:
    """DALI's rules for resize: (output size, source start, source end) along each spatial axis
    of an input of spatial shape ``in_shape`` (outermost first). The source window is the ROI (or
    the whole input), flipped by negative sizes, and moved about its centre so that a fractional
    output size keeps its scale (subpixel_scale)."""
    spatial = len(in_shape)
    requested, mode = _resize_request(args, spatial)
    if args.roi_start is not None and len(args.roi_start):
        starts, ends = (np.broadcast_to(np.ravel(args[name]).astype(np.float64), (spatial,))
                        for name in ("roi_start", "roi_end"))
        lo, hi = [], []
        for start, end, extent in zip(starts, ends, in_shape):
            if args.roi_relative:
                start, end = start * extent, end * extent
            if abs(end - start) < 1e-3:  # DALI widens a degenerate window to a thousandth of a pixel
                offset = 0.5e-3 if start <= end else -0.5e-3
                start, end = start - offset, end + offset
            lo.append(float(np.float32(start)))
            hi.append(float(np.float32(end)))
    else:
        lo, hi = [0.0] * spatial, [float(extent) for extent in in_shape]
    extents = []
    for d in range(spatial):
        if hi[d] < lo[d]:
            lo[d], hi[d] = hi[d], lo[d]
            requested[d] = -requested[d]
        extents.append(float(np.float32(hi[d] - lo[d])))
    max_size = None
    if args.max_size is not None and len(args.max_size):
        max_size = list(np.broadcast_to(np.ravel(args.max_size).astype(np.float64), (spatial,)))
    wanted = [float(np.float32(value)) for value in _adjust_output_size(requested, extents, mode, max_size)]
    sizes = []
    for d in range(spatial):
        size = max(1, int(math.copysign(math.floor(abs(wanted[d]) + 0.5), 1)))
        if wanted[d] < 0:
            lo[d], hi[d] = hi[d], lo[d]
        if args.subpixel_scale and size != abs(wanted[d]):
            adjustment = min(max(size / abs(wanted[d]), -10.0), 10.0)
            centre = 0.5 * lo[d] + 0.5 * hi[d]
            lo[d], hi[d] = centre + (lo[d] - centre) * adjustment, centre + (hi[d] - centre) * adjustment
        sizes.append(size)
    return sizes, lo, hi


def resample_filters(args: dict) -> tuple[str, str]:
    """(min_filter, mag_filter) of a resampling operator, as cpu_image.resample names them."""
    interp = args.interp_type
    return (cpu_image.RESAMPLING_FILTERS[args.min_filter or interp],
            cpu_image.RESAMPLING_FILTERS[args.mag_filter or interp])


def resampled_dtype(image: np.ndarray, args: dict, op_name: str) -> np.dtype:
    """The output type of a resampling operator: the input's, or float32 (DALI allows no other)."""
    if args.dtype is None:
        return image.dtype
    dtype = np.dtype(args.dtype.numpy)
    if dtype != image.dtype and dtype != np.float32:
        raise ValueError(f"{op_name}: argument 'dtype': the output type must be the input's ({image.dtype}) or "
                         f"float, got {dtype}")
    return dtype


def resized_shape(image_shape, args) -> tuple[int, int]:
    """The output (height, width) of an image of (height, width, ...) ``image_shape``."""
    return tuple(resize_window(image_shape[:2], args)[0])


def declare_hwc_layout(spec: OutputSpec, op_name: str) -> OutputSpec:
    """``spec`` as an HWC image operator reads it: refuses other declared layouts (DALI reads an input
    without one as HWC and gives its output that layout)."""
    declare_hwc(spec, op_name)
    if spec.layout not in ("", "HWC"):
        raise layout_refused(op_name, spec.layout, ("HWC",))
    return spec.but(layout="HWC")


def fixed_resize_size(args: dict) -> tuple[int, int] | None:
    """The output (height, width) when it does not depend on the input, else None."""
    size = args.get("size")
    height, width = (size[0], size[-1]) if size is not None and len(size) == 2 else \
        (args.get("resize_y"), args.get("resize_x"))
    if height and width and height > 0 and width > 0 and args.get("mode") in (None, "default", "stretch") \
            and not args.get("max_size") and not args.get("resize_z") and args.get("roi_start") is None:
        return int(math.floor(height + 0.5)), int(math.floor(width + 0.5))
    return None


def resize_filter(args: dict, shrinking: bool) -> types.DALIInterpType:
    """The filter of the GPU's resampling: min_filter when shrinking, mag_filter when enlarging, else interp_type."""
    return (args.min_filter if shrinking else args.mag_filter) or args.interp_type


class ResizeDeclaration(Resamples):
    """What resize declares on both devices."""

    def declare_outputs(self, inputs):
        spec = inputs[0]
        layout = image_layout(spec.layout, spec.ndim, RESIZE_LAYOUTS, RESIZE_DEFAULT_LAYOUTS, self.name)
        self._layout = layout
        fixed = self.fixed_resample_size() if layout == "HWC" else None
        channels = spec.shape[2] if spec.shape and layout == "HWC" else None
        output = spec.but(dtype=self.args.dtype.numpy if self.args.dtype else spec.dtype, layout=layout,
                          shape=(*fixed, channels) if fixed and channels else None)
        if self.args.save_attrs:
            return output, OutputSpec(dtype=np.dtype(np.int32), ndim=1, layout="")
        return output

    def layout_of(self, ndim: int) -> str:
        return getattr(self, "_layout", "") or image_layout("", ndim, RESIZE_LAYOUTS, RESIZE_DEFAULT_LAYOUTS,
                                                            self.name)

    def fixed_resample_size(self):
        return fixed_resize_size(self.args)

    def resampled_size(self, height, width):
        if self.args.resize_z or self.args.roi_start is not None:
            return None
        return resized_shape((height, width), self.args)


@registry.register("resize", "cpu")
class Resize(ResizeDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        layout = self.layout_of(image.ndim)
        if image.ndim != len(layout):
            raise ValueError(f"{self.name}: a sample of shape {image.shape} in the layout {layout!r}")
        axes = spatial_axes(layout)
        sizes, lo, hi = resize_window([image.shape[axis] for axis in axes], args)
        result = cpu_image.resample(image, axes, sizes, lo, hi, *resample_filters(args), args.antialias,
                                    resampled_dtype(image, args, self.name))
        if args.save_attrs:
            return result, np.array([image.shape[axis] for axis in axes], np.int32)
        return result
@registry.register("resize", "gpu", requires=devices.gpu_problem)
class ResizeGpu(ExtendsImagePlan, ResizeDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        if self.layout_of(3) != "HWC":
            raise ValueError(f"{self.name}: the GPU form takes HWC images; got the layout {self.layout_of(3)!r}")
        plan = plan_of(inputs[0])
        if plan.resized or plan.geometry_final:
            plan = plan_of(plan.materialize()[0])
        sizes = _resized_sizes(plan.sizes, args)
        first = args[0]
        shrinking = sizes and sizes[0][0] * sizes[0][1] < plan.sizes[0][0] * plan.sizes[0][1]
        plan = plan.with_resize(sizes, kernel_filter(resize_filter(first, shrinking)), first.antialias)
        if first.dtype is not None:
            plan = plan.with_output(dtype=types.to_torch_dtype(first.dtype))
        return plan


def _resized_sizes(sizes: list, args: list) -> list:
    """Each sample's size after resize; worked out once per distinct input size when the batch
    shares its arguments, once in all when the output size does not depend on the input."""
    first = args[0] if args else None
    if not all(a is first for a in args):
        return [resized_shape(size, a) for size, a in zip(sizes, args)]
    if sizes and fixed_resize_size(first) is not None:
        return [resized_shape(sizes[0], first)] * len(sizes)
    known: dict = {}
    resized = []
    for size in sizes:
        key = tuple(size)
        if key not in known:
            known[key] = resized_shape(size, first)
        resized.append(known[key])
    return resized


def fixed_crop_size(args) -> tuple[int, int] | None:
    """The window's (height, width) when it does not depend on the image: both sizes given, positive."""
    size = crop_size(args)
    return size if size is not None and min(size) > 0 else None


CROP_LAYOUTS = ("HWC", "CHW")


def crop_image(image: np.ndarray, args: dict, op_name: str, layout: str = "HWC") -> np.ndarray:
    """The window of crop / crop_mirror_normalize in an HWC or CHW image; the image itself when no
    window is asked for."""
    hwc = image.transpose(1, 2, 0) if layout == "CHW" else image
    placement = crop_placement(hwc.shape[0], hwc.shape[1], args)
    if placement is None:
        return image
    window = cpu_image.crop_window(hwc, *placement, args.fill_values, args.out_of_bounds_policy, op_name)
    return window.transpose(2, 0, 1) if layout == "CHW" else window


class CropDeclaration:
    _layout = "HWC"

    def declare_outputs(self, inputs):
        spec = inputs[0]
        declare_hwc(spec, self.name)
        layout = spec.layout or "HWC"  # as DALI reads an image without a layout
        if layout not in CROP_LAYOUTS:
            raise layout_refused(self.name, layout, CROP_LAYOUTS)
        self._layout = layout
        size = None if self.args.out_of_bounds_policy == "trim_to_shape" else fixed_crop_size(self.args)
        channels = (spec.shape[2] if layout == "HWC" else spec.shape[0]) if spec.shape else None
        shape = ((*size, channels) if layout == "HWC" else (channels, *size)) if size and channels else None
        return spec.but(dtype=self.args.dtype.numpy if self.args.dtype else spec.dtype, ndim=3, layout=layout,
                        shape=shape)


@registry.register("crop", "cpu")
class Crop(CropDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        result = crop_image(image, args, self.name, self._layout)
        dtype = args.dtype.numpy if args.dtype else image.dtype
        return np.array(result, dtype=dtype, copy=True)


@registry.register("crop", "gpu", requires=devices.gpu_problem)
class CropGpu(ExtendsImagePlan, CropDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        if self._layout != "HWC":
            raise ValueError(f"{self.name}: the GPU form takes HWC images; got the layout {self._layout!r}")
        plan = with_crop_of(geometry_plan(inputs[0]), args, self.name)
        if args[0].dtype is not None:
            plan = plan.with_output(dtype=types.to_torch_dtype(args[0].dtype))
        return plan


FLIP_LAYOUTS = ("FDHWC", "FHWC", "DHWC", "HWC", "FCDHW", "FCHW", "CDHW", "CHW")  # DALI's, in its order
FLIP_AXES = {"horizontal": "W", "vertical": "H", "depthwise": "D"}


def flip_layout(layout: str, ndim: int | None, op_name: str) -> str:
    """The layout flip reads its input in: its own, or for none the first of FLIP_LAYOUTS with its
    number of dimensions (DALI's default); '' while the dimensions are not known."""
    if not layout:
        if ndim is None:
            return ""
        for candidate in FLIP_LAYOUTS:
            if len(candidate) == ndim:
                return candidate
        raise ValueError(f"{op_name}: takes samples of 3 to 5 dimensions ({', '.join(FLIP_LAYOUTS)}), got {ndim}")
    if layout not in FLIP_LAYOUTS:
        raise layout_refused(op_name, layout, FLIP_LAYOUTS)
    return layout


def flipped_axes(layout: str, args: dict) -> tuple[int, ...]:
    """The axes of a sample of ``layout`` that flip's arguments mirror."""
    return tuple(layout.index(name) for flag, name in FLIP_AXES.items() if args[flag] and name in layout)


class FlipDeclaration:
    _layout = ""  # until declared: DALI's default for the samples' dimensions (HWC images)

    def declare_outputs(self, inputs):
        self._layout = flip_layout(inputs[0].layout, inputs[0].ndim, self.name)
        return inputs[0].but(layout=self._layout) if self._layout else inputs[0]

    def layout_of(self, ndim: int) -> str:
        return self._layout or flip_layout("", ndim, self.name)


@registry.register("flip", "cpu")
class Flip(FlipDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        layout = self.layout_of(image.ndim)
        if image.ndim != len(layout):
            raise ValueError(f"{self.name}: a sample of shape {image.shape} in the layout {layout!r}")
        axes = flipped_axes(layout, args)
        return np.ascontiguousarray(np.flip(image, axis=axes)) if axes else image.copy()


@registry.register("flip", "gpu", requires=devices.gpu_problem)
class FlipGpu(ExtendsImagePlan, FlipDeclaration, BatchOperator):
    """HWC images fold into the batch's image plan; other layouts are flipped sample by sample."""

    def run_batch(self, inputs, args, batch):
        import torch
        if self._layout in ("HWC", ""):
            return plan_of(inputs[0]).with_flips([(a.vertical, a.horizontal) for a in args])
        samples = tensors_of(inputs[0])
        results = []
        for sample, sample_args in zip(samples, args):
            axes = flipped_axes(self.layout_of(sample.dim()), sample_args)
            results.append(torch.flip(sample, axes) if axes else sample.clone())
        return results


class TransposeDeclaration:
    def declare_outputs(self, inputs):
        spec = inputs[0]
        perm = self.args.perm
        if perm is not None and spec.ndim is not None and len(perm) != spec.ndim:
            raise ValueError(f"transpose: perm {perm} has {len(perm)} axes, but its input has {spec.ndim}")
        shape = tuple(spec.shape[axis] for axis in (perm or reversed(range(len(spec.shape))))) if spec.shape else None
        return spec.but(layout=self._layout(spec.layout), shape=shape)

    def _layout(self, layout: str) -> str:
        if self.args.output_layout:
            return self.args.output_layout
        if not layout or not self.args.transpose_layout:
            return layout  # as DALI: without transpose_layout the input's layout is kept
        perm = self.args.perm or tuple(reversed(range(len(layout))))
        if sorted(perm) != list(range(len(layout))):
            return ""
        return "".join(layout[axis] for axis in perm)


@registry.register("transpose", "cpu")
class Transpose(TransposeDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        array = inputs[0]
        perm = args.perm or tuple(reversed(range(array.ndim)))
        if len(perm) != array.ndim:
            raise ValueError(f"transpose: perm {perm} does not permute the {array.ndim} axes of a sample of "
                             f"shape {array.shape}")
        return np.ascontiguousarray(array.transpose(perm))


@registry.register("transpose", "gpu", requires=devices.gpu_problem)
class TransposeGpu(TransposeDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        from penstock.kernels.image_plan import ImagePlan
        perm = args[0].perm
        plan = inputs[0] if isinstance(inputs[0], ImagePlan) else None
        if plan is not None and tuple(perm or ()) == (2, 0, 1) and not plan.chw:
            return plan.with_output(chw=True)
        samples = tensors_of(inputs[0])
        perm = perm or tuple(reversed(range(samples[0].dim())))
        if len(perm) != samples[0].dim():
            raise ValueError(f"transpose: perm {perm} does not permute the {samples[0].dim()} axes of a sample "
                             f"of shape {tuple(samples[0].shape)}")
        return [sample.permute(*perm).contiguous() for sample in samples]


# warp_affine and rotate sample by the nearest pixel or bilinearly only (DALI refuses the others)
WARP_INTERPOLATIONS = (types.INTERP_NN, types.INTERP_LINEAR)

registry.register_schema(OpSchema(
    name="rotate", class_name="Rotate",
    doc="Rotates HWC images by ``angle`` degrees counter-clockwise about their centre, as DALI. The output "
        "is the input's size with keep_size, ``size`` when given, else the bounding box of the rotated "
        "image (each side's parity that of the input side it mostly comes from, so that the centre stays "
        "on the pixel grid). Pixels from outside the input take fill_value, or without one the nearest "
        "edge pixel.",
    args=(
        Arg("angle", "float", REQUIRED, "Degrees, counter-clockwise.", per_sample=True),
        Arg("fill_value", "float", None, "Value of pixels that come from outside the input; None repeats "
            "the edge pixels.", nullable=True),
        Arg("interp_type", "interp_type", types.INTERP_LINEAR, "INTERP_NN or INTERP_LINEAR.",
            choices=WARP_INTERPOLATIONS),
        Arg("keep_size", "bool", False, "Keep the input's size."),
        Arg("size", "floats", None, "Output (height, width), rounded to the nearest pixel (given per "
            "sample: truncated, as DALI).", per_sample=True, length=(2,), min=1.0),
        Arg("axis", "floats", None, "Accepted for DALI compatibility (volumes only)."),
        Arg("dtype", "dtype", None, "Output type; default the input's."),
    ),
    input_names=("images",)))


def border_value(fill, dtype):
    """A warp's fill_value as DALI keeps it: converted (rounded, saturated) to the output type;
    None (repeat the edge pixels) stays None."""
    return None if fill is None else numeric.saturate(np.asarray(fill, np.float32), dtype)


class RotateDeclaration:
    def declare_outputs(self, inputs):
        spec = declare_hwc_layout(inputs[0], self.name)
        return spec.but(dtype=self.args.dtype.numpy if self.args.dtype else spec.dtype, shape=None)


@registry.register("rotate", "cpu")
class Rotate(RotateDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        dtype = warped_dtype(image.dtype, args.dtype, self.name)
        height, width = image.shape[:2]
        out_height, out_width = rotated_size(height, width, args.angle, args, self.args.get("size") is None)
        matrix = rotation_edge_map(height, width, out_height, out_width, args.angle)[:2]
        return cpu_image.affine_sample(image, matrix, out_height, out_width, args.interp_type is types.INTERP_NN,
                                       border_value(args.fill_value, dtype), dtype)


# DALI's warps (warp_affine, rotate) take uint8, int16, int32 and float32 images, and give the input's
# type or float32 (float32 images: any of the four)
WARP_TYPES = tuple(np.dtype(name) for name in ("uint8", "int16", "int32", "float32"))


def warped_dtype(input_dtype: np.dtype, dtype, op_name: str) -> np.dtype:
    """The output type of warp_affine and rotate; refuses the pairs DALI has no kernel for."""
    output = np.dtype(dtype.numpy) if dtype is not None else np.dtype(input_dtype)
    if input_dtype not in WARP_TYPES or output not in (input_dtype, np.dtype(np.float32)) \
            and input_dtype != np.float32 or output not in WARP_TYPES:
        raise ValueError(f"{op_name}: takes {', '.join(t.name for t in WARP_TYPES)} images and gives their type or "
                         f"float32 (float32 images: any of these); got {input_dtype} -> {output} (argument 'dtype')")
    return output


@registry.register("rotate", "gpu", requires=devices.gpu_problem)
class RotateGpu(ExtendsImagePlan, RotateDeclaration, BatchOperator):
    """Folded into the batch's image plan as a warp whose outside is fill_value (or the edge)."""

    def run_batch(self, inputs, args, batch):
        from penstock.kernels.image_plan import BORDER_CLAMP, BORDER_CONSTANT
        plan = plan_of(inputs[0])
        maps, sizes = [], []
        for (height, width), a in zip(plan.sizes, args):
            out_height, out_width = rotated_size(height, width, a.angle, a, self.args.get("size") is None)
            maps.append(rotation_edge_map(height, width, out_height, out_width, a.angle))
            sizes.append((out_height, out_width))
        if not args:
            return plan
        fill = args[0].fill_value
        borders = None if fill is None else np.full((len(args), plan.channels), fill, np.float64)
        plan = plan.with_warp(np.stack(maps), sizes, kernel_filter(args[0].interp_type),
                              BORDER_CLAMP if fill is None else BORDER_CONSTANT, borders)
        if args[0].dtype is not None:
            plan = plan.with_output(dtype=types.to_torch_dtype(args[0].dtype))
        return plan
