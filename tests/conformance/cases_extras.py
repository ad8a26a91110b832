"""Operators of no family of their own: shapes, clahe, debayer, random_crop_generator,
ssd_random_crop, and DALI's older names fast_resize_crop_mirror and transform_translation."""
import numpy as np

from conformance.harness import Close, Data, PerSample, Spec, Stats
from conformance.samples import boxes, f32, images, tensors

BAYER = images(layout="HW", sizes=((8, 10), (6, 6), (12, 8)))
BIG = ((40, 50), (30, 30), (50, 36))

SPECS = [
    Spec("shapes", (images(),), {}, grid={
        "@input": {"chw": (images(layout="CHW"),), "scalars": (Data([np.float32(1)] * 3),),
                   "empty": (tensors([(0, 3), (2, 0), (0,)]),), "fhwc": (images(layout="FHWC"),)},
        "dtype": ["types.INT32", "types.INT64", "types.UINT64", "types.FLOAT", "types.FLOAT64", "types.UINT8",
                  "types.INT8", "types.FLOAT16", "types.BOOL"],
    }),
    Spec("clahe", (images(sizes=((20, 24), (16, 16), (24, 18))),), {"tiles_x": 2, "tiles_y": 2, "clip_limit": 2.0},
         compare=Close(atol=1.01), grid={
             "@input": {"gray": (images(channels=1, sizes=((20, 24), (16, 16))),),
                        "hw": (images(layout="HW", sizes=((20, 24), (16, 16))),),
                        "u16": (images("uint16", sizes=((20, 24), (16, 16))),),
                        "f32": (images("float32", sizes=((20, 24), (16, 16))),),
                        "chw": (images(layout="CHW", sizes=((20, 24), (16, 16))),)},
             "tiles_x": [1, 4], "tiles_y": [3],
             "clip_limit": [1.0, 10.0],
             "bins": [128, 256, 64],
             "luma_only": [False, True],
         }),
    Spec("debayer", (BAYER,), {"blue_position": (0, 0)}, compare=Close(atol=1.01), grid={
        "@input": {"u16": (images("uint16", layout="HW", sizes=((8, 10), (6, 6))),),
                   "hw1": (images(channels=1, sizes=((8, 10), (6, 6))),),
                   "fhw": (Data([s[None].repeat(2, 0) for s in BAYER.samples], "FHW"),),
                   "f32": (images("float32", layout="HW", sizes=((8, 10), (6, 6))),),
                   "odd": (images(layout="HW", sizes=((7, 9), (6, 6))),)},
        "blue_position": [(0, 1), (1, 0), (1, 1), (2, 0),
                          PerSample(np.int32([0, 0]), np.int32([1, 1]), np.int32([0, 1]))],
        "algorithm": ["bilinear_ocv", "edgeaware_ocv", "vng_ocv", "gray_ocv", "default_npp", "nearest"],
    }),
    Spec("random_crop_generator", (Data([np.int64([40, 50]), np.int64([30, 30]), np.int64([50, 36])]),), {},
         compare=Stats(low=0, high=50, mean_tol=3, std_tol=3, independent=False), iterations=30, grid={
             "@input": {"int32": (Data([np.int32([40, 50]), np.int32([30, 30]), np.int32([50, 36])]),),
                        "hwc": (Data([np.int64([40, 50, 3])] * 3),)},
             "random_area": [(0.5, 0.5), (0.9, 1.0), 0.3],
             "random_aspect_ratio": [(1.0, 1.0), (0.5, 2.0)],
             "num_attempts": [1, 50],
         }),
    Spec("ssd_random_crop", (images(sizes=BIG), boxes(), Data([np.int32([1, 2, 3]), np.int32([4]),
                                                                np.int32([5, 6])])), {},
         compare=Stats(mean_tol=40, std_tol=40, independent=False, shapes=False), iterations=4, grid={
             "num_attempts": [1, 10],
         }),
    Spec("fast_resize_crop_mirror", (images(),), {"resize_x": 10, "resize_y": 12, "crop": (6, 5)},
         compare=Close(atol=1.01), grid={
             "mirror": [1, PerSample(np.int32(0), np.int32(1), np.int32(2))],
             "crop": [PerSample(f32(3, 3), f32(5, 4), f32(6, 6))],
             "crop_pos_x": [0.0, PerSample(f32(0), f32(0.5), f32(1))],
             "crop_pos_y": [1.0, PerSample(f32(0), f32(0.5), f32(1))],
             "crop_w": [4, PerSample(f32(2), f32(3), f32(4))], "crop_h": [3, PerSample(f32(2), f32(3), f32(4))],
             "rounding": ["truncate"],
             "interp_type": ["types.INTERP_NN", "types.INTERP_CUBIC"],
             "mag_filter": ["types.INTERP_NN"], "min_filter": ["types.INTERP_NN"],
             "antialias": [True, False],
             "dtype": ["types.FLOAT"],
             "mode": ["not_smaller"],
             "size": [(8, 9), PerSample(f32(8, 9), f32(9, 8), f32(10, 10))],
             "resize_x": [PerSample(f32(8), f32(9), f32(10))], "resize_y": [PerSample(f32(8), f32(9), f32(10))],
             "resize_shorter": [8], "resize_longer": [11], "max_size": [11],
             "subpixel_scale": [False],
             "roi_start": [(1, 1)], "roi_end": [(5, 6)], "roi_relative": [True],
             "minibatch_size": [2], "temp_buffer_hint": [64],
         }),
    Spec("fast_resize_crop_mirror", (images(layout="DHWC"),),
         {"resize_x": 6, "resize_y": 6, "resize_z": 6, "crop": (4, 4, 4)}, name="fast_resize_crop_mirror_3d",
         compare=Close(atol=1.01), grid={"crop_d": [3], "crop_pos_z": [0.0, 1.0], "resize_z": [5]}),
    Spec("transform_translation", (), {"offset": (1.0, 2.0)}, batch_size=3, compare=Close(atol=1e-6), grid={
        "offset": [(3.0,), (1.0, 2.0, 3.0), PerSample(f32(1, 2), f32(3, 4), f32(5, 6))],
        "reverse_order": [True],
        "@input": {"previous": (Data([np.float32([[2, 0, 1], [0, 3, 2]])] * 3),)},
    }),
]
