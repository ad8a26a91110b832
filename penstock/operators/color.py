"""Colour operators on HWC images: ``brightness``, ``contrast``, ``brightness_contrast``,
``saturation``, ``hue``, ``hsv``, ``color_twist`` and ``color_space_conversion``; the others
(``equalize``, ``lookup_table``, ``jpeg_compression_distortion``) are in color_nonlinear, HSV
conversions in color_hsv.

Every one of these is a linear map of each pixel's channels (a matrix and an offset per sample,
penstock.operators.color_tables builds them with DALI's definitions). The CPU applies it to each
sample and rounds to the output type; the GPU folds it into the batch's image plan, so a chain of
colour steps (with the crops, resizes and normalization next to them) is one kernel launch that
rounds once at the end. Conversions to and from HSV are not linear: they run on the CPU with
OpenCV, and on the GPU as torch operations per sample.
"""
from __future__ import annotations

import math

import cv2
import numpy as np

from penstock import devices, numeric, registry, types
from penstock.batch import hwc_facts
from penstock.contract import BatchOperator, SampleOperator
from penstock.operators import color_tables as tables
from penstock.operators.color_hsv import hsv_to_rgb_image, hsv_to_rgb_tensor, rgb_to_hsv_image, rgb_to_hsv_tensor
from penstock.operators.geometry import check_hwc, declare_hwc
from penstock.operators.gpu_plan import ExtendsImagePlan, plan_of, tensors_of
from penstock.schema import REQUIRED, Arg, OpSchema

OUTPUT_TYPES = (None, types.UINT8, types.INT16, types.INT32, types.FLOAT, types.FLOAT16)
DTYPE_ARG = Arg("dtype", "dtype", None, "Output type; default the input's.", choices=OUTPUT_TYPES)
IMAGE_TYPE_ARG = Arg("image_type", "image_type", types.RGB, "Colour space of the input and the output: RGB or BGR.",
                     choices=(types.RGB, types.BGR))
BRIGHTNESS_ARGS = (
    Arg("brightness", "float", 1.0, "Multiplier of the values.", per_sample=True),
    Arg("brightness_shift", "float", 0.0, "Added to the values, in units of the output type's range (1.0 is 255 "
        "for uint8, 1.0 for floats).", per_sample=True),
)
CONTRAST_ARGS = (
    Arg("contrast", "float", 1.0, "Multiplier of the distance from contrast_center; 0 gives a uniform grey.",
        per_sample=True),
    Arg("contrast_center", "float", None, "The level contrast leaves unchanged; default half the input type's "
        "positive range (128 for uint8, 0.5 for floats).", per_sample=True, nullable=True),
)
HUE_ARG = Arg("hue", "float", 0.0, "Hue rotation in degrees (a rotation of the chroma in YIQ space, as DALI).",
              per_sample=True)
SATURATION_ARG = Arg("saturation", "float", 1.0, "Saturation multiplier (of the chroma in YIQ space); 0 gives grey.",
                     per_sample=True, min=0.0)


def _schema(name: str, class_name: str, doc: str, *args: Arg, checks=()) -> None:
    registry.register_schema(OpSchema(name=name, class_name=class_name, doc=doc, args=(*args, DTYPE_ARG),
                                      checks=checks, input_names=("images",)))


_schema("brightness", "Brightness", "out = brightness_shift * output_range + brightness * in, on every channel "
        "of HWC images (output_range: 255 for uint8, 1 for floats; values are not rescaled to the output type: "
        "uint8 200 is float 200.0, as in DALI).",
        *BRIGHTNESS_ARGS)
_schema("contrast", "Contrast", "out = contrast_center + contrast * (in - contrast_center), on every channel of "
        "HWC images.", *CONTRAST_ARGS)
_schema("brightness_contrast", "BrightnessContrast", "out = brightness_shift * output_range + brightness * "
        "(contrast_center + contrast * (in - contrast_center)), on every channel of HWC images, as DALI.",
        *BRIGHTNESS_ARGS, *CONTRAST_ARGS)
_schema("hue", "Hue", "Rotates the hue of RGB (or BGR) images by ``hue`` degrees: a rotation of the chroma "
        "in YIQ space, DALI's linear approximation.", HUE_ARG, IMAGE_TYPE_ARG)
_schema("saturation", "Saturation", "Scales the saturation of RGB (or BGR) images: the chroma in YIQ space "
        "times ``saturation``, DALI's linear approximation.", SATURATION_ARG, IMAGE_TYPE_ARG)
_schema("hsv", "Hsv", "Changes hue (degrees, added), saturation and value (multipliers) of RGB images, as one "
        "linear map in YIQ space (DALI's approximation of HSV).", HUE_ARG, SATURATION_ARG,
        Arg("value", "float", 1.0, "Value (brightness) multiplier.", per_sample=True, min=0.0))
_schema("color_twist", "ColorTwist", "Hue, saturation, brightness and contrast of RGB (or BGR) images in one "
        "linear map, as DALI: brightness * (contrast * (twisted - half) + half), half 128 for integers, 0.5 "
        "for floats.", HUE_ARG, SATURATION_ARG,
        Arg("brightness", "float", 1.0, "Brightness multiplier; 0 gives black.", per_sample=True, min=0.0),
        Arg("contrast", "float", 1.0, "Contrast multiplier; 0 gives a uniform grey.", per_sample=True, min=0.0),
        IMAGE_TYPE_ARG)

COLOR_SPACES = (types.RGB, types.BGR, types.GRAY, types.YCbCr, types.HSV)
registry.register_schema(OpSchema(
    name="color_space_conversion", class_name="ColorSpaceConversion",
    doc="Converts HWC images between colour spaces: RGB, BGR, GRAY (luma 0.299 R + 0.587 G + 0.114 B), YCbCr "
        "(ITU-R BT.601 with Y in 16..235, as DALI) and HSV (as OpenCV: for uint8 hue in 0..180, half-degrees; "
        "for floats hue in degrees and S, V in 0..1). The output has the input's type.",
    args=(Arg("image_type", "image_type", REQUIRED, "Colour space of the input.", choices=COLOR_SPACES),
          Arg("output_type", "image_type", REQUIRED, "Colour space of the output.", choices=COLOR_SPACES)),
    input_names=("images",)))


# ---- what every colour operator shares ----------------------------------------------------------
def channel_error(op_name: str, argument: str, value, expected: int, got: int) -> ValueError:
    hint = "; a grayscale image has no hue or saturation (color_space_conversion makes it RGB)" \
        if got == 1 and expected == 3 else ""
    return ValueError(f"{op_name}: argument '{argument}' ({value}) needs {expected}-channel HWC images, got a "
                      f"sample with {got} channel(s){hint}")


def apply_color(image: np.ndarray, matrix: np.ndarray, offset: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """matrix @ pixel + offset for every pixel of an HWC image, in float32, rounded and saturated to
    ``dtype`` (penstock.numeric's rule)."""
    height, width, channels = image.shape
    values = np.ascontiguousarray(image, np.float32)
    if channels <= 4 and matrix.shape[0] <= 4:
        result = cv2.transform(values, np.hstack([matrix, offset[:, None]]).astype(np.float32))
    else:
        result = values @ matrix.T.astype(np.float32) + offset.astype(np.float32)
    return numeric.saturate(result.reshape(height, width, matrix.shape[0]), dtype)


class ColorOperator:
    """Both devices' shared part: the channels each operator takes and the map it builds."""

    def expected_channels(self) -> tuple[str, object, int] | None:
        """(argument, its value, the channels it needs), or None when any count goes."""
        return None

    def output_channels(self, channels: int | None) -> int | None:
        return channels

    def output_dtype(self, in_dtype) -> np.dtype:
        dtype = self.args.get("dtype")
        return dtype.numpy if dtype is not None else np.dtype(in_dtype)

    def check_channels(self, channels: int) -> None:
        expected = self.expected_channels()
        if expected is not None and channels != expected[2]:
            raise channel_error(self.name, *expected, channels)

    def color_maps(self, args: list[dict], channels: int, in_dtype, out_dtype) -> tuple[np.ndarray, np.ndarray]:
        """([R, K', K], [R, K']): one row per sample, or one for a batch that shares its arguments."""
        raise NotImplementedError

    def declare_outputs(self, inputs):
        spec = inputs[0]
        declare_hwc(spec, self.name)
        channels = spec.known_channels
        if channels is not None:
            self.check_channels(channels)
        out_channels = self.output_channels(channels)
        shape = (*spec.shape[:2], out_channels) if spec.shape and out_channels else None
        dtype = self.output_dtype(spec.dtype) if spec.dtype is not None else None
        return spec.but(dtype=dtype, ndim=3, shape=shape, channels=out_channels)


class LinearColorCpu(ColorOperator, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        self.check_channels(image.shape[2])
        dtype = self.output_dtype(image.dtype)
        matrices, offsets = self.color_maps([args], image.shape[2], image.dtype, dtype)
        return apply_color(image, matrices[0], offsets[0], dtype)


class LinearColorGpu(ExtendsImagePlan, ColorOperator, BatchOperator):
    """Extends the batch's image plan with each sample's colour matrix: no kernel of its own."""

    def run_batch(self, inputs, args, batch):
        plan = plan_of(inputs[0])
        if not args:
            return plan
        self.check_channels(plan.channels)
        in_dtype = types.to_numpy_dtype(plan.dtype or hwc_facts(plan.sources)[1])
        out_dtype = self.output_dtype(in_dtype)
        matrices, offsets = tables.for_every_sample(*self.color_maps(args, plan.channels, in_dtype, out_dtype), len(args))
        plan = plan.with_color(matrices, offsets)
        return plan if out_dtype == in_dtype else plan.with_output(dtype=types.to_torch_dtype(out_dtype))


class BrightnessContrastMaps(ColorOperator):
    def color_maps(self, args, channels, in_dtype, out_dtype):
        # contrast_center may differ per sample too; NaN (not given) stands for the input type's default
        values = tables.batch_values(args, {**tables.BRIGHTNESS_CONTRAST_DEFAULTS, "contrast_center": math.nan})
        centers = values.pop("contrast_center")
        centers = np.where(np.isnan(centers), tables.half_range(in_dtype), centers)
        return tables.brightness_contrast_maps(values, channels, centers, in_dtype, out_dtype)


class YiqMaps(ColorOperator):
    def expected_channels(self):
        image_type = self.args.get("image_type", types.RGB)
        return "image_type", image_type.name, 3

    def color_maps(self, args, channels, in_dtype, out_dtype):
        values = tables.batch_values(args, tables.YIQ_DEFAULTS)
        return tables.yiq_maps(values, self.args.get("image_type", types.RGB), in_dtype)


for _name, _class_name, _maps in (("brightness", "Brightness", BrightnessContrastMaps),
                                  ("contrast", "Contrast", BrightnessContrastMaps),
                                  ("brightness_contrast", "BrightnessContrast", BrightnessContrastMaps),
                                  ("hue", "Hue", YiqMaps), ("saturation", "Saturation", YiqMaps),
                                  ("hsv", "Hsv", YiqMaps), ("color_twist", "ColorTwist", YiqMaps)):
    registry.register(_name, "cpu")(type(_class_name, (_maps, LinearColorCpu), {}))
    registry.register(_name, "gpu", requires=devices.gpu_problem)(type(_class_name + "Gpu", (_maps, LinearColorGpu), {}))


# ---- color_space_conversion ---------------------------------------------------------------------
class ColorSpaceMaps(ColorOperator):
    """Linear between RGB, BGR, GRAY and YCbCr; HSV goes through RGB, then OpenCV's rule (CPU) or
    torch per sample (GPU)."""

    def expected_channels(self):
        source = self.args["image_type"]
        return "image_type", source.name, source.channels

    def output_channels(self, channels):
        return self.args["output_type"].channels

    def output_dtype(self, in_dtype):
        return np.dtype(in_dtype)

    def linear_steps(self) -> tuple:
        """(linear source, linear target): the spaces of the linear map; HSV stands as RGB."""
        source, target = self.args["image_type"], self.args["output_type"]
        return (types.RGB if source is types.HSV else source), (types.RGB if target is types.HSV else target)

    def color_maps(self, args, channels, in_dtype, out_dtype):
        matrix, offset = tables.conversion_map(*self.linear_steps(), in_dtype)
        return matrix[None], offset[None]


@registry.register("color_space_conversion", "cpu")
class ColorSpaceConversion(ColorSpaceMaps, LinearColorCpu):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        self.check_channels(image.shape[2])
        source, target = args["image_type"], args["output_type"]
        if source is target:
            return image.copy()
        if source is types.HSV:
            image = hsv_to_rgb_image(image)
        if self.linear_steps()[0] != self.linear_steps()[1]:
            matrices, offsets = self.color_maps([args], image.shape[2], image.dtype, image.dtype)
            image = apply_color(image, matrices[0], offsets[0], image.dtype)
        if target is types.HSV:
            image = rgb_to_hsv_image(image)
        return image if image is not inputs[0] else image.copy()


@registry.register("color_space_conversion", "gpu", requires=devices.gpu_problem)
class ColorSpaceConversionGpu(ColorSpaceMaps, LinearColorGpu):
    """Between RGB, BGR, GRAY and YCbCr: extends the batch's image plan. From HSV: torch per
    sample on the plan's result, then the plan; to HSV: the plan, then torch per sample."""

    def run_batch(self, inputs, args, batch):
        value = inputs[0]
        source, target = self.args["image_type"], self.args["output_type"]
        if source is target:
            value = plan_of(value)
            self.check_channels(value.channels)
            return value
        if source is types.HSV:
            value = [hsv_to_rgb_tensor(sample) for sample in self._checked(tensors_of(value))]
        linear_source, linear_target = self.linear_steps()
        if linear_source != linear_target:
            value = super().run_batch([value], args, batch)
        elif source is not types.HSV:
            value = plan_of(value)
            self.check_channels(value.channels)
        if target is types.HSV:
            value = [rgb_to_hsv_tensor(sample) for sample in tensors_of(value)]
        return value

    def _checked(self, samples: list) -> list:
        for sample in samples:
            self.check_channels(sample.shape[2])
        return samples


__all__ = ["ColorOperator", "apply_color", "channel_error"]
