"""Colour operators: per-sample arguments, types, the fused GPU chain against the CPU's steps, the
colour spaces, and bad input named where it is given. The GPU runs on the emulated GPU where
there is none (CPU tensors, Triton's interpreter)."""
from __future__ import annotations

import contextlib

import cv2
import numpy as np
import pytest
from cases_color import round_uint8
from conftest import CUDA, SEED, assert_close, gpu_or_emulated, run_operator, smooth_image

from penstock import Pipeline, devices, fn, pipeline_def, types

DEVICES = ("cpu", "gpu")


def images(channels=3):
    return [smooth_image(9, 11, channels, seed=1), smooth_image(12, 7, channels, seed=2), smooth_image(6, 6, channels, seed=3)]


def run(build, samples, device, describe=False, layout="HWC"):
    """Outputs (lists of numpy arrays) of ``build(node)`` on ``device``; with ``describe``, also
    Pipeline.describe's text."""
    @pipeline_def(batch_size=len(samples), num_threads=2, device_id=None if device == "cpu" else 0, seed=SEED)
    def pipeline():
        node = fn.external_source(source=lambda: samples, batch=True, layout=layout)
        outputs = build(node.gpu() if device == "gpu" else node, device)
        return outputs if isinstance(outputs, tuple) else (outputs,)

    with devices.emulated_gpu(device != "cpu" and not CUDA):
        pipe = pipeline()
        try:
            text = pipe.describe() if describe else None
            outputs = [[np.asarray(sample) for sample in batch.as_cpu()] for batch in pipe.run()]
        finally:
            pipe.close()
    return (outputs, text) if describe else outputs


@pytest.mark.parametrize("device", DEVICES)
def test_brightness_per_sample_from_a_random_argument(device):
    samples = images()

    def build(node, device):
        factor = fn.random.uniform(range=(0.5, 1.5))
        return fn.brightness(node, brightness=factor, device=device), factor

    outputs, factors = run(build, samples, device)
    assert len({float(f) for f in factors}) == len(samples)  # a different brightness per sample
    for sample, output, factor in zip(samples, outputs, factors):
        assert_close(output, round_uint8(sample * np.float64(factor)), 1)


@pytest.mark.parametrize("device", DEVICES)
def test_float_input_centres_contrast_on_one_half(device):
    samples = [(s / 255.0).astype(np.float32) for s in images()]
    outputs = run(lambda node, d: fn.brightness_contrast(node, brightness=1.2, brightness_shift=-0.05, contrast=0.6,
                                                         device=d), samples, device)[0]
    for sample, output in zip(samples, outputs):
        assert output.dtype == np.float32
        assert_close(output, -0.05 + 1.2 * (0.5 + 0.6 * (sample - 0.5)), 1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_dtype_changes_keep_the_values_unscaled(device):
    """As DALI 2.4: uint8 100 with brightness 0.9 is float 90.0; a float 0.4 is uint8 0 after contrast 1.5
    (around the float centre 0.5); only brightness_shift is in the output type's range."""
    samples = images()
    to_float = run(lambda node, d: fn.brightness(node, brightness=0.9, brightness_shift=0.1, dtype=types.FLOAT,
                                                 device=d), samples, device)[0]
    for sample, output in zip(samples, to_float):
        assert output.dtype == np.float32
        assert_close(output, 0.1 + sample * np.float32(0.9), 1e-4)
    floats = [(s / 255.0 * 300).astype(np.float32) for s in samples]
    to_uint8 = run(lambda node, d: fn.contrast(node, contrast=1.5, dtype=types.UINT8, device=d), floats, device)[0]
    for sample, output in zip(floats, to_uint8):
        assert output.dtype == np.uint8
        assert_close(output, round_uint8(0.5 + 1.5 * (sample.astype(np.float64) - 0.5)), 1)


def _chain(node, device):
    node = fn.brightness(node, brightness=fn.random.uniform(range=(0.8, 1.1)), device=device)
    node = fn.contrast(node, contrast=0.8, device=device)
    node = fn.saturation(node, saturation=fn.random.uniform(range=(0.5, 1.5)), device=device)
    return fn.hue(node, hue=fn.random.uniform(range=(-30.0, 30.0)), device=device)


def test_a_colour_chain_on_the_gpu_is_one_launch_that_matches_the_cpu_steps():
    samples = images()
    cpu = run(_chain, samples, "cpu")[0]
    (gpu,), text = run(_chain, samples, "gpu", describe=True)
    assert "one kernel launch per batch: brightness" in text and "-> hue" in text
    for cpu_output, gpu_output in zip(cpu, gpu):
        assert_close(gpu_output, cpu_output, 2)  # the plan rounds once, the CPU after each step


@pytest.mark.parametrize("device", DEVICES)
def test_color_twist_takes_the_channels_as_rgb_whatever_the_image_type(device):
    """As DALI: image_type does not change the map (BGR, YCbCr... are twisted as if RGB)."""
    samples = images()
    for image_type in (types.BGR, types.YCbCr):
        outputs = run(lambda node, d: fn.color_twist(node, hue=30.0, saturation=1.2, image_type=image_type, device=d),
                      samples, device)[0]
        for sample, output in zip(samples, outputs):
            assert_close(output, round_uint8(sample.astype(np.float64) @ exact_twist_matrix(30.0, 1.2).T), 1)


def exact_twist_matrix(hue=0.0, saturation=1.0, value=1.0) -> np.ndarray:
    """DALI 2.4's map: YIQ back to RGB by the inverse of its RGB -> YIQ matrix."""
    to_yiq = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
    c, s = np.cos(np.radians(hue)), np.sin(np.radians(hue))
    rotation = np.array([[1.0, 0, 0], [0, c, s], [0, -s, c]])
    return np.linalg.inv(to_yiq) @ rotation @ np.diag([1.0, saturation, saturation]) * value @ to_yiq


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["FHWC", "DHWC"])
def test_sequences_and_volumes_map_every_pixel(device, layout):
    """As DALI: frames (FHWC) and slices (DHWC) are mapped as images, per-sample arguments per sample."""
    samples = [np.stack([smooth_image(5 + i, 4, seed=i + k) for k in range(2 + i)]) for i in range(3)]

    def build(node, d):
        hue = fn.external_source(source=lambda: [np.float32(10.0 * i) for i in range(3)], batch=True)
        return (fn.hue(node, hue=hue, device=d), fn.brightness_contrast(node, brightness=1.5, contrast=0.5, device=d),
                fn.hsv(node, saturation=-0.5, value=0.8, dtype=types.FLOAT, device=d))

    hues, contrasts, hsvs = run(build, samples, device, layout=layout)
    for index, sample in enumerate(samples):
        values = sample.astype(np.float64)
        assert_close(hues[index], round_uint8(values @ exact_twist_matrix(10.0 * index).T), 1)
        assert_close(contrasts[index], round_uint8(1.5 * (128 + 0.5 * (values - 128))), 1)
        assert_close(hsvs[index], values @ exact_twist_matrix(0.0, -0.5, 0.8).T, 1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_rgb_to_gray_and_hsv_of_sequences(device):
    samples = [np.stack([smooth_image(5 + i, 4, seed=i + k) for k in range(2)]) for i in range(2)]
    gray, hsv = run(lambda node, d: tuple(fn.color_space_conversion(node, image_type=types.RGB, output_type=space,
                                                                    device=d) for space in (types.GRAY, types.HSV)),
                    samples, device, layout="FHWC")
    for sample, g, h in zip(samples, gray, hsv):
        assert_close(g, round_uint8(sample.astype(np.float64) @ [[0.299], [0.587], [0.114]]), 1)
        assert_close(h, np.stack([cv2.cvtColor(frame, cv2.COLOR_RGB2HSV) for frame in sample]), 1)


@pytest.mark.parametrize("call, message", [
    (lambda x: fn.brightness(x), "brightness: takes the layouts HWC, FHWC, DHWC; got 'CHW'"),
    (lambda x: fn.hue(x), "hue: takes the layouts HWC, FHWC, DHWC; got 'CHW'"),
    (lambda x: fn.color_space_conversion(x, image_type=types.RGB, output_type=types.BGR),
     "color_space_conversion: takes the layouts FDHWC, FHWC, DHWC, HWC; got 'CHW'"),
])
def test_channel_first_images_are_refused_when_the_pipeline_is_built(call, message):
    """As DALI, whose colour operators take channels last."""
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipeline():
        return call(fn.external_source(source=lambda: [np.zeros((3, 4, 4), np.uint8)], batch=True, layout="CHW"))

    with pytest.raises(ValueError, match=message):
        pipeline().build()


@pytest.mark.parametrize("device", DEVICES)
def test_hsv_gives_uint8_unless_told_otherwise(device):
    """As DALI, whose hsv defaults dtype to uint8 (the other colour operators keep the input's type)."""
    samples = [(s / 2.0).astype(np.float32) for s in images()]
    hsv, hue = run(lambda node, d: (fn.hsv(node, saturation=2.0, device=d), fn.hue(node, hue=0.0, device=d)),
                   samples, device)
    for sample, out, same in zip(samples, hsv, hue):
        assert out.dtype == np.uint8 and same.dtype == np.float32
        assert_close(out, round_uint8(sample.astype(np.float64) @ exact_twist_matrix(0.0, 2.0).T), 1)


def _ycbcr(rgb: np.ndarray) -> np.ndarray:
    """DALI's ITU-R BT.601 (color_space_conversion_impl.h), Y in 16..235."""
    matrix = np.array([[0.257, 0.504, 0.098], [-0.148, -0.291, 0.439], [0.439, -0.368, -0.071]])
    return round_uint8(rgb.astype(np.float64) @ matrix.T + (16, 128, 128))


@pytest.mark.parametrize("device", DEVICES)
def test_rgb_to_ycbcr_and_back(device):
    samples = images()

    def build(node, device):
        ycbcr = fn.color_space_conversion(node, image_type=types.RGB, output_type=types.YCbCr, device=device)
        return ycbcr, fn.color_space_conversion(ycbcr, image_type=types.YCbCr, output_type=types.RGB, device=device)

    ycbcr, rgb = run(build, samples, device)
    for sample, converted, back in zip(samples, ycbcr, rgb):
        assert_close(converted, _ycbcr(sample), 1)
        assert_close(back, sample, 2)


@pytest.mark.parametrize("device", DEVICES)
def test_bgr_to_gray_and_rgb_to_hsv_as_opencv(device):
    samples = images()

    def build(node, device):
        gray = fn.color_space_conversion(node, image_type=types.BGR, output_type=types.GRAY, device=device)
        hsv = fn.color_space_conversion(node, image_type=types.RGB, output_type=types.HSV, device=device)
        return gray, hsv, fn.color_space_conversion(hsv, image_type=types.HSV, output_type=types.RGB, device=device)

    gray, hsv, rgb = run(build, samples, device)
    for sample, g, h, back in zip(samples, gray, hsv, rgb):
        assert_close(g, cv2.cvtColor(sample, cv2.COLOR_BGR2GRAY)[:, :, None], 1)
        assert_close(h, cv2.cvtColor(sample, cv2.COLOR_RGB2HSV), 1)
        assert_close(back, sample, 3)  # hue in half-degrees loses a little


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("output_type", [types.YCbCr, types.HSV])
def test_colour_space_conversion_takes_uint8_alone(device, output_type):
    """As DALI, whose conversions are of uint8 images only."""
    samples = [(s / 255.0).astype(np.float32) for s in images()]
    with pytest.raises(Exception, match="color_space_conversion: takes uint8 images, got float32"):
        run(lambda node, d: fn.color_space_conversion(node, image_type=types.RGB, output_type=output_type,
                                                      device=d), samples, device)


@pytest.mark.parametrize("device", DEVICES)
def test_hue_of_a_grayscale_image_says_so(device):
    with pytest.raises(Exception, match="(?s)hue: .*needs 3-channel images.*1 channel.*grayscale"):
        run(lambda node, d: fn.hue(node, hue=10.0, device=d), images(channels=1), device)


# ---- bad arguments, named where they are given --------------------------------------------------
def define(body):
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        return body(fn.external_source(source=lambda: [np.zeros((4, 4, 3), np.uint8)] * 2, batch=True,
                                       dtype=types.UINT8, layout="HWC"))


@pytest.mark.parametrize("call, message", [
    (lambda x: fn.color_space_conversion(x, image_type="XYZ", output_type=types.RGB),
     "color_space_conversion: argument 'image_type': expected one of"),
    (lambda x: fn.color_space_conversion(x, image_type=types.RGB, output_type="YCrCb"),
     "color_space_conversion: argument 'output_type'.*did you mean 'YCbCr'"),
    (lambda x: fn.color_space_conversion(x, image_type=types.BGR, output_type=types.BGR),
     "color_space_conversion: image_type and output_type are both BGR"),
    (lambda x: fn.brightness(x, dtype=types.FLOAT16), "brightness: argument 'dtype': expected one of"),
    (lambda x: fn.hue(x, dtype=types.UINT16), "hue: argument 'dtype': expected one of"),
    (lambda x: fn.lookup_table(x, keys=(1, 70000), values=(0.0, 1.0)), "lookup_table: argument 'keys'"),
    (lambda x: fn.lookup_table(x, keys=(1, 2), values=(0.0,)), "lookup_table: arguments 'keys' and 'values'"),
])
def test_bad_values_fail_at_the_call(call, message):
    with pytest.raises(ValueError, match=message):
        define(call)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_per_sample_values_are_converted_and_checked_for_every_sample(device):
    """Per-sample numbers reach a GPU operator converted for the whole batch at once, and one out of
    range fails the batch naming the argument, as on the CPU."""
    images = [np.full((4, 4, 3), 100, np.uint8)] * 3

    def run(factors):
        @pipeline_def(batch_size=3, num_threads=1, device_id=0 if device == "gpu" else None)
        def pipeline():
            data = fn.external_source(source=lambda: images, batch=True, layout="HWC")
            factor = fn.external_source(source=lambda: factors, batch=True)
            return fn.color_twist(data.gpu() if device == "gpu" else data, brightness=factor)
        pipe = pipeline()
        pipe.build()
        try:
            batch, = pipe.run()
            samples = [batch.at(index) for index in range(len(batch))]
            return [np.asarray(sample.cpu() if hasattr(sample, "cpu") else sample) for sample in samples]
        finally:
            pipe.close()

    with gpu_or_emulated() if device == "gpu" else contextlib.nullcontext():
        for factors in ([np.float32(0.5), np.float32(1.5), np.float32(2)],  # one column of numbers
                        [np.array([0.5], np.float32), np.array([1.5], np.float32), np.array([2], np.float32)]):  # 1-element
            assert [int(output[0, 0, 0]) for output in run(factors)] == [50, 150, 200]
        # as DALI, a negative factor is taken (and saturates to 0)
        assert [int(output[0, 0, 0]) for output in run([np.float32(0.5), np.float32(-1.0), np.float32(1.0)])] \
            == [50, 0, 100]


def test_lookup_keys_outside_the_input_type_fail_when_the_pipeline_is_built():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipeline():
        data = fn.external_source(source=lambda: [np.zeros((4, 4, 3), np.uint8)] * 2, batch=True, dtype=types.UINT8)
        return fn.lookup_table(data, keys=(3, 300), values=(1.0, 2.0))

    with pytest.raises(ValueError, match="lookup_table: argument 'keys': 300 is outside the input type uint8"):
        pipeline().build()


def test_declared_channels_that_do_not_fit_fail_when_the_pipeline_is_built():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipeline():
        data = fn.external_source(source=lambda: [np.zeros((4, 4, 3), np.uint8)] * 2, batch=True, layout="HWC")
        gray = fn.color_space_conversion(data, image_type=types.RGB, output_type=types.GRAY)
        return fn.color_twist(gray, hue=5.0)

    with pytest.raises(ValueError, match="color_twist: .*needs 3-channel images"):
        pipeline().build()


def test_contrast_center_per_sample():
    """contrast_center from another operator (a per-sample input in DALI), with brightness and contrast per
    sample too: out = brightness * (center + contrast * (in - center)), uint8 rounded."""
    samples = images()
    centers = [np.float32(10 + 60 * i) for i in range(len(samples))]
    factors = [np.float32(0.5 + 0.5 * i) for i in range(len(samples))]

    def adjusted(node):
        center = fn.external_source(source=lambda: centers, batch=True)
        factor = fn.external_source(source=lambda: factors, batch=True)
        return (fn.brightness_contrast(node, contrast=factor, contrast_center=center, brightness=0.75),
                fn.contrast(node, contrast=1.5, contrast_center=center, dtype=types.FLOAT))

    both, floats = run_operator(adjusted, samples)
    for sample, center, factor, out, out_float in zip(samples, centers, factors, both, floats):
        values = sample.astype(np.float64)
        assert_close(out, round_uint8(0.75 * (center + factor * (values - center))), 1)
        assert_close(out_float, center + 1.5 * (values - center), 1e-3)


# ---- equalize and jpeg_compression_distortion: DALI's layouts ----------------------------------------
def _equalized(frame: np.ndarray) -> np.ndarray:
    return np.stack([cv2.equalizeHist(np.ascontiguousarray(frame[:, :, c])) for c in range(frame.shape[2])], axis=2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["HW", "CHW", "FHWC", "FCHW"])
def test_equalize_takes_every_channel_of_every_frame(device, layout):
    frames = [[smooth_image(9 + i, 7, seed=3 * i + k) for k in range(2)] for i in range(2)]
    as_layout = {"HW": lambda fs: fs[0][:, :, 0], "CHW": lambda fs: fs[0].transpose(2, 0, 1),
                 "FHWC": lambda fs: np.stack(fs), "FCHW": lambda fs: np.stack(fs).transpose(0, 3, 1, 2)}[layout]
    samples = [np.ascontiguousarray(as_layout(fs)) for fs in frames]
    outputs = run(lambda node, d: fn.equalize(node, device=d), samples, device, layout=layout)[0]
    for fs, output in zip(frames, outputs):
        equalized = [_equalized(f if layout != "HW" else f[:, :, :1]) for f in fs]
        np.testing.assert_array_equal(output, as_layout(equalized))


@pytest.mark.parametrize("device", DEVICES)
def test_jpeg_distortion_of_a_sequence_is_that_of_its_frames(device):
    frames = [smooth_image(16, 16, seed=k) for k in range(2)]
    sequence, single = (run(lambda node, d: fn.jpeg_compression_distortion(node, quality=30, device=d), samples,
                            device, layout=layout)[0][0] for samples, layout in (([np.stack(frames)], "FHWC"),
                                                                                  ([frames[1]], "HWC")))
    assert sequence.shape == (2, 16, 16, 3)
    np.testing.assert_array_equal(sequence[1], single)


def test_jpeg_distortion_refuses_grayscale_images_as_dali():
    with pytest.raises(Exception, match="jpeg_compression_distortion: .*needs 3-channel images"):
        run(lambda node, d: fn.jpeg_compression_distortion(node, device=d), images(channels=1), "cpu")


def test_lookup_table_takes_dalis_older_name_of_dtype():
    samples = [np.array([0, 1, 2, 5], np.uint8)]
    outputs = run_operator(lambda node: fn.lookup_table(node, keys=(0, 1), values=(10.0, 11.0), output_dtype=types.INT32),
                           samples, layout="")
    assert outputs[0].dtype == np.int32 and outputs[0].tolist() == [10, 11, 0, 0]
