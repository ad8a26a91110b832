"""Image operators and decoders against DALI itself: the same small programs run under nvidia.dali and
penstock.compat.dali give the same shapes, types and layouts, and the same values (JPEG decodes within a
few levels: the two libraries' decoders differ)."""
from __future__ import annotations

import cv2
import numpy as np
import pytest

dali = pytest.importorskip("nvidia.dali")
import nvidia.dali.fn as dali_fn  # noqa: E402
import nvidia.dali.types as dali_types  # noqa: E402

import penstock.compat.dali as compat  # noqa: E402
from penstock.compat.dali import fn as compat_fn  # noqa: E402
from penstock.compat.dali import types as compat_types  # noqa: E402

LIBRARIES = {"dali": (dali.pipeline_def, dali_fn, dali_types), "penstock": (compat.pipeline_def, compat_fn, compat_types)}
JPEG_LEVELS = 8  # the largest difference between the two decoders on these smooth images


def run(build, batches):
    """Each library's outputs of ``build(fn, types, *inputs)``: per library, a list of (samples, layout)."""
    results = {}
    for name, (pipeline_def, fn, types) in LIBRARIES.items():
        @pipeline_def(batch_size=len(batches[0]), num_threads=1, device_id=None, seed=1)
        def pipeline():
            return build(fn, types, *(fn.external_source(source=[batch], cycle=True) for batch in batches))

        pipe = pipeline()
        pipe.build()
        outputs = pipe.run()
        results[name] = [([np.array(output.at(i)) for i in range(len(output))], output.layout())
                         for output in outputs]
    return results["dali"], results["penstock"]


def assert_same(build, batches, tolerance=0.0):
    expected, actual = run(build, batches)
    for (dali_samples, dali_layout), (samples, layout) in zip(expected, actual):
        assert layout == dali_layout
        for want, got in zip(dali_samples, samples):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=tolerance)


def jpeg(height, width, seed=0):
    y, x = np.mgrid[0:height, 0:width]
    image = np.stack([x * 255 // width, y * 255 // height, np.full_like(x, 40 * seed)], -1).astype(np.uint8)
    image[height // 5:height // 2, width // 2:width * 4 // 5] = 255
    return np.frombuffer(cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes(), np.uint8)


ENCODED = [jpeg(100, 200), jpeg(64, 48, 1)]


def floats(*rows):
    return [np.array(row, np.float32) for row in rows]


@pytest.mark.parametrize("kwargs", [
    {"rel_start": (0.5, 0.0), "rel_shape": (0.5, 1.0)},
    {"rel_start": (0.1, 0.25), "rel_end": (0.7, 0.9)},
    {"start": (10, 5), "shape": (30, 20)},
    {"start": (10, 5), "end": (40, 25)},
    {"end": (40, 25)},
    {"start": (7, 3)},
    {"start": (5, 10), "shape": (20, 30), "axis_names": "HW"},
    {"start": (5, 10), "shape": (20, 30), "axes": (0, 1)},
    {"rel_start": (0.25,), "rel_shape": (0.5,), "axis_names": "W"},
    {"rel_start": (0.5,), "rel_shape": (0.5,)},  # one value for every axis
])
def test_image_slice_arguments(kwargs):
    assert_same(lambda fn, types, data: fn.decoders.image_slice(data, **kwargs), [ENCODED], JPEG_LEVELS)


@pytest.mark.parametrize("anchor,shape,kwargs", [
    (floats((0.5, 0.0), (0.25, 0.5)), floats((0.5, 1.0), (0.5, 0.5)), {}),
    ([np.array([10, 20], np.int32)] * 2, [np.array([30, 15], np.int32)] * 2, {}),
    (floats((10, 5), (3, 4)), floats((0.5, 0.5), (0.25, 0.5)), {"normalized_anchor": False}),
    (floats((10, 5), (3, 4)), floats((20, 30), (10, 12)), {"normalized_anchor": False, "normalized_shape": False}),
    (floats((0.1, 0.2), (0.0, 0.5)), floats((0.5, 0.3), (1.0, 0.5)), {"axis_names": "HW"}),
])
def test_image_slice_inputs(anchor, shape, kwargs):
    assert_same(lambda fn, types, data, a, s: fn.decoders.image_slice(data, a, s, **kwargs), [ENCODED, anchor, shape],
                JPEG_LEVELS)


@pytest.mark.parametrize("layout,shape", [("HWC", (4, 5, 3)), ("CHW", (3, 4, 5)), ("FHWC", (2, 4, 5, 3)),
                                          ("DHWC", (2, 4, 5, 3)), ("FCHW", (2, 3, 4, 5)), ("CDHW", (3, 2, 4, 5)),
                                          ("FDHWC", (2, 2, 3, 4, 3))])
def test_flip_layouts(layout, shape):
    rng = np.random.default_rng(len(layout))
    samples = [rng.integers(0, 255, shape, dtype=np.uint8) for _ in range(2)]
    flags = [np.array(flag, np.int32) for flag in (0, 1)]
    assert_same(lambda fn, types, data, on: (fn.flip(fn.reshape(data, layout=layout), horizontal=on, vertical=1),
                                             fn.flip(fn.reshape(data, layout=layout), horizontal=0, depthwise=on)),
                [samples, flags])


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_brightness_contrast_per_sample(dtype):
    rng = np.random.default_rng(3)
    samples = [rng.integers(0, 255, (4, 5, 3)).astype(dtype) for _ in range(3)]
    centers, factors = floats(10, 128, 200), floats(0.5, 1.5, 2.0)
    assert_same(lambda fn, types, data, center, factor: (
        fn.brightness_contrast(fn.reshape(data, layout="HWC"), contrast=factor, contrast_center=center,
                               brightness=factor, dtype=types.FLOAT),
        fn.contrast(fn.reshape(data, layout="HWC"), contrast=1.5, contrast_center=center),
        fn.brightness(fn.reshape(data, layout="HWC"), brightness=0.9, brightness_shift=0.1, dtype=types.UINT8)),
        [samples, centers, factors], tolerance=1)  # DALI rounds halves away from zero, penstock to even


def test_grid_mask_after_cast():
    rng = np.random.default_rng(4)
    samples = [rng.integers(0, 255, (30, 40, 3), dtype=np.uint8) for _ in range(2)]
    assert_same(lambda fn, types, data, tile: (
        fn.grid_mask(fn.cast(data, dtype=types.FLOAT), tile=fn.cast(tile, dtype=types.INT32), ratio=0.4, angle=0.3),
        fn.cast(tile, dtype=types.INT32)), [samples, floats(7.0, 12.0)])
