"""Arithmetic on values: ``crop_mirror_normalize`` (the fused last step of image pipelines),
``normalize`` and ``cast``, each with its schema, CPU and GPU implementations; their conversion and
normalization rules are penstock.numeric's, shared by both devices."""
from __future__ import annotations

import numbers
import threading

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.contract import BatchOperator, SampleOperator, WholeBatchOperator, arg_column, distinct_args
from penstock.kernels import cpu_image
from penstock.operators.geometry import CROP_ARGS, check_hwc, crop_image, crop_size, declare_hwc, with_crop_of
from penstock.operators.gpu_plan import ExtendsImagePlan, MAX_PLAN_CHANNELS, geometry_plan, plan_of, tensors_of
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema


def _check_mean_std(static: dict, per_sample: frozenset) -> None:
    mean, std = static.get("mean"), static.get("std", static.get("stddev"))
    if "std" in static and std is not None and any(value == 0 for value in std):
        raise ArgError("argument 'std' must not contain 0")
    if mean and std and len(mean) != len(std) and 1 not in (len(mean), len(std)):
        raise ArgError(f"arguments 'mean' and 'std' have {len(mean)} and {len(std)} values; give one value "
                       "or one per channel for each")

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
    checks=(_check_mean_std,),
    input_names=("images",)))

def _check_normalize(static: dict, per_sample: frozenset) -> None:
    """As DALI: mean and stddev are numbers or per-sample tensors, the latter not with batch=True;
    axes and axis_names exclude each other."""
    for name in ("mean", "stddev"):
        value = static.get(name)
        if name not in per_sample and value is not None and not isinstance(value, numbers.Real):
            raise ArgError(f"argument '{name}' must be a number, or a per-sample tensor (a DataNode), got {value!r}")
        if name in per_sample and static["batch"]:
            raise ArgError(f"argument '{name}' cannot be given per sample with batch=True")
    if static.get("stddev") is not None and "stddev" not in per_sample and static["stddev"] < 0:
        raise ArgError(f"argument 'stddev' must not be negative, got {static['stddev']}")
    if static["axes"] is not None and static["axis_names"] is not None:
        raise ArgError("arguments 'axes' and 'axis_names' exclude each other; give one")
    if static["dtype"].numpy in (np.float16, np.float64, np.bool_):
        raise ArgError(f"dtype {np.dtype(static['dtype'].numpy).name} is not an output type of normalize "
                       "(float32 or integers)")


registry.register_schema(OpSchema(
    name="normalize", class_name="Normalize",
    doc="(x - mean) / sqrt(stddev^2 + epsilon) * scale + shift; mean and stddev are computed over ``axes`` "
        "(default all) per sample, or over the whole batch with batch=True, unless given.",
    args=(
        Arg("mean", "any", None, "Mean to subtract: a number, or per sample a tensor of the input's number of "
            "dimensions with extent 1 or the input's on each axis; default computed.", per_sample=True),
        Arg("stddev", "any", None, "Standard deviation, given as mean is; default computed (around the mean).",
            per_sample=True),
        Arg("axes", "ints", None, "Axes the statistics reduce over; default all.", min=0),
        Arg("axis_names", "str", None, "The axes the statistics reduce over by layout name (instead of axes)."),
        Arg("batch", "bool", False, "Statistics over the whole batch (the samples' extents on the other axes must "
            "agree); mean and stddev cannot then be given per sample."),
        Arg("scale", "float", 1.0, "Multiplies the result."),
        Arg("shift", "float", 0.0, "Added after scale."),
        Arg("epsilon", "float", 0.0, "Added to the variance.", min=0.0),
        Arg("ddof", "int", 0, "Delta degrees of freedom of the computed variance.", min=0),
        Arg("dtype", "dtype", types.FLOAT, "Output type: float32 or an integer type (rounded and saturated)."),
    ),
    checks=(_check_normalize,),
    input_names=("input",)))

registry.register_schema(OpSchema(
    name="cast", class_name="Cast",
    doc="Converts the element type; values converted to an integer type round to nearest (halves to "
        "even, on every device) and saturate to its range; NaN becomes 0.",
    args=(Arg("dtype", "dtype", REQUIRED, "Target type."),),
    input_names=("input",)))


class _TableCache:
    """Lookup tables by (mean, std, scale, shift, channels, dtype); shared by worker threads."""

    def __init__(self, op_name: str):
        self._op_name = op_name
        self._tables: dict = {}
        self._lock = threading.Lock()

    def get(self, mean, std, scale, shift, channels, dtype) -> np.ndarray:
        key = (mean, std, scale, shift, channels, dtype.str)
        table = self._tables.get(key)
        if table is None:
            multipliers, addends = numeric.normalization_affine(mean, std, scale, shift, channels, self._op_name)
            table = numeric.saturate(cpu_image.affine_table(multipliers, addends), dtype)
            with self._lock:
                if len(self._tables) > 64:
                    self._tables.clear()
                self._tables[key] = table
        return table


def _normalized_shape(image_shape: tuple, args: dict) -> tuple | None:
    """The output shape for an HWC image of ``image_shape``; None where the data decides it (a
    window trimmed to the image)."""
    if args["out_of_bounds_policy"] == "trim_to_shape":
        return None
    height, width = crop_size(args) or image_shape[:2]
    channels = image_shape[2] + (1 if args["pad_output"] and image_shape[2] == 3 else 0)
    return (channels, height, width) if args["output_layout"] == "CHW" else (height, width, channels)


class CropMirrorNormalizeDeclaration:
    def declare_outputs(self, inputs):
        declare_hwc(inputs[0], self.name)
        args = self.args
        channels = inputs[0].known_channels
        if channels is not None:  # mean and std against the channels the input declares
            for name in ("mean", "std"):
                values = args[name]
                if values is not None and len(values) not in (1, channels):
                    raise ValueError(f"{self.name}: argument '{name}' has {len(values)} values for "
                                     f"{channels}-channel images; give one, or one per channel")
            channels += 1 if args["pad_output"] and channels == 3 else 0
        shape = _normalized_shape(inputs[0].shape, args) if inputs[0].shape else None
        return inputs[0].but(dtype=args["dtype"].numpy, ndim=3, layout=args["output_layout"], shape=shape,
                             channels=channels)


@registry.register("crop_mirror_normalize", "cpu")
class CropMirrorNormalize(CropMirrorNormalizeDeclaration, SampleOperator):
    def __init__(self, args, context):
        super().__init__(args, context)
        self._tables = _TableCache(self.name)

    def output_spec(self, inputs, args):
        shape = _normalized_shape(inputs[0].shape, args) if inputs[0].ndim == 3 else None
        return None if shape is None else (shape, args["dtype"].numpy)

    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        window = crop_image(image, args, self.name)
        channels = window.shape[2]
        dtype = args["dtype"].numpy
        pad = args["pad_output"] and channels == 3
        if out is None:
            out_channels = channels + (1 if pad else 0)
            shape = (out_channels, *window.shape[:2]) if args["output_layout"] == "CHW" else (*window.shape[:2], out_channels)
            out = np.empty(shape, dtype)
        if window.dtype == np.uint8 and args["output_layout"] == "CHW" and window.size:
            # each channel's plane looked up straight into its plane of the output: no HWC result to
            # transpose (an eighth of the time)
            table = self._tables.get(args["mean"], args["std"], args["scale"], args["shift"], channels, dtype)
            cpu_image.lookup_planes(window, table, out[:channels], mirror=bool(args["mirror"]))
            if pad:
                out[channels] = 0
            return out
        if window.dtype == np.uint8:
            table = self._tables.get(args["mean"], args["std"], args["scale"], args["shift"], channels, dtype)
            normalized = cpu_image.normalize_uint8(window, table)
        else:
            multipliers, addends = numeric.normalization_affine(args["mean"], args["std"], args["scale"],
                                                                args["shift"], channels, self.name)
            values = window.astype(np.float32) * np.float32(multipliers) + np.float32(addends)
            normalized = numeric.saturate(values, dtype)
        if args["mirror"]:
            normalized = normalized[:, ::-1]
        if args["output_layout"] == "CHW":
            out[:channels] = normalized.transpose(2, 0, 1)
            if pad:
                out[channels] = 0
        else:
            out[:, :, :channels] = normalized
            if pad:
                out[:, :, channels] = 0
        return out


AFFINE_ARGS = ("mean", "std", "scale", "shift")


@registry.register("crop_mirror_normalize", "gpu", requires=devices.gpu_problem)
class CropMirrorNormalizeGpu(ExtendsImagePlan, CropMirrorNormalizeDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        plan = geometry_plan(inputs[0])
        channels = plan.channels
        if any(crop_size(a) is not None for a in distinct_args(args, ("crop", "crop_h", "crop_w"))):
            plan = with_crop_of(plan, args, self.name)
        mirror = np.asarray(arg_column(args, "mirror"), bool)
        plan = plan.with_flips(np.stack([np.zeros_like(mirror), mirror], 1))
        affine_maps: dict = {}  # (mean, std, scale, shift) -> (multipliers, addends): usually one for the batch
        for a in distinct_args(args, AFFINE_ARGS):
            key = tuple(a[name] for name in AFFINE_ARGS)
            affine_maps[key] = numeric.normalization_affine(*key, channels, self.name)
        if len(affine_maps) == 1:  # one for the batch: the plan takes it once
            (multiplier, addend), = affine_maps.values()
            multipliers, addends = [multiplier] * len(args), [addend] * len(args)
        else:
            affines = [affine_maps[tuple(a[name] for name in AFFINE_ARGS)] for a in args]
            multipliers, addends = [affine[0] for affine in affines], [affine[1] for affine in affines]
        first = args[0]
        return plan.with_affine(multipliers, addends).with_output(
            dtype=types.to_torch_dtype(first["dtype"]), chw=first["output_layout"] == "CHW",
            pad_channels=first["pad_output"] and channels == 3)


class NormalizeDeclaration:
    def declare_outputs(self, inputs):
        """Resolves axis_names from the input's layout, once."""
        if self.args["axis_names"] is not None:
            layout, names = inputs[0].layout, self.args["axis_names"]
            if not layout or any(name not in layout for name in names):
                raise ValueError(f"{self.name}: axis_names '{names}' are not all in the input's layout "
                                 f"'{layout or 'unknown'}'; give axes instead")
            self.args = {**self.args, "axes": tuple(layout.index(name) for name in names)}
        return inputs[0].but(dtype=self.args["dtype"].numpy)


def _reduced_axes(args: dict, shape) -> tuple:
    axes = tuple(args["axes"]) if args["axes"] is not None else tuple(range(len(shape)))
    for axis in axes:
        if axis >= len(shape):
            raise ValueError(f"normalize: axis {axis} out of range for a sample of shape {tuple(shape)}")
    return axes


def _parameter(xp, value, sample, name: str):
    """A given mean or stddev as an array that broadcasts against ``sample``: a number, or a per-sample
    tensor of the sample's dimensions, each of extent 1 or the sample's (DALI's rule)."""
    array = np.asarray(value, np.float32)
    if array.ndim and (array.ndim != sample.ndim or any(p not in (1, s) for p, s in zip(array.shape, sample.shape))):
        raise ValueError(f"normalize: '{name}' of shape {array.shape} for a sample of shape {tuple(sample.shape)}: "
                         "each extent must be 1 or the sample's")
    return array if xp is np else xp.as_tensor(array, device=sample.device)


def normalize_samples(xp, samples: list, args: list) -> list:
    """The normalized samples (float32 arrays of ``xp``: numpy or torch), with statistics per sample,
    or over all of them with batch=True (the samples' extents on the other axes must agree)."""
    first = args[0]
    data = [sample.astype(np.float32) if xp is np else sample.to(xp.float32) for sample in samples]
    axes = _reduced_axes(first, data[0].shape) if data else ()

    def total(values):  # sums over the axes, kept as extents of 1
        return values.sum(axis=axes, keepdims=True) if xp is np else values.sum(dim=axes, keepdim=True)

    if first["batch"] and data:
        kept = [axis for axis in range(data[0].ndim) if axis not in axes]
        for index, sample in enumerate(data):
            if sample.ndim != data[0].ndim or any(sample.shape[axis] != data[0].shape[axis] for axis in kept):
                raise ValueError(f"normalize: batch=True needs the samples' extents on the axes not reduced to "
                                 f"agree; sample {index} has shape {tuple(sample.shape)}, sample 0 "
                                 f"{tuple(data[0].shape)}")
        count = sum(int(np.prod([sample.shape[axis] for axis in axes])) for sample in data)
        mean = _parameter(xp, first["mean"], data[0], "mean") if first["mean"] is not None else \
            sum(total(sample) for sample in data) / count
        means = [mean] * len(data)
        if first["stddev"] is None:
            variance = sum(total((sample - mean) ** 2) for sample in data) / max(count - first["ddof"], 1)
            stddevs = [variance ** 0.5] * len(data)
        else:
            stddevs = [_parameter(xp, first["stddev"], data[0], "stddev")] * len(data)
    else:
        means, stddevs = [], []
        for sample, a in zip(data, args):
            count = int(np.prod([sample.shape[axis] for axis in _reduced_axes(a, sample.shape)]))
            mean = _parameter(xp, a["mean"], sample, "mean") if a["mean"] is not None else total(sample) / count
            means.append(mean)
            stddevs.append(_parameter(xp, a["stddev"], sample, "stddev") if a["stddev"] is not None else
                           (total((sample - mean) ** 2) / max(count - a["ddof"], 1)) ** 0.5)
    results = []
    for sample, mean, stddev, a in zip(data, means, stddevs, args):
        denominator = (stddev * stddev + np.float32(a["epsilon"])) ** 0.5
        if xp is np:
            with np.errstate(divide="ignore", invalid="ignore"):
                result = np.where(denominator == 0, np.float32(0), (sample - mean) / denominator)
        else:
            result = xp.where(denominator == 0, xp.zeros_like(sample), (sample - mean) / denominator)
        results.append(result * np.float32(a["scale"]) + np.float32(a["shift"]))
    return results


@registry.register("normalize", "cpu")
class Normalize(NormalizeDeclaration, SampleOperator):
    """Per sample on the workers; with batch=True (statistics of the whole batch) a whole-batch
    operator (NormalizeBatch)."""

    def __new__(cls, args, context):
        return object.__new__(NormalizeBatch if args["batch"] else cls)

    def run(self, inputs, args, sample, out=None):
        (result,) = normalize_samples(np, [np.asarray(inputs[0])], [args])
        return numeric.saturate(result, args["dtype"].numpy)


class NormalizeBatch(Normalize, WholeBatchOperator):
    def run_batch(self, inputs, args, params):
        return [numeric.saturate(result, a["dtype"].numpy)
                for result, a in zip(normalize_samples(np, [np.asarray(s) for s in inputs[0]], args), args)]


@registry.register("normalize", "gpu", requires=devices.gpu_problem)
class NormalizeGpu(NormalizeDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        import torch
        results = normalize_samples(torch, tensors_of(inputs[0]), args)
        return [numeric.saturate_tensor(result, types.to_torch_dtype(a["dtype"])) for result, a in zip(results, args)]


class CastDeclaration:
    def declare_outputs(self, inputs):
        return inputs[0].but(dtype=self.args["dtype"].numpy)


@registry.register("cast", "cpu")
class Cast(CastDeclaration, SampleOperator):
    def output_spec(self, inputs, args):
        return inputs[0].shape, args["dtype"].numpy

    def run(self, inputs, args, sample, out=None):
        result = numeric.saturate(np.asarray(inputs[0]), args["dtype"].numpy)
        if out is not None:
            out[...] = result
            return out
        return result if result is not inputs[0] else result.copy()


@registry.register("cast", "gpu", requires=devices.gpu_problem)
class CastGpu(ExtendsImagePlan, CastDeclaration, BatchOperator):
    """Folded into the fused image plan for images of 8-bit or float values (its kernel rounds and
    saturates by penstock.numeric's rule); other data is converted sample by sample."""

    def run_batch(self, inputs, args, batch):
        import torch
        from penstock.kernels.image_plan import ImagePlan
        value = inputs[0]
        target = types.to_torch_dtype(args[0]["dtype"])
        if isinstance(value, ImagePlan) or (value and value[0].dim() == 3 and value[0].shape[2] <= MAX_PLAN_CHANNELS
                                            and not value[0].dtype.is_complex):
            plan = plan_of(value)
            if target != torch.bool and (plan.dtype is None or plan.dtype.is_floating_point
                                         or plan.dtype == torch.uint8):
                return plan.with_output(dtype=target)
            value = plan.materialize()[0]
        return [numeric.saturate_tensor(sample, target) for sample in value]
