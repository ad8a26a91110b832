"""Resampling operators: resize, resize_crop_mirror, warp_affine, warp_perspective, rotate,
random_resized_crop, water, sphere."""
import numpy as np

from conformance.harness import Close, PerSample, Spec, Stats
from conformance.samples import f32, images

INTERPOLATIONS = ["types.INTERP_NN", "types.INTERP_LINEAR", "types.INTERP_CUBIC", "types.INTERP_LANCZOS3",
                  "types.INTERP_TRIANGULAR", "types.INTERP_GAUSSIAN"]
WARP_INTERPOLATIONS = ["types.INTERP_NN", "types.INTERP_LINEAR", "types.INTERP_CUBIC"]
IMAGE_INPUTS = {
    "f32_hwc": (images("float32"),),
    "u8_gray": (images(channels=1),),
    "i16_hwc": (images("int16"),),
    "u8_chw": (images(layout="CHW"),),
    "u8_fhwc": (images(layout="FHWC"),),
    "u8_hw": (images(layout="HW"),),
}
# uint8 outputs may round the other way; float outputs of uint8 inputs are compared as closely
RESAMPLED = Close(atol=1.01)

SPECS = [
    Spec("resize", (images(),), {"resize_x": 5, "resize_y": 7}, compare=RESAMPLED, grid={
        "@input": {**IMAGE_INPUTS, "u8_dhwc": (images(layout="DHWC"),)},
        "interp_type": INTERPOLATIONS,
        "mag_filter": ["types.INTERP_NN", "types.INTERP_CUBIC"],
        "min_filter": ["types.INTERP_NN", "types.INTERP_LANCZOS3", "types.INTERP_TRIANGULAR"],
        "antialias": [False],
        "dtype": ["types.FLOAT", "types.UINT8", "types.INT16"],
        "resize_x": [12, 0, 1, -3, PerSample(f32(4), f32(9), f32(3))],
        "resize_y": [0, PerSample(f32(4), f32(9), f32(3))],
        "subpixel_scale": [False],
        "minibatch_size": [1],
        "temp_buffer_hint": [1024],
        "save_attrs": [True],
        "roi_start": [(1, 2), PerSample(f32(1, 1), f32(2, 0), f32(0, 1))],
        "roi_end": [(4, 5), (1, 0)],
    }),
    Spec("resize", (images(),), {"size": (7, 5)}, name="resize_size", compare=RESAMPLED, grid={
        "size": [(4, 0), (0, 6), (20, 3), PerSample(f32(4, 5), f32(9, 3), f32(3, 3)), (5,)],
        "mode": ["default", "stretch", "not_larger", "not_smaller", "fit"],
        "max_size": [(6, 6), 6, (6, 0)],
        "roi_start": [(0.2, 0.1)],
        "roi_relative": [True],
    }, refused=("fit",)),
    Spec("resize", (images(),), {"resize_shorter": 6}, name="resize_shorter", compare=RESAMPLED, grid={
        "resize_shorter": [3, 11, PerSample(f32(4), f32(9), f32(3))],
        "max_size": [7],
        "resize_longer": [9],
    }),
    Spec("resize", (images(),), {"resize_longer": 10}, name="resize_longer", compare=RESAMPLED, grid={
        "resize_longer": [4, PerSample(f32(4), f32(9), f32(3))],
        "max_size": [(8, 9)],
    }),
    Spec("resize", (images(layout="DHWC"),), {"resize_x": 4, "resize_y": 5, "resize_z": 3},
         name="resize_3d", compare=RESAMPLED, grid={
             "resize_z": [0, 8, PerSample(f32(4), f32(2), f32(3))],
             "size": [(3, 4, 5)],
             "interp_type": ["types.INTERP_NN", "types.INTERP_CUBIC"],
             "roi_start": [(1, 1, 0)],
         }),
    Spec("resize_crop_mirror", (images(),), {"resize_x": 10, "resize_y": 12, "crop": (6, 5)},
         compare=RESAMPLED, grid={
             "@input": {"f32_hwc": IMAGE_INPUTS["f32_hwc"], "u8_gray": IMAGE_INPUTS["u8_gray"],
                        "u8_fhwc": IMAGE_INPUTS["u8_fhwc"], "u8_chw": IMAGE_INPUTS["u8_chw"]},
             "mirror": [1, 2, 3, PerSample(np.int32(0), np.int32(1), np.int32(2))],
             "crop": [(12, 10), (14, 14), PerSample(f32(3, 3), f32(5, 4), f32(6, 6))],
             "crop_pos_x": [0.0, 1.0, 0.3, PerSample(f32(0), f32(0.5), f32(1))],
             "crop_pos_y": [0.0, 1.0, PerSample(f32(0), f32(0.5), f32(1))],
             "crop_w": [4], "crop_h": [3],
             "rounding": ["round", "truncate"],
             "interp_type": WARP_INTERPOLATIONS + ["types.INTERP_LANCZOS3"],
             "mag_filter": ["types.INTERP_NN"], "min_filter": ["types.INTERP_NN"],
             "antialias": [False],
             "dtype": ["types.FLOAT"],
             "mode": ["not_smaller"],
             "size": [(8, 9)],
             "resize_shorter": [8], "resize_longer": [11], "max_size": [11],
             "subpixel_scale": [False],
             "roi_start": [(1, 1)], "roi_end": [(5, 6)], "roi_relative": [True],
             "minibatch_size": [2], "temp_buffer_hint": [64],
         }),
    # the mirror's bits count the sequence's layout, frames included: of FHWC, 1 flips H and 2 nothing
    Spec("resize_crop_mirror", IMAGE_INPUTS["u8_fhwc"], {"resize_x": 10, "resize_y": 12, "crop": (6, 5), "mirror": 1},
         name="resize_crop_mirror_sequences", compare=RESAMPLED, grid={"mirror": [2, 3]}),
    Spec("resize_crop_mirror", (images(layout="DHWC"),),
         {"resize_x": 6, "resize_y": 6, "resize_z": 6, "crop": (4, 4, 4)},
         name="resize_crop_mirror_3d", compare=RESAMPLED, grid={
             "crop_d": [3], "crop_pos_z": [0.0, 1.0], "size": [(5, 5, 5)],
         }),
    Spec("warp_affine", (images(),), {"matrix": (1.0, 0.1, 0.5, 0.2, 0.9, -1.0)}, compare=RESAMPLED, grid={
        "@input": IMAGE_INPUTS,
        "matrix": [(1, 0, 0, 0, 1, 0), (0.5, 0, 0, 0, 2, 0), (1, 0, 0, 0, 1),
                   PerSample(f32([1, 0, 1], [0, 1, 0]), f32([0.5, 0, 0], [0, 0.5, 0]), f32([1, 0.2, 0], [0, 1, 2]))],
        "size": [(10, 12), (1, 1), PerSample(f32(4, 5), f32(9, 3), f32(3, 3))],
        "inverse_map": [False],
        "fill_value": [0.0, 200.0],
        "interp_type": WARP_INTERPOLATIONS + ["types.INTERP_LANCZOS3"],
        "dtype": ["types.FLOAT", "types.UINT8"],
    }, refused=("1,0,0,0,1",)),
    Spec("warp_affine", (images(layout="DHWC"),), {"matrix": (1, 0, 0, 0.5, 0, 1, 0, 0, 0, 0, 1, 1)},
         name="warp_affine_3d", compare=RESAMPLED, grid={
             "size": [(4, 5, 6)], "interp_type": ["types.INTERP_NN"], "fill_value": [7.0],
         }),
    Spec("experimental.warp_perspective", (images(),),
         {"matrix": (1.0, 0.1, 0.5, 0.2, 0.9, -1.0, 0.01, 0.02, 1.0)}, compare=RESAMPLED, grid={
             "@input": {"f32_hwc": IMAGE_INPUTS["f32_hwc"], "u8_gray": IMAGE_INPUTS["u8_gray"],
                        "u8_hw": IMAGE_INPUTS["u8_hw"], "u8_chw": IMAGE_INPUTS["u8_chw"]},
             "matrix": [PerSample(np.eye(3, dtype=np.float32), 2 * np.eye(3, dtype=np.float32),
                                  f32([1, 0, 1], [0, 1, 1], [0, 0, 1]))],
             "size": [(10, 12), PerSample(f32(4, 5), f32(9, 3), f32(3, 3))],
             "inverse_map": [False],
             "fill_value": [0.0, 200.0],
             "interp_type": ["types.INTERP_NN", "types.INTERP_LINEAR", "types.INTERP_CUBIC"],
             "border_mode": ["constant", "clamp", "reflect", "reflect_101", "wrap"],
             "pixel_origin": ["center", "corner"],
         }),
    Spec("rotate", (images(),), {"angle": 30.0}, compare=RESAMPLED, grid={
        "@input": IMAGE_INPUTS,
        "angle": [0.0, 90.0, -45.0, 180.0, 370.0, PerSample(f32(10), f32(-100), f32(270))],
        "keep_size": [True],
        "size": [(10, 12), PerSample(f32(4, 5), f32(9, 3), f32(3, 3))],
        "fill_value": [0.0, 255.0],
        "interp_type": WARP_INTERPOLATIONS,
        "dtype": ["types.FLOAT", "types.UINT8"],
    }),
    Spec("rotate", (images(layout="DHWC"),), {"angle": 30.0, "axis": (0, 0, 1)}, name="rotate_3d",
         compare=RESAMPLED, grid={
             "axis": [(1, 0, 0), (1, 1, 0), PerSample(f32(0, 1, 0), f32(0, 0, 1), f32(1, 0, 0))],
             "keep_size": [True], "size": [(4, 5, 6)], "interp_type": ["types.INTERP_NN"],
         }),
    Spec("water", (images(),), {}, compare=RESAMPLED, grid={
        "@input": {"f32_hwc": IMAGE_INPUTS["f32_hwc"], "u8_gray": IMAGE_INPUTS["u8_gray"]},
        "ampl_x": [0.0, 3.0, PerSample(f32(1), f32(2), f32(5))],
        "ampl_y": [5.0],
        "freq_x": [0.5], "freq_y": [PerSample(f32(0.1), f32(0.3), f32(1))],
        "phase_x": [1.0], "phase_y": [2.0],
        "fill_value": [100.0],
        "interp_type": ["types.INTERP_NN", "types.INTERP_LINEAR"],
        "mask": [0, PerSample(np.int32(1), np.int32(0), np.int32(1))],
    }),
    Spec("sphere", (images(),), {}, compare=RESAMPLED, grid={
        "@input": {"f32_hwc": IMAGE_INPUTS["f32_hwc"], "u8_gray": IMAGE_INPUTS["u8_gray"]},
        "fill_value": [100.0],
        "interp_type": ["types.INTERP_NN", "types.INTERP_LINEAR"],
        "mask": [0, PerSample(np.int32(1), np.int32(0), np.int32(1))],
    }),
    # random: noise images, so every crop has the same statistics; the statistics of many windows (those
    # of one batch depend on its few draws)
    Spec("random_resized_crop", (images(sizes=((40, 50), (30, 30), (50, 35))),), {"size": (8, 8)},
         compare=Stats(0, 255, mean_tol=12, std_tol=10), iterations=20, grid={
             "@input": {"f32_hwc": (images("float32", sizes=((40, 50), (30, 30), (50, 35))),),
                        "u8_fhwc": (images(layout="FHWC", sizes=((40, 50), (30, 30), (50, 35))),),
                        "u8_chw": (images(layout="CHW", sizes=((40, 50), (30, 30), (50, 35))),)},
             "size": [(4, 10), 6],
             "random_area": [(0.5, 0.5), (0.05, 1.0), 0.3],
             "random_aspect_ratio": [(1.0, 1.0), (0.5, 2.0)],
             "num_attempts": [1],
             "interp_type": ["types.INTERP_NN", "types.INTERP_CUBIC"],
             "mag_filter": ["types.INTERP_NN"], "min_filter": ["types.INTERP_NN"],
             "antialias": [False],
             "dtype": ["types.FLOAT"],
             "minibatch_size": [1], "temp_buffer_hint": [64],
         }),
]
