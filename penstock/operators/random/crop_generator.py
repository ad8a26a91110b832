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
from penstock.operators.shared.crop_windows import RANGE_ARGS, crop_window, ordered_ranges, value_range

INPUT_TYPES = tuple(np.dtype(name) for name in ("uint8", "int8", "uint16", "int16", "uint32", "int32", "int64"))


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
        return UniformBlocks.draw(rng, count, max(self.args.num_attempts, 1))

    def run(self, inputs, args, sample, out=None):
        shape = inputs[0]
        if shape.dtype not in INPUT_TYPES:
            raise TypeError(f"expected an image shape of an integer type, got {shape.dtype}")
        if shape.ndim != 1 or len(shape) not in (2, 3):
            raise ValueError(f"expected an image shape of 2 or 3 values (HW or HWC), got an array of shape {shape.shape}")
        anchor, size = crop_window(int(np.int32(shape[0])), int(np.int32(shape[1])), sample.params, args.num_attempts,
                                   value_range(args.random_area), value_range(args.random_aspect_ratio))
        return np.array(anchor, np.int32), np.array(size, np.int32)
