"""``random_crop_generator``: a random window (anchor and shape, both (y, x)) for each image shape it
is given, chosen as DALI's RandomCropGenerator chooses it, so that its outputs feed slice or a
decoder's window as in DALI programs.

The window's arithmetic is DALI's, in float32 as there: up to ``num_attempts`` draws of an area
fraction and a log-uniform aspect ratio, the first whose rounded window fits with its rounded
ratio in range kept; images too wide or too tall for any window of the smallest area get the
widest (tallest) window the ratio range allows, and when every attempt fails the whole image,
clamped to the ratio range and shrunk to the largest area. The numbers drawn are penstock's
(``UniformBlocks``: four uniforms per attempt, the last two placing the window), not DALI's.
"""
from __future__ import annotations

import numpy as np

from penstock import registry
from penstock.contract import OutputSpec, SampleOperator
from penstock.draws import UniformBlocks
from penstock.schema import Arg, ArgError, OpSchema

F32 = np.float32
INPUT_TYPES = tuple(np.dtype(name) for name in ("uint8", "int8", "uint16", "int16", "uint32", "int32", "int64"))


# The ranges of a random window, shared by random_crop_generator, decoders.image_random_crop and
# random_resized_crop (DALI's RandomCropAttr), documented once.
RANGE_ARGS = (
    Arg("random_area", "floats", (0.08, 1.0), "Range [min, max] of the window's share of the image's area "
        "(one value: that share).", length=(1, 2)),
    Arg("random_aspect_ratio", "floats", (3 / 4, 4 / 3), "Range [min, max] of the window's width / height "
        "(one value: that ratio), drawn uniformly on a log scale.", length=(1, 2), min=1e-30),
)


def ordered_ranges(static: dict, per_sample: frozenset) -> None:
    for name in ("random_area", "random_aspect_ratio"):
        low, high = value_range(static[name])
        if low > high:
            raise ArgError(f"argument '{name}': the range [{low}, {high}] is empty")


def value_range(values: tuple) -> tuple[float, float]:
    """One value stands for both ends (DALI's single-or-pair arguments)."""
    return (values[0], values[-1])


registry.register_schema(OpSchema(
    name="random_crop_generator", class_name="RandomCropGenerator", num_inputs=(1, 1), num_outputs=2,
    input_names=("input",),
    doc="A random crop window for each image shape given (a 1-D array of integers: HW or HWC), as two int32 "
        "outputs, the anchor and the shape, each (y, x): a window of a random share of the area and a random "
        "aspect ratio (width / height), chosen as DALI chooses it. Feed them to slice (axes=[0, 1]) or to a "
        "decoder's window.",
    args=(*RANGE_ARGS,
          Arg("num_attempts", "int", 10, "Draws of a window before falling back to the whole image (clamped to the "
              "ratio range and shrunk to the largest area).", min=0)),
    checks=(ordered_ranges,)))


def crop_window(height: int, width: int, blocks, attempts: int, area_range, ratio_range) -> tuple[tuple, tuple]:
    """((y, x), (crop height, crop width)) for an image of (height, width); ``blocks``: per attempt,
    (area, log ratio, y, x) uniforms in [0, 1), at least one (the window's place, where there is no
    attempt)."""
    if height <= 0 or width <= 0:
        return (0, 0), (0, 0)
    blocks = list(blocks)
    min_ratio, max_ratio = F32(ratio_range[0]), F32(ratio_range[1])
    min_area, max_area = F32(area_range[0]), F32(area_range[1])
    log_low, log_high = np.log(min_ratio), np.log(max_ratio)
    smallest = F32(width * height) * min_area
    max_width = max(1, int(F32(height) * max_ratio))
    max_height = max(1, int(F32(width) * (F32(1) / min_ratio)))
    y_draw, x_draw = blocks[-1][2:]
    if height * max_width < smallest:  # too wide for a window of the smallest area
        shape = (height, max_width)
    elif width * max_height < smallest:  # too tall
        shape = (max_height, width)
    else:
        shape = None
        for area_draw, ratio_draw, y_draw, x_draw in blocks[:attempts]:
            target = (min_area + (max_area - min_area) * F32(area_draw)) * F32(height * width)
            ratio = np.exp(log_low + (log_high - log_low) * F32(ratio_draw))
            crop_width, crop_height = _side(target * ratio), _side(target / ratio)
            rounded = F32(crop_width) / F32(crop_height)
            if crop_width <= width and crop_height <= height and min_ratio <= rounded <= max_ratio:
                shape = (crop_height, crop_width)
                break
        if shape is None:
            image_ratio = F32(width) / F32(height)
            whole = (height, max_width) if image_ratio > max_ratio else (max_height, width) \
                if image_ratio < min_ratio else (height, width)
            scale = min(F32(1), max_area * F32(width) * F32(height) / F32(whole[0] * whole[1]))
            shape = tuple(max(1, int(F32(side) * np.sqrt(scale))) for side in whole)
    anchor = (_place(y_draw, height - shape[0]), _place(x_draw, width - shape[1]))
    return anchor, shape


def _side(square) -> int:
    """sqrt rounded half away from zero, at least 1 (DALI's windows of a negative area are 1 wide)."""
    return max(1, int(np.floor(np.sqrt(max(square, F32(0))) + F32(0.5))))


def _place(draw: float, room: int) -> int:
    """A uniform integer in [0, room]."""
    return min(int(draw * (room + 1)), room) if room > 0 else 0


@registry.register("random_crop_generator", "cpu")
class RandomCropGenerator(SampleOperator):
    def declare_outputs(self, inputs):
        spec = inputs[0]
        if spec.dtype is not None and spec.dtype not in INPUT_TYPES:
            raise ValueError(f"{self.name}: expects image shapes of an integer type "
                             f"({', '.join(dtype.name for dtype in INPUT_TYPES)}), got {spec.dtype}")
        if spec.ndim is not None and spec.ndim != 1:
            raise ValueError(f"{self.name}: expects image shapes as 1-D arrays (HW or HWC), got {spec.ndim}-dimensional "
                             "samples")
        return OutputSpec(np.dtype(np.int32), 1, "", (2,))

    def draw(self, rng, count):
        return UniformBlocks.draw(rng, count, max(self.args["num_attempts"], 1))

    def run(self, inputs, args, sample, out=None):
        shape = inputs[0]
        if shape.dtype not in INPUT_TYPES:
            raise TypeError(f"expected an image shape of an integer type, got {shape.dtype}")
        if shape.ndim != 1 or len(shape) not in (2, 3):
            raise ValueError(f"expected an image shape of 2 or 3 values (HW or HWC), got an array of shape {shape.shape}")
        anchor, size = crop_window(int(np.int32(shape[0])), int(np.int32(shape[1])), sample.params, args["num_attempts"],
                                   value_range(args["random_area"]), value_range(args["random_aspect_ratio"]))
        return np.array(anchor, np.int32), np.array(size, np.int32)
