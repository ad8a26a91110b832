"""Image decoders: decoders.image, image_crop, image_random_crop, image_slice and peek_image_shape,
over small JPEG, PNG, BMP, TIFF and WebP images encoded by OpenCV (and an EXIF-rotated JPEG by
Pillow). Shapes must agree exactly; pixels within a few levels where the codec is lossy (JPEG
decoders differ in their IDCT and chroma upsampling), exactly where it is lossless."""
import numpy as np

from conformance.harness import Close, Data, PerSample, Spec, Stats
from conformance.samples import encoded, f32, oriented_jpeg

LOSSY = Close(atol=6)  # libjpeg-turbo (DALI) and OpenCV's/Pillow's libjpeg may differ by a few levels
FORMATS = {
    "png": (encoded(".png"),), "bmp": (encoded(".bmp"),), "tiff": (encoded(".tiff"),),
    "webp_lossless": (encoded(".webp"),), "png_gray": (encoded(".png", channels=1),),
    "png_rgba": (encoded(".png", channels=4),), "jpeg_gray": (encoded(".jpg", channels=1),),
    "exif_rotated": (Data([oriented_jpeg(), oriented_jpeg(3), oriented_jpeg(8)]),),
}
OUTPUT_TYPES = ["types.RGB", "types.BGR", "types.GRAY", "types.YCbCr", "types.ANY_DATA"]
# arguments of DALI's GPU decoding (nvJPEG memory, hardware decoder share) and caches: the CPU
# decoder reads them and decodes the same
DECODER_TUNING = {
    "device_memory_padding": [1 << 20], "device_memory_padding_jpeg2k": [1 << 20],
    "host_memory_padding": [1 << 20], "host_memory_padding_jpeg2k": [1 << 20],
    "hw_decoder_load": [0.0], "hybrid_huffman_threshold": [0], "preallocate_height_hint": [64],
    "preallocate_width_hint": [64], "jpeg_fancy_upsampling": [True],
    "affine": [False],
}
DECODER_COMMON = {"output_type": OUTPUT_TYPES, "dtype": ["types.UINT8", "types.FLOAT", "types.INT16"],
                  "adjust_orientation": [False], **DECODER_TUNING}
JPEGS = (encoded(".jpg"),)
FAST_IDCT = Close(atol=12)  # DALI's fast IDCT is coarser still

SPECS = [
    Spec("decoders.image", JPEGS, {}, compare=LOSSY, grid={
        "@input": FORMATS,
        **DECODER_COMMON,
        "cache_size": [0], "cache_threshold": [0], "cache_type": ["threshold"], "cache_debug": [False],
        "cache_batch_copy": [True],
    }),
    Spec("decoders.image", (encoded(".png"),), {}, name="decoders.image_png", grid={
        "output_type": OUTPUT_TYPES, "dtype": ["types.FLOAT"],
    }),
    Spec("decoders.image", (Data([np.frombuffer(b"not an image at all", np.uint8)] * 2),), {},
         name="decoders.image_garbage", refused=("base",)),
    Spec("decoders.image_crop", JPEGS, {"crop": (8, 10)}, compare=LOSSY, grid={
        "@input": {"png": FORMATS["png"], "png_gray": FORMATS["png_gray"], "exif_rotated": FORMATS["exif_rotated"]},
        **DECODER_COMMON,
        "crop": [(16, 16), (40, 40), PerSample(f32(4, 4), f32(10, 6), f32(16, 16))],
        "crop_pos_x": [0.0, 1.0, PerSample(f32(0), f32(0.3), f32(1))],
        "crop_pos_y": [0.0, 1.0, PerSample(f32(1), f32(0.5), f32(0))],
        "rounding": ["round", "truncate"],
    }),
    Spec("decoders.image_crop", JPEGS, {"crop_w": 9, "crop_h": 7}, name="decoders.image_crop_wh", compare=LOSSY,
         grid={
             "crop_w": [PerSample(f32(3), f32(5), f32(16))],
             "crop_h": [PerSample(f32(4), f32(11), f32(16))],
             "crop_pos_x": [0.25],
             "crop_d": [3.0], "crop_pos_z": [0.5],
         }),
    Spec("decoders.image_slice", JPEGS + (Data([f32(0.1, 0.2)] * 3), Data([f32(0.5, 0.5)] * 3)), {},
         compare=LOSSY, grid={
             "@input": {"pixels": JPEGS + (Data([f32(2, 3)] * 3), Data([f32(8, 6)] * 3)),
                        "png": (encoded(".png"), Data([f32(0.1, 0.2)] * 3), Data([f32(0.5, 0.5)] * 3)),
                        "per_sample_windows": JPEGS + (Data([f32(0, 0), f32(0.5, 0.5), f32(0.2, 0.1)]),
                                                       Data([f32(1, 1), f32(0.5, 0.25), f32(0.3, 0.6)]))},
             **DECODER_COMMON,
             "normalized_anchor": [False], "normalized_shape": [False],
             "axis_names": ["HW"], "axes": [(0, 1), PerSample(np.int32([1, 0]), np.int32([0, 1]), np.int32([1, 0]))],
         }),
    Spec("decoders.image_slice", JPEGS, {"start": (2, 3), "end": (12, 9)}, name="decoders.image_slice_args",
         compare=LOSSY, grid={
             "start": [PerSample(np.int32([0, 0]), np.int32([1, 2]), np.int32([4, 4]))],
             "end": [PerSample(np.int32([5, 5]), np.int32([10, 12]), np.int32([16, 16]))],
             "shape": [(4, 6), PerSample(np.int32([3, 3]), np.int32([2, 5]), np.int32([8, 8]))],
             "rel_start": [(0.25, 0.5), PerSample(f32(0, 0), f32(0.5, 0.5), f32(0.25, 0.75))],
             "rel_end": [(0.75, 0.75), PerSample(f32(1, 1), f32(0.75, 0.5), f32(0.5, 1))],
             "rel_shape": [(0.5, 0.25), PerSample(f32(1, 1), f32(0.25, 0.5), f32(0.5, 0.5))],
             "axis_names": ["HW"],
         }),
    # random windows: the crops' sizes vary, the smooth pictures' statistics stay close
    Spec("decoders.image_random_crop", (encoded(".jpg", sizes=((40, 48), (36, 36), (44, 30))),), {},
         compare=Stats(0, 255, mean_tol=40, std_tol=30, shapes=False), grid={
             "@input": {"png": (encoded(".png", sizes=((40, 48), (36, 36), (44, 30))),)},
             **{name: values for name, values in DECODER_COMMON.items() if name != "dtype"},
             "dtype": ["types.UINT8"],
             "random_area": [(0.5, 0.5), (0.9, 1.0), 0.3],
             "random_aspect_ratio": [(1.0, 1.0), (0.5, 2.0)],
             "num_attempts": [1, 50],
         }),
    *[Spec(op, JPEGS, {"use_fast_idct": True, **args}, name=f"{op}_fast_idct", compare=FAST_IDCT)
      for op, args in [("decoders.image", {}), ("decoders.image_crop", {"crop": (8, 8)}),
                       ("decoders.image_slice", {"rel_start": (0.25, 0.25), "rel_shape": (0.5, 0.5)})]],
    Spec("decoders.image_random_crop", JPEGS, {"use_fast_idct": True}, name="decoders.image_random_crop_fast_idct",
         compare=Stats(0, 255, mean_tol=40, std_tol=30, shapes=False)),
    Spec("peek_image_shape", JPEGS, {}, grid={
        "@input": FORMATS,
        "dtype": ["types.INT32", "types.UINT64", "types.FLOAT", "types.INT8"],
        "image_type": ["types.GRAY", "types.RGB", "types.ANY_DATA", "types.YCbCr"],
        "adjust_orientation": [False],
    }),
]
