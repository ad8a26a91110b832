"""Image decoders against Pillow: every format, every output type, the cropping decoders, and the
errors a user sees for bad files."""
from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
from conftest import (LOSSLESS_FORMATS, SEED, assert_close, check_operator, encode, noise_image, pillow_decode,
                      read_bytes, run_operator, smooth_image)

import penstock
from penstock import fn, pipeline_def, types
from penstock.operators.decoders.images import random_crop_window

# Two JPEG decoders (both IDCTs are 'accurate', upsampling may differ) agree to a few levels.
JPEG_MAX_ABS, JPEG_MEAN_ABS = 4, 0.5
# RGB -> gray: OpenCV and Pillow both use the BT.601 weights, with different fixed-point rounding.
GRAY_MAX_ABS = 1

OUTPUT_TYPES = {types.RGB: ("RGB", slice(None)), types.BGR: ("RGB", slice(None, None, -1)),
                types.GRAY: ("L", slice(None))}


def pillow_reference(data: bytes, output_type) -> np.ndarray:
    mode, channel_order = OUTPUT_TYPES[output_type]
    return pillow_decode(data, mode)[:, :, channel_order]


def jpeg_batch(count: int = 3, quality: int = 90, **save_args) -> tuple[list[np.ndarray], list[bytes]]:
    """Encoded JPEGs of different sizes (the operator's input) and their bytes (Pillow's input)."""
    encoded = [encode(smooth_image(30 + 17 * i, 70 - 11 * i, seed=i), "JPEG", quality=quality, **save_args)
               for i in range(count)]
    return [np.frombuffer(data, np.uint8) for data in encoded], encoded


# ---- decoders.image ---------------------------------------------------------------------------------
@pytest.mark.parametrize("output_type", list(OUTPUT_TYPES))
@pytest.mark.parametrize("subsampling", [0, 2])  # 4:4:4 and 4:2:0
def test_jpeg_matches_pillow(output_type, subsampling):
    samples, _ = jpeg_batch(subsampling=subsampling)
    check_operator(fn.decoders.image, samples, lambda data: pillow_reference(data.tobytes(), output_type),
                   max_abs=JPEG_MAX_ABS, mean_abs=JPEG_MEAN_ABS, out_dtype=np.uint8, output_type=output_type)


def test_grayscale_jpeg_decodes_to_three_equal_channels():
    gray = smooth_image(33, 47, channels=1, seed=4)
    data = encode(gray, "JPEG", quality=90)
    [rgb] = run_operator(fn.decoders.image, [np.frombuffer(data, np.uint8)], output_type=types.RGB)
    assert rgb.shape == (33, 47, 3)
    assert_close(rgb, np.repeat(pillow_decode(data, "L"), 3, axis=2), JPEG_MAX_ABS, JPEG_MEAN_ABS)


@pytest.mark.parametrize("name", sorted(LOSSLESS_FORMATS))
@pytest.mark.parametrize("output_type", list(OUTPUT_TYPES))
def test_lossless_formats_decode_exactly(image_files, name, output_type):
    path, written = image_files[name]
    mode, channel_order = OUTPUT_TYPES[output_type]
    if output_type is types.GRAY:
        expected, tolerance = pillow_decode(read_bytes(path).tobytes(), "L"), GRAY_MAX_ABS
    else:
        expected, tolerance = written[:, :, channel_order], 0
    [decoded] = run_operator(fn.decoders.image, [read_bytes(path)], output_type=output_type)
    assert decoded.dtype == np.uint8
    assert_close(decoded, expected, max_abs=tolerance, where=name)


def test_lossless_ragged_batch_of_mixed_formats():
    images = [noise_image(20 + 9 * i, 45 - 7 * i, seed=i) for i in range(len(LOSSLESS_FORMATS))]
    samples = [np.frombuffer(encode(image, fmt, **save_args), np.uint8)
               for image, (fmt, save_args) in zip(images, LOSSLESS_FORMATS.values())]
    decoded = run_operator(fn.decoders.image, samples)
    for image, output in zip(images, decoded):
        np.testing.assert_array_equal(output, image)


def test_png_alpha_is_dropped_and_16_bit_is_scaled_to_8_bit():
    rgba = noise_image(21, 34, channels=4, seed=7)
    deep = smooth_image(21, 34, seed=8).astype(np.uint16) * 257  # 16-bit values v * 257 mean 8-bit v
    deep_png = cv2.imencode(".png", deep[:, :, ::-1])[1]
    decoded_rgba, decoded_deep = run_operator(
        fn.decoders.image, [np.frombuffer(encode(rgba, "PNG"), np.uint8), deep_png.ravel()])
    np.testing.assert_array_equal(decoded_rgba, rgba[:, :, :3])
    np.testing.assert_array_equal(decoded_deep, (deep // 257).astype(np.uint8))


@pytest.mark.parametrize("output_type", list(OUTPUT_TYPES))
def test_gif_decodes_first_frame(image_files, output_type):
    path, first_frame = image_files["gif"]
    [decoded] = run_operator(fn.decoders.image, [read_bytes(path)], output_type=output_type)
    expected = pillow_reference(read_bytes(path).tobytes(), output_type)  # Pillow opens at frame 0
    assert_close(decoded, expected, max_abs=GRAY_MAX_ABS if output_type is types.GRAY else 0)
    if output_type is types.RGB:
        np.testing.assert_array_equal(decoded, first_frame)


# ---- files through readers.file: every format, and errors naming the path and the reason ---------------------
def decode_files(paths: list[str]) -> list[np.ndarray]:
    @pipeline_def(batch_size=len(paths), num_threads=2, device_id=None, seed=SEED)
    def pipeline():
        encoded, _ = fn.readers.file(files=paths)
        return fn.decoders.image(encoded)

    pipe = pipeline()
    try:
        return [np.array(sample) for sample in pipe.run()[0]]
    finally:
        pipe.close()


def test_every_format_decodes_from_files(image_files):
    names = sorted(image_files)
    decoded = decode_files([image_files[name][0] for name in names])
    for name, output in zip(names, decoded):
        path, written = image_files[name]
        if name == "jpeg":
            assert_close(output, pillow_decode(read_bytes(path).tobytes()), JPEG_MAX_ABS, JPEG_MEAN_ABS, where=name)
        else:
            np.testing.assert_array_equal(output, written, err_msg=name)


def _bad_files():
    image = smooth_image(64, 80, seed=3)
    jpeg, png = encode(image, "JPEG", quality=90), encode(image, "PNG")
    noise = np.random.default_rng(SEED).integers(0, 256, 500, dtype=np.uint8).tobytes()
    return {
        "empty.jpg": (b"", "empty"),
        "truncated.jpg": (jpeg[:len(jpeg) // 2], "truncated"),
        "truncated_header.jpg": (jpeg[:20], "corrupt"),
        "truncated.png": (png[:len(png) // 2], "truncated"),
        "noise.jpg": (noise, "not a supported image format"),
    }


@pytest.mark.parametrize("name", sorted(_bad_files()))
def test_bad_file_error_names_path_and_reason(tmp_path, name):
    data, reason = _bad_files()[name]
    good = tmp_path / "good.png"
    good.write_bytes(encode(smooth_image(20, 20), "PNG"))
    bad = tmp_path / name
    bad.write_bytes(data)
    with pytest.raises(penstock.PipelineError) as error:
        decode_files([str(good), str(bad)])
    message = str(error.value)
    assert str(bad) in message and "decoders.image" in message
    assert reason in message.lower(), message


def test_dali_cache_arguments_are_accepted_and_change_nothing():
    samples, encoded = jpeg_batch(2)
    cached = run_operator(fn.decoders.image, samples, cache_size=2000, cache_type="threshold", cache_threshold=1,
                          cache_debug=False, cache_batch_copy=True, use_chunk_allocator=True)
    for image, plain in zip(cached, run_operator(fn.decoders.image, samples)):
        np.testing.assert_array_equal(image, plain)


def test_non_byte_input_is_a_clear_error():
    with pytest.raises(penstock.PipelineError, match="1-D uint8"):
        run_operator(fn.decoders.image, [np.zeros((4, 4, 3), np.uint8)])


# ---- peek_image_shape ------------------------------------------------------------------------------
def oriented(image: np.ndarray, fmt: str, orientation: int) -> np.ndarray:
    """``image`` encoded by Pillow as ``fmt`` with an EXIF orientation (1 to 8)."""
    from PIL import Image
    exif = Image.Exif()
    exif[0x0112] = orientation
    return np.frombuffer(encode(image, fmt, exif=exif.tobytes()), np.uint8)


@pytest.mark.parametrize("orientation", [1, 3, 6, 8])
def test_peeked_shape_is_the_decoded_shape_whatever_the_format_and_orientation(orientation):
    """Against Pillow's exif_transpose (the shape as displayed) and against the decoder itself, whose
    output shape it promises: JPEG, PNG, WebP and TIFF follow adjust_orientation (as DALI's)."""
    from PIL import Image, ImageOps
    import io
    formats = ["JPEG", "PNG", "WEBP", "TIFF", "BMP"]
    sizes = [(20 + 3 * index, 41 - index) for index in range(len(formats))]
    samples = [oriented(smooth_image(*size, seed=index), fmt, orientation)
               for index, (fmt, size) in enumerate(zip(formats, sizes))]
    for adjust in (True, False):
        for output_type in (types.RGB, types.GRAY):
            peeked = run_operator(fn.peek_image_shape, samples, adjust_orientation=adjust, image_type=output_type)
            decoded = run_operator(fn.decoders.image, samples, adjust_orientation=adjust, output_type=output_type)
            for fmt, sample, size, shape, image in zip(formats, samples, sizes, peeked, decoded):
                assert shape.dtype == np.int64 and tuple(shape) == image.shape, (fmt, adjust, output_type)
                with Image.open(io.BytesIO(sample.tobytes())) as pillow:
                    shown = (ImageOps.exif_transpose(pillow).height, ImageOps.exif_transpose(pillow).width) \
                        if adjust else size
                    expected = (*shown, output_type.channels)
                if fmt != "BMP":  # BMP has no EXIF: Pillow saves it without the orientation
                    assert tuple(shape) == expected, (fmt, adjust, output_type)


def test_peek_image_shape_takes_dali_names_and_types():
    from penstock.compat.dali import fn as dali_fn, ops as dali_ops
    sample = np.frombuffer(encode(smooth_image(12, 30), "PNG"), np.uint8)
    for operator in (dali_fn.peek_image_shape, dali_fn.experimental.peek_image_shape):
        [shape] = run_operator(operator, [sample], dtype=types.INT32)
        assert shape.dtype == np.int32 and shape.tolist() == [12, 30, 3]
    [shape] = run_operator(fn.peek_image_shape, [sample], type=types.FLOAT)  # DALI's older name of dtype
    assert shape.dtype == np.float32 and shape.tolist() == [12.0, 30.0, 3.0]
    assert dali_ops.PeekImageShape is not None and dali_ops.experimental.PeekImageShape is not None


def test_peek_image_shape_errors_name_the_operator_and_the_file(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "noise.jpg").write_bytes(bytes(range(256)) * 4)

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def peek():
        jpegs, _ = fn.readers.file(file_root=str(tmp_path))
        return fn.peek_image_shape(jpegs)

    with pytest.raises(penstock.PipelineError) as error:
        pipe = peek()
        pipe.build()
        pipe.run()
    assert "peek_image_shape" in str(error.value) and "noise.jpg" in str(error.value)
    with pytest.raises(penstock.PipelineError, match="1-D uint8"):
        run_operator(fn.peek_image_shape, [np.zeros((4, 4, 3), np.uint8)])
    with pytest.raises(ValueError, match="peek_image_shape.*dtype"):
        run_operator(fn.peek_image_shape, [np.zeros(4, np.uint8)], dtype=types.INT8)


# ---- decoders.image_random_crop ----------------------------------------------------------------------
def window_bounds_hold(height: int, width: int, image_area: int, area_range, aspect_range) -> bool:
    """Whether some unrounded (area, aspect) within the ranges rounds to this window."""
    low_area = (height - 0.5) * (width - 0.5) / image_area
    high_area = (height + 0.5) * (width + 0.5) / image_area
    low_ratio, high_ratio = (width - 0.5) / (height + 0.5), (width + 0.5) / (height - 0.5)
    return (low_area <= area_range[1] and high_area >= area_range[0]
            and low_ratio <= aspect_range[1] and high_ratio >= aspect_range[0])


def locate_window(full: np.ndarray, crop: np.ndarray) -> tuple[tuple[int, int], float, float]:
    """The (top, left) where ``crop`` best matches a window of ``full`` (least mean abs difference),
    with that difference and the second least one."""
    height, width = crop.shape[:2]
    crop = crop.astype(np.int16)
    scores = {(top, left): float(np.abs(full[top:top + height, left:left + width] - crop).mean())
              for top in range(full.shape[0] - height + 1) for left in range(full.shape[1] - width + 1)}
    ranked = sorted(scores, key=scores.get)
    return ranked[0], scores[ranked[0]], scores[ranked[1]] if len(ranked) > 1 else math.inf


# A 96x96 noise JPEG: every window with area <= 0.5 and aspect ratio within [3/4, 4/3] fits in it, so
# the first attempt always succeeds and no fallback hides a wrong window; noise makes windows unique.
CROP_AREA, CROP_RATIO = (0.1, 0.5), (0.75, 4 / 3)


@pytest.fixture(scope="module")
def noise_jpeg() -> bytes:
    return encode(noise_image(96, 96, seed=11), "JPEG", quality=95)


def random_crops(data: bytes, count: int = 16, iterations: int = 4, seed: int = SEED, **kwargs) -> list:
    kwargs = {"random_area": CROP_AREA, "random_aspect_ratio": CROP_RATIO, **kwargs}
    return run_operator(fn.decoders.image_random_crop, [np.frombuffer(data, np.uint8)] * count,
                        iterations=iterations, seed=seed, **kwargs)


def test_random_crop_windows_respect_area_and_aspect_bounds(noise_jpeg):
    crops = random_crops(noise_jpeg)
    shapes = {crop.shape for crop in crops}
    assert len(shapes) > 20, "the windows should vary"
    for height, width, channels in shapes:
        assert channels == 3
        assert window_bounds_hold(height, width, 96 * 96, CROP_AREA, CROP_RATIO), (height, width)
    # the draws cover the ranges: both small and large, both tall and wide windows appear
    areas = [h * w / 96 ** 2 for h, w, _ in shapes]
    ratios = [w / h for h, w, _ in shapes]
    assert min(areas) < 0.2 and max(areas) > 0.4
    assert min(ratios) < 0.85 and max(ratios) > 1.15


def test_random_crop_pixels_are_a_window_of_the_full_decode(noise_jpeg):
    full = pillow_decode(noise_jpeg).astype(np.int16)
    crops = random_crops(noise_jpeg, count=8, iterations=1)
    positions = set()
    for crop in crops:
        (top, left), _, second = locate_window(full, crop)
        # noise: the right window matches within JPEG tolerance, any other is tens of levels off
        assert second > 10 * JPEG_MEAN_ABS, f"a {crop.shape} crop matches several windows"
        height, width = crop.shape[:2]
        assert_close(crop, full[top:top + height, left:left + width], JPEG_MAX_ABS, JPEG_MEAN_ABS,
                     where=f"window at ({top}, {left})")
        positions.add((top, left))
    assert len(positions) > 1, "windows should be placed at random"


def test_random_crop_is_deterministic_for_a_seed(noise_jpeg):
    first = random_crops(noise_jpeg, count=6, iterations=2, seed=7)
    again = random_crops(noise_jpeg, count=6, iterations=2, seed=7, num_threads=1)
    other = random_crops(noise_jpeg, count=6, iterations=2, seed=8)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert [c.shape for c in first] != [c.shape for c in other]


def test_random_crop_window_function_with_fixed_draws():
    # area 0.25 of 100x200 = 5000 px, ratio exp(log 0.5 + 0.5 * (log 2 - log 0.5)) = 1 -> 71x71
    draws = np.array([[(0.25 - 0.1) / (0.4 - 0.1), 0.5, 0.0, 1.0 - 1e-9]])  # random_area (0.1, 0.4)
    top, left, height, width = random_crop_window(100, 200, draws, (0.5, 2.0), (0.1, 0.4))
    assert (height, width) == (71, 71)
    assert (top, left) == (0, 200 - 71)
    # ratio draw 1 -> aspect 2: width = sqrt(5000 * 2) = 100, height = 50; position in the middle
    draws = np.array([[(0.25 - 0.1) / 0.3, 1.0, 0.5, 0.5]])
    assert random_crop_window(100, 200, draws, (0.5, 2.0), (0.1, 0.4)) == (25, 50, 50, 100)


def test_random_crop_window_skips_windows_that_do_not_fit_then_falls_back():
    # first attempt: area 1.0 at aspect 2 does not fit a 100x100 image; the second (area 0.25, aspect 1) does
    draws = np.array([[1.0, 1.0, 0.0, 0.0], [0.25, 0.5, 0.0, 0.0]])
    assert random_crop_window(100, 100, draws, (0.5, 2.0), (0.0, 1.0)) == (0, 0, 50, 50)
    # no attempt fits: the whole image clamped to the aspect range, centred
    assert random_crop_window(100, 400, draws[:1], (0.5, 2.0), (0.0, 1.0)) == (0, 100, 100, 200)
    assert random_crop_window(400, 100, draws[:1], (0.5, 2.0), (0.0, 1.0)) == (100, 0, 200, 100)
    assert random_crop_window(100, 150, draws[:1], (0.5, 2.0), (0.0, 1.0)) == (0, 0, 100, 150)


def test_random_crop_window_draws_stay_in_the_image():
    rng = np.random.default_rng(SEED)
    for _ in range(500):
        height, width = (int(v) for v in rng.integers(1, 300, 2))
        top, left, crop_height, crop_width = random_crop_window(height, width, rng.random((10, 4)),
                                                                (3 / 4, 4 / 3), (0.08, 1.0))
        assert 0 <= top and 0 <= left and 1 <= crop_height and 1 <= crop_width
        assert top + crop_height <= height and left + crop_width <= width


# ---- decoders.image_crop and decoders.image_slice ---------------------------------------------------------
@pytest.fixture(scope="module")
def jpegs():
    """Encoded smooth JPEGs of different sizes and their full decodes by Pillow."""
    samples, encoded = jpeg_batch(count=3, quality=95)
    return samples, [pillow_decode(data) for data in encoded]


def assert_window(actual: np.ndarray, expected: np.ndarray) -> None:
    # a window shifted by one pixel would be several levels off on average, far beyond the tolerance
    assert_close(actual, expected, JPEG_MAX_ABS, JPEG_MEAN_ABS)


def anchor(size: int, crop: int, position: float) -> int:
    """DALI's crop anchor: round(position * (size - crop)), halves up."""
    return int(math.floor(position * (size - crop) + 0.5))


@pytest.mark.parametrize("pos_x,pos_y", [(0.5, 0.5), (0.0, 0.0), (1.0, 1.0), (0.3, 0.8)])
def test_image_crop_is_a_window_of_the_full_decode(jpegs, pos_x, pos_y):
    samples, full = jpegs
    crops = run_operator(fn.decoders.image_crop, samples, crop=(20, 25), crop_pos_x=pos_x, crop_pos_y=pos_y)
    for image, crop in zip(full, crops):
        top, left = anchor(image.shape[0], 20, pos_y), anchor(image.shape[1], 25, pos_x)
        assert_window(crop, image[top:top + 20, left:left + 25])


def test_image_crop_larger_than_the_image_is_an_error(jpegs):
    with pytest.raises(penstock.PipelineError, match=r"decoders.image_crop.*outside"):
        run_operator(fn.decoders.image_crop, jpegs[0], crop_h=200, crop_w=10)


def round_half_up(value: float) -> int:
    return int(math.floor(value + 0.5))


def slice_window(image: np.ndarray, start, end) -> np.ndarray:
    """DALI's slice: the start and the end (y, x) in pixels are rounded, halves up."""
    top, left = (round_half_up(v) for v in start)
    bottom, right = (round_half_up(v) for v in end)
    return image[top:bottom, left:right]


# window(h, w) -> (start, end) as (y, x) in pixels; the arguments are (x, y) unless axis_names say otherwise
# (DALI's default 'WH'); the relative windows end exactly at the image's edge
@pytest.mark.parametrize("kwargs,window", [
    ({"rel_start": (0.75, 0.5), "rel_shape": (0.25, 0.5)}, lambda h, w: ((h * 0.5, w * 0.75), (h, w))),
    ({"rel_start": (0.1, 0.25), "rel_shape": (0.7, 0.3)}, lambda h, w: ((h * 0.25, w * 0.1), (h * 0.55, w * 0.8))),
    ({"rel_start": (0.1, 0.25), "rel_end": (0.8, 0.55)}, lambda h, w: ((h * 0.25, w * 0.1), (h * 0.55, w * 0.8))),
    ({"start": (5, 3), "shape": (12, 10)}, lambda h, w: ((3, 5), (13, 17))),
    ({"start": (5, 3), "end": (17, 13)}, lambda h, w: ((3, 5), (13, 17))),
    ({"end": (17, 13)}, lambda h, w: ((0, 0), (13, 17))),
    ({"start": (5, 3)}, lambda h, w: ((3, 5), (h, w))),
    ({"start": (3, 5), "shape": (10, 12), "axis_names": "HW"}, lambda h, w: ((3, 5), (13, 17))),
    ({"start": (3, 5), "shape": (10, 12), "axes": (0, 1)}, lambda h, w: ((3, 5), (13, 17))),
    ({"start": (4,), "shape": (9,), "axis_names": "W"}, lambda h, w: ((0, 4), (h, 13))),
    ({"rel_start": (0.5,), "rel_shape": (0.5,), "axes": (0,)}, lambda h, w: ((h * 0.5, 0), (h, w))),
])
def test_image_slice_is_a_window_of_the_full_decode(jpegs, kwargs, window):
    samples, full = jpegs
    slices = run_operator(fn.decoders.image_slice, samples, **kwargs)
    for image, cut in zip(full, slices):
        assert_window(cut, slice_window(image, *window(*image.shape[:2])))


def feed(batch):
    return fn.external_source(source=lambda: batch, batch=True)


def test_image_slice_takes_anchor_and_shape_as_inputs(jpegs):
    """(x, y) and (width, height); integer inputs are pixels, float inputs fractions of the image size unless
    normalized_anchor / normalized_shape are False (as in DALI)."""
    samples, full = jpegs
    starts = [np.array([2 * i, i], np.int32) for i in range(len(samples))]
    shapes = [np.array([9 + i, 8 + i], np.int32) for i in range(len(samples))]
    relative_starts = [np.array([0.25, 0.5], np.float32)] * len(samples)
    relative_shapes = [np.array([0.75, 0.5], np.float32)] * len(samples)
    pixel_starts = [np.array([3.0, 2.0], np.float32)] * len(samples)

    def slice_with_inputs(node):
        return (fn.decoders.image_slice(node, feed(starts), feed(shapes)),
                fn.decoders.image_slice(node, feed(relative_starts), feed(relative_shapes)),
                fn.decoders.image_slice(node, feed(pixel_starts), feed(relative_shapes), normalized_anchor=False))

    absolute, relative, mixed = run_operator(slice_with_inputs, samples)
    for image, cut, rel, pixel, start, shape in zip(full, absolute, relative, mixed, starts, shapes):
        assert_window(cut, slice_window(image, start[::-1], (start + shape)[::-1]))
        height, width = image.shape[:2]
        assert_window(rel, slice_window(image, (height * 0.5, width * 0.25), (height, width)))
        assert_window(pixel, slice_window(image, (2, 3), (2 + height * 0.5, 3 + width * 0.75)))


def test_image_slice_half_of_a_wide_image_is_its_right_half():
    """anchor=(0.5, 0.0), shape=(0.5, 1.0) on a 100x200 image: its right 100x100 half."""
    image = smooth_image(100, 200)
    data = np.frombuffer(encode(image, "JPEG", quality=95), np.uint8)
    [cut] = run_operator(lambda node: fn.decoders.image_slice(node, feed([np.array([0.5, 0.0], np.float32)]),
                                                              feed([np.array([0.5, 1.0], np.float32)])), [data])
    assert_window(cut, pillow_decode(data.tobytes())[:, 100:])


@pytest.mark.parametrize("make,message", [
    (lambda node: fn.decoders.image_slice(node), "give the window"),
    (lambda node: fn.decoders.image_slice(node, feed([np.zeros(2, np.float32)] * 3)), "not one input"),
    (lambda node: fn.decoders.image_slice(node, feed([np.zeros(2, np.float32)] * 3),
                                          feed([np.ones(2, np.float32)] * 3), start=(1, 1)), "given twice"),
    (lambda node: fn.decoders.image_slice(node, start=(1, 1), rel_start=(0.1, 0.1)), "'rel_start' and 'start' exclude"),
    (lambda node: fn.decoders.image_slice(node, end=(1, 1), rel_shape=(0.1, 0.1)), "'end' and 'rel_shape' exclude"),
    (lambda node: fn.decoders.image_slice(node, start=(1, 1), axes=(0, 1), axis_names="HW"),
     "'axes' and 'axis_names' exclude"),
])
def test_image_slice_refuses_a_window_given_twice_or_not_at_all(jpegs, make, message):
    with pytest.raises((ValueError, TypeError), match=message):
        run_operator(make, jpegs[0])


@pytest.mark.parametrize("make,message", [
    (lambda node: fn.decoders.image_slice(node, feed([np.array([0.1, 0.2, 0.0], np.float32)] * 3),
                                          feed([np.array([0.5, 0.5, 1.0], np.float32)] * 3)), "3 values for the 2"),
    (lambda node: fn.decoders.image_slice(node, feed([np.array([0, 0], np.int32)] * 3),
                                          feed([np.array([0.5, 0.5], np.float32)] * 3)), "same type"),
    (lambda node: fn.decoders.image_slice(node, start=(0, 0), shape=(500, 5)), "outside"),
    (lambda node: fn.decoders.image_slice(node, start=(0, 0), shape=(5, 5), axis_names="HC"), "'H' and 'W'"),
])
def test_image_slice_refuses_windows_it_cannot_cut(jpegs, make, message):
    with pytest.raises(Exception, match=message):
        run_operator(make, jpegs[0])


# ---- decoding smaller for the resize that follows -------------------------------------------------
@pytest.mark.parametrize("resize_args", [dict(resize_shorter=48), dict(resize_longer=40), dict(resize_x=50),
                                         dict(resize_x=37, resize_y=29)],
                         ids=["shorter", "longer", "one-side", "fixed"])
def test_decoding_smaller_for_a_resize_keeps_its_output(tmp_path, resize_args):
    """A decoder followed only by a resize decodes at 1/2 to 1/8 scale in the DCT domain, for
    aspect-keeping resizes as for fixed-size ones (a 12000 x 12000 photo resized to 256 decodes an
    eighth of its pixels): the output has the same shape as from the whole image (odd sizes
    included) and the pixels agree within the resampling tolerance (levels)."""
    folder = tmp_path / "a"
    folder.mkdir()
    for i, (height, width) in enumerate([(401, 603), (517, 389), (600, 600)]):
        (folder / f"{i}.jpg").write_bytes(encode(smooth_image(height, width, seed=i), "JPEG", quality=95))

    @pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=1)
    def resized(keep_decoded):
        jpegs, _ = fn.readers.file(file_root=str(tmp_path))
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        small = fn.resize(images, **resize_args)
        return (small, images) if keep_decoded else small

    shrinking, whole = resized(False), resized(True)  # a decoded output the user sees is never shrunk
    shrinking.build()
    whole.build()
    assert "DCT domain" in shrinking.describe() and "DCT domain" not in whole.describe()
    smalls, references = shrinking.run()[0], whole.run()[0]
    for i in range(3):
        # the scaled decode stands for a whole number of its pixels: up to half of one differs
        # from the whole image's extent (at 1/8 scale, 4 pixels of it)
        assert_close(smalls.at(i), references.at(i), max_abs=8, mean_abs=2.0, where=f"image {i}")
    shrinking.close()
    whole.close()


@pytest.mark.parametrize("progressive", [False, True])
def test_a_jpeg_cut_inside_its_frame_header_is_a_decode_error(progressive):
    from penstock.kernels import image_codecs
    data = np.frombuffer(encode(noise_image(16, 24), "JPEG", progressive=progressive), np.uint8)
    frame = next(at for at in range(2, len(data) - 1) if data[at] == 0xFF and data[at + 1] in (0xC0, 0xC2))
    for cut in range(frame + 4, frame + 12):
        with pytest.raises(image_codecs.DecodeError):
            image_codecs.decode(data[:cut].copy(), types.RGB)


def test_random_area_given_as_one_value_is_that_share_and_empty_ranges_are_refused():
    """DALI's single-or-pair arguments: random_area=a is [a, a]; ranges low > high are refused."""
    sample = np.frombuffer(encode(smooth_image(40, 60), "PNG"), np.uint8)
    windows = run_operator(fn.decoders.image_random_crop, [sample] * 4, random_area=0.3, random_aspect_ratio=1.0)
    for window in windows:
        side = math.sqrt(0.3 * 40 * 60)  # square windows of 30% of the area
        assert abs(window.shape[0] - side) <= 1 and abs(window.shape[1] - side) <= 1
    for name, values in (("random_area", (0.5, 0.3)), ("random_aspect_ratio", (2.0, 1.0))):
        with pytest.raises(ValueError, match=f"image_random_crop.*{name}.*empty"):
            run_operator(fn.decoders.image_random_crop, [sample], **{name: values})
