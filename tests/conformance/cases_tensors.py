"""Tensor operators: slice, reshape, reinterpret, squeeze, expand_dims, one_hot, reductions.*, normalize,
cat, stack, flip, and the image operators equalize and brightness_contrast."""
import numpy as np

from conformance.harness import OMIT, Close, Data, PerSample, Spec
from conformance.samples import f32, images, tensors

REDUCED = Close(atol=1e-4, rtol=1e-5)
REDUCTION_GRID = {
    "@input": {"u8_hwc": (images(),), "i32": (tensors([(3, 4), (2, 5)], "int32"),)},
    "axes": [(), (0,), (0, 1), 1],
    "axis_names": ["W", "HC"],
    "keep_dims": [True],
}

SPECS = [
    Spec("slice", (images(),), {"start": (1, 2), "end": (4, 5), "axis_names": "HW"}, grid={
        "@input": {"f32": (images("float32"),), "chw": (images(layout="CHW"),),
                   "anchor_shape_inputs": (images(), Data([f32(1, 1)] * 3), Data([f32(2, 3)] * 3))},
        "start": [(-2, 0), PerSample(f32(0, 0), f32(1, 1), f32(2, 2))],
        "end": [(20, 20)], "shape": [(2, 2)], "rel_start": [(0.5, 0.5)], "rel_end": [(0.9, 0.9)],
        "rel_shape": [(0.5, 0.25)],
        "axes": [(0, 1), (1,)], "axis_names": ["W"],
        "normalized_anchor": [True], "normalized_shape": [True],
        "out_of_bounds_policy": ["error", "pad", "trim_to_shape"],
        "fill_values": [(1.0, 2.0, 3.0)],
        "dtype": ["types.FLOAT"],
    }),
    Spec("slice", (images(),), {"start": (1,), "shape": (2,), "axes": (0,)}, name="slice_axes", grid={
        "axes": {"-3": (-3,), "-1": (-1,), "3": (3,), "per_sample": PerSample(np.int32([0]), np.int32([1]),
                                                                              np.int32([-2])),
                 "per_sample_i64": PerSample(np.int64([0]), np.int64([1]), np.int64([0]))},
        "start": {"per_sample": PerSample(np.int32([0]), np.int32([1]), np.int32([2])),
                  "per_sample_i64": PerSample(np.int64([0]), np.int64([1]), np.int64([2]))},
        "shape": [(-1,), OMIT, PerSample(np.int32([1]), np.int32([2]), np.int32([0]))],
        "rel_shape": [PerSample(f32([0.5]), f32([0.25]), f32([1.0]))],
        "@input": {"anchor_shape_and_start": (images(), Data([np.int32([1])] * 3), Data([np.int32([2])] * 3)),
                   "anchor_shape_u8": (images(), Data([np.uint8([1])] * 3), Data([np.uint8([2])] * 3)),
                   "anchor_shape_i64": (images(), Data([np.int64([1])] * 3), Data([np.int64([2])] * 3)),
                   "anchor_shape_f64": (images(), Data([np.float64([0.1])] * 3), Data([np.float64([0.5])] * 3))},
    }),
    Spec("slice", (images(),), {"rel_start": (0.25, 0.5), "rel_shape": (0.5, 0.3)}, name="slice_rel", grid={
        "rel_shape": {"omitted": OMIT, "per_sample": PerSample(f32(0.5, 0.5), f32(0.3, 0.1), f32(0.7, 0.5)),
                      "per_sample_f64": PerSample(*[np.float64([0.5, 0.5])] * 3)},
        "rel_end": [(0.8, 0.9)],
    }),
    Spec("reshape", (tensors([(2, 6), (3, 4), (4, 3)]),), {"shape": (4, 3)}, grid={
        "shape": [(-1,), (12, 1), (0, -1), (5, 5), PerSample(np.int32([12]), np.int32([6, 2]), np.int32([3, 4]))],
        "rel_shape": [(2.0, 0.5), (-1.0,)],
        "src_dims": [(1, 0), (-1, 0, 1)],
        "layout": ["HW", "XYZ"],
        "@input": {"shape_input": (tensors([(2, 6), (3, 4), (4, 3)]), Data([np.int32([12, 1])] * 3))},
    }),
    Spec("reinterpret", (tensors([(2, 4), (3, 4)], "uint8"),), {"dtype": "types.INT16"}, grid={
        "dtype": ["types.UINT8", "types.FLOAT"],
        "shape": [(-1,), (4, 2), (2, -1), (4, 4)], "rel_shape": [(1.0, 0.5), (0.5, 1.0), (1.0, 1.0)],
        "src_dims": [(1, 0), (-1, 0, 1)], "layout": ["AB"],
    }),
    Spec("squeeze", (tensors([(1, 3, 1), (1, 4, 1)]),), {"axes": (0,)}, grid={
        "axes": [(0, 2), (1,), (-1,), (2, -1), (2, 5), (2, 2)], "axis_names": ["A"],
        "@input": {"layout": (tensors([(1, 3, 1), (1, 4, 1)], layout="ABC"),)},
    }),
    Spec("expand_dims", (tensors([(3,), (4,)], layout="W"),), {"axes": (0,)}, grid={
        "axes": [(1,), (0, 2), (3,)], "new_axis_names": ["H", "HC"],
    }),
    Spec("one_hot", (Data([np.int32(1), np.int32(3), np.int32(0)]),), {"num_classes": 4}, grid={
        "@input": {"vector": (Data([np.int32([1, 2]), np.int32([0, 5])]),), "f32": (Data([f32(1.7), f32(-1)]),)},
        "num_classes": [1, 6],
        "axis": [0, -1], "axis_name": ["C"],
        "on_value": [2.5], "off_value": [-1.0],
        "dtype": ["types.UINT8", "types.INT32", "types.BOOL"],
    }),
    *[Spec(f"reductions.{name}", (tensors([(3, 4, 2), (2, 5, 2)], layout="HWC"),), {}, compare=REDUCED,
           grid={**REDUCTION_GRID, **({"dtype": ["types.FLOAT64", "types.INT64"]} if dtype else {}),
                 **({"ddof": [1, 3]} if ddof else {})})
      for name, dtype, ddof in [("sum", True, False), ("mean", True, False), ("mean_square", True, False),
                                ("rms", True, False), ("min", False, False), ("max", False, False),
                                ("std_dev", False, True), ("variance", False, True)]],
    Spec("normalize", (tensors([(3, 4), (2, 4)], layout="HW"),), {}, compare=REDUCED, grid={
        "@input": {"u8": (tensors([(3, 4), (2, 4)], "uint8"),)},
        "axes": [(0,), (1,), (0, 1)], "axis_names": ["W"],
        "batch": [True], "ddof": [1],
        "mean": [1.0, PerSample(f32(1), f32(2))], "stddev": [2.0, PerSample(f32(1), f32(2))],
        "scale": [64.0], "shift": [128.0], "epsilon": [1.0],
        "dtype": ["types.UINT8", "types.INT16"],
    }),
    Spec("cat", (images(), images(seed=5)), {"axis": 2}, grid={
        "axis": [0, 1, -1, 3], "axis_name": ["C", "H"],
        "@input": {"three": (images(), images(seed=5), images(seed=9))},
    }),
    Spec("stack", (images(), images(seed=5)), {"axis": 0}, grid={
        "axis": [1, 3, -1, 4], "axis_name": ["F"],
    }),
    Spec("flip", (images(),), {}, grid={
        "@input": {"chw": (images(layout="CHW"),), "fhwc": (images(layout="FHWC"),), "dhwc": (images(layout="DHWC"),),
                   "hw": (images(layout="HW"),)},
        "horizontal": [0, PerSample(np.int32(0), np.int32(1), np.int32(1))],
        "vertical": [1, PerSample(np.int32(0), np.int32(1), np.int32(0))],
        "depthwise": [1],
    }),
    Spec("equalize", (images(sizes=((20, 20), (12, 30))),), {}, grid={
        "@input": {"gray": (images(channels=1),), "hw": (images(layout="HW"),), "fhwc": (images(layout="FHWC"),)},
    }),
    Spec("brightness_contrast", (images(),), {"brightness": 1.2, "contrast": 0.8}, compare=Close(atol=1.01), grid={
        "@input": {"f32": (images("float32"),), "chw": (images(layout="CHW"),)},
        "brightness": [0.0, PerSample(f32(0.5), f32(1), f32(2))],
        "brightness_shift": [0.1],
        "contrast": [2.0, PerSample(f32(0.5), f32(1), f32(2))],
        "contrast_center": [0.0],
        "dtype": ["types.FLOAT", "types.INT16"],
    }),
]
