"""Filters: ``gaussian_blur``, ``laplacian``, ``filter`` (the user's kernel), ``median_blur``,
``erode`` and ``dilate`` over HWC (or HW) images, as DALI's; their schemas and the rules that build
their windows are in rules.py.

Every operator but the median is a window slid over the image: each builds, from its arguments,
a ``Window`` (weights, anchor, border rule, what it computes: a weighted sum or the minimum or
maximum over the taps). The CPU applies a window with OpenCV after padding the image by the border
rule (so every rule, 'wrap' included, means the same as on the GPU), the GPU with one Triton kernel
launch over the ragged batch (penstock.kernels.triton_filters). Sums are computed in float32 and
converted to the output type by penstock.numeric's rule.
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from penstock import devices, numeric, registry, types
from penstock.contract import BatchOperator, SampleOperator
from penstock.operators.filters.rules import (BLUR_TYPES, FILTER_TYPES, LAPLACIAN_TYPES, filter_window, gaussian_terms,
                                              is_valid_mode, laplacian_terms, median_size, morphology_window,
                                              planar_window, separable_volume)
from penstock.operators.shared.gpu_plan import tensors_of
from penstock.operators.shared.windows import Window, apply_window


def median_cpu(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The median over a window of ``size`` around each pixel, the edge pixels repeated outside:
    OpenCV's medianBlur where it applies, else numpy over sliding windows."""
    height, width, channels = image.shape
    square = size[0] == size[1]
    if square and channels in (1, 3, 4) and (image.dtype == np.uint8 or (image.dtype == np.float32 and size[0] <= 5)):
        return cv2.medianBlur(np.ascontiguousarray(image), size[0]).reshape(image.shape)
    padded = np.pad(image, ((size[0] // 2,) * 2, (size[1] // 2,) * 2, (0, 0)), mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, size, axis=(0, 1))
    return np.median(windows.reshape(height, width, channels, -1), axis=-1).astype(image.dtype)


@dataclass(frozen=True)
class SampleAxes:
    """How a sample's axes split, as DALI reads its layout: leading frame or channel-first axes
    (each plane between them is filtered on its own), the spatial axes, then channels or none."""

    lead: int
    spatial: int
    channels: bool

    def planes(self, sample):
        """[planes, *spatial, channels] (a reshape: a view where it can be; numpy or torch)."""
        shape = tuple(sample.shape)
        count = int(np.prod(shape[:self.lead], dtype=np.int64)) if self.lead else 1
        return sample.reshape(count, *shape[self.lead:self.lead + self.spatial], shape[-1] if self.channels else 1)

    def restore(self, planes, sample_shape: tuple):
        """planes' inverse for the filtered planes (whose spatial size may differ: mode 'valid')."""
        spatial = tuple(planes.shape[1:1 + self.spatial])
        return planes.reshape(*sample_shape[:self.lead], *spatial, *sample_shape[-1:] if self.channels else ())


def sample_axes(layout: str, ndim: int, op_name: str, spatial_counts: tuple) -> SampleAxes:
    if not layout:
        if ndim not in spatial_counts:
            raise ValueError(f"{op_name}: a sample of {ndim} dimensions without a layout (every axis is then spatial); "
                             f"takes {' or '.join(map(str, spatial_counts))} spatial axes: give the layout")
        return SampleAxes(0, ndim, False)
    if len(layout) != ndim:
        raise ValueError(f"{op_name}: a sample of {ndim} dimensions in the layout '{layout}'")
    lead = len(layout) - len(layout.lstrip("FC"))
    channels = len(layout) > lead and layout[-1] == "C"
    inner = layout[lead:len(layout) - channels]
    if lead > 2 or len(inner) not in spatial_counts or "F" in inner or "C" in inner:
        raise ValueError(f"{op_name}: takes layouts of frames or channels first ('F', 'C'), then "
                         f"{' or '.join(map(str, spatial_counts))} spatial axes, then channels ('C') or none; got "
                         f"'{layout}'")
    if (lead, len(inner), channels) == (0, 1, True):
        # DALI's kernels refuse this one form (one spatial axis then channels, as 'WC'); 'FWC' goes
        raise ValueError(f"{op_name}: takes no samples of one spatial axis followed by channels ('{layout}'), as "
                         "DALI; give them a leading frames axis or lay them out channels first")
    return SampleAxes(lead, len(inner), channels)


class FilterDeclaration:
    """What every filter declares and checks: the layouts and types it takes, and its output type
    (the input's, or float where dtype says so)."""

    keeps_type = False  # min, max and median: the input's type always
    input_types: tuple = ()  # () takes every type
    spatial_counts = (2,)
    layouts: tuple = ()  # DALI's list where it has one (without a layout: HW or HWC by the dimensions)
    # integer outputs round halves to even on the CPU too (filter: DALI converts with OpenCV's rounding),
    # else away from zero (DALI's own CPU kernels)
    halves_to_even = False

    def declare_outputs(self, inputs):
        spec = inputs[0]
        self._layout = spec.layout
        if spec.ndim is not None or spec.layout:
            self.axes_of(spec.ndim if spec.ndim is not None else len(spec.layout))
        dtype = self.output_type(self.args, spec.dtype) if spec.dtype is not None else None
        valid = is_valid_mode(self.args)
        return spec.but(dtype=dtype, shape=None if valid else spec.shape)

    def axes_of(self, ndim: int) -> SampleAxes:
        layout = self._layout
        if self.layouts:
            if layout and layout not in self.layouts:
                raise ValueError(f"{self.name}: takes the layouts {', '.join(self.layouts)}; got '{layout}'")
            layout = layout or {2: "HW", 3: "HWC"}.get(ndim, "")
        return sample_axes(layout, ndim, self.name, self.spatial_counts)

    def output_type(self, args: dict, input_type) -> np.dtype:
        input_type = np.dtype(input_type)
        if self.input_types and input_type not in self.input_types:
            raise TypeError(f"{self.name}: takes {', '.join(t.name for t in self.input_types)} data, got {input_type}")
        dtype = args.get("dtype")
        if dtype is None or self.keeps_type:
            return input_type
        if np.dtype(dtype.numpy) not in (input_type, np.dtype(np.float32)):
            raise TypeError(f"{self.name}: argument 'dtype': the output type is the input's ({input_type}) or float, "
                            f"got {np.dtype(dtype.numpy)}")
        return np.dtype(dtype.numpy)

    def window(self, args: dict, dtype: np.dtype, spatial: int) -> Window:
        raise NotImplementedError

    def filtered(self, sample: np.ndarray, args: dict) -> np.ndarray:
        """One sample's output on the CPU."""
        axes = self.axes_of(sample.ndim)
        out_type = self.output_type(args, sample.dtype)
        planes = axes.planes(sample)
        if axes.spatial == 3:
            terms = self.terms(args, 3)
            result = np.stack([separable_volume(plane, terms) for plane in planes])
        else:
            window = self.window(args, sample.dtype, axes.spatial)
            rows = planes if axes.spatial == 2 else planes[:, None]  # one spatial axis: a row
            result = np.stack([apply_window(plane, window, self.name) for plane in rows])
            result = result if axes.spatial == 2 else result[:, 0]
        if self.halves_to_even and out_type.kind in "iu":
            result = np.rint(result)
        return axes.restore(numeric.saturate(result, out_type), sample.shape)


class WindowFilter(FilterDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        return self.filtered(np.asarray(inputs[0]), args)


class WindowFilterGpu(FilterDeclaration, BatchOperator):
    """Every plane of the batch (images, the frames of sequences, the channels of channel-first
    samples) in one Triton launch; volumes through the CPU form on the executor's CPU workers."""

    def run_batch(self, inputs, args, batch):
        import torch

        from penstock.kernels import triton_filters
        from penstock.runtime.pinned import to_device
        samples = tensors_of(inputs[0])
        if not samples:
            return []
        axes = [self.axes_of(sample.dim()) for sample in samples]
        if any(a.spatial == 3 for a in axes):
            return self.through_host(samples, args, batch)
        dtype = types.to_numpy_dtype(samples[0].dtype)
        out_type = self.output_type(args[0], dtype)
        windows = [self.window(a, dtype, sample_axes.spatial) for a, sample_axes in zip(args, axes)]
        operations, borders = {w.operation for w in windows}, {w.border for w in windows}
        assert len(operations) == len(borders) == 1  # set by static arguments: one per batch
        images, owners = [], []
        for index, (sample, sample_axes) in enumerate(zip(samples, axes)):
            planes = sample_axes.planes(sample)
            planes = planes if sample_axes.spatial == 2 else planes[:, None]
            images.extend(planes.unbind(0))
            owners.extend([index] * len(planes))
        results = triton_filters.run_window(
            images, [(windows[o].weights, windows[o].anchor) for o in owners],
            [windows[o].output_size(*image.shape[:2], self.name) for o, image in zip(owners, images)],
            operations.pop(), borders.pop(), [windows[o].fill for o in owners], types.to_torch_dtype(out_type),
            self.name, upload=to_device)
        outputs, start = [], 0
        for sample, sample_axes in zip(samples, axes):
            count = owners.count(len(outputs))
            planes = torch.stack(results[start:start + count])
            planes = planes if sample_axes.spatial == 2 else planes[:, 0]
            outputs.append(sample_axes.restore(planes, tuple(sample.shape)))
            start += count
        return outputs

    def through_host(self, samples, args, batch):
        import torch
        hosts = [sample.cpu().numpy() for sample in samples]
        results: list = [None] * len(hosts)

        def filter_sample(index: int):
            def call():
                results[index] = self.filtered(hosts[index], args[index])
            return call
        batch.run_on_workers([filter_sample(index) for index in range(len(hosts))])
        return [torch.from_numpy(result).to(sample.device) for result, sample in zip(results, samples)]


class SeparableRule:
    """gaussian_blur and laplacian: sums of separable terms over 1 to 3 spatial axes."""

    spatial_counts = (1, 2, 3)

    def window(self, args, dtype, spatial):
        return planar_window(self.terms(args, spatial))


class GaussianBlurRule(SeparableRule):
    input_types = BLUR_TYPES

    def terms(self, args, count):
        return gaussian_terms(args, count, self.name)


class LaplacianRule(SeparableRule):
    input_types = LAPLACIAN_TYPES

    def terms(self, args, count):
        return laplacian_terms(args, count, self.name)


class FilterRule:
    input_types = FILTER_TYPES
    halves_to_even = True

    def window(self, args, dtype, spatial):
        return filter_window(args, self.name)


class ErodeRule:
    keeps_type = True
    layouts = ("HW", "HWC", "FHWC", "CHW", "FCHW")

    def window(self, args, dtype, spatial):
        return morphology_window(args, self.name, "min", np.dtype(dtype))


class DilateRule:
    keeps_type = True
    layouts = ("HW", "HWC", "FHWC", "CHW", "FCHW")

    def window(self, args, dtype, spatial):
        return morphology_window(args, self.name, "max", np.dtype(dtype))


def _register_window_filter(names: tuple[str, ...], rule: type) -> None:
    for name in names:
        suffix = "".join(part.title() for part in name.replace(".", "_").split("_"))
        registry.register(name, "cpu")(type(suffix, (rule, WindowFilter), {}))
        registry.register(name, "gpu", requires=devices.gpu_problem)(type(suffix + "Gpu", (rule, WindowFilterGpu), {}))


_register_window_filter(("gaussian_blur",), GaussianBlurRule)


_register_window_filter(("laplacian",), LaplacianRule)


_register_window_filter(("filter",), FilterRule)


_register_window_filter(("erode",), ErodeRule)


_register_window_filter(("dilate",), DilateRule)


def median_tensor(image, size: tuple[int, int]):
    """The median over a window of ``size`` around each pixel of an HWC tensor, the edge pixels
    repeated outside (torch: the padded image unfolded into windows)."""
    import torch
    height, width, channels = image.shape
    planes = image.permute(2, 0, 1)[None].to(torch.float32)  # float32 holds 8- and 16-bit values exactly
    padded = torch.nn.functional.pad(planes, (size[1] // 2, size[1] // 2, size[0] // 2, size[0] // 2),
                                     mode="replicate")
    windows = padded.unfold(2, size[0], 1).unfold(3, size[1], 1)  # [1, C, H, W, size_y, size_x]
    median = windows.reshape(channels, height, width, -1).median(dim=-1).values
    return median.permute(1, 2, 0).to(image.dtype)


class MedianDeclaration(FilterDeclaration):
    keeps_type = True
    layouts = ("HW", "HWC", "FHWC", "CHW", "FCHW")


class MedianBlur(MedianDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = np.asarray(inputs[0])
        axes = self.axes_of(image.ndim)
        size = median_size(args, self.name)
        return axes.restore(np.stack([median_cpu(plane, size) for plane in axes.planes(image)]), image.shape)


class MedianBlurGpu(MedianDeclaration, BatchOperator):
    """Per plane with torch: a median needs a sort per pixel, which the window kernel does not do."""

    def run_batch(self, inputs, args, batch):
        import torch
        results = []
        for sample, a in zip(tensors_of(inputs[0]), args):
            axes = self.axes_of(sample.dim())
            size = median_size(a, self.name)
            planes = torch.stack([median_tensor(plane, size) for plane in axes.planes(sample)])
            results.append(axes.restore(planes, tuple(sample.shape)))
        return results


registry.register("median_blur", "cpu")(MedianBlur)


registry.register("median_blur", "gpu", requires=devices.gpu_problem)(MedianBlurGpu)
