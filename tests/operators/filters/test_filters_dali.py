"""Filters, noise, morphology and colour operators against DALI itself: the same small programs run
under nvidia.dali and penstock.compat.dali give the same values, types, shapes and layouts, and both
refuse the same calls."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

dali = pytest.importorskip("nvidia.dali")
import nvidia.dali.fn as dali_fn  # noqa: E402
import nvidia.dali.types as dali_types  # noqa: E402

import penstock.compat.dali as compat  # noqa: E402
from penstock.compat.dali import fn as compat_fn  # noqa: E402
from penstock.compat.dali import types as compat_types  # noqa: E402

LIBRARIES = {"dali": (dali.pipeline_def, dali_fn, dali_types), "penstock": (compat.pipeline_def, compat_fn, compat_types)}


def outputs_of(library: str, build, batches, layout=None):
    """``build(fn, types, *inputs)``'s outputs under one library: per output, (samples, layout). The
    first input (the data) has ``layout``."""
    pipeline_def, fn, types = LIBRARIES[library]

    @pipeline_def(batch_size=len(batches[0]), num_threads=1, device_id=None, seed=3)
    def pipeline():
        data = fn.external_source(source=[batches[0]], cycle=True, layout=layout)
        return build(fn, types, data, *(fn.external_source(source=[batch], cycle=True) for batch in batches[1:]))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # DALI's experimental.* names
        pipe = pipeline()
        pipe.build()
        outputs = pipe.run()
    return [([np.array(output.at(i)) for i in range(len(output))], output.layout()) for output in outputs]


def assert_same(build, batches, layout=None, tolerance=0.0, relative=0.0):
    expected = outputs_of("dali", build, batches, layout)
    actual = outputs_of("penstock", build, batches, layout)
    for (dali_samples, dali_layout), (samples, sample_layout) in zip(expected, actual):
        assert sample_layout == dali_layout
        for dali_sample, sample in zip(dali_samples, samples):
            assert sample.dtype == dali_sample.dtype and sample.shape == dali_sample.shape
            np.testing.assert_allclose(sample.astype(np.float64), dali_sample.astype(np.float64), atol=tolerance,
                                       rtol=relative)


def assert_both_refuse(build, batches, layout=None):
    for library in LIBRARIES:
        with pytest.raises(Exception):
            outputs_of(library, build, batches, layout)


def images(dtype, shape=(9, 11, 3), count=2, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return [rng.uniform(0, 1, shape).astype(dtype) for _ in range(count)]
    info = np.iinfo(dtype)
    return [rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype) for _ in range(count)]


# ---- filter -----------------------------------------------------------------------------------
FILTER = np.array([[0.1, 0.2, 0.0], [0.3, 0.4, 0.1]], np.float32)  # sums end in .5: rounding shows


@pytest.mark.parametrize("border", ["101", "1001", "reflect", "reflect101", "REFLECT_1001", "edge", "const", "fill",
                                    "pad", "Wrap", "clamp"])
def test_filter_border_names(border):
    def build(fn, types, data):
        return fn.filter(data, FILTER, np.uint8(9), border=border)
    assert_same(build, [images(np.uint8)], layout="HWC")


@pytest.mark.parametrize("border", ["mirror", "replicate", "isolated", "transparent", ""])
def test_filter_border_names_both_refuse(border):
    assert_both_refuse(lambda fn, types, data: fn.filter(data, FILTER, border=border), [images(np.uint8)], "HWC")


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int16, np.float32])
@pytest.mark.parametrize("layout", ["HWC", "HW", "CHW"])
def test_filter_rounds_as_dali(dtype, layout):
    shape = {"HWC": (7, 8, 3), "HW": (7, 8), "CHW": (2, 7, 8)}[layout]
    # multiples of 5: many sums end in .5, where DALI (OpenCV's conversion) rounds to even
    data = [(sample // 5 * 5 if np.dtype(dtype).kind != "f" else sample) for sample in images(dtype, shape)]
    assert_same(lambda fn, types, x: fn.filter(x, FILTER), [data], layout=layout, tolerance=1e-5)
    largest = max(float(np.abs(sample.astype(np.float64)).max()) for sample in data)
    assert_same(lambda fn, types, x: fn.filter(x, FILTER, dtype=types.FLOAT), [data], layout=layout,
                tolerance=largest * 1e-6)  # float32 sums in another order


@pytest.mark.parametrize("dtype", [np.int8, np.float16, np.int32, np.float64])
def test_filter_types_both_refuse(dtype):
    assert_both_refuse(lambda fn, types, data: fn.filter(data, FILTER), [images(dtype)], "HWC")


def test_filter_per_sample_filters_of_any_size():
    filters = [np.full((1, 1), 0.5, np.float32), np.arange(1, 7, dtype=np.float32).reshape(2, 3) / 21,
               np.array([[0.25], [0.5], [0.25]], np.float32)]
    anchors = [np.array([0, 0], np.int32), np.array([1, -1], np.int32), np.array([-1, 0], np.int32)]

    def build(fn, types, data, kernel, anchor):
        return fn.filter(data, kernel, anchor=anchor, border="1001")
    assert_same(build, [images(np.uint8, count=3), filters, anchors], layout="HWC")


# ---- noise ------------------------------------------------------------------------------------
@pytest.mark.parametrize("library", sorted(LIBRARIES))
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.uint32, np.int64, np.float32])
def test_gaussian_noise_adds_what_random_normal_draws_with_the_same_seed(library, dtype):
    """DALI's definition (its test_noise_gaussian): noise.gaussian(x, mean, stddev, seed=s) is x plus
    what random.normal(x, mean, stddev, seed=s) draws (float, float64 for 32- and 64-bit integers),
    rounded (halves away from zero) and saturated to x's type; checked under both libraries (their
    generators draw different numbers)."""
    wide = np.dtype(dtype).kind in "iu" and np.dtype(dtype).itemsize >= 4
    data = [sample // 2 + (2 ** 24 + 1 if wide else 0) for sample in images(dtype, (5, 6, 3), count=3)]

    def build(fn, types, x, mean, stddev):
        return (fn.noise.gaussian(x, mean=mean, stddev=stddev, seed=12345), x,
                fn.random.normal(x, mean=mean, stddev=stddev, seed=12345, dtype=types.FLOAT64 if wide else types.FLOAT))
    means, stddevs = [np.float32(0.5), np.float32(-3.0), np.float32(10.0)], [np.float32(30.0)] * 3
    (noisy, layout), (inputs, _), (draws, _) = outputs_of(library, build, [data, means, stddevs], layout="HWC")
    assert layout == "HWC"
    for sample, source, draw in zip(noisy, inputs, draws):
        assert sample.dtype == source.dtype and sample.shape == source.shape
        total = source.astype(np.float64 if wide else np.float32) + draw
        if np.dtype(dtype).kind in "iu":
            total = np.clip(np.trunc(total + np.copysign(0.5, total)), np.iinfo(dtype).min, np.iinfo(dtype).max)
        np.testing.assert_array_equal(sample.astype(total.dtype), total)


# ---- colour -----------------------------------------------------------------------------------
SPACES = ["RGB", "BGR", "GRAY", "YCbCr"]


@pytest.mark.parametrize("source", SPACES)
@pytest.mark.parametrize("target", SPACES)
def test_color_space_conversion_as_dali(source, target):
    if source == target:
        pytest.skip("no conversion")
    channels = 1 if source == "GRAY" else 3
    data = images(np.uint8, (32, 32, channels), count=2)

    def build(fn, types, x):
        return fn.color_space_conversion(x, image_type=getattr(types, source), output_type=getattr(types, target))
    assert_same(build, [data], layout="HWC")


@pytest.mark.parametrize("quality", [-5, 0, 1, 30, 100, 101, 1000])
def test_jpeg_compression_distortion_takes_any_quality_as_dali(quality):
    """DALI takes qualities outside 1..100 as the nearest end."""
    data = images(np.uint8, (16, 24, 3))
    assert_same(lambda fn, types, x: fn.jpeg_compression_distortion(x, quality=quality), [data], layout="HWC")


def test_jpeg_compression_distortion_quality_per_sample():
    qualities = [np.int32(0), np.int32(50), np.int32(150)]
    data = images(np.uint8, (16, 24, 3), count=3)
    assert_same(lambda fn, types, x, quality: fn.jpeg_compression_distortion(x, quality=quality), [data, qualities],
                layout="HWC")


@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.float64])
def test_filter_values_other_than_float32_per_sample_both_refuse(dtype):
    kernels = [np.full((3, 3), 0.1, dtype)] * 2
    assert_both_refuse(lambda fn, types, x, kernel: fn.filter(x, kernel), [images(np.uint8), kernels], "HWC")


@pytest.mark.parametrize("dtype", [np.int32, np.float16])
def test_filter_constants_other_than_float_both_refuse(dtype):
    kernel = np.full((3, 3), 1, dtype)
    assert_both_refuse(lambda fn, types, x: fn.filter(x, kernel), [images(np.uint8)], "HWC")


def test_filter_float64_constant_is_taken_as_float32():
    kernel = np.arange(9, dtype=np.float64).reshape(3, 3) / 45
    assert_same(lambda fn, types, x: fn.filter(x, kernel), [images(np.uint8)], layout="HWC")


@pytest.mark.parametrize("mode", ["VALID", "Same", "valid"])
def test_filter_mode_in_any_letter_case(mode):
    assert_same(lambda fn, types, x: fn.filter(x, FILTER, mode=mode), [images(np.uint8)], layout="HWC")


# ---- gaussian_blur, laplacian ---------------------------------------------------------------------
@pytest.mark.parametrize("window_size", [25, 31, (31, 3)])
def test_laplacian_takes_windows_up_to_31_as_dali(window_size):
    def build(fn, types, x):
        return fn.laplacian(x, window_size=window_size, smoothing_size=31, normalized_kernel=True)
    assert_same(build, [images(np.uint8, (40, 41, 3))], layout="HWC")


@pytest.mark.parametrize("window_size", [1, 33])
def test_laplacian_windows_outside_3_to_31_both_refuse(window_size):
    assert_both_refuse(lambda fn, types, x: fn.laplacian(x, window_size=window_size), [images(np.uint8)], "HWC")
