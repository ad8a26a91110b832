"""Displacement distortions: ``jitter``, ``water`` and ``sphere`` over HWC images, as DALI's.

Each output pixel (x, y) (integer indices) takes the input at a source point computed from its
position, in DALI's coordinates: input pixel i covers [i, i + 1), so its centre is at i + 0.5.
INTERP_NN takes the pixel that contains the point; INTERP_LINEAR interpolates between the four
pixel centres around it. Points and taps outside the image read ``fill_value``. ``mask`` (per
sample) 0 leaves a sample as it is.

- water: the point (x + ampl_x sin(freq_x y + phase_x), y + ampl_y cos(freq_y x + phase_y)).
- sphere: about the centre (W/2, H/2), the pixel centre's offset v (from the image centre) is
  stretched to v |v| / d, d = int(max(W/2, H/2)).
- jitter: each pixel moves by a random whole offset in [-(nDegree // 2), nDegree - nDegree // 2]
  on each axis, clamped to the image (as DALI, whose jitter never reads outside the image).

The source points are written once, against the array API numpy and torch share, so both devices
compute the same numbers. Jitter's offsets come from an integer hash of (the sample's seed, the
pixel, the axis), so the CPU and the GPU move each pixel alike for a seed.
"""
from __future__ import annotations

import math

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.contract import BatchOperator, SampleOperator
from penstock.operators.shared.images import check_hwc, declare_hwc
from penstock.operators.shared.gpu_plan import tensors_of
from penstock.schema import Arg, OpSchema

INTERP_CHOICES = (types.INTERP_NN, types.INTERP_LINEAR)
SHARED_ARGS = (
    Arg("fill_value", "float", 0.0, "Value of points outside the input."),
    Arg("interp_type", "interp_type", types.INTERP_NN, "INTERP_NN or INTERP_LINEAR.", choices=INTERP_CHOICES),
    Arg("mask", "int", 1, "Per sample (an operator's output): 0 leaves the sample as it is, other values "
        "distort it. As in DALI, a plain value changes nothing (every sample is distorted).", per_sample=True),
)
INPUT_TYPES = (np.dtype(np.uint8), np.dtype(np.float32))  # DALI's displacement filters take these alone

registry.register_schema(OpSchema(
    name="water", class_name="Water",
    doc="Makes HWC images look as seen through water: output pixel (x, y) takes the input at (x + ampl_x * "
        "sin(freq_x * y + phase_x), y + ampl_y * cos(freq_y * x + phase_y)), in coordinates where input pixel i "
        "covers [i, i + 1) (as DALI; with INTERP_LINEAR that puts the point half a pixel before the centre).",
    args=(Arg("ampl_x", "float", 10.0, "Amplitude of the wave along x, in pixels."),
          Arg("ampl_y", "float", 10.0, "Amplitude of the wave along y, in pixels."),
          Arg("freq_x", "float", 2 * math.pi / 128, "Frequency of the wave along x (radians per pixel of y)."),
          Arg("freq_y", "float", 2 * math.pi / 128, "Frequency of the wave along y (radians per pixel of x)."),
          Arg("phase_x", "float", 0.0, "Phase of the wave along x, in radians."),
          Arg("phase_y", "float", 0.0, "Phase of the wave along y, in radians."),
          *SHARED_ARGS),
    input_names=("images",)))

registry.register_schema(OpSchema(
    name="sphere", class_name="Sphere",
    doc="Bulges HWC images as if mapped onto a sphere: the offset v of each pixel centre from the image centre "
        "takes the input at centre + v * |v| / d, d = int(max(width, height) / 2).",
    args=SHARED_ARGS,
    input_names=("images",)))

registry.register_schema(OpSchema(
    name="jitter", class_name="Jitter",
    doc="Moves every pixel of HWC images by a random whole offset in [-(nDegree // 2), nDegree - nDegree // 2] "
        "along each axis, clamped to the image; every channel of a pixel moves alike. The offsets depend on the "
        "seed alone, and are the same on the CPU and the GPU.",
    args=(Arg("nDegree", "int", 2, "The size of the neighbourhood pixels are taken from.", min=1),
          *SHARED_ARGS),
    input_names=("images",)))


# ---- the rules, shared by both devices (xp: numpy or torch) -------------------------------------
def ragged_grid(xp, height: int, width: int, like):
    """Integer row and column indices (float32) of every pixel, as arrays of xp on the device of ``like``."""
    if xp is np:
        y, x = np.mgrid[0:height, 0:width]
        return y.astype(np.float32), x.astype(np.float32)
    rows = xp.arange(height, dtype=xp.float32, device=like.device)
    columns = xp.arange(width, dtype=xp.float32, device=like.device)
    y, x = xp.meshgrid(rows, columns, indexing="ij")
    return y, x


def _to_int(xp, values):
    return values.astype(np.int64) if xp is np else values.long()


def water_points(xp, height: int, width: int, args: dict, like):
    y, x = ragged_grid(xp, height, width, like)
    # plain Python numbers: numpy and torch both compute them with float32 arrays in float32
    source_x = x + args.ampl_x * xp.sin(args.freq_x * y + args.phase_x)
    source_y = y + args.ampl_y * xp.cos(args.freq_y * x + args.phase_y)
    return source_x, source_y


def sphere_points(xp, height: int, width: int, args: dict, like):
    y, x = ragged_grid(xp, height, width, like)
    mid_x, mid_y = width * 0.5, height * 0.5
    radius = float(int(max(mid_x, mid_y)))
    offset_x, offset_y = x + 0.5 - mid_x, y + 0.5 - mid_y
    stretch = xp.sqrt(offset_x * offset_x + offset_y * offset_y) / radius
    return mid_x + stretch * offset_x, mid_y + stretch * offset_y


def _hash32(values):
    """A 32-bit integer hash (xorshift-multiply) of int64 values below 2**32, for numpy and torch alike."""
    values = values & 0xFFFFFFFF
    values = ((values >> 16) ^ values) * 0x45D9F3B & 0xFFFFFFFF
    values = ((values >> 16) ^ values) * 0x45D9F3B & 0xFFFFFFFF
    return (values >> 16) ^ values


def jitter_points(xp, height: int, width: int, args: dict, like, seed: int):
    """Pixel centres moved by whole offsets drawn from a hash of (seed, pixel, axis), clamped to the image."""
    y, x = ragged_grid(xp, height, width, like)
    pixel = _to_int(xp, y) * width + _to_int(xp, x)
    seed_hash = int(_hash32(np.int64(seed)))
    degree = args.nDegree
    low = -(degree // 2)
    moved = []
    for axis, (position, extent) in enumerate(((x, width), (y, height))):
        offset = _hash32((pixel * 2 + axis) ^ seed_hash) % (degree + 1) + low
        offset = offset.astype(np.float32) if xp is np else offset.to(xp.float32)
        moved.append(xp.clip(position + offset, 0, extent - 1) + 0.5)
    return moved[0], moved[1]


def sample_at(xp, image, source_x, source_y, nearest: bool, fill: float):
    """The HWC float32 image sampled at the points (source_x, source_y), DALI's coordinates (pixel i
    covers [i, i + 1)); points and taps outside the image read ``fill``."""
    height, width = image.shape[0], image.shape[1]
    values = image.astype(np.float32) if xp is np else image.float()
    fill = float(fill)

    def tap(rows, columns):
        inside = (rows >= 0) & (rows < height) & (columns >= 0) & (columns < width)
        picked = values[xp.clip(rows, 0, height - 1), xp.clip(columns, 0, width - 1)]
        return xp.where(inside[..., None], picked, fill)

    if nearest:
        return tap(_to_int(xp, xp.floor(source_y)), _to_int(xp, xp.floor(source_x)))
    centre_x, centre_y = source_x - 0.5, source_y - 0.5
    left, top = xp.floor(centre_x), xp.floor(centre_y)
    weight_x, weight_y = (centre_x - left)[..., None], (centre_y - top)[..., None]
    left, top = _to_int(xp, left), _to_int(xp, top)
    upper = tap(top, left) * (1 - weight_x) + tap(top, left + 1) * weight_x
    lower = tap(top + 1, left) * (1 - weight_x) + tap(top + 1, left + 1) * weight_x
    return upper * (1 - weight_y) + lower * weight_y


def distorted(xp, kind: str, image, args: dict, seed: int):
    """One sample's output (float32) of water, sphere or jitter."""
    height, width = image.shape[0], image.shape[1]
    if kind == "jitter":
        points = jitter_points(xp, height, width, args, image, seed)
    else:
        points = (water_points if kind == "water" else sphere_points)(xp, height, width, args, image)
    return sample_at(xp, image, *points, args.interp_type is types.INTERP_NN, args.fill_value)


def check_input(layout: str, dtype, op_name: str) -> None:
    if layout and layout != "HWC":
        raise ValueError(f"{op_name}: takes HWC images, got the layout '{layout}'")
    if dtype is not None and np.dtype(dtype) not in INPUT_TYPES:
        raise TypeError(f"{op_name}: takes uint8 or float images, got {np.dtype(dtype)}")


class DistortionDeclaration:
    kind = ""

    def declare_outputs(self, inputs):
        declare_hwc(inputs[0], self.name)
        check_input(inputs[0].layout, inputs[0].dtype, self.name)
        return inputs[0]

    def masked(self, args: dict) -> bool:
        """Whether a sample stays as it is: a per-sample mask of 0 (a plain mask is not in effect)."""
        return "mask" not in self.args and not args.mask

    def draw(self, rng, count):
        return rng.integers(0, 2**31 - 1, count) if self.kind == "jitter" else None


class Distortion(DistortionDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        check_input("", image.dtype, self.name)
        if self.masked(args):
            return image.copy()
        seed = int(sample.params) if sample.params is not None else 0
        return numeric.saturate(distorted(np, self.kind, image, args, seed), image.dtype)


class DistortionGpu(DistortionDeclaration, BatchOperator):
    """Per sample, in torch on the GPU (the points depend on each sample's size and arguments)."""

    def run_batch(self, inputs, args, batch):
        import torch
        results = []
        for index, (image, sample_args) in enumerate(zip(tensors_of(inputs[0]), args)):
            if image.dim() != 3:
                raise ValueError(f"{self.name}: expected an HWC image (3 dimensions), got shape {tuple(image.shape)}")
            check_input("", types.to_numpy_dtype(image.dtype), self.name)
            if self.masked(sample_args):
                results.append(image.clone())
                continue
            seed = int(batch.params[index]) if batch.params is not None else 0
            results.append(numeric.saturate_tensor(distorted(torch, self.kind, image, sample_args, seed), image.dtype))
        return results


for _kind in ("water", "sphere", "jitter"):
    registry.register(_kind, "cpu")(type(_kind.capitalize(), (Distortion,), {"kind": _kind}))
    registry.register(_kind, "gpu", requires=devices.gpu_problem)(
        type(_kind.capitalize() + "Gpu", (DistortionGpu,), {"kind": _kind}))


__all__ = ["distorted", "jitter_points", "sample_at", "sphere_points", "water_points"]
