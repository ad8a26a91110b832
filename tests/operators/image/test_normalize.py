"""Pixel arithmetic: crop_mirror_normalize, normalize and cast against numpy references computed in
float64."""
from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest
from conftest import assert_close, check_operator, noise_image, ragged_images, run_batches, run_operator

import penstock
from penstock import fn, pipeline_def, types

MEAN, STD = (0.485 * 255, 0.456 * 255, 0.406 * 255), (0.229 * 255, 0.224 * 255, 0.225 * 255)
# float32 results of (x - mean) / std: a few float32 ulps, relative; absolute near zero
FLOAT32_TOLERANCE = {"rtol": 1e-5, "max_abs": 1e-5}
# float16: one fp16 ulp (the result is rounded once more than the float64 reference)
FLOAT16_TOLERANCE = {"rtol": 2 ** -10, "max_abs": 2 ** -14}


# ---- crop_mirror_normalize ------------------------------------------------------------------------------
def reference_cmn(image, crop=None, pos=(0.5, 0.5), mean=(0.0,), std=(1.0,), scale=1.0, shift=0.0, mirror=False,
                  layout="CHW", pad=False, dtype=np.float32):
    """numpy: crop slice, flip, (x - mean) / std * scale + shift in float64, pad, transpose, convert."""
    if crop is not None:
        height, width = crop
        # DALI's window start: the position a float32 (0.7 is 0.69999999), times the slack, to nearest
        top = math.floor(float(np.float32(pos[0])) * (image.shape[0] - height) + 0.5)
        left = math.floor(float(np.float32(pos[1])) * (image.shape[1] - width) + 0.5)
        image = image[top:top + height, left:left + width]
    if mirror:
        image = image[:, ::-1]
    result = (image.astype(np.float64) - np.asarray(mean)) / np.asarray(std) * scale + shift
    if pad:
        result = np.concatenate([result, np.zeros((*result.shape[:2], 1))], axis=2)
    if layout == "CHW":
        result = result.transpose(2, 0, 1)
    if np.dtype(dtype).kind == "u":
        return np.clip(np.rint(result), 0, 255).astype(dtype)
    return result


@pytest.mark.parametrize("layout", ["CHW", "HWC"])
@pytest.mark.parametrize("dtype,tolerance", [(types.FLOAT, FLOAT32_TOLERANCE), (types.FLOAT16, FLOAT16_TOLERANCE)],
                         ids=["float32", "float16"])
@pytest.mark.parametrize("mirror", [0, 1])
def test_crop_mirror_normalize_matches_numpy(layout, dtype, tolerance, mirror):
    images = ragged_images(4, smooth=False, seed=20, min_side=30, max_side=60)
    check_operator(fn.crop_mirror_normalize, images,
                   lambda image: reference_cmn(image, (24, 28), (0.3, 0.7), MEAN, STD, mirror=mirror, layout=layout),
                   out_dtype=dtype.numpy, **tolerance, crop=(24, 28), crop_pos_y=0.3, crop_pos_x=0.7, mean=MEAN,
                   std=STD, mirror=mirror, output_layout=layout, dtype=dtype)


@pytest.mark.parametrize("channels", [1, 2, 4])
@pytest.mark.parametrize("mirror", [0, 1])
def test_crop_mirror_normalize_to_planes_of_any_channel_count(channels, mirror):
    """CHW output from uint8 images goes channel plane by channel plane: every count of channels."""
    rng = np.random.default_rng(22 + channels)
    images = [rng.integers(0, 256, (20 + 3 * index, 25 + index, channels), dtype=np.uint8) for index in range(3)]
    mean, std = [10.0 * (c + 1) for c in range(channels)], [2.0 + c for c in range(channels)]
    check_operator(fn.crop_mirror_normalize, images,
                   lambda image: reference_cmn(image, (12, 14), mean=mean, std=std, mirror=mirror),
                   **FLOAT32_TOLERANCE, crop=(12, 14), mean=mean, std=std, mirror=mirror, output_layout="CHW")


def test_crop_mirror_normalize_scale_shift_and_scalar_mean_std():
    images = ragged_images(3, smooth=False, seed=21)
    check_operator(fn.crop_mirror_normalize, images,
                   lambda image: reference_cmn(image, mean=(100.0,), std=(50.0,), scale=64.0, shift=128.0),
                   **FLOAT32_TOLERANCE, mean=100.0, std=50.0, scale=64.0, shift=128.0)


def test_crop_mirror_normalize_to_uint8_rounds_and_saturates():
    images = ragged_images(3, smooth=False, seed=22)
    check_operator(fn.crop_mirror_normalize, images,
                   lambda image: reference_cmn(image, mean=(64.0,), std=(0.7,), layout="HWC", dtype=np.uint8),
                   out_dtype=np.uint8, mean=64.0, std=0.7, output_layout="HWC", dtype=types.UINT8)


def test_crop_mirror_normalize_float_input():
    images = [image.astype(np.float32) / 3 for image in ragged_images(3, smooth=False, seed=23)]
    check_operator(fn.crop_mirror_normalize, images,
                   lambda image: reference_cmn(image, (10, 12), mean=MEAN, std=STD, mirror=True),
                   **FLOAT32_TOLERANCE, crop=(10, 12), mean=MEAN, std=STD, mirror=1)


@pytest.mark.parametrize("layout", ["CHW", "HWC"])
def test_crop_mirror_normalize_pad_output_adds_a_zero_channel(layout):
    images = ragged_images(3, smooth=False, seed=24, min_side=30, max_side=60)
    outputs = check_operator(fn.crop_mirror_normalize, images,
                             lambda image: reference_cmn(image, (20, 22), mean=MEAN, std=STD, layout=layout, pad=True),
                             **FLOAT32_TOLERANCE, crop=(20, 22), mean=MEAN, std=STD, output_layout=layout,
                             pad_output=True)
    assert all(output.shape == ((4, 20, 22) if layout == "CHW" else (20, 22, 4)) for output in outputs)


def test_crop_mirror_normalize_mirror_per_sample_from_coin_flips():
    images = ragged_images(10, smooth=False, seed=25, min_side=30, max_side=60)
    arguments = {"crop": (16, 18), "mean": MEAN, "std": STD}

    def mirror_random(node):
        coin = fn.random.coin_flip()
        return (fn.crop_mirror_normalize(node, mirror=coin, **arguments),
                fn.crop_mirror_normalize(node, mirror=0, **arguments), coin)

    mirrored, plain, coins = run_operator(mirror_random, images)
    assert {int(coin) for coin in coins} == {0, 1}
    for image, out, unflipped, coin in zip(images, mirrored, plain, coins):
        expected = unflipped[:, :, ::-1] if coin else unflipped  # CHW: the width is the last axis
        np.testing.assert_array_equal(out, expected)
        assert_close(out, reference_cmn(image, (16, 18), mean=MEAN, std=STD, mirror=bool(coin)), **FLOAT32_TOLERANCE)


@pytest.mark.parametrize("layout", ["CHW", "HWC"])
def test_crop_mirror_normalize_output_is_a_dense_batch(layout):
    images = ragged_images(5, smooth=False, seed=26, min_side=30, max_side=60)
    [batch] = run_batches(fn.crop_mirror_normalize, images, crop=(20, 24), mean=MEAN, std=STD,
                          output_layout=layout, dtype=types.FLOAT16)[0]
    assert batch.layout() == layout and batch.is_dense_tensor()
    array = batch.as_array()
    assert array.shape == ((5, 3, 20, 24) if layout == "CHW" else (5, 20, 24, 3))
    assert array.dtype == np.float16
    assert batch.as_array() is array
    assert all(np.shares_memory(batch.at(i), array) for i in range(len(batch))), "the samples are views of one buffer"


def test_crop_mirror_normalize_ragged_output_without_crop_is_not_dense():
    images = ragged_images(3, smooth=False, seed=27)
    [batch] = run_batches(fn.crop_mirror_normalize, images, mean=MEAN, std=STD)[0]
    assert not batch.is_dense_tensor()
    with pytest.raises(ValueError, match="not dense"):
        batch.as_array()


def test_crop_mirror_normalize_rejects_wrong_channel_counts():
    with pytest.raises(penstock.PipelineError, match="mean, std and fill_values give 2 values per channel for 3"):
        run_operator(fn.crop_mirror_normalize, [noise_image(8, 8)], mean=(1.0, 2.0))
    with pytest.raises(ValueError, match="crop_mirror_normalize: arguments 'mean' and 'std' have 2 and 3"):
        run_operator(fn.crop_mirror_normalize, [noise_image(8, 8)], mean=(1.0, 2.0), std=(1.0, 2.0, 3.0))
    with pytest.raises(ValueError, match="crop_mirror_normalize: give crop_w and crop_h together"):
        run_operator(fn.crop_mirror_normalize, [noise_image(8, 8)], crop_w=3.0)


@pytest.mark.parametrize("per_sample", [False, True])
def test_crop_mirror_normalize_std_of_zero_gives_infinities(per_sample):
    image = noise_image(8, 8)
    std = (1.0, 0.0, 2.0)
    given = (lambda images: fn.external_source(source=lambda: [np.float32(std)], batch=True)) if per_sample else None
    (output,) = run_operator(lambda images: fn.crop_mirror_normalize(
        images, mean=(1.0, 128.0, 3.0), std=given(images) if per_sample else std, output_layout="HWC"), [image])
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = (image.astype(np.float32) - np.float32([1.0, 128.0, 3.0])) * (np.float32(1) / np.float32(std))
    np.testing.assert_array_equal(output, expected)


# ---- normalize -------------------------------------------------------------------------------------------
def reference_normalize(data, axes=None, mean=None, stddev=None, epsilon=0.0, scale=1.0, shift=0.0, ddof=0):
    data = data.astype(np.float64)
    axes = tuple(range(data.ndim)) if axes is None else axes
    mean = data.mean(axis=axes, keepdims=True) if mean is None else np.asarray(mean)
    if stddev is None:
        stddev = np.sqrt(((data - mean) ** 2).sum(axis=axes, keepdims=True) /
                         (np.prod([data.shape[a] for a in axes]) - ddof))
    return (data - mean) / np.sqrt(np.asarray(stddev) ** 2 + epsilon) * scale + shift


NORMALIZE_TOLERANCE = {"rtol": 1e-5, "max_abs": 2e-5}


@pytest.mark.parametrize("kwargs", [
    {},
    {"axes": (0, 1)},  # per channel
    {"axes": (1,)},
    {"mean": 100.0, "stddev": 30.0},
    {"epsilon": 400.0, "scale": 2.0, "shift": 0.5},
    {"ddof": 1, "axes": (0, 1)},
], ids=["all_axes", "per_channel", "axis_1", "given_scalar", "epsilon_scale_shift", "ddof"])
def test_normalize_matches_numpy(kwargs):
    images = ragged_images(4, smooth=False, seed=30)
    check_operator(fn.normalize, images, lambda image: reference_normalize(image, **kwargs), out_dtype=np.float32,
                   **NORMALIZE_TOLERANCE, **kwargs)


def test_normalize_float_input_and_constant_samples():
    rng = np.random.default_rng(31)
    samples = [rng.normal(5.0, 3.0, (17, 4)).astype(np.float32), np.full((6, 5), 2.5, np.float32)]
    outputs = check_operator(fn.normalize, samples[:1], reference_normalize, **NORMALIZE_TOLERANCE, layout="")
    assert abs(float(outputs[0].mean())) < 1e-5 and abs(float(outputs[0].std()) - 1.0) < 1e-5
    # a constant sample has no spread: the result is 0, not NaN
    [constant] = run_operator(fn.normalize, samples[1:], layout="")
    np.testing.assert_array_equal(constant, np.zeros((6, 5), np.float32))


def test_normalize_per_channel_parameters_given_per_sample():
    images = ragged_images(3, smooth=False, seed=32)
    mean, stddev = np.array([[[10.0, 20.0, 30.0]]], np.float32), np.array([[[5.0, 6.0, 7.0]]], np.float32)
    check_operator(lambda node: fn.normalize(node, mean=fn.constant(value=mean), stddev=fn.constant(value=stddev)), images,
                   lambda image: reference_normalize(image, mean=mean, stddev=stddev), **NORMALIZE_TOLERANCE)


def test_normalize_parameters_are_numbers_or_per_sample_tensors():
    with pytest.raises(TypeError, match="normalize: argument 'mean': expected a number"):  # DALI: a TypeError too
        run_operator(lambda node: fn.normalize(node, mean=[1.0, 2.0, 3.0]), [noise_image(4, 4)])
    with pytest.raises(ValueError, match="normalize: argument 'mean' cannot be given per sample with batch=True"):
        run_operator(lambda node: fn.normalize(node, batch=True, mean=fn.reductions.mean(node)), [noise_image(4, 4)])
    with pytest.raises(ValueError, match="normalize: argument 'dtype': expected one of"):
        run_operator(lambda node: fn.normalize(node, dtype=types.FLOAT16), [noise_image(4, 4)])


def reference_batch_normalize(samples, axes, **kwargs):
    """The batch's statistics over ``axes`` of every sample together (numpy, float64)."""
    stacked = np.concatenate([sample.astype(np.float64) for sample in samples], axis=axes[0])
    mean = stacked.mean(axis=axes, keepdims=True)
    stddev = np.sqrt(((stacked - mean) ** 2).sum(axis=axes, keepdims=True) /
                     (np.prod([stacked.shape[a] for a in axes]) - kwargs.get("ddof", 0)))
    return [reference_normalize(sample, axes, mean=mean, stddev=stddev, epsilon=kwargs.get("epsilon", 0.0))
            for sample in samples]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("kwargs", [{"axes": (0, 1)}, {"axis_names": "H", "ddof": 1, "epsilon": 2.0}])
def test_normalize_batch_statistics(device, kwargs):
    from conftest import gpu_or_emulated
    rng = np.random.default_rng(33)
    samples = [rng.integers(0, 255, (height, 5, 3), dtype=np.uint8) for height in (4, 7, 2)]

    @pipeline_def(batch_size=len(samples), num_threads=1, device_id=0 if device == "gpu" else None, seed=1)
    def pipe():
        node = fn.external_source(source=lambda: samples, batch=True, layout="HWC")
        return fn.normalize(node.gpu() if device == "gpu" else node, batch=True, **kwargs)
    with gpu_or_emulated() if device == "gpu" else contextlib.nullcontext():
        pipeline = pipe()
        (batch,) = pipeline.run()
        pipeline.close()
    outputs = [np.asarray(sample) for sample in (batch.as_cpu() if device == "gpu" else batch)]
    expected = reference_batch_normalize(samples, kwargs.get("axes", (0,)), ddof=kwargs.get("ddof", 0),
                                         epsilon=kwargs.get("epsilon", 0.0))
    for output, reference in zip(outputs, expected):
        assert output.dtype == np.float32
        assert_close(output, reference, rtol=1e-5, max_abs=2e-5)


def test_normalize_batch_needs_equal_extents_on_the_other_axes():
    with pytest.raises(penstock.PipelineError, match="batch=True needs the samples' extents"):
        run_operator(lambda node: fn.normalize(node, batch=True, axes=(0,)), [noise_image(4, 4), noise_image(4, 5)])


# ---- cast -------------------------------------------------------------------------------------------------
def numpy_saturate(values: np.ndarray, dtype) -> np.ndarray:
    """numpy in float64 / Python ints: round to nearest (halves away from zero, as DALI), clip, convert."""
    info = np.iinfo(dtype)
    as_float = values.astype(np.float64)
    rounded = np.sign(as_float) * np.floor(np.abs(as_float) + 0.5) if values.dtype.kind == "f" else values.astype(object)
    return np.array([min(max(value, info.min), info.max) for value in rounded.ravel()], dtype=dtype).reshape(values.shape)


EDGE_VALUES = [-1e10, -300.0, -128.5, -1.5, -0.5, 0.0, 0.4999, 0.5, 1.5, 2.5, 126.5, 254.5, 255.4, 255.5, 256.0, 3e4,
               40000.0, 2.0 ** 31, 1e10]


@pytest.mark.parametrize("dtype", [types.UINT8, types.INT8, types.INT16, types.UINT16, types.INT32, types.UINT32])
def test_cast_float_to_int_rounds_and_saturates(dtype):
    uniform = np.random.default_rng(40).uniform(-400, 400, (7, 9))
    for source_type in (np.float32, np.float64):  # the samples of a batch share their type
        # the samples of a batch share their number of dimensions too (DALI's rule)
        samples = [np.array(EDGE_VALUES, source_type).reshape(1, -1),
                   np.array(EDGE_VALUES[::-1], source_type).reshape(-1, 1), uniform.astype(source_type)]
        check_operator(fn.cast, samples, lambda sample: numpy_saturate(sample, dtype.numpy), out_dtype=dtype.numpy,
                       layout="", dtype=dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32, np.int64])
def test_not_a_number_becomes_zero_and_infinities_the_ends(dtype):
    from penstock import numeric
    info = np.iinfo(dtype)
    values = np.array([np.nan, np.inf, -np.inf, 2.5, np.nan], np.float32)
    np.testing.assert_array_equal(numeric.saturate(values, dtype), np.array([0, info.max, info.min, 3, 0], dtype))
    assert numeric.saturate(np.float32(np.nan), dtype) == 0  # 0-d too


def test_cast_float_to_int64_saturates_at_both_ends():
    samples = [np.array([-1e30, -2.0 ** 63, -3.5, 2.0 ** 62, 2.0 ** 63, 1e30], np.float64)]
    [result] = run_operator(fn.cast, samples, layout="", dtype=types.INT64)
    info = np.iinfo(np.int64)
    np.testing.assert_array_equal(result, np.array([info.min, info.min, -4, 2 ** 62, info.max, info.max], np.int64))


def test_cast_between_integer_types_saturates():
    samples = [np.array([-70000, -300, -1, 0, 127, 128, 255, 256, 70000], np.int32)]
    for dtype in (types.UINT8, types.INT8, types.UINT16, types.INT16):
        [result] = run_operator(fn.cast, samples, layout="", dtype=dtype)
        np.testing.assert_array_equal(result, numpy_saturate(samples[0], dtype.numpy))


def test_cast_uint8_to_float_is_exact():
    images = ragged_images(3, smooth=False, seed=41)
    check_operator(fn.cast, images, lambda image: image.astype(np.float16), out_dtype=np.float16, dtype=types.FLOAT16)
    check_operator(fn.cast, images, lambda image: image.astype(np.float32), out_dtype=np.float32, dtype=np.float32)


def test_crop_mirror_normalize_names_the_layouts_it_takes():
    with pytest.raises(ValueError, match='crop_mirror_normalize: the layout "ABC" does not match any of the allowed '
                                         'layouts: HWC, CHW'):
        run_operator(fn.crop_mirror_normalize, [noise_image(8, 8)], layout="ABC")


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.int32, np.float64])
def test_the_c_lookup_into_planes_gives_what_opencvs_lookups_give(dtype):
    """runtime/csrc/lookup_planes.c (when it builds) writes each channel's looked-up values into its
    CHW plane, mirrored when asked: equal to the bit to OpenCV's split-and-lookup, for a crop that
    is a strided view of a larger image and for each output type's size."""
    from penstock.kernels import cpu_image
    from penstock.runtime import native
    if native.lookup_planes() is None:
        pytest.skip(f"the C lookup cannot be built here: {native.problem('lookup_planes')}")
    rng = np.random.default_rng(7)
    image = rng.integers(0, 256, (23, 31, 3), dtype=np.uint8)[2:19, 3:28]
    table = rng.normal(0, 40, (1, 256, 3)).astype(dtype) if np.dtype(dtype).kind == "f" else \
        rng.integers(0, 120, (1, 256, 3)).astype(dtype)
    for mirror in (False, True):
        with_c, with_opencv = (np.empty((3, 17, 25), dtype) for _ in range(2))
        cpu_image.lookup_planes(image, table, with_c, mirror=mirror, native_lookup=native.lookup_planes)
        cpu_image.lookup_planes(image, table, with_opencv, mirror=mirror)
        np.testing.assert_array_equal(with_c.view(np.uint8), with_opencv.view(np.uint8))
        want = table[0, image, np.arange(3)].transpose(2, 0, 1)
        np.testing.assert_array_equal(with_c, want[:, :, ::-1] if mirror else want)


@pytest.mark.parametrize("arguments", [dict(axes=[1]), dict(axes=[0]), dict(axes=[1], epsilon=1e-5),
                                       dict(axes=[1], ddof=1, scale=2.0, shift=3.0)])
def test_the_gpu_forms_batch_of_one_reduced_axis_computes_what_each_sample_alone_computes(arguments):
    """normalize_along_one_axis (the GPU form's path for ragged features reduced over one axis:
    one segmented sum for the batch) gives the per-sample path's values, a constant sample (no
    deviation) included; equal to the bit here (float64 sums of float32 values)."""
    import torch

    from penstock import registry
    from penstock.operators.image.normalize import normalize_along_one_axis, normalize_samples
    static, _ = registry.get_schema("normalize").validate(arguments)
    axis = arguments["axes"][0]
    rng = np.random.default_rng(4)
    shapes = [(16, n) if axis == 1 else (n, 16) for n in (5, 17, 90, 2)]
    samples = [torch.from_numpy(rng.normal(3, 2, shape).astype(np.float32)) for shape in shapes]
    samples.append(torch.full((16, 7) if axis == 1 else (7, 16), 1.5))
    args = [static] * len(samples)
    batched = normalize_along_one_axis(torch, samples, args)
    assert batched is not None and all(sample.is_contiguous() for sample in batched)
    for got, want in zip(batched, normalize_samples(torch, samples, args)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert normalize_along_one_axis(torch, samples, [static.replace(batch=True)] * len(samples)) is None
