"""Cropping, padding and layout: crop, crop_mirror_normalize, pad, paste, multi_paste, transpose, and
plain tensor operators: cast, cast_like, copy, element_extract, permute_batch, constant, full, ones,
zeros (and their _like forms)."""
import numpy as np

from conformance.harness import Close, Data, PerSample, Spec
from conformance.samples import f32, images, tensors

NORMALIZED = Close(atol=1e-4, rtol=1e-5)
UNIFORM = ((6, 8),) * 3
SQUARE, SQUARE_2 = images(sizes=UNIFORM), images(sizes=UNIFORM, seed=7)
IMAGES = {"f32_hwc": (images("float32"),), "i16_hwc": (images("int16"),), "u8_chw": (images(layout="CHW"),),
          "u8_fhwc": (images(layout="FHWC"),), "u8_dhwc": (images(layout="DHWC"),), "u8_hw": (images(layout="HW"),)}
CROP_GRID = {
    "crop": [(4, 4), (20, 3), PerSample(f32(3, 3), f32(5, 4), f32(6, 6))],
    "crop_w": [3, PerSample(f32(1), f32(2), f32(3))],
    "crop_h": [2],
    "crop_pos_x": [0.0, 1.0, PerSample(f32(0), f32(0.5), f32(1))],
    "crop_pos_y": [1.0, PerSample(f32(0), f32(0.5), f32(1))],
    "out_of_bounds_policy": ["error", "pad", "trim_to_shape"],
    "fill_values": [7.0, (1.0, 2.0, 3.0)],
    "rounding": ["round", "truncate"],
}
CROP_3D = {"crop_d": [2], "crop_pos_z": [0.0, 1.0, PerSample(f32(0), f32(0.5), f32(1))]}

SPECS = [
    Spec("crop", (images(),), {"crop": (4, 5), "crop_pos_x": 0.3, "crop_pos_y": 0.6}, grid={
        "@input": IMAGES, **CROP_GRID, "dtype": ["types.FLOAT", "types.UINT8"],
    }),
    Spec("crop", (images(layout="DHWC"),), {"crop": (3, 4, 5)}, name="crop_3d", grid=CROP_3D),
    Spec("crop_mirror_normalize", (images(),), {"crop": (4, 5), "mean": (10.0, 20.0, 30.0), "std": (2.0, 3.0, 4.0)},
         compare=NORMALIZED, grid={
             "@input": IMAGES, **CROP_GRID,
             "mean": [0.0, 128.0, PerSample(f32(1, 2, 3), f32(0, 0, 0), f32(5, 5, 5))],
             "std": [64.0, PerSample(f32(1, 2, 3), f32(1, 1, 1), f32(5, 5, 5))],
             "scale": [0.5], "shift": [128.0],
             "mirror": [0, 1, PerSample(np.int32(0), np.int32(1), np.int32(1))],
             "output_layout": ["HWC", "CHW", "WHC"],
             "pad_output": [True],
             "dtype": ["types.UINT8", "types.FLOAT16", "types.INT32"],
         }),
    Spec("crop_mirror_normalize", (images(layout="DHWC"),), {"crop": (3, 4, 5)}, name="crop_mirror_normalize_3d",
         compare=NORMALIZED, grid=CROP_3D),
    # sequences and volumes: output_layout a permutation of theirs (DALI's default, CHW, is refused)
    Spec("crop_mirror_normalize", (images(layout="FHWC", frames=3),),
         {"crop": (4, 5), "mean": (10.0, 20.0, 30.0), "std": (2.0, 3.0, 4.0), "output_layout": "FCHW"},
         name="crop_mirror_normalize_sequences", compare=NORMALIZED, grid={
             "@input": {"fchw": (images(layout="FCHW", frames=3),), "cfhw": (images(layout="CFHW", frames=3),)},
             "output_layout": ["FHWC", "CFHW", "CHW"], "mirror": [1, PerSample(np.int32(0), np.int32(1), np.int32(1))],
             "pad_output": [True], "dtype": ["types.UINT8", "types.FLOAT16"],
             "crop": [(2, 4, 5), (20, 3)], "crop_pos_z": [1.0], "crop_pos_x": [0.0],
             # (fill_values and 'pad' one at a time: DALI 2.4's CPU operator zeroes channels 1 and 2 of
             # a sequence's data where both are given per channel)
             "out_of_bounds_policy": ["pad", "trim_to_shape"], "fill_values": [7.0],
         }),
    Spec("crop_mirror_normalize", (images(layout="DHWC"),),
         {"crop": (4, 5), "mean": (10.0, 20.0, 30.0), "std": (2.0, 3.0, 4.0), "output_layout": "CDHW"},
         name="crop_mirror_normalize_volumes", compare=NORMALIZED, grid={
             "@input": {"cdhw": (images(layout="CDHW"),)},
             "output_layout": ["DHWC", "CHW"], "mirror": [1], "pad_output": [True],
             "crop_d": [2], "crop_pos_z": [0.0, 1.0], "dtype": ["types.UINT8"],
         }),
    Spec("pad", (tensors([(2, 3), (4, 1), (1, 5)]),), {}, grid={
        "@input": {"u8_hwc": (images(),), "i16": (tensors([(2, 3), (4, 1)], "int16"),)},
        "fill_value": [7.0, -1.5],
        "axes": [(0,), (1,), (1, 0)],
        "axis_names": ["W"],
        "shape": {"6,6": (6, 6), "-1,8": (-1, 8), "6": (6,), "3,3": (3, 3), "0,7": (0, 7), "6,6,6": (6, 6, 6),
                  "per_sample": PerSample(np.int32([5, 5]), np.int32([6, 6]), np.int32([7, 7])),
                  "per_sample_ragged": PerSample(np.int32([2, 5]), np.int32([3, 3]), np.int32([1, 1]))},
        "align": {"4": 4, "2,3": (2, 3), "zero": 0,
                  "per_sample": PerSample(np.int32([2, 2]), np.int32([3, 3]), np.int32([4, 4]))},
    }, refused=("6,6,6", "zero")),
    Spec("pad", (tensors([(2, 3), (4, 1), (1, 5)], "int16"),), {"fill_value": 3.0}, name="pad_fill", grid={
        "fill_value": [PerSample(np.float32(1), np.float32(-2), np.float32(700))], "axis_names": ["B"],
        "@input": {"layout": (tensors([(2, 3), (4, 1), (1, 5)], "int16", layout="AB"),)}}),
    Spec("paste", (images(),), {"ratio": 2.0, "fill_value": 0}, grid={
        # not a 1-channel input: DALI 2.4's CPU paste corrupts memory on one (n_channels is 3)
        "@input": {"f32": (images("float32"),)},
        "ratio": [1.0, 1.5, PerSample(f32(1), f32(2), f32(3))],
        "paste_x": [0.0, 1.0, PerSample(f32(0), f32(0.5), f32(1))],
        "paste_y": [1.0, PerSample(f32(0), f32(0.5), f32(1))],
        "fill_value": [9, (1, 2, 3)],
        "min_canvas_size": [20.0, PerSample(f32(1), f32(10), f32(30))],
        "n_channels": [3],
    }),
    Spec("multi_paste", (images(),), {"in_ids": (0, 1), "output_size": (10, 10)}, grid={
        "@input": {"f32": (images("float32"),), "gray": (images(channels=1),)},
        "in_ids": [(2,), PerSample(np.int32([0, 1]), np.int32([2]), np.int32([1, 1]))],
        "output_size": [PerSample(np.int32([10, 10]), np.int32([5, 7]), np.int32([12, 3]))],
        "in_anchors": [PerSample(np.int32([[0, 0], [1, 1]]), np.int32([[1, 1], [0, 0]]), np.int32([[2, 2], [0, 0]]))],
        "in_anchors_rel": [PerSample(f32([0, 0], [0.5, 0.5]), f32([0.1, 0.1], [0, 0]), f32([0, 0], [0, 0]))],
        "shapes": [PerSample(np.int32([[2, 2], [3, 3]]), np.int32([[1, 1], [2, 2]]), np.int32([[2, 1], [1, 2]]))],
        "shapes_rel": [PerSample(f32([0.5, 0.5], [0.5, 0.5]), f32([1, 1], [0.2, 0.2]), f32([0.3, 0.3], [1, 1]))],
        "out_anchors": [PerSample(np.int32([[0, 0], [5, 5]]), np.int32([[1, 1], [2, 2]]), np.int32([[0, 0], [0, 0]]))],
        "out_anchors_rel": [PerSample(f32([0, 0], [0.5, 0.5]), f32([0.1, 0.1], [0, 0]), f32([0, 0], [0.9, 0.9]))],
        "dtype": ["types.FLOAT", "types.INT16", "types.INT32", "types.UINT8", "types.FLOAT64"],
        "output_size": {"per_sample": PerSample(np.int32([10, 10]), np.int32([5, 7]), np.int32([12, 3])),
                        "0,0": (0, 0), "10,10,3": (10, 10, 3), "10": (10,)},
    }, refused=("FLOAT64", "10")),
    # without in_ids: region k of output i is sample i of input k; canvases of the inputs' (uniform) size
    Spec("multi_paste", (SQUARE, SQUARE_2), {}, name="multi_paste_inputs", grid={
        "@input": {"one": (SQUARE,), "f32": (images("float32", sizes=UNIFORM), images("float32", sizes=UNIFORM, seed=5)),
                   "ragged": (images(), images()), "no_layout": (Data(SQUARE.samples),),
                   "chw": (images(layout="CHW", sizes=UNIFORM),), "u16": (images("uint16", sizes=UNIFORM),),
                   "mixed_types": (SQUARE, images("int16", sizes=UNIFORM))},
        "out_anchors": [PerSample(*[np.int32([[0, 0], [1, 2]])] * 3)],
        "out_anchors_rel": [PerSample(f32([0, 0], [0.5, 0.25]), f32([0.3, 0.3], [0, 0]), f32([1, 1], [0, 0]))],
        "shapes_rel": [PerSample(f32([0.5, 0.5], [0.25, 0.75]), f32([1, 1], [0, 0]), f32([0.3, 0.3], [0.7, 0.1]))],
        "in_anchors_rel": [PerSample(f32([0.5, 0.5], [0.25, 0.75]), f32([1, 1], [0, 0]), f32([0.3, 0.3], [0.7, 0.1]))],
        "output_size": [(4, 9)],
        "in_ids": [(0,)],
        "dtype": ["types.UINT8", "types.INT16"],
    }, refused=("ragged", "chw", "u16", "mixed_types", "0")),
    Spec("transpose", (images(),), {"perm": (2, 0, 1)}, grid={
        "@input": {"f32": (images("float32"),), "no_layout": (tensors([(2, 3, 4), (1, 2, 3)]),)},
        "perm": [(0, 1, 2), (1, 0, 2), (1, 0)],
        "output_layout": ["CHW", "abc"],
        "transpose_layout": [False],
    }),
    Spec("cast", (images(),), {"dtype": "types.FLOAT"}, grid={
        "@input": {"f32": (tensors([(3, 1), (2, 2)], "float32"),), "i32": (tensors([(3, 1), (2, 2)], "int32"),),
                   "neg_f32": (Data([f32(-1.5, -0.5, 0.5, 1.5, 2.5, 300.7, -300.2, np.nan)]),),
                   "bool": (tensors([(3,), (4,)], "bool"),)},
        "dtype": ["types.UINT8", "types.INT8", "types.INT16", "types.UINT16", "types.INT32", "types.UINT32",
                  "types.INT64", "types.UINT64", "types.FLOAT16", "types.FLOAT64", "types.BOOL"],
    }),
    Spec("cast", (Data([f32(-1.5, -0.5, 0.5, 1.5, 2.5, 300.7, -300.2, 1e10, -1e10)]),), {"dtype": "types.UINT8"},
         name="cast_float", grid={"dtype": ["types.INT8", "types.INT32", "types.UINT32", "types.INT64", "types.BOOL"]}),
    Spec("cast_like", (images(), tensors([(2,), (2,), (2,)], "int16")), {}, grid={
        "@input": {"to_f32": (images(), tensors([(2,), (2,), (2,)], "float32"))}}),
    Spec("copy", (images(),), {}, grid={"@input": {"f32_chw": (images("float32", "CHW"),)}}),
    Spec("element_extract", (images(layout="FHWC", frames=3),), {"element_map": (0,)}, grid={
        "element_map": [(2, 0), (1, 1), (3,)],
        "@input": {"fchw": (images(layout="FCHW"),)},
    }),
    Spec("permute_batch", (images(),), {"indices": (2, 0, 1)}, grid={
        "indices": [(0, 0, 0), (1, 2, 0, 1), (3, 0, 1)],
    }),
    Spec("constant", (), {"fdata": (1.0, 2.5)}, grid={
        "fdata": [3.0, (1.0, 2.0, 3.0, 4.0)],
        "idata": [5, (1, 2, 3, 4)],
        "shape": [(2, 2), (4,), ()],
        "layout": ["HW"],
        "dtype": ["types.INT32", "types.UINT8", "types.FLOAT64"],
    }),
    Spec("full", (Data([f32(1.5)] * 3),), {"shape": (2, 3)}, grid={
        "@input": {"i32_vector": (Data([np.int32([1, 2, 3])] * 3),)},
        "shape": [(3,), (), PerSample(np.int32([1, 2]), np.int32([3]), np.int32([]))],
        "layout": ["HW"],
    }),
    Spec("full_like", (images(), Data([f32(1.5)] * 3)), {}, grid={
        "@input": {"i32": (images(), Data([np.int32([1, 2, 3])] * 3))}}),
    Spec("zeros", (), {"shape": (2, 3)}, grid={
        "shape": [(), PerSample(np.int32([1, 2]), np.int32([3]), np.int32([]))],
        "dtype": ["types.INT32", "types.UINT8", "types.BOOL"],
        "layout": ["HW"],
    }),
    Spec("ones", (), {"shape": (2, 3)}, grid={
        "shape": [(), PerSample(np.int32([1, 2]), np.int32([3]), np.int32([]))],
        "dtype": ["types.INT32", "types.UINT8", "types.BOOL"],
        "layout": ["HW"],
    }),
    Spec("zeros_like", (images(),), {}, grid={"dtype": ["types.FLOAT", "types.INT64"]}),
    Spec("ones_like", (images(),), {}, grid={"dtype": ["types.FLOAT", "types.INT64"]}),
]
