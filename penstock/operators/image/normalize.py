"""Arithmetic on values: ``crop_mirror_normalize`` (the fused last step of image pipelines),
``normalize`` and ``cast``, each with its schema, CPU and GPU implementations; their conversion and
normalization rules are penstock.numeric's, shared by both devices."""
from __future__ import annotations

import threading

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.columns import arg_column, distinct_args
from penstock.contract import BatchOperator, SampleOperator, WholeBatchOperator
from penstock.kernels import cpu_image
from penstock.runtime import native
from penstock.operators.shared.images import (CROP_ARGS, WINDOW_CHECKS, check_hwc, crop_placement, crop_size,
                                              cut_window, window_of_layout, with_crop_of)
from penstock.operators.shared.gpu_plan import ExtendsImagePlan, MAX_PLAN_CHANNELS, geometry_plan, plan_of, tensors_of
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema


# DALI's input and output types of crop_mirror_normalize
CMN_INPUT_TYPES = (types.UINT8, types.INT16, types.UINT16, types.INT32, types.FLOAT, types.FLOAT16)
CMN_OUTPUT_TYPES = (types.FLOAT, types.FLOAT16, types.UINT8, types.INT8)
# input layouts (an input without one is read as HWC): images, and sequences and volumes (whose
# windows and normalization crop_mirror_normalize_sample computes)
CMN_LAYOUTS = ("HWC", "CHW", "FHWC", "FCHW", "CFHW", "DHWC", "CDHW")


def _check_mean_std(static: dict, per_sample: frozenset) -> None:
    """As DALI: mean and std of one value each, or one per channel (the other of one value)."""
    mean, std = static.get("mean"), static.get("std")
    if mean and std and len(mean) != len(std) and 1 not in (len(mean), len(std)):
        raise ArgError(f"arguments 'mean' and 'std' have {len(mean)} and {len(std)} values; give one value "
                       "or one per channel for each")


registry.register_schema(OpSchema(
    name="crop_mirror_normalize", class_name="CropMirrorNormalize",
    doc="Crops, mirrors (per sample), normalizes ((x - mean) / std * scale + shift), converts the type "
        "and permutes the layout of HWC or CHW images in one pass; of FHWC, FCHW or CFHW sequences and DHWC or "
        "CDHW volumes too (their window's depth along D, or along the frames, as crop's; output_layout a "
        "permutation of theirs). Takes uint8, int16, uint16, int32, float32 and float16 samples.",
    args=(
        *CROP_ARGS,
        Arg("mean", "floats", (0.0,), "Subtracted from each channel (one value or one per channel).",
            per_sample=True),
        Arg("std", "floats", (1.0,), "Divides each channel after the mean (one value or one per channel); 0 "
            "gives infinities.", per_sample=True),
        Arg("scale", "float", 1.0, "Multiplies the normalized value."),
        Arg("shift", "float", 0.0, "Added after scale."),
        Arg("mirror", "int", 0, "Not 0: flips the sample left-right.", per_sample=True),
        Arg("dtype", "dtype", types.FLOAT, "Output type: FLOAT, FLOAT16, UINT8 or INT8.", aliases=("output_dtype",),
            choices=CMN_OUTPUT_TYPES),
        Arg("output_layout", "layout", "CHW", "A permutation of the input's layout ('CHW', 'HWC', 'WHC', ...); "
            "'' keeps the input's."),
        Arg("pad_output", "bool", False, "Pad the channels to the next power of two (3 to 4), with fill_values "
            "under out_of_bounds_policy='pad', else zeros."),
        Arg("image_type", "image_type", None, "Accepted for DALI compatibility; channels come from the data."),
    ),
    checks=(*WINDOW_CHECKS, _check_mean_std),
    input_names=("images",)))

# DALI's input and output types of normalize
NORMALIZE_TYPES = (types.INT8, types.UINT8, types.INT16, types.UINT16, types.INT32, types.UINT32, types.FLOAT)


def _check_normalize(static: dict, per_sample: frozenset) -> None:
    """As DALI: mean and stddev given per sample not with batch=True; axes not where mean and
    stddev are both numbers (they then apply to every element); axes name at least one axis."""
    for name in ("mean", "stddev"):
        if name in per_sample and static.batch:
            raise ArgError(f"argument '{name}' cannot be given per sample with batch=True")
    if static.axes is not None and static.axis_names is not None:
        raise ArgError("arguments 'axes' and 'axis_names' exclude each other; give one")
    if static.get("mean") is not None and static.get("stddev") is not None and \
            (static.axes is not None or static.axis_names is not None):
        raise ArgError("arguments 'axes' and 'axis_names' cannot be given where 'mean' and 'stddev' are both "
                       "numbers")
    if static.axes is not None and not static.axes:
        raise ArgError("argument 'axes' must name at least one axis")


registry.register_schema(OpSchema(
    name="normalize", class_name="Normalize",
    doc="(x - mean) * scale / sqrt(stddev^2 + epsilon) + shift, rounded and saturated to ``dtype``; mean and "
        "stddev are computed over the reduced axes per sample, or over the whole batch with batch=True, unless "
        "given. Takes int8, uint8, int16, uint16, int32, uint32 and float32 data.",
    args=(
        Arg("mean", "tensor", None, "Mean to subtract: a number, or per sample a float32 tensor of the input's "
            "number of dimensions, of extent 1 on the reduced axes and the input's on the others; default "
            "computed.", per_sample=True, input_types=(np.float32,)),
        Arg("stddev", "tensor", None, "Standard deviation, given as mean is (per sample, of mean's shape); "
            "default computed around the mean. A given 0 divides (infinities) where it is a number, and gives "
            "0 where it is per sample, without epsilon.", per_sample=True, input_types=(np.float32,)),
        Arg("axes", "ints", None, "Axes the statistics reduce over; default the axes of extent 1 of a per-sample "
            "mean or stddev, else all.", min=0),
        Arg("axis_names", "str", None, "The axes the statistics reduce over by layout name (instead of axes)."),
        Arg("batch", "bool", False, "Statistics over the whole batch (the samples' extents on the other axes must "
            "agree); mean and stddev cannot then be given per sample."),
        Arg("scale", "float", 1.0, "Multiplies the result."),
        Arg("shift", "float", 0.0, "Added after scale."),
        Arg("epsilon", "float", 0.0, "Added to the variance."),
        Arg("ddof", "int", 0, "Delta degrees of freedom of a computed variance: the squares' sum / (n - ddof); "
            "where n <= ddof the variance is 0 (and the output is shift without epsilon)."),
        Arg("dtype", "dtype", types.FLOAT, "Output type: float32 or an 8-, 16- or 32-bit integer type (rounded and "
            "saturated).", choices=NORMALIZE_TYPES),
    ),
    checks=(_check_normalize,),
    input_names=("input",)))

registry.register_schema(OpSchema(
    name="cast", class_name="Cast",
    doc="Converts the element type; values converted to an integer type round to nearest (halves to "
        "even, on every device) and saturate to its range; NaN becomes 0.",
    args=(Arg("dtype", "dtype", REQUIRED, "Target type."),),
    input_names=("input",)))


def check_type(dtype, allowed: tuple, op_name: str) -> None:
    if dtype is not None and np.dtype(dtype) not in [kind.numpy for kind in allowed]:
        raise TypeError(f"{op_name}: takes {', '.join(kind.name.lower() for kind in allowed)} data, got "
                        f"{np.dtype(dtype).name}")


def padded_channels(channels: int, args: dict) -> int:
    """The output's channels: with pad_output, the next power of two (DALI's rule: 3 gives 4)."""
    return 1 << (channels - 1).bit_length() if args.pad_output and channels > 1 else channels


def cmn_channel_values(args: dict, out_channels: int, op_name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """DALI's per-channel values: (means, multipliers, fills) with out = (x - mean) * multiplier
    (mean holding shift, multiplier scale / std), both empty where they change nothing, and the
    fill of the window outside the image and of padded channels (fill_values under
    out_of_bounds_policy 'pad', else 0), in the output's units, one per output channel. Given, they
    hold one value (for all) or one per output channel, as DALI; other counts are refused."""
    mean, std, scale, shift = args.mean, args.std, args.scale, args.shift
    count = max(len(mean), len(std))
    with np.errstate(divide="ignore", invalid="ignore"):  # std 0 gives infinities, as DALI
        stds = np.float64([std[c % len(std)] for c in range(count)])
        means = np.float64([mean[c % len(mean)] for c in range(count)]) - shift * (stds / np.float64(scale))
        multipliers = np.float64(scale) / stds
    means, multipliers = means.astype(np.float32), multipliers.astype(np.float32)
    if not means.any() and (multipliers == 1).all():
        means = multipliers = np.zeros(0, np.float32)
    if args.pad_output and count > 1 and out_channels > count:  # padded channels: mean 0, multiplier 0
        extra = np.zeros(out_channels - count, np.float32)
        means, multipliers = np.concatenate([means, extra]), np.concatenate([multipliers, extra])
    fills = np.float32(args.fill_values if args.out_of_bounds_policy == "pad" else ())
    per_channel = max(len(means), len(fills), 1)
    if per_channel not in (1, out_channels):
        raise ValueError(f"{op_name}: mean, std and fill_values give {per_channel} values per channel for "
                         f"{out_channels} output channels; give one value, or one per channel")
    if len(means) == 1:
        means, multipliers = np.repeat(means, out_channels), np.repeat(multipliers, out_channels)
    if len(fills) <= 1:
        fills = np.repeat(fills if len(fills) else np.zeros(1, np.float32), out_channels)
    else:
        fills = np.concatenate([fills, np.zeros(out_channels - len(fills), np.float32)])
    return means, multipliers, fills


def _convert_fill(fills: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Fill values in the output type as DALI writes them: converted, not normalized; towards zero
    for integer types (saturated, where DALI's conversion is undefined)."""
    return numeric.saturate(np.trunc(fills) if np.dtype(dtype).kind in "iu" else fills, dtype)


class _TableCache:
    """Lookup tables of uint8 inputs by (means, multipliers, dtype); shared by worker threads."""

    def __init__(self):
        self._tables: dict = {}
        self._lock = threading.Lock()

    def get(self, means: np.ndarray, multipliers: np.ndarray, channels: int, dtype) -> np.ndarray:
        key = (means.tobytes(), multipliers.tobytes(), channels, np.dtype(dtype).str)
        table = self._tables.get(key)
        if table is None:
            values = np.arange(256, dtype=np.float32)[:, None]
            if len(means):
                with np.errstate(invalid="ignore"):
                    values = (values - means[:channels]) * multipliers[:channels]
            table = numeric.saturate(np.broadcast_to(values, (256, channels)), dtype).reshape(1, 256, channels)
            with self._lock:
                if len(self._tables) > 64:
                    self._tables.clear()
                self._tables[key] = table
        return table


def _output_shape(image_shape: tuple, layout: str, permutation: tuple, args: dict) -> tuple | None:
    """The output shape for an image of ``image_shape`` (in ``layout``); None where the data decides
    it (a window trimmed to the image)."""
    if args.out_of_bounds_policy == "trim_to_shape":
        return None
    height, width, channels = (image_shape[1], image_shape[2], image_shape[0]) if layout == "CHW" else image_shape
    window = crop_placement(height, width, args)
    hwc = (*(window[2:] if window else (height, width)), padded_channels(channels, args))
    return tuple(hwc[axis] for axis in permutation)


class CropMirrorNormalizeDeclaration:
    """Resolves the input's layout (one of CMN_LAYOUTS; none reads as HWC) and the output's
    permutation of it, once: of HWC for images (their CHW input is read as HWC), of the input's
    layout for sequences and volumes."""

    layout, permutation = "HWC", (2, 0, 1)

    def declare_outputs(self, inputs):
        spec = inputs[0]
        check_type(spec.dtype, CMN_INPUT_TYPES, self.name)
        layout = spec.layout or ("HWC" if spec.ndim in (None, 3) else "")
        if layout not in CMN_LAYOUTS:
            raise ValueError(f'{self.name}: the layout "{spec.layout or f"of {spec.ndim} dimensions"}" does not match '
                             f'any of the allowed layouts: {", ".join(CMN_LAYOUTS)}')
        output_layout = self.args.output_layout or layout
        if sorted(output_layout) != sorted(layout):
            raise ValueError(f"{self.name}: output_layout {output_layout!r} is not a permutation of the input's "
                             f"layout {layout!r}")
        self.layout = layout
        self.permutation = tuple(("HWC" if self.is_image else layout).index(axis) for axis in output_layout)
        channels = spec.known_channels if spec.layout else None
        if channels is not None:
            channels = padded_channels(channels, self.args)
            cmn_channel_values(self.args, channels, self.name)  # refuses argument counts that do not fit
        shape = _output_shape(spec.shape, layout, self.permutation, self.args) \
            if spec.shape and self.is_image else None
        return spec.but(dtype=self.args.dtype.numpy, layout=output_layout, shape=shape, channels=channels)

    @property
    def is_image(self) -> bool:
        return self.layout in ("HWC", "CHW")


def crop_mirror_normalize_sample(xp, sample, layout: str, permutation: tuple, args, op_name: str):
    """crop_mirror_normalize of one sequence or volume (numpy or torch): crop's window (the depth
    along D, or along the frames; the outside under out_of_bounds_policy), mirrored along W,
    normalized per channel in float32 and converted, the channels padded under pad_output, the
    window's outside and the padded channels the fill values as they are; then permuted."""
    shape, channel_axis = tuple(sample.shape), layout.index("C")
    window = window_of_layout(shape, layout, args, op_name) or [(0, extent) for extent in shape]
    inside = [(max(start, 0), max(0, min(start + size, extent) - max(start, 0)))
              for (start, size), extent in zip(window, shape)]
    region = sample[tuple(slice(start, start + size) for start, size in inside)]
    channels = shape[channel_axis]
    out_channels = padded_channels(channels, args)
    means, multipliers, fills = cmn_channel_values(args, out_channels, op_name)
    dtype = np.dtype(args.dtype.numpy)
    along_channels = [1] * len(shape)
    along_channels[channel_axis] = channels
    if xp is np:
        values = region.astype(np.float32)
        if len(means):
            with np.errstate(invalid="ignore"):  # infinity times 0 (std 0) is NaN, as DALI
                values = (values - means[:channels].reshape(along_channels)) * multipliers[:channels].reshape(along_channels)
        values = numeric.saturate(values, dtype)
    else:
        values = region.to(xp.float32)
        if len(means):
            device = region.device
            values = (values - xp.from_numpy(means[:channels].reshape(along_channels)).to(device)) \
                * xp.from_numpy(multipliers[:channels].reshape(along_channels)).to(device)
        values = numeric.saturate_tensor(values, types.to_torch_dtype(dtype))
    fill = _convert_fill(fills, dtype)
    if out_channels > channels:  # the padded channels take their fill
        extra = list(values.shape)
        extra[channel_axis] = out_channels - channels
        filler = fill[channels:].reshape([out_channels - channels if axis == channel_axis else 1
                                          for axis in range(len(shape))])
        if xp is np:
            values = np.concatenate([values, np.broadcast_to(filler, extra)], axis=channel_axis)
        else:
            values = xp.cat([values, xp.from_numpy(np.ascontiguousarray(np.broadcast_to(filler, extra)))
                             .to(values.device)], dim=channel_axis)
    relative = [(start - kept, size) for (start, size), (kept, _) in zip(window, inside)]
    relative[channel_axis] = (0, out_channels)
    values = cut_window(xp, values, relative, fill if len(fill) > 1 else fill[:1], channel_axis)
    if args.mirror:
        values = xp.flip(values, (layout.index("W"),)) if xp is not np else values[tuple(
            slice(None, None, -1) if axis == layout.index("W") else slice(None) for axis in range(len(shape)))]
    values = values.transpose(permutation) if xp is np else values.permute(permutation)
    return np.ascontiguousarray(values) if xp is np else values.contiguous()


@registry.register("crop_mirror_normalize", "cpu")
class CropMirrorNormalize(CropMirrorNormalizeDeclaration, SampleOperator):
    def __init__(self, args, context):
        super().__init__(args, context)
        self._tables = _TableCache()

    def output_spec(self, inputs, args):
        shape = _output_shape(inputs[0].shape, self.layout, self.permutation, args) \
            if inputs[0].ndim == 3 and self.is_image else None
        return None if shape is None else (shape, args.dtype.numpy)

    def run(self, inputs, args, sample, out=None):
        image = np.asarray(inputs[0])
        if not self.is_image:
            check_type(image.dtype, CMN_INPUT_TYPES, self.name)
            if image.ndim != len(self.layout):
                raise ValueError(f"{self.name}: a sample of shape {image.shape} in the layout {self.layout!r}")
            return crop_mirror_normalize_sample(np, image, self.layout, self.permutation, args, self.name)
        check_hwc(image, self.name)
        check_type(image.dtype, CMN_INPUT_TYPES, self.name)
        hwc = image.transpose(1, 2, 0) if self.layout == "CHW" else image
        height, width, channels = hwc.shape
        placement = crop_placement(height, width, args) or (0, 0, height, width)
        top, left, window_height, window_width = cpu_image.fit_window(
            *placement, height, width, args.out_of_bounds_policy, self.name)
        out_channels = padded_channels(channels, args)
        means, multipliers, fills = cmn_channel_values(args, out_channels, self.name)
        dtype = np.dtype(args.dtype.numpy)
        bottom, right = min(top + window_height, height), min(left + window_width, width)
        inside = hwc[max(top, 0):bottom, max(left, 0):right]
        whole = inside.shape[:2] == (window_height, window_width)
        if self.permutation == (2, 0, 1) and whole and image.dtype == np.uint8 and inside.size:
            # each channel's plane looked up straight into its plane of the output: no HWC result to
            # transpose (an eighth of the time)
            if out is None:
                out = np.empty((out_channels, window_height, window_width), dtype)
            table = self._tables.get(means, multipliers, channels, dtype)
            cpu_image.lookup_planes(inside, table, out[:channels], mirror=bool(args.mirror),
                                    native_lookup=native.lookup_planes)
            out[channels:] = _convert_fill(fills[channels:], dtype)[:, None, None]
            return out
        if image.dtype == np.uint8 and inside.size:
            values = cpu_image.normalize_uint8(inside, self._tables.get(means, multipliers, channels, dtype))
        elif len(means):
            with np.errstate(invalid="ignore"):  # infinity times 0 (std 0) is NaN, as DALI
                values = numeric.saturate((inside.astype(np.float32) - means[:channels]) * multipliers[:channels], dtype)
        else:
            values = numeric.saturate(inside, dtype)
        if whole and out_channels == channels:
            result = values
        else:
            result = np.empty((window_height, window_width, out_channels), dtype)
            result[...] = _convert_fill(fills, dtype)
            result[max(-top, 0):max(-top, 0) + inside.shape[0], max(-left, 0):max(-left, 0) + inside.shape[1],
                   :channels] = values
        if args.mirror:
            result = result[:, ::-1]
        result = result.transpose(self.permutation)
        if out is None:
            return np.ascontiguousarray(result)
        out[...] = result
        return out


AFFINE_ARGS = ("mean", "std", "scale", "shift")


@registry.register("crop_mirror_normalize", "gpu", requires=devices.gpu_problem)
class CropMirrorNormalizeGpu(ExtendsImagePlan, CropMirrorNormalizeDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        if not self.is_image:  # sequences and volumes: sample by sample
            import torch
            return [crop_mirror_normalize_sample(torch, sample, self.layout, self.permutation, args[index], self.name)
                    for index, sample in enumerate(tensors_of(inputs[0]))]
        if self.layout != "HWC" or self.permutation not in ((2, 0, 1), (0, 1, 2)):
            raise ValueError(f"{self.name}: the GPU form takes HWC images to CHW or HWC")
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
            dtype=types.to_torch_dtype(first.dtype), chw=first.output_layout == "CHW",
            pad_channels=first.pad_output and channels == 3)


class NormalizeDeclaration:
    def declare_outputs(self, inputs):
        """Resolves axis_names from the input's layout, once."""
        check_type(inputs[0].dtype, NORMALIZE_TYPES, self.name)
        if self.args.axis_names is not None:
            layout, names = inputs[0].layout, self.args.axis_names
            if not layout or any(name not in layout for name in names):
                raise ValueError(f"{self.name}: axis_names '{names}' are not all in the input's layout "
                                 f"'{layout or 'unknown'}'; give axes instead")
            self.args = self.args.replace(axes=tuple(layout.index(name) for name in names))
        return inputs[0].but(dtype=self.args.dtype.numpy)


def _per_sample(value) -> bool:
    """Whether mean or stddev was given per sample (the sample's array), not as a number."""
    return isinstance(value, np.ndarray)


def _reduced_axes(args: dict, ndim: int) -> tuple:
    """The axes the statistics reduce over: ``axes``; else (DALI's rule) those where a per-sample
    mean (or else stddev) has extent 1; else all (also where mean and stddev are both numbers)."""
    if args.axes is not None:
        for axis in args.axes:
            if axis >= ndim:
                raise ValueError(f"normalize: axis {axis} is out of range for samples of {ndim} dimensions")
        return tuple(sorted(set(args.axes)))
    given = [value for value in (args.mean, args.stddev) if _per_sample(value)]
    if given:
        return tuple(axis for axis, extent in enumerate(given[0].shape) if extent == 1)
    return tuple(range(ndim))


def _parameter(xp, value, sample, axes: tuple, name: str):
    """A given mean or stddev: a number, or a per-sample tensor of the sample's shape reduced over
    ``axes`` (DALI's rule: no other broadcasting)."""
    if not _per_sample(value):
        return np.float32(value)
    expected = tuple(1 if axis in axes else extent for axis, extent in enumerate(sample.shape))
    if value.shape != expected:
        raise ValueError(f"normalize: '{name}' of shape {value.shape} for a sample of shape {tuple(sample.shape)}: "
                         f"expected {expected} (extent 1 on the reduced axes {axes}, the sample's on the others)")
    return value if xp is np else xp.as_tensor(value, device=sample.device)


def _total(xp, values, axes: tuple):
    """Sums over ``axes`` in float64, kept as extents of 1."""
    if xp is np:
        return values.sum(axis=axes, keepdims=True, dtype=np.float64)
    return values.double().sum(dim=axes, keepdim=True) if axes else values.double()


def _float32(xp, values):
    return values.astype(np.float32) if xp is np else values.float()


def _keep_zero(xp, values, divided):
    """``divided`` where ``values`` is not 0, else 0 (DALI's reciprocals of a zero deviation)."""
    if xp is np:
        return np.where(values == 0, np.float32(0), divided)
    return xp.where(values == 0, xp.zeros_like(divided), divided)


def _multiplier(xp, args: dict, samples: list, mean, axes: tuple, count: int):
    """What multiplies x - mean: scale / sqrt(stddev^2 + epsilon), with the stddev given or computed
    over the samples around ``mean``, each step in float32 as DALI."""
    scale, epsilon, stddev = np.float32(args.scale), np.float32(args.epsilon), args.stddev
    if stddev is None:
        squares = _float32(xp, sum(_total(xp, (sample - mean) ** 2, axes) for sample in samples))
        if count > args.ddof:
            reciprocal = np.float32(1.0 / (count - args.ddof))
        else:  # no degrees of freedom left: variance 0 (without epsilon, the output is shift)
            reciprocal, scale = (np.float32(1), np.float32(0)) if epsilon == 0 else (np.float32(0), scale)
        variance = squares * reciprocal
        if epsilon:
            return scale / xp.sqrt(variance + epsilon)
        return _keep_zero(xp, variance, scale / xp.sqrt(variance))
    stddev = _parameter(xp, stddev, samples[0], axes, "stddev")
    if epsilon:
        return scale / ((stddev * stddev + epsilon) ** 0.5)
    # a number divides as it is (0 gives infinities); a per-sample 0 gives 0
    return _keep_zero(xp, stddev, scale / stddev) if _per_sample(args.stddev) else scale / stddev


def _statistics(xp, samples: list, args: dict) -> tuple:
    """(mean, multiplier) of ``samples`` (one sample, or the whole batch with batch=True), which
    share ``args``."""
    ndim = samples[0].ndim
    axes = _reduced_axes(args, ndim)
    count = sum(int(np.prod([sample.shape[axis] for axis in axes])) for sample in samples)
    if args.mean is not None:
        mean = _parameter(xp, args.mean, samples[0], axes, "mean")
    else:
        mean = _float32(xp, sum(_total(xp, sample, axes) for sample in samples) / max(count, 1))
    return mean, _multiplier(xp, args, samples, mean, axes, count)


def normalize_samples(xp, samples: list, args: list) -> list:
    """The normalized samples (float32 arrays of ``xp``: numpy or torch), with statistics per sample,
    or over all of them with batch=True (the samples' extents on the other axes must agree)."""
    data = [sample.astype(np.float32) if xp is np else sample.to(xp.float32) for sample in samples]
    if not data:
        return []
    if args[0].batch:  # the whole batch's statistics: the same extents on the axes kept
        axes = _reduced_axes(args[0], data[0].ndim)
        kept = [axis for axis in range(data[0].ndim) if axis not in axes]
        for index, sample in enumerate(data):
            if sample.ndim != data[0].ndim or any(sample.shape[axis] != data[0].shape[axis] for axis in kept):
                raise ValueError(f"normalize: batch=True needs the samples' extents on the axes not reduced to "
                                 f"agree; sample {index} has shape {tuple(sample.shape)}, sample 0 "
                                 f"{tuple(data[0].shape)}")
    with np.errstate(divide="ignore", invalid="ignore"):  # infinities and NaN as DALI gives them
        if args[0].batch:
            statistics = [_statistics(xp, data, args[0])] * len(data)
        else:
            statistics = [_statistics(xp, [sample], a) for sample, a in zip(data, args)]
        return [(sample - mean) * multiplier + np.float32(a.shift)
                for sample, (mean, multiplier), a in zip(data, statistics, args)]


@registry.register("normalize", "cpu")
class Normalize(NormalizeDeclaration, SampleOperator):
    """Per sample on the workers; with batch=True (statistics of the whole batch) a whole-batch
    operator (NormalizeBatch)."""

    def __new__(cls, args, context):
        return object.__new__(NormalizeBatch if args.batch else cls)

    def run(self, inputs, args, sample, out=None):
        check_type(inputs[0].dtype, NORMALIZE_TYPES, self.name)
        (result,) = normalize_samples(np, [np.asarray(inputs[0])], [args])
        return numeric.saturate(result, args.dtype.numpy)


class NormalizeBatch(Normalize, WholeBatchOperator):
    def run_batch(self, inputs, args, params):
        for sample in inputs[0]:
            check_type(sample.dtype, NORMALIZE_TYPES, self.name)
        return [numeric.saturate(result, a.dtype.numpy)
                for result, a in zip(normalize_samples(np, [np.asarray(s) for s in inputs[0]], args), args)]


def normalize_along_one_axis(torch, samples: list, args: list) -> list | None:
    """normalize_samples for a ragged batch whose samples share their arguments and reduce over one
    axis, their other extents equal (features x frames of audio, each band over its clip's frames):
    every sample's statistics from float64 running sums over the batch joined along that axis,
    differenced at the samples' bounds, in a fixed number of calls where the per-sample path makes
    about ten a sample; the same float32 steps, the float64 sums in another order. None where
    another case (given mean or stddev, batch=True, other shapes)."""
    first = args[0] if args else None
    if first is None or any(a is not first for a in args) or first.batch or first.mean is not None \
            or first.stddev is not None or any(sample.dim() != 2 for sample in samples):
        return None
    axes = _reduced_axes(first, 2)
    if len(axes) != 1:
        return None
    axis, kept = axes[0], 1 - axes[0]
    lengths = [int(sample.shape[axis]) for sample in samples]
    if any(sample.shape[kept] != samples[0].shape[kept] for sample in samples) or min(lengths) <= first.ddof:
        return None
    from penstock.runtime.pinned import to_device
    joined = torch.cat([sample.to(torch.float32) for sample in samples], dim=axis)
    # the tables in one upload that does not wait for the GPU (from pageable memory it would)
    segment, bounds, counts, reciprocals = to_device(samples[0].device, [
        np.repeat(np.arange(len(samples), dtype=np.int64), lengths),
        np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), np.asarray(lengths, np.float64),
        np.float32(1.0) / (np.asarray(lengths, np.float64) - first.ddof).astype(np.float32)])
    counts = counts[None, :] if axis == 1 else counts[:, None]

    def segment_sums(values):  # float64 running sums, differenced at the samples' bounds
        running = torch.cumsum(values.double(), dim=axis)
        running = torch.cat([torch.zeros_like(running.narrow(axis, 0, 1)), running], dim=axis)
        return running.index_select(axis, bounds[1:]) - running.index_select(axis, bounds[:-1])

    difference = joined - (segment_sums(joined) / counts).float().index_select(axis, segment)
    squares = segment_sums(difference * difference).float()
    variance = squares * (reciprocals[None, :] if axis == 1 else reciprocals[:, None])
    scale, epsilon = np.float32(first.scale), np.float32(first.epsilon)
    with np.errstate(divide="ignore", invalid="ignore"):
        if epsilon:
            multiplier = scale / torch.sqrt(variance + epsilon)
        else:
            multiplier = _keep_zero(torch, variance, scale / torch.sqrt(variance))
    result = difference * multiplier.index_select(axis, segment) + np.float32(first.shift)
    return [part.contiguous() for part in torch.split(result, lengths, dim=axis)]


@registry.register("normalize", "gpu", requires=devices.gpu_problem)
class NormalizeGpu(NormalizeDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        import torch
        samples = tensors_of(inputs[0])
        results = normalize_along_one_axis(torch, samples, args)
        if results is None:
            results = normalize_samples(torch, samples, args)
        return [numeric.saturate_tensor(result, types.to_torch_dtype(a.dtype)) for result, a in zip(results, args)]


class CastDeclaration:
    def declare_outputs(self, inputs):
        return inputs[0].but(dtype=self.args.dtype.numpy)


@registry.register("cast", "cpu")
class Cast(CastDeclaration, SampleOperator):
    def output_spec(self, inputs, args):
        return inputs[0].shape, args.dtype.numpy

    def run(self, inputs, args, sample, out=None):
        result = numeric.saturate(np.asarray(inputs[0]), args.dtype.numpy)
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
        target = types.to_torch_dtype(args[0].dtype)
        if isinstance(value, ImagePlan) or (value and value[0].dim() == 3 and value[0].shape[2] <= MAX_PLAN_CHANNELS
                                            and not value[0].dtype.is_complex):
            plan = plan_of(value)
            if target != torch.bool and (plan.dtype is None or plan.dtype.is_floating_point
                                         or plan.dtype == torch.uint8):
                return plan.with_output(dtype=target)
            value = plan.materialize()[0]
        return [numeric.saturate_tensor(sample, target) for sample in value]
