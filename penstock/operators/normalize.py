"""Arithmetic on pixels: ``crop_mirror_normalize`` (the fused last step of image pipelines),
``normalize`` and ``cast``."""
from __future__ import annotations

import threading

import numpy as np

from penstock import registry, types
from penstock.kernels import cpu_image
from penstock.operators.base import SampleOperator
from penstock.operators.geometry import CROP_ARGS, check_hwc, crop_image, crop_size
from penstock.schema import REQUIRED, Arg, OpSchema

registry.register_schema(OpSchema(
    name="crop_mirror_normalize", class_name="CropMirrorNormalize",
    doc="Crops, mirrors (per sample), normalizes ((x - mean) / std * scale + shift), converts the type "
        "and the layout of HWC images in one pass.",
    args=(
        *CROP_ARGS,
        Arg("mean", "floats", (0.0,), "Subtracted from each channel (one value or one per channel).",
            per_sample=True),
        Arg("std", "floats", (1.0,), "Divides each channel after the mean (one value or one per channel).",
            per_sample=True),
        Arg("scale", "float", 1.0, "Multiplies the normalized value."),
        Arg("shift", "float", 0.0, "Added after scale."),
        Arg("mirror", "int", 0, "1 flips the sample left-right.", per_sample=True, choices=(0, 1)),
        Arg("dtype", "dtype", types.FLOAT, "Output type (FLOAT, FLOAT16, UINT8, ...).", aliases=("output_dtype",)),
        Arg("output_layout", "layout", "CHW", "'CHW' (types.NCHW) or 'HWC' (types.NHWC).",
            choices=("CHW", "HWC")),
        Arg("pad_output", "bool", False, "Pad 3-channel output with a fourth channel of zeros."),
        Arg("image_type", "image_type", None, "Accepted for DALI compatibility; channels come from the data."),
    ),
    input_names=("images",)))

registry.register_schema(OpSchema(
    name="normalize", class_name="Normalize",
    doc="(x - mean) / sqrt(stddev^2 + epsilon) * scale + shift per sample; mean and stddev are computed "
        "over ``axes`` (default all) unless given.",
    args=(
        Arg("mean", "floats", None, "Mean to subtract; default computed per sample.", per_sample=True),
        Arg("stddev", "floats", None, "Standard deviation; default computed per sample.", per_sample=True,
            min=0.0),
        Arg("axes", "ints", None, "Axes the statistics reduce over; default all.", min=0),
        Arg("axis_names", "str", None, "Axes by layout letters, e.g. 'HW'."),
        Arg("batch", "bool", False, "Statistics over the whole batch (not supported on the CPU yet: raises)."),
        Arg("scale", "float", 1.0, "Multiplies the result."),
        Arg("shift", "float", 0.0, "Added after scale."),
        Arg("epsilon", "float", 0.0, "Added to the variance.", min=0.0),
        Arg("ddof", "int", 0, "Delta degrees of freedom of the computed variance.", min=0),
        Arg("dtype", "dtype", types.FLOAT, "Output type."),
    ),
    input_names=("input",)))

registry.register_schema(OpSchema(
    name="cast", class_name="Cast",
    doc="Converts the element type; values converted to an integer type round to nearest (halves to "
        "even) and saturate to its range.",
    args=(Arg("dtype", "dtype", REQUIRED, "Target type."),),
    input_names=("input",)))


class _TableCache:
    """Lookup tables by (mean, std, scale, shift, channels, dtype); shared by worker threads."""

    def __init__(self):
        self._tables: dict = {}
        self._lock = threading.Lock()

    def get(self, mean, std, scale, shift, channels, dtype) -> np.ndarray:
        key = (mean, std, scale, shift, channels, dtype.str)
        table = self._tables.get(key)
        if table is None:
            table = cpu_image.normalize_table(np.asarray(mean, np.float64), np.asarray(std, np.float64),
                                              scale, shift, channels)
            table = saturate(table, dtype)
            with self._lock:
                if len(self._tables) > 64:
                    self._tables.clear()
                self._tables[key] = table
        return table


def _holds(float_type: np.dtype, value: int) -> bool:
    """Whether the float type represents the integer exactly (float32 rounds 2**31 - 1 up to 2**31)."""
    return value <= float(np.finfo(float_type).max) and int(float_type.type(value)) == value


def saturate(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Converts to dtype; to an integer type by rounding to nearest (halves to even) and clamping to
    its range."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu" and values.dtype.kind in "iu":
        info, source = np.iinfo(dtype), np.iinfo(values.dtype)
        if source.min < info.min or source.max > info.max:  # clamp, as DALI's ConvertSat; never wrap
            values = np.clip(values, max(info.min, source.min), min(info.max, source.max))
        return values.astype(dtype, copy=False)
    if dtype.kind in "iu" and values.dtype.kind == "f":
        info = np.iinfo(dtype)
        if not _holds(values.dtype, info.max):
            values = values.astype(np.float64)
        rounded = np.rint(values)
        if _holds(values.dtype, info.max):
            return np.clip(rounded, info.min, info.max).astype(dtype)
        # not even float64 holds 2**63 - 1: values that reach it would overflow, so they saturate here
        too_high = rounded >= float(info.max)
        result = np.clip(np.where(too_high, 0, rounded), info.min, None).astype(dtype)
        result[too_high] = info.max
        return result
    if dtype.kind == "b":
        return values != 0
    return values.astype(dtype, copy=False)


def check_channels(values: tuple, channels: int, name: str, op_name: str) -> None:
    if len(values) not in (1, channels):
        raise ValueError(f"{op_name}: argument '{name}' has {len(values)} values for {channels}-channel images")


@registry.register("crop_mirror_normalize", "cpu")
class CropMirrorNormalize(SampleOperator):
    def __init__(self, args, context):
        super().__init__(args, context)
        self._tables = _TableCache()

    def output_spec(self, inputs, args):
        image = inputs[0]
        if image.ndim != 3:
            return None
        height, width = crop_size(args) or image.shape[:2]
        if args["out_of_bounds_policy"] == "trim_to_shape":
            return None
        channels = image.shape[2] + (1 if args["pad_output"] and image.shape[2] == 3 else 0)
        shape = (channels, height, width) if args["output_layout"] == "CHW" else (height, width, channels)
        return shape, args["dtype"].numpy

    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        window = crop_image(image, args, self.name)
        channels = window.shape[2]
        check_channels(args["mean"], channels, "mean", self.name)
        check_channels(args["std"], channels, "std", self.name)
        if any(value == 0 for value in args["std"]):
            raise ValueError(f"{self.name}: argument 'std' must not contain 0")
        dtype = args["dtype"].numpy
        if window.dtype == np.uint8:
            table = self._tables.get(args["mean"], args["std"], args["scale"], args["shift"], channels, dtype)
            normalized = cpu_image.normalize_uint8(window, table)
        else:
            mean, std = np.asarray(args["mean"], np.float32), np.asarray(args["std"], np.float32)
            normalized = saturate((window.astype(np.float32) - mean) / std * args["scale"] + args["shift"], dtype)
        if args["mirror"]:
            normalized = normalized[:, ::-1]
        pad = args["pad_output"] and channels == 3
        if out is None:
            out_channels = channels + (1 if pad else 0)
            shape = (out_channels, *window.shape[:2]) if args["output_layout"] == "CHW" else (*window.shape[:2], out_channels)
            out = np.empty(shape, dtype)
        if args["output_layout"] == "CHW":
            out[:channels] = normalized.transpose(2, 0, 1)
            if pad:
                out[channels] = 0
        else:
            out[:, :, :channels] = normalized
            if pad:
                out[:, :, channels] = 0
        return out

    def output_layout(self, input_layouts):
        return self.args["output_layout"]


@registry.register("normalize", "cpu")
class Normalize(SampleOperator):
    def run(self, inputs, args, sample, out=None):
        if args["batch"]:
            raise ValueError("normalize: batch=True (statistics over the whole batch) is not supported on the "
                             "CPU; compute per-sample statistics (batch=False) or pass mean and stddev")
        data = inputs[0].astype(np.float32)
        axes = args["axes"]
        if args["axis_names"]:
            raise ValueError("normalize: axis_names needs the input's layout; pass axes=(...) instead")
        axes = tuple(axes) if axes is not None else tuple(range(data.ndim))
        for axis in axes:
            if axis >= data.ndim:
                raise ValueError(f"normalize: axis {axis} out of range for a sample of shape {data.shape}")
        mean = np.asarray(args["mean"], np.float32) if args["mean"] is not None else data.mean(axis=axes, keepdims=True)
        if args["stddev"] is not None:
            stddev = np.asarray(args["stddev"], np.float32)
        else:
            count = np.prod([data.shape[a] for a in axes])
            variance = ((data - mean) ** 2).sum(axis=axes, keepdims=True) / max(count - args["ddof"], 1)
            stddev = np.sqrt(variance)
        denominator = np.sqrt(stddev.astype(np.float32) ** 2 + args["epsilon"])
        with np.errstate(divide="ignore", invalid="ignore"):
            result = (data - mean) / denominator
        result = np.where(denominator == 0, 0.0, result) * args["scale"] + args["shift"]
        return saturate(result, args["dtype"].numpy)


@registry.register("cast", "cpu")
class Cast(SampleOperator):
    def output_spec(self, inputs, args):
        return inputs[0].shape, args["dtype"].numpy

    def run(self, inputs, args, sample, out=None):
        result = saturate(np.asarray(inputs[0]), args["dtype"].numpy)
        if out is not None:
            out[...] = result
            return out
        return result if result is not inputs[0] else result.copy()
