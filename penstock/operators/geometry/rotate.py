"""``rotate`` of HWC images (and of each frame of FHWC sequences) about their centre, on both devices, and what warp_affine shares with it:
the interpolations they take, the border value and the output type."""
from __future__ import annotations

import math

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.contract import BatchOperator, SampleOperator
from penstock.kernels import cpu_image
from penstock.kernels.volume_warp import affine_volume
from penstock.operators.geometry.layouts import image_layout
from penstock.operators.shared.frames import each_frame, run_on_frames
from penstock.operators.shared.gpu_plan import ExtendsImagePlan, kernel_filter, plan_of, tensors_of
from penstock.operators.shared.images import check_hwc, rotated_size, rotation_edge_map, warp_sizes
from penstock.runtime import native
from penstock.schema import REQUIRED, Arg, OpSchema


# warp_affine and rotate sample by the nearest pixel or bilinearly only (DALI refuses the others)
WARP_INTERPOLATIONS = (types.INTERP_NN, types.INTERP_LINEAR)


registry.register_schema(OpSchema(
    name="rotate", class_name="Rotate",
    doc="Rotates HWC images (and each frame of FHWC sequences alike) by ``angle`` degrees counter-clockwise about "
        "their centre, as DALI, and DHWC volumes about ``axis`` through theirs. The output "
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
        Arg("size", "floats", None, "Output (height, width), or (depth, height, width) of volumes, rounded to the "
            "nearest pixel (given per sample: truncated, as DALI).", per_sample=True, length=(2, 3), min=1.0),
        Arg("axis", "floats", None, "The axis (x, y, z) volumes turn about, any length but 0 (the angle "
            "counter-clockwise looking against it); required for volumes, ignored for images.", per_sample=True,
            length=(3,)),
        Arg("dtype", "dtype", None, "Output type; default the input's."),
    ),
    input_names=("images",)))


def border_value(fill, dtype):
    """A warp's fill_value as DALI keeps it: converted (rounded, saturated) to the output type;
    None (repeat the edge pixels) stays None."""
    return None if fill is None else numeric.saturate(np.asarray(fill, np.float32), dtype)


ROTATE_LAYOUTS = ("HWC", "FHWC", "DHWC")  # each frame of a sequence rotated alike; volumes about ``axis``


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
        if self._layout == "DHWC":
            return rotated_volume(np, image, args, self.name, self.args.get("size") is None)
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


def rotation_3d(axis, radians: np.float32) -> np.ndarray:
    """DALI's rotation3D: the 3x3 rotation by ``radians`` about ``axis`` (x, y, z), in float32 (an
    axis along one coordinate made exactly one, others divided by their length)."""
    f32 = np.float32
    axis = np.asarray(axis, f32)
    if not radians:
        return np.eye(3, dtype=f32)
    # as C's cosf and sinf (correctly rounded here; numpy's float32 ones may differ in the last bit,
    # which moves exact ties of the nearest-neighbour sampler)
    c, s = f32(math.cos(float(radians))), f32(math.sin(float(radians)))
    if np.count_nonzero(axis) == 1:
        axis = np.sign(axis).astype(f32)
    else:
        axis = (axis / f32(np.sqrt(f32(np.sum(axis * axis, dtype=f32))))).astype(f32)
    u, v, w = axis
    one = f32(1) - c
    return np.array([[u * u + (v * v + w * w) * c, u * v * one - w * s, u * w * one + v * s],
                     [u * v * one + w * s, v * v + (u * u + w * w) * c, v * w * one - u * s],
                     [u * w * one - v * s, v * w * one + u * s, w * w + (u * u + v * v) * c]], f32)


def rotated_volume_size(in_xyz: np.ndarray, rotation: np.ndarray) -> np.ndarray:
    """DALI's RotatedCanvasSize of volumes, (x, y, z): the rotated box's extents rounded up (less a
    hundredth), each given the parity of the input axis it mostly comes from."""
    magnitudes = np.abs(rotation)
    out = np.ceil((magnitudes @ in_xyz.astype(np.float32)).astype(np.float32) - np.float32(1e-2)).astype(np.int64)
    parity = in_xyz[np.argmax(magnitudes, axis=1)] % 2
    return out + ((out % 2) ^ parity)


def rotated_volume(xp, volume, args, op_name: str, size_per_sample: bool):
    """rotate of one DHWC volume (numpy or torch) by ``angle`` about ``axis`` about its centre."""
    if volume.ndim != 4:
        raise ValueError(f"{op_name}: expected a DHWC volume (4 dimensions), got shape {tuple(volume.shape)}")
    if args.axis is None or not np.any(np.asarray(args.axis, np.float32)):
        raise ValueError(f"{op_name}: argument 'axis': volumes turn about an axis of 3 values, not all 0; got "
                         f"{None if args.axis is None else list(args.axis)}")
    radians = np.float32(np.float32(args.angle) * np.float32(np.pi / 180))
    in_xyz = np.array(volume.shape[:3][::-1], np.int64)
    if args.size:
        out_xyz = np.array(volume_size(volume, args, op_name, size_per_sample)[::-1], np.int64)
    elif args.keep_size:
        out_xyz = in_xyz
    else:
        out_xyz = rotated_volume_size(in_xyz, rotation_3d(args.axis, radians))
    # translation(in / 2) * rotation(-angle) * translation(-out / 2), in float32 as DALI's
    rotation = rotation_3d(args.axis, np.float32(-radians))
    matrix = np.zeros((3, 4), np.float32)
    matrix[:, :3] = rotation
    half_out = -out_xyz.astype(np.float32) * np.float32(0.5)
    for row in range(3):  # the product's last column summed in DALI's order, in float32
        total = np.float32(0)
        for column in range(3):
            total = np.float32(total + np.float32(rotation[row, column] * half_out[column]))
        matrix[row, 3] = np.float32(total + np.float32(in_xyz[row] * np.float32(0.5)))
    return affine_volume(xp, volume, matrix, tuple(int(n) for n in out_xyz[::-1]), args.interp_type is types.INTERP_NN,
                         *volume_output(xp, volume, args, op_name))


def volume_size(volume, args, op_name: str, size_per_sample: bool) -> tuple:
    """The (depth, height, width) a warp of a volume gives: ``size`` (3 values), else the volume's."""
    if args.size and len(args.size) != 3:
        raise ValueError(f"{op_name}: argument 'size': a volume takes 3 values (depth, height, width), got "
                         f"{len(args.size)}")
    return warp_sizes(tuple(volume.shape[:3]), args.size, size_per_sample)


def volume_output(xp, volume, args, op_name: str) -> tuple:
    """(fill, output type) of a warp of a volume (numpy or torch): warped_dtype and border_value's."""
    dtype = warped_dtype(types.to_numpy_dtype(volume.dtype), args.dtype, op_name)
    return border_value(args.fill_value, dtype), dtype if xp is np else types.to_torch_dtype(dtype)


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
        if self._layout == "DHWC":
            import torch
            per_sample = self.args.get("size") is None
            return [rotated_volume(torch, volume, args[index], self.name, per_sample)
                    for index, volume in enumerate(tensors_of(inputs[0]))]
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
