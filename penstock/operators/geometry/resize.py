"""``resize`` over images, sequences and volumes: its schema, its rules (output sizes, the resize
window, filter choice: one function each, used by both devices), its CPU implementation (per
sample, OpenCV and numpy) and its GPU implementation (per batch, folded into the fused image
plan)."""
from __future__ import annotations

import math

import numpy as np

from penstock import devices, registry, types
from penstock.capabilities import Resamples
from penstock.contract import BatchOperator, OutputSpec, SampleOperator
from penstock.kernels import cpu_image
from penstock.operators.geometry.layouts import image_layout, spatial_axes
from penstock.operators.shared.gpu_plan import ExtendsImagePlan, kernel_filter, plan_of, tensors_of
from penstock.runtime import native
from penstock.operators.shared.resizing import INTERP_ARGS, RESIZE_ARGS, RESIZE_CHECKS
from penstock.schema import Arg, OpSchema


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
    also_named=(("experimental.resize", "experimental.Resize"),),  # DALI's resize on CV-CUDA: the same operator
    input_names=("images",)))


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
        lo, hi = region_of_interest(starts, ends, in_shape, args.roi_relative)
    else:
        lo, hi = [0.0] * spatial, [float(extent) for extent in in_shape]
    extents = ordered_region(lo, hi, requested)
    max_size = None
    if args.max_size is not None and len(args.max_size):
        max_size = list(np.broadcast_to(np.ravel(args.max_size).astype(np.float64), (spatial,)))
    wanted = [float(np.float32(value)) for value in _adjust_output_size(requested, extents, mode, max_size)]
    return fitted_window(wanted, lo, hi, args.subpixel_scale)


def region_of_interest(starts, ends, extents, relative: bool) -> tuple[list, list]:
    """DALI's CalculateInputRoI: (starts, ends) of the source region along each axis, fractions of
    the ``extents`` when ``relative``, in float32; a degenerate one widened to a thousandth of a pixel."""
    lo, hi = [], []
    for start, end, extent in zip(starts, ends, extents):
        if relative:
            start, end = start * extent, end * extent
        if abs(end - start) < 1e-3:
            offset = 0.5e-3 if start <= end else -0.5e-3
            start, end = start - offset, end + offset
        lo.append(float(np.float32(start)))
        hi.append(float(np.float32(end)))
    return lo, hi


def ordered_region(lo: list, hi: list, requested: list) -> list:
    """The region's extent along each axis, in float32: a region given end first is put in order
    (in place) and its requested size negated, so that the output is flipped."""
    extents = []
    for d in range(len(lo)):
        if hi[d] < lo[d]:
            lo[d], hi[d] = hi[d], lo[d]
            requested[d] = -requested[d]
        extents.append(float(np.float32(hi[d] - lo[d])))
    return extents


def round_half_away(value: float) -> int:
    return int(math.copysign(math.floor(abs(value) + 0.5), value))


def fitted_window(wanted: list, lo: list, hi: list, subpixel_scale: bool, alignment=None, round_size=round_half_away,
                  smallest: int = 1) -> tuple[list, list, list]:
    """DALI's CalculateSampleParams after the sizes are adjusted: each axis's whole output size
    (``round_size`` of the wanted size's magnitude, at least ``smallest``), its source window
    flipped where the size is negative, and, with subpixel_scale, moved about the point at
    ``alignment`` (0 its start, 0.5 its centre, 1 its end) so that a rounded size keeps the scale."""
    sizes = []
    lo, hi = list(lo), list(hi)
    for d, value in enumerate(wanted):
        size = max(smallest, round_size(abs(value)))
        if value < 0:
            lo[d], hi[d] = hi[d], lo[d]
        if subpixel_scale and size != abs(value):
            adjustment = min(max(size / abs(value), -10.0), 10.0)
            align = 0.5 if alignment is None else float(alignment[d])
            centre = (1.0 - align) * lo[d] + align * hi[d]
            lo[d], hi[d] = (min(max(centre + (lo[d] - centre) * adjustment, -1e9), 1e9),
                            min(max(centre + (hi[d] - centre) * adjustment, -1e9), 1e9))
        sizes.append(size)
    return sizes, lo, hi


def batch_resize_windows(in_sizes, args: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """resize_window for a batch of inputs that share ``args`` ([N, spatial] input extents,
    outermost first), worked out for all of them at once with the same float32 and float64 steps:
    (output sizes, source starts, source ends), each [N, spatial]; None where the per-sample rules
    are needed (a ROI, or an empty input)."""
    if args.roi_start is not None and len(args.roi_start):
        return None
    extents = np.asarray(in_sizes, np.float64)
    if extents.ndim != 2 or not extents.size or not np.all(extents > 0):
        return None
    spatial = extents.shape[1]
    extents = extents.astype(np.float32).astype(np.float64)
    requested, mode = _resize_request(args, spatial)
    requested = np.broadcast_to(np.asarray(requested, np.float64), extents.shape)
    given = requested != 0
    scales = requested / extents
    out = requested.copy()
    to_float32 = lambda values: values.astype(np.float32).astype(np.float64)  # noqa: E731
    max_size = None
    if args.max_size is not None and len(args.max_size):
        max_size = np.broadcast_to(np.ravel(args.max_size).astype(np.float64), (spatial,))
    if mode in ("default", "stretch"):
        missing = ~given
        if mode == "default":
            scale = np.ones(len(extents))
            for axis in range(spatial):
                scale = np.where(given[:, axis], scale * np.abs(scales[:, axis]), scale)
            counts = given.sum(axis=1)
            scale = np.where(counts > 1, scale ** (1.0 / np.maximum(counts, 1)), scale)
            out = np.where(missing, to_float32(extents * scale[:, None]), out)
        else:
            out = np.where(missing, extents, out)
        if max_size is not None:
            over = (max_size > 0) & (np.abs(out) > max_size)
            out = np.where(over, np.copysign(np.broadcast_to(max_size, out.shape), out), out)
    else:
        scale32 = to_float32(np.abs(scales))
        if mode == "not_smaller":
            final = np.max(np.where(given, scale32, -np.inf), axis=1)
        else:
            final = np.min(np.where(given, scale32, np.inf), axis=1)
        if max_size is not None:
            for axis in range(spatial):
                if max_size[axis] > 0:
                    final = np.minimum(final, max_size[axis] / extents[:, axis])
        kept = given & (np.abs(scales) == final[:, None])
        out = np.where(kept, out, to_float32(extents * np.copysign(final[:, None], scales)))
    wanted = to_float32(np.where(given.any(axis=1)[:, None], out, extents))
    sizes = np.maximum(1, np.floor(np.abs(wanted) + 0.5))
    flipped = wanted < 0
    lo, hi = np.where(flipped, extents, 0.0), np.where(flipped, 0.0, extents)
    if args.subpixel_scale:
        moved = sizes != np.abs(wanted)
        with np.errstate(divide="ignore", invalid="ignore"):
            adjustment = np.minimum(np.maximum(sizes / np.abs(wanted), -10.0), 10.0)
        centre = 0.5 * lo + 0.5 * hi
        lo = np.where(moved, centre + (lo - centre) * adjustment, lo)
        hi = np.where(moved, centre + (hi - centre) * adjustment, hi)
    return sizes.astype(np.int64), lo, hi


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
                                    resampled_dtype(image, args, self.name), native.resample_axis)
        if args.save_attrs:
            return result, np.array([image.shape[axis] for axis in axes], np.int32)
        return result


@registry.register("resize", "gpu", requires=devices.gpu_problem)
class ResizeGpu(ExtendsImagePlan, ResizeDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        if self.layout_of(3) != "HWC":
            return self._resampled_one_by_one(tensors_of(inputs[0]), args)
        plan = plan_of(inputs[0])
        if plan.resized or plan.geometry_final:
            plan = plan_of(plan.materialize()[0])
        in_sizes = list(plan.sizes)
        sizes, starts, ends = resize_windows_of_batch(in_sizes, args)
        first = args[0]
        shrinking = sizes and sizes[0][0] * sizes[0][1] < in_sizes[0][0] * in_sizes[0][1]
        plan = plan.with_resize_windows(sizes, starts, ends, kernel_filter(resize_filter(first, shrinking)),
                                        first.antialias)
        if first.dtype is not None:
            plan = plan.with_output(dtype=types.to_torch_dtype(first.dtype))
        if first.save_attrs:  # each image's input (height, width)
            from penstock.runtime.pinned import to_device
            return plan, to_device(batch.device, [np.array(size, np.int32) for size in in_sizes])
        return plan

    def _resampled_one_by_one(self, samples: list, args) -> list:
        """Sequences, volumes and planar images: each sample through the CPU form's resampling passes,
        run on the device (the CPU form's values)."""
        results, shapes = [], []
        for index, sample in enumerate(samples):
            sample_args = args[index]
            layout = self.layout_of(sample.dim())
            if sample.dim() != len(layout):
                raise ValueError(f"{self.name}: a sample of shape {tuple(sample.shape)} in the layout {layout!r}")
            axes = spatial_axes(layout)
            sizes, lo, hi = resize_window([sample.shape[axis] for axis in axes], sample_args)
            results.append(resampled_on_device(sample, axes, sizes, lo, hi, sample_args))
            shapes.append(np.array([sample.shape[axis] for axis in axes], np.int32))
        if samples and args[0].save_attrs:
            from penstock.runtime.pinned import to_device
            return results, to_device(samples[0].device, shapes)
        return results


def resampled_on_device(sample, axes: tuple, sizes, lo, hi, args):
    """A tensor resampled along ``axes`` to ``sizes`` from the region ``lo``..``hi`` with the
    filters, antialiasing and output type of a resampling operator's ``args``: the CPU form's
    passes (cpu_image.resampling_passes) run on the tensor's device, to the CPU's values."""
    from penstock.kernels.tensor_resampling import resample_tensor
    from penstock.runtime.pinned import to_device
    passes, _, _ = cpu_image.resampling_passes(tuple(sample.shape), tuple(axes), tuple(sizes), tuple(lo), tuple(hi),
                                               *resample_filters(args), args.antialias)
    dtype = sample.dtype if args.dtype is None else types.to_torch_dtype(args.dtype)
    return resample_tensor(sample, passes, dtype, upload=to_device)


def resize_windows_of_batch(sizes: list, args: list) -> tuple[list, np.ndarray, np.ndarray]:
    """resize_window for each (height, width) of a batch: (output sizes as tuples, source starts
    and ends [N, 2]), for the whole batch at once where it shares its arguments."""
    first = args[0] if args else None
    batch = batch_resize_windows(sizes, first) if sizes and all(a is first for a in args) else None
    if batch is not None:
        out, starts, ends = batch
        return list(map(tuple, out.tolist())), starts, ends
    windows = [resize_window(list(size), a) for size, a in zip(sizes, args)]
    return ([tuple(out) for out, _, _ in windows], np.array([lo for _, lo, _ in windows], np.float64).reshape(-1, 2),
            np.array([hi for _, _, hi in windows], np.float64).reshape(-1, 2))
