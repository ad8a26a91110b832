"""Geometry: ``resize``, ``crop``, ``flip``, ``transpose`` and ``rotate`` over HWC images (and other
layouts where the operator's doc says so): each operator's schema, its rules (output sizes, crop
windows, filter choice: one function each, used by both devices), its CPU implementation (per
sample, OpenCV and numpy) and its GPU implementation (per batch, folded into the fused image plan)."""
from __future__ import annotations

import math

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.batch import one_value
from penstock.contract import BatchArgs, BatchOperator, OutputSpec, SampleOperator
from penstock.kernels import cpu_image
from penstock.operators.gpu_plan import ExtendsImagePlan, geometry_plan, kernel_filter, plan_of, tensors_of
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema, given, require_one_of

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


def _one_window_form(static: dict, per_sample: frozenset) -> None:
    if given(static, per_sample, "crop") and (given(static, per_sample, "crop_h") or given(static, per_sample, "crop_w")):
        raise ArgError("give the window as crop=(height, width) or as crop_h and crop_w, not both")


# the checks of a call that cuts a window of a fixed size (crop, decoders.image_crop)
WINDOW_REQUIRED = (require_one_of("crop", ("crop_h", "crop_w"), what="the window size"), _one_window_form)

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
    checks=(require_one_of("size", "resize_x", "resize_y", "resize_shorter", "resize_longer",
                           what="the output size"),),
    input_names=("images",)))

registry.register_schema(OpSchema(
    name="crop", class_name="Crop",
    doc="Cuts a (height, width) window out of HWC images, placed by crop_pos_x / crop_pos_y.",
    args=(*CROP_ARGS, Arg("image_type", "image_type", None, "Accepted for DALI compatibility."),
          Arg("dtype", "dtype", None, "Output type; default the input's.")),
    checks=WINDOW_REQUIRED,
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
    checks=(lambda static, per_sample: _check_permutation(static["perm"]),),
    input_names=("input",)))


def _check_permutation(perm) -> None:
    if perm is not None and sorted(perm) != list(range(len(perm))):
        raise ArgError(f"argument 'perm': {tuple(perm)} is not a permutation of 0..{len(perm) - 1}")


def resized_shape(image_shape, args) -> tuple[int, int]:
    size = args["size"]
    resize_y, resize_x = (size[0], size[-1]) if size else (args["resize_y"], args["resize_x"])
    return cpu_image.output_size(image_shape[0], image_shape[1], resize_x, resize_y, args["resize_shorter"],
                                 args["resize_longer"], args["mode"], args["max_size"])


def check_hwc(image: np.ndarray, op_name: str) -> None:
    if image.ndim != 3:
        raise ValueError(f"{op_name}: expected an HWC image (3 dimensions), got shape {image.shape}")


def declare_hwc(spec: OutputSpec, op_name: str) -> None:
    """Rejects, before anything runs, inputs declared with other than 3 dimensions."""
    if spec.ndim is not None and spec.ndim != 3:
        raise ValueError(f"{op_name}: expected HWC images (3 dimensions), but its input has {spec.ndim}")


def fixed_resize_size(args: dict) -> tuple[int, int] | None:
    """The output (height, width) when it does not depend on the input, else None."""
    size = args.get("size")
    height, width = (size[0], size[-1]) if size else (args.get("resize_y"), args.get("resize_x"))
    if height and width and args.get("mode") in ("default", "stretch") and not args.get("max_size"):
        return int(round(height)), int(round(width))
    return None


def resize_filter(args: dict, shrinking: bool) -> types.DALIInterpType:
    """The filter resize uses: min_filter when shrinking, mag_filter when enlarging, else interp_type."""
    return (args["min_filter"] if shrinking else args["mag_filter"]) or args["interp_type"]


class ResizeDeclaration:
    """What resize declares on both devices."""

    def declare_outputs(self, inputs):
        declare_hwc(inputs[0], self.name)
        fixed = self.fixed_resample_size()
        channels = inputs[0].shape[2] if inputs[0].shape else None
        return inputs[0].but(dtype=self.args["dtype"].numpy if self.args["dtype"] else inputs[0].dtype, ndim=3,
                             shape=(*fixed, channels) if fixed and channels else None)

    def fixed_resample_size(self):
        return fixed_resize_size(self.args)

    def resampled_size(self, height, width):
        return resized_shape((height, width), self.args)


@registry.register("resize", "cpu")
class Resize(ResizeDeclaration, SampleOperator):
    def output_spec(self, inputs, args):
        image = inputs[0]
        if image.ndim != 3:
            return None
        height, width = resized_shape(image.shape, args)
        return (height, width, image.shape[2]), (args["dtype"].numpy if args["dtype"] else image.dtype)

    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        height, width = resized_shape(image.shape, args)
        interp = resize_filter(args, height * width < image.shape[0] * image.shape[1])
        dtype = args["dtype"].numpy if args["dtype"] else image.dtype
        source = image.astype(dtype) if dtype != image.dtype else image
        return cpu_image.resize(source, height, width, interp, args["antialias"], out)


@registry.register("resize", "gpu", requires=devices.gpu_problem)
class ResizeGpu(ExtendsImagePlan, ResizeDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        plan = plan_of(inputs[0])
        if plan.resized or plan.geometry_final:
            plan = plan_of(plan.materialize()[0])
        sizes = _resized_sizes(plan.sizes, args)
        first = args[0]
        shrinking = sizes and sizes[0][0] * sizes[0][1] < plan.sizes[0][0] * plan.sizes[0][1]
        plan = plan.with_resize(sizes, kernel_filter(resize_filter(first, shrinking)), first["antialias"])
        if first["dtype"] is not None:
            plan = plan.with_output(dtype=types.to_torch_dtype(first["dtype"]))
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


def crop_size(args) -> tuple[int, int] | None:
    """The window's (height, width); None where not given, or given per sample and read from the
    operator's build-time arguments (which hold no per-sample ones)."""
    crop = args.get("crop")
    if crop:
        return int(round(crop[0])), int(round(crop[-1]))
    if args.get("crop_h") and args.get("crop_w"):
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


def _crop_args_shared(args) -> bool:
    """Whether every sample has the same crop arguments: none of CROP_ARGS given per sample, or one
    dict for every sample (compared in C, not sample by sample in Python)."""
    if not len(args):
        return False
    if isinstance(args, BatchArgs):
        return not any(args.varies(arg.name) for arg in CROP_ARGS)
    return one_value(args) is not None


def _crop_args(args) -> list:
    """The samples' argument dicts as far as the crop reads them: the first sample's for every
    sample when they share the crop arguments (BatchArgs then makes no dict per sample)."""
    return [args[0]] * len(args) if _crop_args_shared(args) else list(args)


def crop_windows(plan, args: list, op_name: str) -> list:
    """Each sample's crop window for a GPU plan; worked out once per distinct (size, arguments):
    samples share argument dictionaries when their per-sample arguments are equal."""
    sizes = plan.sizes
    if _crop_args_shared(args) and one_value(sizes) is not None:
        # one size and one set of arguments (a crop after a fixed-size resize): one window for all
        (height, width), a = sizes[0], args[0]
        placement = crop_placement(height, width, a) or (0, 0, height, width)
        return [cpu_image.fit_window(*placement, height, width, a["out_of_bounds_policy"], op_name)] * len(args)
    args = _crop_args(args)
    known: dict = {}
    windows = []
    for (height, width), a in zip(plan.sizes, args):
        key = (height, width, id(a))
        window = known.get(key)
        if window is None:
            placement = crop_placement(height, width, a) or (0, 0, height, width)
            window = known[key] = cpu_image.fit_window(*placement, height, width, a["out_of_bounds_policy"], op_name)
        windows.append(window)
    return windows


def with_crop_of(plan, args: list, op_name: str):
    """The plan with each sample's window (crop / crop_mirror_normalize) and its fill values."""
    from penstock.kernels.image_plan import BORDER_FILL_OUTSIDE, ImagePlan
    args = _crop_args(args)
    if plan.border != BORDER_FILL_OUTSIDE and any(a["out_of_bounds_policy"] == "pad" for a in args):
        plan = ImagePlan.of(plan.materialize()[0])  # the plan's outside is a warp's border, not this fill
    return plan.with_crop(crop_windows(plan, args, op_name)).with_fills([a["fill_values"] for a in args])


class CropDeclaration:
    def declare_outputs(self, inputs):
        declare_hwc(inputs[0], self.name)
        size = None if self.args["out_of_bounds_policy"] == "trim_to_shape" else crop_size(self.args)
        channels = inputs[0].shape[2] if inputs[0].shape else None
        return inputs[0].but(dtype=self.args["dtype"].numpy if self.args["dtype"] else inputs[0].dtype, ndim=3,
                             shape=(*size, channels) if size and channels else None)


@registry.register("crop", "cpu")
class Crop(CropDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        result = crop_image(image, args, self.name)
        dtype = args["dtype"].numpy if args["dtype"] else image.dtype
        return np.array(result, dtype=dtype, copy=True)


@registry.register("crop", "gpu", requires=devices.gpu_problem)
class CropGpu(ExtendsImagePlan, CropDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        plan = with_crop_of(geometry_plan(inputs[0]), args, self.name)
        if args[0]["dtype"] is not None:
            plan = plan.with_output(dtype=types.to_torch_dtype(args[0]["dtype"]))
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
        raise ValueError(f"{op_name}: takes the layouts {', '.join(FLIP_LAYOUTS)}; got {layout!r}")
    return layout


def flipped_axes(layout: str, args: dict) -> tuple[int, ...]:
    """The axes of a sample of ``layout`` that flip's arguments mirror."""
    return tuple(layout.index(name) for flag, name in FLIP_AXES.items() if args[flag] and name in layout)


class FlipDeclaration:
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
        if self._layout == "HWC":
            return plan_of(inputs[0]).with_flips([(a["vertical"], a["horizontal"]) for a in args])
        samples = tensors_of(inputs[0])
        results = []
        for sample, sample_args in zip(samples, args):
            axes = flipped_axes(self.layout_of(sample.dim()), sample_args)
            results.append(torch.flip(sample, axes) if axes else sample.clone())
        return results


class TransposeDeclaration:
    def declare_outputs(self, inputs):
        spec = inputs[0]
        perm = self.args["perm"]
        if perm is not None and spec.ndim is not None and len(perm) != spec.ndim:
            raise ValueError(f"transpose: perm {perm} has {len(perm)} axes, but its input has {spec.ndim}")
        shape = tuple(spec.shape[axis] for axis in (perm or reversed(range(len(spec.shape))))) if spec.shape else None
        return spec.but(layout=self._layout(spec.layout), shape=shape)

    def _layout(self, layout: str) -> str:
        if self.args["output_layout"]:
            return self.args["output_layout"]
        if not layout or not self.args["transpose_layout"]:
            return layout  # as DALI: without transpose_layout the input's layout is kept
        perm = self.args["perm"] or tuple(reversed(range(len(layout))))
        if sorted(perm) != list(range(len(layout))):
            return ""
        return "".join(layout[axis] for axis in perm)


@registry.register("transpose", "cpu")
class Transpose(TransposeDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        array = inputs[0]
        perm = args["perm"] or tuple(reversed(range(array.ndim)))
        if len(perm) != array.ndim:
            raise ValueError(f"transpose: perm {perm} does not permute the {array.ndim} axes of a sample of "
                             f"shape {array.shape}")
        return np.ascontiguousarray(array.transpose(perm))


@registry.register("transpose", "gpu", requires=devices.gpu_problem)
class TransposeGpu(TransposeDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        from penstock.kernels.image_plan import ImagePlan
        perm = args[0]["perm"]
        plan = inputs[0] if isinstance(inputs[0], ImagePlan) else None
        if plan is not None and tuple(perm or ()) == (2, 0, 1) and not plan.chw:
            return plan.with_output(chw=True)
        samples = tensors_of(inputs[0])
        perm = perm or tuple(reversed(range(samples[0].dim())))
        if len(perm) != samples[0].dim():
            raise ValueError(f"transpose: perm {perm} does not permute the {samples[0].dim()} axes of a sample "
                             f"of shape {tuple(samples[0].shape)}")
        return [sample.permute(*perm).contiguous() for sample in samples]


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


class RotateDeclaration:
    def declare_outputs(self, inputs):
        declare_hwc(inputs[0], self.name)
        return inputs[0].but(dtype=self.args["dtype"].numpy if self.args["dtype"] else inputs[0].dtype, shape=None)


@registry.register("rotate", "cpu")
class Rotate(RotateDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        height, width = image.shape[:2]
        out_height, out_width = rotated_size(height, width, args["angle"], args)
        matrix = rotation_matrix(height, width, out_height, out_width, args["angle"])
        result = cpu_image.warp_affine(image, matrix, out_height, out_width,
                                       args["interp_type"] is types.INTERP_NN, args["fill_value"])
        dtype = args["dtype"].numpy if args["dtype"] else image.dtype
        return numeric.saturate(result, dtype)


def rotation_edge_map(height: int, width: int, out_height: int, out_width: int, angle: float) -> np.ndarray:
    """rotation_matrix as the 3x3 map from output pixel edges to input ones (the image plan's)."""
    forward = np.vstack([rotation_matrix(height, width, out_height, out_width, angle), [0.0, 0.0, 1.0]])
    to_centres = np.array([[1.0, 0.0, -0.5], [0.0, 1.0, -0.5], [0.0, 0.0, 1.0]])
    to_edges = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])
    return to_edges @ np.linalg.inv(forward) @ to_centres


@registry.register("rotate", "gpu", requires=devices.gpu_problem)
class RotateGpu(ExtendsImagePlan, RotateDeclaration, BatchOperator):
    """Folded into the batch's image plan as a warp whose outside is fill_value."""

    def run_batch(self, inputs, args, batch):
        from penstock.kernels.image_plan import BORDER_CONSTANT
        plan = plan_of(inputs[0])
        maps, sizes = [], []
        for (height, width), a in zip(plan.sizes, args):
            out_height, out_width = rotated_size(height, width, a["angle"], a)
            maps.append(rotation_edge_map(height, width, out_height, out_width, a["angle"]))
            sizes.append((out_height, out_width))
        if not args:
            return plan
        nearest = args[0]["interp_type"] is types.INTERP_NN
        borders = np.full((len(args), plan.channels), args[0]["fill_value"], np.float64)
        plan = plan.with_warp(np.stack(maps), sizes, kernel_filter(types.INTERP_NN if nearest else types.INTERP_LINEAR),
                              BORDER_CONSTANT, borders)
        if args[0]["dtype"] is not None:
            plan = plan.with_output(dtype=types.to_torch_dtype(args[0]["dtype"]))
        return plan
