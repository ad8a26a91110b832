"""``tensor_resize`` (DALI's TensorResize, also ``experimental.tensor_resize``): resize's resampling
over any axes of any tensor, the output sizes given per axis as sizes or as scales of the input.

Its rules are resize's (penstock.operators.geometry.resize: the adjusted sizes of ``mode`` and
``max_size``, the region of interest, the sub-pixel scale) with two more: a scaled size is rounded
by ``size_rounding``, and the region keeps the point at ``alignment`` in place when the rounding
changes the scale. The axes not named keep their size. The CPU resamples with resize's separable
passes; the GPU runs the same passes on tensors (kernels.tensor_resampling), to the same values.
"""
from __future__ import annotations

import math

import numpy as np

from penstock import devices, registry, types
from penstock.contract import BatchOperator, SampleOperator, named_axes
from penstock.kernels import cpu_image
from penstock.operators.geometry.resize import (_adjust_output_size, fitted_window, ordered_region,
                                               region_of_interest, resample_filters, resampled_dtype,
                                               resampled_on_device, round_half_away)
from penstock.operators.shared.resizing import INTERP_ARGS
from penstock.operators.shared.gpu_plan import tensors_of
from penstock.runtime import native
from penstock.schema import Arg, ArgError, OpSchema, given

ROUNDINGS = {"round": round_half_away, "truncate": int, "ceil": math.ceil}


def _one_size_form(static: dict, per_sample: frozenset) -> None:
    if given(static, per_sample, "sizes") == given(static, per_sample, "scales"):
        raise ArgError("Need one of ``scales`` or ``sizes``, but not both")
    if given(static, per_sample, "roi_start") != given(static, per_sample, "roi_end"):
        raise ArgError("``roi_start`` and ``roi_end`` must be specified together")
    if given(static, per_sample, "scales") and static.get("mode") in ("not_smaller", "not_larger"):
        raise ArgError("Providing ``scales`` is incompatible with not-smaller or not-larger modes")
    if static.get("axes") is not None and static.get("axis_names") is not None:
        raise ArgError("give the axes as axes or as axis_names, not both")


registry.register_schema(OpSchema(
    name="tensor_resize", class_name="TensorResize",
    doc="Resizes tensors of any number of dimensions along ``axes`` (or ``axis_names``; default every axis), "
        "with resize's filters: the output sizes given as ``sizes`` or as ``scales`` of the input (rounded by "
        "``size_rounding``; the region of interest keeps the point at ``alignment`` in place), adjusted by "
        "``mode`` and ``max_size`` as resize's. The other axes keep their size.",
    args=(
        Arg("sizes", "floats", None, "Output sizes, one per axis resized.", per_sample=True),
        Arg("scales", "floats", None, "Scale factors, one per axis resized: out = size_rounding(scale * input).",
            per_sample=True),
        Arg("alignment", "floats", None, "Where the region of interest stays when a scaled size is rounded: 0 its "
            "start, 0.5 its centre (DALI's default), 1 its end; one value or one per axis.", per_sample=True),
        Arg("axes", "ints", None, "The axes that sizes, scales, max_size, roi_start and roi_end refer to "
            "(negative: from the back); default every axis."),
        Arg("axis_names", "layout", None, "The axes as layout letters (instead of axes)."),
        Arg("size_rounding", "str", "round", "Rounding of scaled sizes: 'round' (halves away from zero), 'truncate' "
            "or 'ceil'.", choices=tuple(ROUNDINGS)),
        Arg("mode", "str", None, "'default', 'stretch', 'not_larger' or 'not_smaller', as resize's.",
            choices=(None, "default", "stretch", "not_larger", "not_smaller")),
        Arg("max_size", "floats", None, "Upper limit of the output size, one value or one per axis resized.",
            min=0.0),
        Arg("roi_start", "floats", None, "Start of the input region, per axis resized (with roi_end).",
            per_sample=True),
        Arg("roi_end", "floats", None, "End of the input region, per axis resized.", per_sample=True),
        Arg("roi_relative", "bool", False, "roi_start and roi_end are fractions of the input size (0 to 1)."),
        Arg("subpixel_scale", "bool", True, "Keep the exact scale of a fractional output size."),
        Arg("dtype", "dtype", None, "Output type: the input's (default) or FLOAT.",
            choices=(None, types.UINT8, types.UINT16, types.INT16, types.FLOAT)),
        *INTERP_ARGS,
    ),
    checks=(_one_size_form,),
    also_named=(("experimental.tensor_resize", "experimental.TensorResize"),),
    input_names=("input",)))


def _per_axis(values, count: int, name: str) -> list[float]:
    values = [float(value) for value in np.ravel(values)]
    if len(values) == 1:
        return values * count
    if len(values) != count:
        raise ValueError(f"tensor_resize: argument '{name}': {len(values)} values for {count} axes")
    return values


def tensor_window(shape: tuple, axes: tuple, args) -> tuple[list, list, list]:
    """(output size, source start, source end) along every axis of a sample of ``shape``."""
    ndim = len(shape)
    count = len(axes)
    extents_in = [float(extent) for extent in shape]
    if args.sizes is not None:
        requested = list(extents_in)
        for axis, size in zip(axes, _per_axis(args.sizes, count, "sizes")):
            requested[axis] = size
    else:
        requested = list(extents_in)
        for axis, scale in zip(axes, _per_axis(args.scales, count, "scales")):
            requested[axis] = float(np.float32(np.float32(scale) * np.float32(shape[axis])))
    lo, hi = [0.0] * ndim, list(extents_in)
    if args.roi_start is not None:
        starts, ends = _per_axis(args.roi_start, count, "roi_start"), _per_axis(args.roi_end, count, "roi_end")
        region = region_of_interest(starts, ends, [shape[axis] for axis in axes], args.roi_relative)
        for axis, start, end in zip(axes, *region):
            lo[axis], hi[axis] = start, end
    extents = ordered_region(lo, hi, requested)
    max_size = None
    if args.max_size is not None and len(args.max_size):
        max_size = [float(np.nextafter(np.float32(2**31 - 1), np.float32(0)))] * ndim
        for axis, value in zip(axes, _per_axis(args.max_size, count, "max_size")):
            max_size[axis] = value
    wanted = [float(np.float32(value)) for value in _adjust_output_size(requested, extents, args.mode or "default",
                                                                        max_size)]
    alignment = None
    if args.alignment is not None:
        alignment = [0.0] * ndim
        for axis, value in zip(axes, _per_axis(args.alignment, count, "alignment")):
            alignment[axis] = value
    for d in range(ndim):
        if lo[d] == hi[d] and wanted[d] != 0:
            raise ValueError("tensor_resize: Cannot produce non-empty output from empty input")
    return fitted_window(wanted, lo, hi, args.subpixel_scale, alignment, ROUNDINGS[args.size_rounding],
                         0 if 0 in shape else 1)


class TensorResizeDeclaration:
    _layout = ""

    def declare_outputs(self, inputs):
        spec = inputs[0]
        self._layout = spec.layout
        if self.args.axis_names is not None:
            named_axes(self.name, spec.layout, self.args.axis_names)  # refuses names the layout lacks, where called
        return spec.but(dtype=self.args.dtype.numpy if self.args.dtype else spec.dtype, shape=None)

    def axes_of(self, ndim: int) -> tuple[int, ...]:
        if ndim < 1:
            raise ValueError(f"{self.name}: Input must be at least 1D")
        if self.args.axis_names is not None:
            return named_axes(self.name, self._layout, self.args.axis_names)
        if self.args.axes is None:
            return tuple(range(ndim))
        for axis in self.args.axes:
            if not -ndim <= axis < ndim:
                raise ValueError(f"{self.name}: axis {axis} is out of range for samples of {ndim} dimensions")
        return tuple(axis % ndim for axis in self.args.axes)

    def changes(self, shape: tuple, args) -> tuple:
        """(axes, output sizes, source starts, source ends) of the axes whose size or region changes."""
        sizes, lo, hi = tensor_window(shape, self.axes_of(len(shape)), args)
        changed = tuple(d for d in range(len(shape)) if (sizes[d], lo[d], hi[d]) != (shape[d], 0.0, float(shape[d])))
        return (changed, *(tuple(values[d] for d in changed) for values in (sizes, lo, hi)))


@registry.register("tensor_resize", "cpu")
class TensorResize(TensorResizeDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        data = np.asarray(inputs[0])
        dtype = resampled_dtype(data, args, self.name)
        axes, sizes, lo, hi = self.changes(data.shape, args)
        if not axes:
            return data.astype(dtype, copy=True)
        return cpu_image.resample(data, axes, sizes, lo, hi, *resample_filters(args), args.antialias, dtype,
                                  native.resample_axis)


@registry.register("tensor_resize", "gpu", requires=devices.gpu_problem)
class TensorResizeGpu(TensorResizeDeclaration, BatchOperator):
    """Sample by sample, the CPU form's passes run on the device."""

    def run_batch(self, inputs, args, batch):
        results = []
        for index, sample in enumerate(tensors_of(inputs[0])):
            sample_args = args[index]
            if sample_args.dtype is not None and types.to_torch_dtype(sample_args.dtype) not in (
                    sample.dtype, types.to_torch_dtype(types.FLOAT)):
                raise ValueError(f"{self.name}: argument 'dtype': the output type must be the input's or float")
            axes, sizes, lo, hi = self.changes(tuple(sample.shape), sample_args)
            if not axes:
                dtype = types.to_torch_dtype(sample_args.dtype) if sample_args.dtype is not None else sample.dtype
                results.append(sample.to(dtype).clone())
                continue
            results.append(resampled_on_device(sample, axes, sizes, lo, hi, sample_args))
        return results
