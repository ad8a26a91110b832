"""``rotate`` of HWC images (and of each frame of FHWC sequences) about their centre, on both devices, and what warp_affine shares with it:
the interpolations they take, the border value and the output type."""
from __future__ import annotations

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.contract import BatchOperator, SampleOperator
from penstock.kernels import cpu_image
from penstock.operators.geometry.layouts import image_layout
from penstock.operators.shared.frames import each_frame, run_on_frames
from penstock.operators.shared.gpu_plan import ExtendsImagePlan, kernel_filter, plan_of, tensors_of
from penstock.operators.shared.images import check_hwc, rotated_size, rotation_edge_map
from penstock.runtime import native
from penstock.schema import REQUIRED, Arg, OpSchema


# warp_affine and rotate sample by the nearest pixel or bilinearly only (DALI refuses the others)
WARP_INTERPOLATIONS = (types.INTERP_NN, types.INTERP_LINEAR)


registry.register_schema(OpSchema(
    name="rotate", class_name="Rotate",
    doc="Rotates HWC images (and each frame of FHWC sequences alike) by ``angle`` degrees counter-clockwise about "
        "their centre, as DALI. The output "
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


ROTATE_LAYOUTS = ("HWC", "FHWC")  # each frame of a sequence rotated alike


class RotateDeclaration:
    _layout = "HWC"

    def declare_outputs(self, inputs):
        spec = inputs[0]
        self._layout = image_layout(spec.layout, spec.ndim, ROTATE_LAYOUTS, {3: "HWC"}, self.name) or "HWC"
        return spec.but(dtype=self.args.dtype.numpy if self.args.dtype else spec.dtype, shape=None,
                        layout=self._layout)


@registry.register("rotate", "cpu")
class Rotate(RotateDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        if self._layout == "FHWC" and image.ndim == 4:
            return each_frame(lambda frame: self._rotated(frame, args), image, self._layout)
        return self._rotated(image, args)

    def _rotated(self, image, args):
        check_hwc(image, self.name)
        dtype = warped_dtype(image.dtype, args.dtype, self.name)
        height, width = image.shape[:2]
        out_height, out_width = rotated_size(height, width, args.angle, args, self.args.get("size") is None)
        matrix = rotation_edge_map(height, width, out_height, out_width, args.angle)[:2]
        return cpu_image.affine_sample(image, matrix, out_height, out_width, args.interp_type is types.INTERP_NN,
                                       border_value(args.fill_value, dtype), dtype, native.affine_warp)


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
        if self._layout == "FHWC":
            return run_on_frames(self._rotated, tensors_of(inputs[0]), args, batch, self._layout)
        return self._rotated(inputs[0], args, batch)

    def _rotated(self, images, args, batch):
        from penstock.kernels.image_plan import BORDER_CLAMP, BORDER_CONSTANT
        plan = plan_of(images)
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
