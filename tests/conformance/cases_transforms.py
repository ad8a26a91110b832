"""Affine transforms and coordinates: transforms.*, coord_transform, coord_flip, and boxes: bb_flip,
bbox_paste, bbox_rotate, box_encoder, random_bbox_crop, roi_random_crop."""
import numpy as np

from conformance.harness import Close, Data, PerSample, Spec, Stats
from conformance.samples import boxes, f32, tensors

MATRIX = Close(atol=1e-5, rtol=1e-5)
PREVIOUS = Data([f32([1, 0, 1], [0, 2, 0]), f32([0, 1, 0], [1, 0, 3]), f32([1, 0.5, 0], [0, 1, 0])])
PREVIOUS_3D = Data([f32([1, 0, 0, 1], [0, 2, 0, 0], [0, 0, 1, 2])] * 3)
PREVIOUS_F64 = Data([np.float64([[1, 0, 1], [0, 2, 0]])] * 3)
POINTS = tensors([(4, 2), (1, 2), (3, 2)])
LABELS = Data([np.int32([1, 2, 3]), np.int32([4]), np.int32([5, 6])])
SHAPES = Data([np.int64([100, 200, 3]), np.int64([50, 40, 3]), np.int64([30, 30, 3])])

SPECS = [
    Spec("transforms.translation", (), {"offset": (1.0, 2.0)}, compare=MATRIX, grid={
        "@input": {"previous": (PREVIOUS,), "f64": (PREVIOUS_F64,)},
        "offset": {"1.0,2.0,3.0": (1.0, 2.0, 3.0), "1.0": (1.0,), "6d": (1.0, 2.0, 3.0, 4.0, 5.0, 6.0), "7d": (1.0,) * 7,
                   "per_sample": PerSample(f32(1, 2), f32(0, 0), f32(-1, 5)),
                   "per_sample_1d": PerSample(f32(1), f32(0), f32(2))},
        "reverse_order": [True],
    }, refused=("f64", "7d")),
    Spec("transforms.scale", (PREVIOUS_3D,), {"scale": (2.0,)}, name="transforms.scale_input", compare=MATRIX, grid={
        "ndim": [2], "center": [(1.0, 2.0, 3.0)]}),
    Spec("transforms.scale", (), {"scale": (2.0, 3.0)}, compare=MATRIX, grid={
        "@input": {"previous": (PREVIOUS,)},
        "scale": [(2.0,), (1.0, 2.0, 3.0), PerSample(f32(1, 2), f32(0, 0), f32(-1, 5))],
        "center": [(1.0, 1.0), PerSample(f32(1, 2), f32(0, 0), f32(-1, 5))],
        "ndim": [2, 3],
        "reverse_order": [True],
    }),
    Spec("transforms.scale", (), {"scale": (2.0,)}, name="transforms.scale_one", compare=MATRIX, grid={
        "ndim": [1, 3, 6, 7], "center": [(1.0,)]}, refused=("7",)),
    Spec("transforms.rotation", (), {"angle": 30.0}, compare=MATRIX, grid={
        "@input": {"previous": (PREVIOUS,)},
        "angle": [0.0, -90.0, PerSample(f32(10), f32(20), f32(370))],
        "axis": [(0.0, 0.0, 1.0), (0.0, 0.0, 0.0), (0.0, 1.0), PerSample(f32(1, 0, 0), f32(0, 1, 0), f32(1, 1, 1))],
        "center": [(1.0, 2.0), PerSample(f32(1, 2), f32(0, 0), f32(-1, 5))],
        "reverse_order": [True],
    }, refused=("0.0,1.0",)),
    Spec("transforms.shear", (), {"shear": (0.1, 0.2)}, compare=MATRIX, grid={
        "@input": {"previous": (PREVIOUS,)},
        "shear": {"0.1,0.2,0.3,0.4,0.5,0.6": (0.1, 0.2, 0.3, 0.4, 0.5, 0.6), "0.1,0.2,0.3": (0.1, 0.2, 0.3),
                  "per_sample": PerSample(f32(1, 2), f32(0, 0), f32(-1, 5)),
                  "per_sample_2x1": PerSample(f32([1], [2]), f32([0], [0]), f32([-1], [5])),
                  "per_sample_3x2": PerSample(*[f32([1, 2], [3, 4], [5, 6])] * 3)},
        "angles": [(10.0, 20.0), (95.0, 0.0), PerSample(f32(1, 2), f32(0, 0), f32(-1, 5))],
        "center": [(1.0, 2.0), (1.0, 2.0, 3.0)],
        "reverse_order": [True],
    }, refused=("0.1,0.2,0.3", "95.0,0.0", "1.0,2.0,3.0")),
    Spec("transforms.crop", (), {"from_start": (0.0, 0.0), "from_end": (10.0, 20.0)}, compare=MATRIX, grid={
        "@input": {"previous": (PREVIOUS,)},
        "from_start": [(2.0, 3.0), PerSample(f32(1, 2), f32(0, 0), f32(-1, 5))],
        "from_end": [(1.0, 1.0, 1.0), (0.0, 20.0), (1.0, 2.0, 3.0, 4.0)],
        "to_start": [(1.0, 1.0), PerSample(f32(1, 2), f32(0, 0), f32(-1, 5))],
        "to_end": [(2.0, 4.0)],
        "absolute": [True],
        "reverse_order": [True],
    }),
    Spec("transforms.combine", (PREVIOUS, PREVIOUS), {}, compare=MATRIX, grid={
        "@input": {"three": (PREVIOUS, Data([f32([2, 0, 0], [0, 2, 0])] * 3), PREVIOUS), "many": (PREVIOUS,) * 40,
                   "1d": (Data([f32([2, 1])] * 3), Data([f32([3, -1])] * 3)), "f64": (PREVIOUS_F64, PREVIOUS_F64),
                   "2d_3d": (PREVIOUS, PREVIOUS_3D)},
        "reverse_order": [True],
    }, refused=("f64", "2d_3d")),
    Spec("coord_transform", (POINTS,), {"M": (1.0, 2.0, 3.0, 4.0), "T": (1.0, -1.0)}, compare=MATRIX, grid={
        "@input": {"f64": (tensors([(4, 2), (1, 2), (3, 2)], "float64"),), "u8": (tensors([(4, 2), (2, 2)], "uint8"),),
                   "3d": (tensors([(4, 3), (2, 3)]),)},
        "M": [2.0, (1.0, 0.0, 0.0, 1.0, 1.0, 1.0), PerSample(f32([1, 0], [0, 1]), f32([0, 1], [1, 0]), f32([2, 0], [0, 2]))],
        "T": [3.0, PerSample(f32(1, 2), f32(0, 0), f32(-1, 5))],
        "MT": [(1.0, 2.0, 3.0, 4.0, 5.0, 6.0), PerSample(f32([1, 0, 1], [0, 1, 0]), f32([0, 1, 2], [1, 0, 3]), f32([2, 0, 0], [0, 2, 0]))],
        "dtype": ["types.UINT8", "types.INT32", "types.FLOAT"],
    }),
    Spec("coord_transform", (tensors([(4, 2), (2, 2)], "uint8"),), {"M": (1.5, -0.5, 0.25, 2.0), "T": (0.5, -300.0)},
         name="coord_transform_types", compare=MATRIX, grid={
             "@input": {"i16": (tensors([(4, 2), (2, 2)], "int16"),), "u16": (tensors([(4, 2), (2, 2)], "uint16"),),
                        "i32": (tensors([(4, 2), (2, 2)], "int32"),), "i8": (tensors([(4, 2), (2, 2)], "int8"),),
                        "3d_points": (tensors([(2, 3, 2), (1, 2, 2)], "uint8", layout="ABC"),),
                        "1d": (tensors([(2,), (2,)], "uint8"),)},
             "dtype": ["types.UINT8", "types.FLOAT", "types.INT16"],
         }, refused=("i8", "1d", "INT16")),
    Spec("coord_flip", (POINTS,), {}, compare=MATRIX, grid={
        "@input": {"3d": (tensors([(4, 3), (2, 3)]),), "1d": (tensors([(4, 1), (2, 1)]),)},
        "layout": ["xy", "yx", "x", "xyz", "zyx"],
        "flip_x": [False, PerSample(np.int32(0), np.int32(1), np.int32(0))],
        "flip_y": [True, PerSample(np.int32(0), np.int32(1), np.int32(1))],
        "flip_z": [True],
        "center_x": [0.0, PerSample(f32(0), f32(0.2), f32(1))],
        "center_y": [0.25, PerSample(f32(0), f32(0.2), f32(1))],
        "center_z": [0.25],
    }),
    Spec("bb_flip", (boxes(),), {}, compare=MATRIX, grid={
        # [N, 6] of whole boxes of 4 (DALI leaves values past the last whole box unwritten)
        "@input": {"xywh": (boxes(ltrb=False),), "3d": (tensors([(2, 6), (4, 6)]),)},
        "horizontal": [0, PerSample(np.int32(0), np.int32(1), np.int32(1))],
        "vertical": [1, PerSample(np.int32(0), np.int32(1), np.int32(0))],
        "ltrb": [True],
    }),
    Spec("bbox_paste", (boxes(),), {"ratio": 2.0}, compare=MATRIX, grid={
        "@input": {"flat": (Data([b.ravel() for b in boxes().samples]),),
                   "3d": (Data([b.reshape(-1, 2, 2) for b in boxes().samples]),),
                   "f64": (Data([b.astype(np.float64) for b in boxes().samples]),),
                   "6_values": (Data([b.ravel()[:6] for b in boxes((2, 2, 2)).samples]),)},
        "ratio": [1.0, 0.5, 0.3, PerSample(f32(1), f32(2), f32(3))],
        "paste_x": [0.0, 1.0, PerSample(f32(0), f32(0.5), f32(1))],
        "paste_y": [1.0, PerSample(f32(0), f32(0.5), f32(1))],
        "ltrb": [True],
    }, refused=("f64", "6_values")),
    Spec("bbox_rotate", (boxes(),), {"angle": 30.0, "input_shape": (20, 30)}, compare=MATRIX, grid={
        "@input": {"labels": (boxes(), LABELS), "xywh": (boxes(ltrb=False),)},
        "angle": [0.0, 90.0, PerSample(f32(0), f32(45), f32(-30))],
        "input_shape": [PerSample(np.int32([20, 30]), np.int32([10, 10]), np.int32([30, 20]))],
        "bbox_layout": ["xyXY", "xyWH"],
        "bbox_normalized": [False],
        "keep_size": [True],
        "mode": ["expand", "halfway", "fixed"],
        "remove_threshold": [0.5],
        "shape_layout": ["WH"],
        "size": [(25, 25)],
    }),
    Spec("box_encoder", (boxes(), LABELS), {"anchors": (0.0, 0.0, 0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 0.2, 0.2, 0.6, 0.7)},
         compare=MATRIX, grid={
             "criteria": [0.0, 0.9, 0.3],
             "offset": [True],
             "means": [(0.1, 0.1, 0.1, 0.1)],
             "stds": [(0.1, 0.1, 0.2, 0.2)],
             "scale": [2.0],
         }),
    # random crops: the outputs' shapes depend on the crops drawn
    Spec("random_bbox_crop", (boxes(), LABELS), {}, compare=Stats(shapes=False, independent=False), grid={
        "@input": {"no_labels": (boxes(),)},
        "aspect_ratio": [(0.5, 2.0, 0.5, 2.0)],
        "scaling": [(0.3, 1.0), (1.0, 1.0)],
        "thresholds": [(0.1, 0.5), (0.0,)],
        "threshold_type": ["iou", "overlap"],
        "all_boxes_above_threshold": [False],
        "allow_no_crop": [False],
        "bbox_layout": ["xyWH"],
        "ltrb": [False],
        "bbox_prune_threshold": [0.5],
        "crop_shape": [(10, 10)],
        "input_shape": [(20, 20)],
        "shape_layout": ["WH"],
        "num_attempts": [3],
        "total_num_attempts": [5],
        "output_bbox_indices": [True],
        "quiet": [True],
    }),
    Spec("roi_random_crop", (), {"crop_shape": (10, 10), "roi_start": (5, 5), "roi_shape": (3, 3)},
         compare=Stats(independent=False), grid={
             "@input": {"data": (tensors([(20, 20), (30, 40), (15, 15)]),)},
             "crop_shape": [(2, 2), PerSample(np.int32([4, 4]), np.int32([5, 6]), np.int32([2, 2]))],
             "roi_start": [PerSample(np.int32([1, 1]), np.int32([2, 3]), np.int32([0, 0]))],
             "roi_shape": [(30, 30)],
             "roi_end": [(9, 9)],
             "in_shape": [(20, 20), PerSample(np.int32([20, 20]), np.int32([30, 40]), np.int32([15, 15]))],
         }),
]
