"""``crop``, ``flip`` and ``transpose``: each operator's schema, its rules, its CPU implementation
(per sample) and its GPU implementation (per batch; crop and flip folded into the fused image
plan)."""
from __future__ import annotations

import numpy as np

from penstock import devices, registry, types
from penstock.contract import BatchOperator, SampleOperator
from penstock.kernels import cpu_image
from penstock.operators.geometry.layouts import image_layout, layout_refused
from penstock.operators.shared.gpu_plan import ExtendsImagePlan, geometry_plan, plan_of, tensors_of
from penstock.operators.shared.images import (CROP_ARGS, WINDOW_CHECKS, crop_placement, crop_size, cut_window,
                                              window_of_layout, with_crop_of)
from penstock.schema import Arg, ArgError, OpSchema


registry.register_schema(OpSchema(
    name="crop", class_name="Crop",
    doc="Cuts a window out of images, volumes and sequences (layouts " + ", ".join(
        ("HWC", "CHW", "DHWC", "CDHW", "FHWC", "FCHW", "CFHW", "FDHWC", "FCDHW", "CFDHW")) + "; without a layout "
        "HWC, DHWC or FDHWC by the number of dimensions): (height, width), placed by crop_pos_x / crop_pos_y, and a "
        "depth placed by crop_pos_z along D, or along F in sequences without D (as DALI); without a window the "
        "sample is kept whole.",
    args=(*CROP_ARGS, Arg("image_type", "image_type", None, "Accepted for DALI compatibility."),
          Arg("dtype", "dtype", None, "Output type; default the input's.")),
    checks=WINDOW_CHECKS,
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
    checks=(lambda static, per_sample: _check_permutation(static.perm),),
    input_names=("input",)))


def _check_permutation(perm) -> None:
    if perm is not None and sorted(perm) != list(range(len(perm))):
        raise ArgError(f"argument 'perm': {tuple(perm)} is not a permutation of 0..{len(perm) - 1}")


def fixed_crop_size(args) -> tuple[int, int] | None:
    """The window's (height, width) when it does not depend on the image: both sizes given, positive."""
    size = crop_size(args)
    return size if size is not None and min(size) > 0 else None


CROP_LAYOUTS = ("HWC", "CHW", "DHWC", "CDHW", "FHWC", "FCHW", "CFHW", "FDHWC", "FCDHW", "CFDHW")  # DALI's
CROP_DEFAULT_LAYOUTS = {3: "HWC", 4: "DHWC", 5: "FDHWC"}  # for samples without a layout, as DALI reads them


def crop_image(image: np.ndarray, args: dict, op_name: str, layout: str = "HWC") -> np.ndarray:
    """The window of crop / crop_mirror_normalize in an HWC or CHW image; the image itself when no
    window is asked for."""
    hwc = image.transpose(1, 2, 0) if layout == "CHW" else image
    placement = crop_placement(hwc.shape[0], hwc.shape[1], args)
    if placement is None:
        return image
    window = cpu_image.crop_window(hwc, *placement, args.fill_values, args.out_of_bounds_policy, op_name)
    return window.transpose(2, 0, 1) if layout == "CHW" else window


def crop_sample(xp, sample, layout: str, args, op_name: str):
    """crop's window of one sample (numpy or torch) in any of CROP_LAYOUTS."""
    if layout in ("HWC", "CHW") and xp is np:
        return crop_image(sample, args, op_name, layout)
    window = window_of_layout(tuple(sample.shape), layout, args, op_name)
    return sample if window is None else cut_window(xp, sample, window, args.fill_values, layout.index("C"))


class CropDeclaration:
    _layout = "HWC"

    def declare_outputs(self, inputs):
        spec = inputs[0]
        # where nothing tells the dimensions before the data comes, the samples are read as HWC images
        layout = self._layout = image_layout(spec.layout, spec.ndim, CROP_LAYOUTS, CROP_DEFAULT_LAYOUTS,
                                             self.name) or "HWC"
        shape = None
        if layout in ("HWC", "CHW"):
            size = None if self.args.out_of_bounds_policy == "trim_to_shape" else fixed_crop_size(self.args)
            channels = (spec.shape[2] if layout == "HWC" else spec.shape[0]) if spec.shape else None
            shape = ((*size, channels) if layout == "HWC" else (channels, *size)) if size and channels else None
        return spec.but(dtype=self.args.dtype.numpy if self.args.dtype else spec.dtype, layout=layout, shape=shape)

    def layout_of(self, sample) -> str:
        return image_layout(self._layout, sample.ndim, CROP_LAYOUTS, CROP_DEFAULT_LAYOUTS, self.name)


@registry.register("crop", "cpu")
class Crop(CropDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        result = crop_sample(np, image, self.layout_of(image), args, self.name)
        dtype = args.dtype.numpy if args.dtype else image.dtype
        return np.array(result, dtype=dtype, copy=True)


@registry.register("crop", "gpu", requires=devices.gpu_problem)
class CropGpu(ExtendsImagePlan, CropDeclaration, BatchOperator):
    """HWC images fold into the batch's image plan; other layouts are cut sample by sample."""

    def run_batch(self, inputs, args, batch):
        if self._layout == "HWC":
            plan = with_crop_of(geometry_plan(inputs[0]), args, self.name)
            if args[0].dtype is not None:
                plan = plan.with_output(dtype=types.to_torch_dtype(args[0].dtype))
            return plan
        import torch
        results = []
        for sample, sample_args in zip(tensors_of(inputs[0]), args):
            result = crop_sample(torch, sample, self.layout_of(sample), sample_args, self.name)
            dtype = types.to_torch_dtype(sample_args.dtype) if sample_args.dtype is not None else result.dtype
            results.append(result.to(dtype).contiguous() if result.dtype != dtype else result.contiguous())
        return results


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
        raise layout_refused(op_name, layout, FLIP_LAYOUTS)
    return layout


def flipped_axes(layout: str, args: dict) -> tuple[int, ...]:
    """The axes of a sample of ``layout`` that flip's arguments mirror."""
    return tuple(layout.index(name) for flag, name in FLIP_AXES.items() if args[flag] and name in layout)


class FlipDeclaration:
    _layout = ""  # until declared: DALI's default for the samples' dimensions (HWC images)

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
        if self._layout in ("HWC", ""):
            return plan_of(inputs[0]).with_flips([(a.vertical, a.horizontal) for a in args])
        samples = tensors_of(inputs[0])
        results = []
        for sample, sample_args in zip(samples, args):
            axes = flipped_axes(self.layout_of(sample.dim()), sample_args)
            results.append(torch.flip(sample, axes) if axes else sample.clone())
        return results


class TransposeDeclaration:
    def declare_outputs(self, inputs):
        spec = inputs[0]
        perm = self.args.perm
        if perm is not None and spec.ndim is not None and len(perm) != spec.ndim:
            raise ValueError(f"transpose: perm {perm} has {len(perm)} axes, but its input has {spec.ndim}")
        shape = tuple(spec.shape[axis] for axis in (perm or reversed(range(len(spec.shape))))) if spec.shape else None
        return spec.but(layout=self._layout(spec.layout), shape=shape)

    def _layout(self, layout: str) -> str:
        if self.args.output_layout:
            return self.args.output_layout
        if not layout or not self.args.transpose_layout:
            return layout  # as DALI: without transpose_layout the input's layout is kept
        perm = self.args.perm or tuple(reversed(range(len(layout))))
        if sorted(perm) != list(range(len(layout))):
            return ""
        return "".join(layout[axis] for axis in perm)


@registry.register("transpose", "cpu")
class Transpose(TransposeDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        array = inputs[0]
        perm = args.perm or tuple(reversed(range(array.ndim)))
        if len(perm) != array.ndim:
            raise ValueError(f"transpose: perm {perm} does not permute the {array.ndim} axes of a sample of "
                             f"shape {array.shape}")
        return np.ascontiguousarray(array.transpose(perm))


@registry.register("transpose", "gpu", requires=devices.gpu_problem)
class TransposeGpu(TransposeDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        from penstock.kernels.image_plan import ImagePlan
        perm = args[0].perm
        plan = inputs[0] if isinstance(inputs[0], ImagePlan) else None
        if plan is not None and tuple(perm or ()) == (2, 0, 1) and not plan.chw:
            return plan.with_output(chw=True)
        samples = tensors_of(inputs[0])
        perm = perm or tuple(reversed(range(samples[0].dim())))
        if len(perm) != samples[0].dim():
            raise ValueError(f"transpose: perm {perm} does not permute the {samples[0].dim()} axes of a sample "
                             f"of shape {tuple(samples[0].shape)}")
        return [sample.permute(*perm).contiguous() for sample in samples]
