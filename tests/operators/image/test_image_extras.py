"""clahe and debayer: against references written here (bilinear demosaicing in numpy; CLAHE's
channels and lightness through OpenCV's CLAHE and Lab conversion) and against DALI itself (values,
types, layouts, and what each refuses)."""
import contextlib

import cv2
import numpy as np
import pytest
from conftest import noise_image, smooth_image

from penstock.compat import dali as penstock_dali


def run(library, operator, data, layout="HWC", per_sample=None, **arguments):
    fn = library.fn
    for part in operator.split("."):
        fn = getattr(fn, part)

    @library.pipeline_def(batch_size=len(data), num_threads=1, device_id=None)
    def pipe():
        extra = {name: library.fn.external_source(source=[batch], cycle=True) for name, batch in (per_sample or {}).items()}
        return fn(library.fn.external_source(source=[data], cycle=True, layout=layout), **arguments, **extra)
    built = pipe()
    built.build()
    (out,) = built.run()
    return out.layout(), [np.array(out[index]) for index in range(len(data))]


# ---- clahe ------------------------------------------------------------------------------------
def opencv_clahe(plane, clip_limit, tiles_x, tiles_y):
    return cv2.createCLAHE(clipLimit=clip_limit, tileGridSize=(tiles_x, tiles_y)).apply(np.ascontiguousarray(plane))


@pytest.mark.parametrize("channels, luma_only", [(1, True), (3, False), (3, True)])
def test_clahe_as_opencv(channels, luma_only):
    images = [smooth_image(67, 83, channels, seed=1), noise_image(40, 32, channels, seed=2)]
    layout, arrays = run(penstock_dali, "clahe", images, tiles_x=4, tiles_y=3, clip_limit=2.5, luma_only=luma_only)
    assert layout == "HWC"
    for array, image in zip(arrays, images):
        if channels == 3 and luma_only:  # the lightness of CIE Lab, the colour kept
            lab = cv2.cvtColor(image, cv2.COLOR_RGB2Lab)
            lab[:, :, 0] = opencv_clahe(lab[:, :, 0], 2.5, 4, 3)
            expected = cv2.cvtColor(lab, cv2.COLOR_Lab2RGB)
        else:
            expected = np.stack([opencv_clahe(image[:, :, c], 2.5, 4, 3) for c in range(channels)], axis=2)
        assert array.dtype == np.uint8 and np.array_equal(array, expected)


@pytest.mark.parametrize("image, layout, arguments, message", [
    (np.zeros((8, 8, 1), np.uint16), "HWC", {}, "uint8"),
    (np.zeros((8, 8, 2), np.uint8), "HWC", {}, "1 or 3 channels"),
    (np.zeros((8, 8), np.uint8), "HW", {}, "HWC"),
    (np.zeros((8, 8, 1), np.uint8), "HWC", {"tiles_x": 0}, "tiles_x"),
])
def test_clahe_refuses(image, layout, arguments, message):
    with pytest.raises(Exception, match=message):
        run(penstock_dali, "clahe", [image], layout, **{"tiles_x": 2, "tiles_y": 2, "clip_limit": 2.0, **arguments})


# ---- debayer ----------------------------------------------------------------------------------
def bayer_mosaic(rgb, blue_position):
    """A Bayer sensor image of an RGB image: blue at ``blue_position`` of the 2x2 tile that starts at
    the second row and column, red diagonally opposite, green elsewhere."""
    y, x = np.mgrid[:rgb.shape[0], :rgb.shape[1]]
    by, bx = blue_position
    blue = ((y - 1) % 2 == by) & ((x - 1) % 2 == bx)
    red = ((y - 1) % 2 != by) & ((x - 1) % 2 != bx)
    return np.where(blue, rgb[:, :, 2], np.where(red, rgb[:, :, 0], rgb[:, :, 1])), red, blue


def bilinear_demosaic(mosaic, red, blue):
    """Each missing colour the mean of its nearest sensors of that colour (the 3x3 neighbourhood),
    for the pixels away from the border."""
    out = np.zeros(mosaic.shape + (3,))
    for channel, mask in enumerate((red, ~(red | blue), blue)):
        values = np.pad(np.where(mask, mosaic, 0).astype(np.float64), 1)
        counts = np.pad(mask.astype(np.float64), 1)
        height, width = mosaic.shape
        total = sum(values[dy:dy + height, dx:dx + width] for dy in range(3) for dx in range(3)
                    if channel == 1 and abs(dy - 1) + abs(dx - 1) <= 1 or channel != 1)
        count = sum(counts[dy:dy + height, dx:dx + width] for dy in range(3) for dx in range(3)
                    if channel == 1 and abs(dy - 1) + abs(dx - 1) <= 1 or channel != 1)
        out[:, :, channel] = np.where(mask, mosaic, total / np.maximum(count, 1))
    return out[1:-1, 1:-1]


@pytest.mark.parametrize("blue_position", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_debayer_bilinear_as_numpy(blue_position, dtype):
    rgb = smooth_image(20, 26, 3, seed=3).astype(dtype) * (200 if dtype == np.uint16 else 1)
    mosaic, red, blue = bayer_mosaic(rgb, blue_position)
    layout, (array,) = run(penstock_dali, "debayer", [mosaic.astype(dtype)], "HW", blue_position=blue_position)
    assert layout == "HWC" and array.dtype == dtype and array.shape == (20, 26, 3)
    expected = bilinear_demosaic(mosaic, red, blue)
    assert np.abs(array[1:-1, 1:-1].astype(np.float64) - expected).max() <= 1  # integer rounding


def test_debayer_sequences_per_sample_positions_and_gray():
    frames = np.stack([bayer_mosaic(smooth_image(8, 10, 3, seed=s), (1, 0))[0] for s in range(3)]).astype(np.uint8)
    layout, (array,) = run(penstock_dali, "debayer", [frames], "FHW", blue_position=[1, 0])
    assert layout == "FHWC" and array.shape == (3, 8, 10, 3)
    for frame, out in zip(frames, array):
        assert np.array_equal(out, cv2.cvtColor(frame, cv2.COLOR_BayerGR2RGB))
    positions = [np.array([0, 1], np.int32), np.array([1, 1], np.int32)]
    _, arrays = run(penstock_dali, "debayer", [frames[0], frames[1]], "HW", per_sample={"blue_position": positions},
                    algorithm="GRAY_OCV")
    assert np.array_equal(arrays[0][:, :, 0], cv2.cvtColor(frames[0], cv2.COLOR_BayerGB2GRAY))
    assert np.array_equal(arrays[1][:, :, 0], cv2.cvtColor(frames[1], cv2.COLOR_BayerRG2GRAY))


@pytest.mark.parametrize("image, layout, arguments, message", [
    (np.zeros((6, 8), np.float32), "HW", {}, "uint8 or uint16"),
    (np.zeros((6, 8), np.uint16), "HW", {"algorithm": "vng_ocv"}, "uint8 images only"),
    (np.zeros((5, 8), np.uint8), "HW", {}, "even"),
    (np.zeros((6, 8, 3), np.uint8), "HWC", {}, "single-channel"),
    (np.zeros((6, 8), np.uint8), "HW", {"blue_position": [0, 2]}, "blue_position"),
    (np.zeros((6, 8), np.uint8), "HW", {"algorithm": "default_npp"}, "GPU"),
    (np.zeros((6, 8), np.uint8), "CHW", {}, "layout"),
])
def test_debayer_refuses(image, layout, arguments, message):
    with pytest.raises(Exception, match=message):
        run(penstock_dali, "debayer", [image], layout, **{"blue_position": [0, 0], **arguments})


# ---- against DALI ------------------------------------------------------------------------------
@pytest.mark.parametrize("operator, images, layout, arguments", [
    ("clahe", [smooth_image(67, 83, 1, seed=1)], "HWC", {"tiles_x": 4, "tiles_y": 3, "clip_limit": 2.0}),
    ("clahe", [smooth_image(40, 50, 3, seed=2), noise_image(24, 30, 3)], "HWC",
     {"tiles_x": 8, "tiles_y": 8, "clip_limit": 3.0}),
    ("clahe", [smooth_image(40, 50, 3, seed=2)], "HWC", {"tiles_x": 2, "tiles_y": 5, "clip_limit": 1.5,
                                                         "luma_only": False, "bins": 128}),
    ("debayer", [noise_image(6, 8, 1)[:, :, 0]], "HW", {"blue_position": 1}),
    ("debayer", [noise_image(6, 8, 1)], "HWC", {"blue_position": [0, 1], "algorithm": "edgeaware_ocv"}),
    ("debayer", [noise_image(12, 8, 1)[:, :, 0].astype(np.uint16) * 250], None, {"blue_position": [1, 0]}),
    ("debayer", [noise_image(6, 8, 2).transpose(2, 0, 1).copy()], "FHW", {"blue_position": [0, 0],
                                                                          "algorithm": "vng_ocv"}),
    ("experimental.debayer", [noise_image(6, 8, 1)[:, :, 0]], "HW", {"blue_position": [1, 1],
                                                                     "algorithm": "gray_ocv"}),
])
def test_same_as_dali(operator, images, layout, arguments):
    dali = pytest.importorskip("nvidia.dali")
    deprecated = pytest.warns(DeprecationWarning) if operator.startswith("experimental.") else contextlib.nullcontext()
    with deprecated:  # DALI's own warning that experimental.debayer is now debayer
        expected_layout, expected = run(dali, operator, images, layout, **arguments)
    got_layout, got = run(penstock_dali, operator, images, layout, **arguments)
    assert got_layout == expected_layout
    for array, want in zip(got, expected):
        assert array.dtype == want.dtype and np.array_equal(array, want)


def test_per_sample_blue_positions_as_dali():
    dali = pytest.importorskip("nvidia.dali")
    images = [noise_image(6, 8, 1, seed=s)[:, :, 0] for s in range(4)]
    positions = [np.array(p, np.int32) for p in ((0, 0), (0, 1), (1, 0), (1, 1))]
    expected = run(dali, "debayer", images, "HW", per_sample={"blue_position": positions})[1]
    got = run(penstock_dali, "debayer", images, "HW", per_sample={"blue_position": positions})[1]
    assert all(np.array_equal(a, b) for a, b in zip(got, expected))


# ---- older names (compat.dali.deprecated) --------------------------------------------------------
def older_names(library):
    """fast_resize_crop_mirror and transform_translation, by their fn and ops names, beside the current
    operators they stand for."""
    fn, ops = library.fn, library.ops
    image = noise_image(60, 80, 3)

    @library.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        images = fn.external_source(source=[[image]], cycle=True, layout="HWC")
        return (fn.fast_resize_crop_mirror(images, size=(30, 40), crop=(20, 20), mirror=1),
                ops.FastResizeCropMirror(size=(30, 40), crop=(20, 20))(images),
                fn.resize_crop_mirror(images, size=(30, 40), crop=(20, 20), mirror=1, antialias=False),
                fn.transform_translation(offset=(2.0, 3.0)),
                ops.TransformTranslation(offset=(1.0, -1.0), reverse_order=True)(fn.transforms.scale(scale=(2.0, 2.0))))
    built = pipe()
    built.build()
    return [np.array(batch[0]) for batch in built.run()]


def test_older_names_are_the_current_operators_with_their_defaults():
    fast, fast_ops, current, translation, reversed_translation = older_names(penstock_dali)
    assert np.array_equal(fast, current)  # no antialiasing by default
    assert np.array_equal(fast_ops, current[:, ::-1])
    assert np.array_equal(translation, np.float32([[1, 0, 2], [0, 1, 3]]))
    # reverse_order: the translation first, then the scale
    assert np.array_equal(reversed_translation, np.float32([[2, 0, 2], [0, 2, -2]]))


def test_older_names_as_dali():
    dali = pytest.importorskip("nvidia.dali")
    with pytest.warns(DeprecationWarning):  # DALI's own warnings that the names are deprecated
        expected = older_names(dali)
    for array, want in zip(older_names(penstock_dali), expected):
        assert array.dtype == want.dtype and array.shape == want.shape
        assert np.abs(array.astype(np.float64) - want).max() <= 1  # resampling rounds within a grey level


def test_debayer_errors_at_run_name_the_operator():
    with pytest.raises(Exception, match="debayer: the height and width of Bayer images must be even, got 20 x 15"):
        run(penstock_dali, "experimental.debayer", [np.zeros((20, 15), np.uint8)], layout="HW", blue_position=[0, 0])
