"""Color operators: color_space_conversion, hsv, hue, saturation, color_twist, brightness, contrast,
lookup_table, jpeg_compression_distortion, grid_mask."""
import numpy as np

from conformance.harness import Close, Data, PerSample, Spec
from conformance.samples import f32, images

COLOR = Close(atol=1.01, rtol=1e-4)
RGB_INPUTS = {"f32_hwc": (images("float32"),), "u8_fhwc": (images(layout="FHWC"),),
              "u8_chw": (images(layout="CHW"),), "i16_hwc": (images("int16"),)}
IMAGE_TYPES = ["types.RGB", "types.BGR", "types.YCbCr", "types.GRAY"]

SPECS = [
    Spec("color_space_conversion", (images(),), {"image_type": "types.RGB", "output_type": "types.YCbCr"},
         compare=COLOR, grid={
             "@input": {"f32_hwc": (images("float32"),), "u8_fhwc": (images(layout="FHWC"),),
                        "gray": (images(channels=1),)},
             "image_type": IMAGE_TYPES,
             "output_type": IMAGE_TYPES,
         }),
    Spec("color_space_conversion", (images(channels=1),), {"image_type": "types.GRAY", "output_type": "types.RGB"},
         name="color_space_conversion_gray", compare=COLOR, grid={"output_type": IMAGE_TYPES}),
    Spec("hsv", (images(),), {"hue": 30.0, "saturation": 0.5, "value": 1.2}, compare=COLOR, grid={
        "@input": RGB_INPUTS,
        "hue": [0.0, -400.0, PerSample(f32(0), f32(90), f32(-180))],
        "saturation": [0.0, 2.0, PerSample(f32(0), f32(1), f32(3))],
        "value": [0.0, PerSample(f32(0.5), f32(1), f32(2))],
        "dtype": ["types.FLOAT", "types.UINT8"],
    }),
    Spec("hue", (images(),), {"hue": 45.0}, compare=COLOR, grid={
        "@input": RGB_INPUTS,
        "hue": [0.0, 180.0, -90.0, PerSample(f32(0), f32(90), f32(-180))],
        "image_type": ["types.BGR", "types.YCbCr"],
        "dtype": ["types.FLOAT"],
    }),
    Spec("saturation", (images(),), {"saturation": 0.5}, compare=COLOR, grid={
        "@input": RGB_INPUTS,
        "saturation": [0.0, 3.0, -1.0, PerSample(f32(0), f32(1), f32(3))],
        "image_type": ["types.BGR", "types.YCbCr"],
        "dtype": ["types.FLOAT"],
    }),
    Spec("color_twist", (images(),), {"hue": 20.0, "saturation": 0.8, "brightness": 1.1, "contrast": 1.2},
         compare=COLOR, grid={
             "@input": RGB_INPUTS,
             "hue": [PerSample(f32(0), f32(90), f32(-180))],
             "saturation": [0.0, PerSample(f32(0), f32(1), f32(3))],
             "brightness": [0.0, PerSample(f32(0.5), f32(1), f32(2))],
             "contrast": [0.0, PerSample(f32(0.5), f32(1), f32(2))],
             "image_type": ["types.BGR", "types.YCbCr"],
             "dtype": ["types.FLOAT", "types.INT16"],
         }),
    Spec("brightness", (images(),), {"brightness": 1.5}, compare=COLOR, grid={
        "@input": RGB_INPUTS,
        "brightness": [0.0, PerSample(f32(0.5), f32(1), f32(2))],
        "brightness_shift": [0.1, PerSample(f32(-0.5), f32(0), f32(0.5))],
        "dtype": ["types.FLOAT", "types.INT16"],
    }),
    Spec("contrast", (images(),), {"contrast": 1.5}, compare=COLOR, grid={
        "@input": RGB_INPUTS,
        "contrast": [0.0, PerSample(f32(0.5), f32(1), f32(2))],
        "contrast_center": [0.0, 200.0, PerSample(f32(0), f32(100), f32(255))],
        "dtype": ["types.FLOAT", "types.INT16"],
    }),
    Spec("lookup_table", (Data([np.array([0, 1, 2, 5, 9], np.uint8), np.array([3, 200], np.uint8),
                                np.array([1, 2, 4, 0], np.uint8)]),),
         {"keys": (0, 1, 2, 3), "values": (10.0, 11.5, -12.0, 13.0)}, grid={
             "@input": {"i32": (Data([np.array([-1, 0, 2, 3, 70000], np.int32)] * 2),),
                        "i64": (Data([np.array([1, 3, 5], np.int64)] * 2),)},
             "default_value": [-1.0, 0.5],
             "dtype": ["types.UINT8", "types.INT32", "types.FLOAT16", "types.INT64"],
             "keys": [(1, 0, 2, 3), (-1, 0, 2, 3)],
             "values": [(1, 2)],
         }),
    # lossy: the same library (libjpeg) gives the same bits; another encoder gives close values
    Spec("jpeg_compression_distortion", (images(sizes=((16, 16), (24, 20), (9, 13))),), {},
         compare=Close(atol=12), grid={
             "@input": {"gray": (images(channels=1, sizes=((16, 16), (8, 8), (9, 13))),),
                        "u8_fhwc": (images(layout="FHWC", sizes=((16, 16), (8, 8), (9, 13))),)},
             "quality": [1, 50, 100, PerSample(np.int32(10), np.int32(60), np.int32(95))],
         }),
    Spec("grid_mask", (images(sizes=((30, 40), (25, 25), (16, 33))),), {}, grid={
        "@input": {"f32_hwc": (images("float32", sizes=((30, 40), (25, 25))),),
                   "gray": (images(channels=1, sizes=((30, 40), (25, 25))),)},
        "tile": [10, 7, PerSample(np.int32(5), np.int32(8), np.int32(12))],
        "ratio": [0.0, 0.3, 1.0, PerSample(f32(0.2), f32(0.5), f32(0.9))],
        "angle": [0.5, PerSample(f32(0), f32(0.3), f32(1.2))],
        "shift_x": [3.0, PerSample(f32(0), f32(4), f32(-7))],
        "shift_y": [-2.0, PerSample(f32(0), f32(4), f32(-7))],
    }),
]
