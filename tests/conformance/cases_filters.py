"""Convolutions and region operators: gaussian_blur, laplacian, filter, erase."""
import numpy as np

from conformance.harness import Close, Data, PerSample, Spec
from conformance.samples import f32, images

FILTERED = Close(atol=1.01, rtol=1e-5)
KERNEL = np.array([[0, 1, 0], [1, -4, 2], [0, 1, 0]], np.float32)

SPECS = [
    Spec("gaussian_blur", (images(),), {"sigma": 1.0}, compare=FILTERED, grid={
        "@input": {"f32_hwc": (images("float32"),), "u8_gray": (images(channels=1),),
                   "i16_hwc": (images("int16"),), "u8_hw": (images(layout="HW"),),
                   "u8_fhwc": (images(layout="FHWC"),), "u8_chw": (images(layout="CHW"),),
                   "u8_dhwc": (images(layout="DHWC"),), "u8_fchw": (images(layout="FCHW"),),
                   "f16_hwc": (images("float16"),), "f64_hwc": (images("float64"),)},
        "sigma": [0.5, (1.0, 2.0), 0.0, PerSample(f32(0.5), f32(1.0), f32(2.0))],
        "window_size": [3, (3, 5), 4, PerSample(np.int32(3), np.int32(5), np.int32(7))],
        "dtype": ["types.FLOAT", "types.UINT8", "types.INT16"],
    }, refused=("4",)),
    Spec("gaussian_blur", (images(layout="DHWC"),), {"sigma": (1.0, 2.0, 0.5)}, name="gaussian_blur_volume",
         compare=FILTERED, grid={
             "@input": {"f32_dhwc": (images("float32", layout="DHWC"),),
                        "u8_dhw": (Data([sample[..., 0] for sample in images(channels=1, layout="DHWC").samples],
                                        "DHW"),)},
             "sigma": [(1.0, 2.0), PerSample(f32(0.5, 1, 1), f32(1, 1, 1), f32(2, 1, 0.5))],
             "window_size": [(3, 5, 1)],
             "dtype": ["types.FLOAT"],
         }, refused=("1.0,2.0",)),
    Spec("laplacian", (images(layout="DHWC"),), {"window_size": (3, 5, 3)}, name="laplacian_volume", compare=FILTERED,
         grid={"smoothing_size": [(1, 3, 5)], "normalized_kernel": [True], "dtype": ["types.FLOAT"]}),
    Spec("laplacian", (images(),), {}, compare=FILTERED, grid={
        "@input": {"f32_hwc": (images("float32"),), "u8_gray": (images(channels=1),),
                   "u8_hw": (images(layout="HW"),), "u8_fhwc": (images(layout="FHWC"),),
                   "u8_dhwc": (images(layout="DHWC"),)},
        "window_size": [1, 5, (3, 5), PerSample(np.int32(3), np.int32(5), np.int32(1))],
        "smoothing_size": [1, 5, (3, 1)],
        "scale": [0.5, (1.0, 2.0), PerSample(f32(0.5), f32(1.0), f32(2.0))],
        "normalized_kernel": [True],
        "dtype": ["types.FLOAT", "types.INT16"],
    }),
    Spec("filter", (images(), Data([KERNEL] * 3)), {}, compare=FILTERED, grid={
        "@input": {"f32_hwc": (images("float32"), Data([KERNEL] * 3)),
                   "u8_hw": (images(layout="HW"), Data([KERNEL] * 3)),
                   "u8_fhwc": (images(layout="FHWC"), Data([KERNEL] * 3)),
                   "u8_chw": (images(layout="CHW"), Data([KERNEL] * 3)),
                   "u8_fchw": (images(layout="FCHW"), Data([KERNEL] * 3)),
                   "u16_hwc": (images("uint16"), Data([KERNEL] * 3)),
                   "i32_hwc": (images("int32"), Data([KERNEL] * 3)),
                   "u8_dhwc": (images(layout="DHWC"), Data([KERNEL] * 3)),
                   "kernel_5x3": (images(), Data([np.ones((5, 3), np.float32) / 15] * 3)),
                   "fill_input": (images(), Data([KERNEL] * 3), Data([np.uint8(9)] * 3))},
        "border": ["reflect_101", "reflect_1001", "wrap", "clamp", "constant", "mirror"],
        "mode": ["same", "valid", "full"],
        "anchor": [(0, 0), (2, 1), -1, PerSample(np.int32([0, 0]), np.int32([1, 1]), np.int32([2, 2]))],
        "dtype": ["types.FLOAT", "types.INT16"],
    }, refused=("mirror", "full", "i32_hwc", "u8_dhwc")),
    Spec("erase", (images(),), {"anchor": (1, 2), "shape": (2, 3), "axis_names": "HW"}, grid={
        "@input": {"f32_hwc": (images("float32"),), "u8_chw": (images(layout="CHW"),)},
        "anchor": [(1, 2, 4, 4), (-1, 20), PerSample(f32(0, 0), f32(1, 1), f32(3, 2))],
        "shape": [(10, 10), (2, 3, 1, 1), PerSample(f32(1, 1), f32(2, 2), f32(3, 0))],
        "axis_names": ["W", "HWC"],
        "axes": [(1,), (0, 1)],
        "fill_value": [7.0, (1.0, 2.0, 3.0), (1.0, 2.0)],
        "centered_anchor": [True],
        "normalized_anchor": [True],
        "normalized_shape": [True],
        "normalized": [True],
    }),
]
