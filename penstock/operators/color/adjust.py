"""Colour operators on HWC images: ``brightness``, ``contrast``, ``brightness_contrast``,
``saturation``, ``hue``, ``hsv``, ``color_twist`` and ``color_space_conversion``; the others
(``equalize``, ``lookup_table``, ``jpeg_compression_distortion``) are in color_nonlinear, HSV
conversions in color_hsv.

Every one of these is a linear map of each pixel's channels (a matrix and an offset per sample,
penstock.operators.shared.color_tables builds them with DALI's definitions). The CPU applies it to each
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
from penstock.batch import DeferredBatch, hwc_facts
from penstock.contract import BatchOperator, SampleOperator
from penstock.operators.shared import color_tables as tables
from penstock.operators.color.color_hsv import hsv_to_rgb_image, hsv_to_rgb_tensor, rgb_to_hsv_image, rgb_to_hsv_tensor
from penstock.operators.shared.gpu_plan import ExtendsImagePlan, plan_of, tensors_of
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema

# the types DALI's kernels take, as input and as output (brightness_contrast.h, color_twist.h)
LINEAR_TYPES = (types.UINT8, types.INT16, types.INT32, types.FLOAT)
YIQ_TYPES = (*LINEAR_TYPES, types.FLOAT16)
# images, sequences of images and volumes, channels last (DALI's input layouts); pixels are
# independent, so a sample of any of them is mapped as one tall HWC image
COLOR_LAYOUTS = ("HWC", "FHWC", "DHWC")


def dtype_arg(choices: tuple, default=None) -> Arg:
    return Arg("dtype", "dtype", default, "Output type; default the input's." if default is None else
               f"Output type; default {default.name} (as DALI).", choices=(None, *choices))


IMAGE_TYPE_ARG = Arg("image_type", "image_type", types.RGB, "Colour space of the images. As in DALI, the map is "
                     "the same whatever the value (it treats the channels as R, G, B).")
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
SATURATION_ARG = Arg("saturation", "float", 1.0, "Saturation multiplier (of the chroma in YIQ space); 0 gives grey, "
                     "negative values also turn the hue by 180 degrees.", per_sample=True)
IMAGES_DOC = " Takes HWC images, FHWC sequences and DHWC volumes."


def _schema(name: str, class_name: str, doc: str, *args: Arg, output_types=LINEAR_TYPES, dtype_default=None) -> None:
    registry.register_schema(OpSchema(name=name, class_name=class_name, doc=doc + IMAGES_DOC,
                                      args=(*args, dtype_arg(output_types, dtype_default)),
                                      input_names=("images",)))


_schema("brightness", "Brightness", "out = brightness_shift * output_range + brightness * in, on every channel "
        "(output_range: 255 for uint8, 1 for floats; values are not rescaled to the output type: "
        "uint8 200 is float 200.0, as in DALI). Types: uint8, int16, int32 and float.",
        *BRIGHTNESS_ARGS)
_schema("contrast", "Contrast", "out = contrast_center + contrast * (in - contrast_center), on every channel. "
        "Types: uint8, int16, int32 and float.", *CONTRAST_ARGS)
_schema("brightness_contrast", "BrightnessContrast", "out = brightness_shift * output_range + brightness * "
        "(contrast_center + contrast * (in - contrast_center)), on every channel, as DALI. Types: uint8, int16, "
        "int32 and float.", *BRIGHTNESS_ARGS, *CONTRAST_ARGS)
_schema("hue", "Hue", "Rotates the hue of 3-channel images by ``hue`` degrees: a rotation of the chroma in YIQ "
        "space, DALI's linear approximation. Types: uint8, int16, int32, float16 and float.", HUE_ARG,
        IMAGE_TYPE_ARG, output_types=YIQ_TYPES)
_schema("saturation", "Saturation", "Scales the saturation of 3-channel images: the chroma in YIQ space times "
        "``saturation``, DALI's linear approximation. Types: uint8, int16, int32, float16 and float.",
        SATURATION_ARG, IMAGE_TYPE_ARG, output_types=YIQ_TYPES)
_schema("hsv", "Hsv", "Changes hue (degrees, added), saturation and value (multipliers) of RGB images, as one "
        "linear map in YIQ space (DALI's approximation of HSV). Types: uint8, int16, int32, float16 and float; "
        "the output is uint8 unless dtype says otherwise, as in DALI.", HUE_ARG, SATURATION_ARG,
        Arg("value", "float", 1.0, "Value (brightness) multiplier.", per_sample=True),
        output_types=YIQ_TYPES, dtype_default=types.UINT8)
_schema("color_twist", "ColorTwist", "Hue, saturation, brightness and contrast of 3-channel images in one "
        "linear map, as DALI: brightness * (contrast * (twisted - half) + half), half 128 for integers, 0.5 "
        "for floats. Types: uint8, int16, int32, float16 and float.", HUE_ARG, SATURATION_ARG,
        Arg("brightness", "float", 1.0, "Brightness multiplier; 0 gives black.", per_sample=True),
        Arg("contrast", "float", 1.0, "Contrast multiplier; 0 gives a uniform grey.", per_sample=True),
        IMAGE_TYPE_ARG, output_types=YIQ_TYPES)

COLOR_SPACES = (types.RGB, types.BGR, types.GRAY, types.YCbCr, types.HSV)
CONVERSION_LAYOUTS = ("FDHWC", "FHWC", "DHWC", "HWC")  # DALI's, in its order


def _check_conversion(static: dict, per_sample: frozenset) -> None:
    if static.image_type is static.output_type:
        raise ArgError(f"image_type and output_type are both {static.image_type.name}: there is nothing to "
                       "convert (DALI has no such conversion)")


registry.register_schema(OpSchema(
    name="color_space_conversion", class_name="ColorSpaceConversion",
    doc="Converts uint8 images (HWC, FHWC, DHWC or FDHWC) between colour spaces: RGB, BGR, GRAY (luma 0.299 R + "
        "0.587 G + 0.114 B), YCbCr (ITU-R BT.601 with Y in 16..235, as DALI) and HSV (as OpenCV: hue in 0..180, "
        "half-degrees; DALI has no HSV conversion). The output is uint8.",
    args=(Arg("image_type", "image_type", REQUIRED, "Colour space of the input.", choices=COLOR_SPACES),
          Arg("output_type", "image_type", REQUIRED, "Colour space of the output; not the input's.",
              choices=COLOR_SPACES)),
    checks=(_check_conversion,),
    input_names=("images",)))


# ---- what every colour operator shares ----------------------------------------------------------
def channel_error(op_name: str, reason: str, expected: int, got: int) -> ValueError:
    hint = "; a grayscale image has no hue or saturation (color_space_conversion makes it RGB)" \
        if got == 1 and expected == 3 else ""
    return ValueError(f"{op_name}: {reason} needs {expected}-channel images, got a sample with {got} "
                      f"channel(s){hint}")


def color_layout(spec, layouts: tuple, op_name: str) -> str:
    """The layout an input is read in: its own, one of ``layouts``, or for none the first of them
    with its number of dimensions (as DALI); '' while the dimensions are not known."""
    if spec.layout:
        if spec.layout not in layouts:
            raise ValueError(f"{op_name}: takes the layouts {', '.join(layouts)}; got '{spec.layout}'")
        return spec.layout
    if spec.ndim is None:
        return ""
    for candidate in layouts:
        if len(candidate) == spec.ndim:
            return candidate
    raise ValueError(f"{op_name}: takes samples of the layouts {', '.join(layouts)}, got {spec.ndim} dimensions")


def check_type(dtype, allowed: tuple, op_name: str) -> None:
    if dtype is not None and np.dtype(dtype) not in [kind.numpy for kind in allowed]:
        raise TypeError(f"{op_name}: takes {', '.join(kind.name.lower() for kind in allowed)} images, got "
                        f"{np.dtype(dtype)}")


def apply_color(image: np.ndarray, matrix: np.ndarray, offset: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """matrix @ pixel + offset for every pixel of a channel-last sample, in float32, rounded and
    saturated to ``dtype`` (penstock.numeric's rule)."""
    pixels = np.ascontiguousarray(image, np.float32).reshape(-1, 1, image.shape[-1])
    if image.shape[-1] <= 4 and matrix.shape[0] <= 4:
        result = cv2.transform(pixels, np.hstack([matrix, offset[:, None]]).astype(np.float32))
    else:
        result = pixels @ matrix.T.astype(np.float32) + offset.astype(np.float32)
    return numeric.saturate(result.reshape(*image.shape[:-1], matrix.shape[0]), dtype)


class ColorOperator:
    """Both devices' shared part: the layouts, types and channels each operator takes and the map it
    builds."""

    layouts = COLOR_LAYOUTS
    input_types = LINEAR_TYPES

    def expected_channels(self) -> tuple[str, int] | None:
        """(why, the channels a sample needs), or None when any count goes."""
        return None

    def output_channels(self, channels: int | None) -> int | None:
        return channels

    def output_dtype(self, in_dtype) -> np.dtype:
        dtype = self.args.get("dtype")
        return dtype.numpy if dtype is not None else np.dtype(in_dtype)

    def check_channels(self, channels: int) -> None:
        expected = self.expected_channels()
        if expected is not None and channels != expected[1]:
            raise channel_error(self.name, expected[0], expected[1], channels)

    def check_sample(self, image) -> None:
        """A sample's dimensions, type and channels (the layouts take 3 to 5 dimensions, channels last)."""
        if image.ndim not in {len(layout) for layout in self.layouts}:
            raise ValueError(f"{self.name}: takes the layouts {', '.join(self.layouts)}; got a sample of shape "
                             f"{tuple(image.shape)}")
        check_type(types.to_numpy_dtype(image.dtype), self.input_types, self.name)
        self.check_channels(image.shape[-1])

    def color_maps(self, args: list[dict], channels: int, in_dtype, out_dtype) -> tuple[np.ndarray, np.ndarray]:
        """([R, K', K], [R, K']): one row per sample, or one for a batch that shares its arguments."""
        raise NotImplementedError

    def declare_outputs(self, inputs):
        spec = inputs[0]
        layout = self._layout = color_layout(spec, self.layouts, self.name)
        check_type(spec.dtype, self.input_types, self.name)
        channels = spec.known_channels
        if channels is None and spec.shape is not None and layout and len(spec.shape) == len(layout):
            channels = spec.shape[-1]
        if channels is not None:
            self.check_channels(channels)
        out_channels = self.output_channels(channels)
        shape = (*spec.shape[:-1], out_channels) if spec.shape and out_channels else None
        dtype = self.output_dtype(spec.dtype) if spec.dtype is not None else None
        return spec.but(dtype=dtype, ndim=len(layout) or spec.ndim, layout=layout, shape=shape, channels=out_channels)


class LinearColorCpu(ColorOperator, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        self.check_sample(image)
        dtype = self.output_dtype(image.dtype)
        matrices, offsets = self.color_maps([args], image.shape[-1], image.dtype, dtype)
        return apply_color(image, matrices[0], offsets[0], dtype)


class LinearColorGpu(ExtendsImagePlan, ColorOperator, BatchOperator):
    """Extends the batch's image plan with each sample's colour matrix: no kernel of its own.
    Sequences and volumes go through a plan of their pixels as tall HWC images (views), and come
    back in their shapes."""

    def run_batch(self, inputs, args, batch):
        value = inputs[0]
        # images (HWC, declared so or found so) extend the plan; sequences and volumes go through it tall
        if self._layout != "HWC" and not isinstance(value, DeferredBatch) and \
                any(sample.dim() != 3 for sample in value):
            samples = list(value)
            shapes = [tuple(sample.shape) for sample in samples]
            for sample in samples:
                self.check_sample(sample)
            tall = [sample.reshape(-1, *sample.shape[-2:]) for sample in samples]
            mapped = tensors_of(self.run_plan(tall, args))
            return [result.reshape(*shape[:-1], result.shape[-1]) for result, shape in zip(mapped, shapes)]
        return self.run_plan(value, args)

    def run_plan(self, value, args):
        plan = plan_of(value)
        if not args:
            return plan
        self.check_channels(plan.channels)
        in_dtype = types.to_numpy_dtype(plan.dtype or hwc_facts(plan.sources)[1])
        check_type(in_dtype, self.input_types, self.name)
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
    input_types = YIQ_TYPES

    def expected_channels(self):
        return "its colour map (of R, G and B)", 3

    def color_maps(self, args, channels, in_dtype, out_dtype):
        return tables.yiq_maps(tables.batch_values(args, tables.YIQ_DEFAULTS), in_dtype)


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

    layouts = CONVERSION_LAYOUTS
    input_types = (types.UINT8,)  # DALI's conversions take uint8 alone

    def expected_channels(self):
        source = self.args.image_type
        return f"argument 'image_type' ({source.name})", source.channels

    def output_channels(self, channels):
        return self.args.output_type.channels

    def output_dtype(self, in_dtype):
        return np.dtype(in_dtype)

    def linear_steps(self) -> tuple:
        """(linear source, linear target): the spaces of the linear map; HSV stands as RGB."""
        source, target = self.args.image_type, self.args.output_type
        return (types.RGB if source is types.HSV else source), (types.RGB if target is types.HSV else target)

    def color_maps(self, args, channels, in_dtype, out_dtype):
        matrix, offset = tables.conversion_map(*self.linear_steps(), in_dtype)
        return matrix[None], offset[None]


OPENCV_GRAY = {(types.RGB, types.GRAY): cv2.COLOR_RGB2GRAY, (types.BGR, types.GRAY): cv2.COLOR_BGR2GRAY}


@registry.register("color_space_conversion", "cpu")
class ColorSpaceConversion(ColorSpaceMaps, LinearColorCpu):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        self.check_sample(image)
        source, target = args.image_type, args.output_type
        if source is types.HSV:
            image = hsv_to_rgb_image(image)
        steps = self.linear_steps()
        if steps in OPENCV_GRAY:
            # DALI's CPU takes these from OpenCV, whose fixed-point rule rounds some values up a level
            gray = cv2.cvtColor(np.ascontiguousarray(image).reshape(-1, image.shape[-2], 3), OPENCV_GRAY[steps])
            image = gray.reshape(*image.shape[:-1], 1)
        elif steps[0] != steps[1]:
            matrices, offsets = self.color_maps([args], image.shape[-1], image.dtype, image.dtype)
            image = apply_color(image, matrices[0], offsets[0], image.dtype)
        if target is types.HSV:
            image = rgb_to_hsv_image(image)
        return image


@registry.register("color_space_conversion", "gpu", requires=devices.gpu_problem)
class ColorSpaceConversionGpu(ColorSpaceMaps, LinearColorGpu):
    """Between RGB, BGR, GRAY and YCbCr: extends the batch's image plan. From HSV: torch per
    sample on the plan's result, then the plan; to HSV: the plan, then torch per sample."""

    def run_batch(self, inputs, args, batch):
        value = inputs[0]
        source, target = self.args.image_type, self.args.output_type
        if types.HSV in (source, target):
            value = self._checked(tensors_of(value))
        if source is types.HSV:
            value = [hsv_to_rgb_tensor(sample) for sample in value]
        if self.linear_steps()[0] != self.linear_steps()[1]:
            value = super().run_batch([value], args, batch)
        if target is types.HSV:
            value = [rgb_to_hsv_tensor(sample) for sample in tensors_of(value)]
        return value

    def _checked(self, samples: list) -> list:
        for sample in samples:
            self.check_sample(sample)
        return samples


__all__ = ["ColorOperator", "apply_color", "channel_error"]
