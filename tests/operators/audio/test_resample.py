"""audio_resample and its resampler (penstock.kernels.audio_resampling), on the CPU and on the GPU
(the emulated GPU here: CPU tensors).

References and tolerances: a sine resampled against the analytic sine at the new rate, within 1e-3
at quality 50 and 100 and 2e-2 at quality 0 (3 lobes), away from the ends (where the window reaches
past the signal); against scipy's resample_poly within 2e-3 (scipy's own filter differs by that
much); halving the rate keeps every other sample (within float32 rounding, 1e-6). Lengths, types
and DALI's value conversions exactly. The GPU form against the CPU form within 1e-6 (float32 sums
in another order) and one step of integer outputs. DALI's own results are compared in the
conformance tier (tests/conformance/cases_audio_io.py).
"""
from __future__ import annotations

import numpy as np
import pytest
from conftest import run_operator
from operator_cases import Case, on_device, run_case
from scipy.signal import resample_poly

from penstock import fn, types
from penstock.kernels import audio_resampling


def sine(frames: int, rate: float, frequency: float = 440.0, amplitude: float = 0.8) -> np.ndarray:
    return (amplitude * np.sin(2 * np.pi * frequency * np.arange(frames) / rate)).astype(np.float32)


def test_quality_sets_the_lobes_as_dali_documents():
    assert [audio_resampling.lobes_for_quality(q) for q in (0, 50, 100)] == [3, 16, 64]
    with pytest.raises(ValueError, match="quality 101"):
        audio_resampling.lobes_for_quality(101)


def test_the_window_is_one_at_its_centre_and_zero_at_whole_samples():
    lobes = 16
    table = audio_resampling.window_table(lobes)
    center = int(audio_resampling.table_center(lobes))
    assert table[0] == 0 and table[center] == pytest.approx(1.0)
    whole = table[center + 32:center + 32 * lobes:32]  # 32 entries a sample
    np.testing.assert_allclose(whole, 0, atol=1e-7)


@pytest.mark.parametrize("quality, tolerance", [(0, 2e-2), (50, 1e-3), (100, 1e-3)])
@pytest.mark.parametrize("out_rate, up, down", [(22050, 441, 320), (12000, 3, 4), (44100, 441, 160)])
def test_a_sine_stays_the_sine(quality, tolerance, out_rate, up, down):
    signal = sine(1600, 16000)
    result = audio_resampling.resample(signal, 16000, out_rate, quality)
    assert result.shape == (int(np.ceil(1600 * out_rate / 16000)),) and result.dtype == np.float32
    inner = slice(out_rate // 100, -(out_rate // 100))
    np.testing.assert_allclose(result[inner], sine(len(result), out_rate)[inner], rtol=0, atol=tolerance)
    if quality:
        scipy_result = resample_poly(signal.astype(np.float64), up, down)[:len(result)]
        np.testing.assert_allclose(result[inner], scipy_result[inner], rtol=0, atol=2e-3)


def test_halving_keeps_every_other_sample_and_channels_are_independent():
    signal = np.random.default_rng(0).uniform(-1, 1, (301, 3)).astype(np.float32)
    halved = audio_resampling.resample(signal, 2, 1)
    np.testing.assert_allclose(halved, signal[::2], rtol=0, atol=1e-6)
    stretched = audio_resampling.resample(signal, 3, 7, 30)
    for channel in range(3):
        np.testing.assert_allclose(stretched[:, channel], audio_resampling.resample(signal[:, channel], 3, 7, 30),
                                   rtol=0, atol=1e-6)


def run_resample(samples, device="cpu", **kwargs):
    """The operator's outputs for ``samples`` on ``device`` (the GPU's through operator_cases.run_case)."""
    if device == "cpu":
        return run_operator(lambda node: fn.audio_resample(node, **kwargs), samples)
    case = Case(lambda: samples, lambda node, device: fn.audio_resample(on_device(node, device), device=device,
                                                                       **kwargs), reference=None)
    return run_case(case, device)[1]


def test_rates_scale_and_length_give_dalis_lengths():
    samples = [sine(100, 8000)[:, None], np.zeros((37, 2), np.float32), np.zeros((0, 2), np.float32)]
    assert [s.shape for s in run_resample(samples, in_rate=8000, out_rate=11025)] == [(138, 1), (51, 2), (0, 2)]
    assert [s.shape for s in run_resample(samples, scale=0.5)] == [(50, 1), (19, 2), (0, 2)]
    assert [s.shape for s in run_resample(samples, scale=0.0)] == [(0, 1), (0, 2), (0, 2)]
    assert [s.shape for s in run_resample(samples[:2], out_length=64)] == [(64, 1), (64, 2)]
    assert [s.shape for s in run_resample([sine(10, 1), sine(0, 1)], out_length=0)] == [(0,), (0,)]

    def per_sample(node):
        scales = fn.external_source(source=lambda: [np.float32(2), np.float32(1), np.float32(3)], batch=True)
        return fn.audio_resample(node, scale=scales)
    assert [s.shape for s in run_operator(per_sample, samples)] == [(200, 1), (37, 2), (0, 2)]


def test_integer_types_are_taken_and_given_at_full_scale():
    """DALI's conversions: integers divided by the type's maximum, unsigned ones moved to [-1, 1]
    for a signed output (and signed ones to [0, 1] for an unsigned output), the result scaled back
    to the output type's maximum and rounded."""
    halves = np.array([-32767, -100, 0, 100, 32767, 5], np.int16)
    assert run_resample([halves], scale=0.5)[0].tolist() == [-32767, 0, 32767]
    as_float = run_resample([np.array([0, 64, 128, 255], np.uint8)], scale=0.5, dtype=types.FLOAT)[0]
    np.testing.assert_allclose(as_float, [-1.0, 128 / 255 * 2 - 1], rtol=0, atol=1e-6)
    as_uint8 = run_resample([np.array([-1.0, 0.5, 0.5, 0.25, 1.0, 0.0], np.float32)], scale=0.5,
                            dtype=types.UINT8)[0]
    assert as_uint8.dtype == np.uint8 and as_uint8.tolist() == [0, 191, 255]  # 0.5 -> 0.75 of 255
    as_int32 = run_resample([np.array([0.5, 0.0], np.float32)], scale=0.5, dtype=types.INT32)[0]
    assert as_int32.tolist() == [1 << 30]


@pytest.mark.parametrize("kwargs", [dict(in_rate=16000, out_rate=11025), dict(scale=1.7, quality=0),
                                    dict(out_length=91, dtype=types.INT16), dict(scale=0.6, dtype=types.UINT8)])
def test_the_gpu_form_matches_the_cpu_form(kwargs):
    rng = np.random.default_rng(3)
    channels = [rng.uniform(-1, 1, (300, 2)), rng.uniform(-1, 1, (77, 1)), rng.uniform(-1, 1, (129, 3))]
    mono = [rng.uniform(-1, 1, 250), rng.uniform(-1, 1, 31)]
    for samples in (channels, mono):
        samples = [sample.astype(np.float32) for sample in samples]
        on_cpu, on_gpu = run_resample(samples, **kwargs), run_resample(samples, "gpu", **kwargs)
        for cpu, gpu in zip(on_cpu, on_gpu):
            assert cpu.shape == gpu.shape and cpu.dtype == gpu.dtype
            np.testing.assert_allclose(gpu.astype(np.float64), cpu, rtol=0, atol=1 if cpu.dtype.kind != "f" else 1e-6)


@pytest.mark.parametrize("kwargs, message", [
    (dict(in_rate=2.0), "'in_rate' and 'out_rate' must be given together"),
    (dict(), "no resampling factor given"),
    (dict(scale=2.0, out_length=4), "cannot be used together"),
    (dict(scale=2.0, quality=-1), "argument 'quality'"),
    (dict(scale=2.0, dtype=types.INT64), "argument 'dtype'"),
])
def test_bad_arguments_are_refused_where_called(kwargs, message):
    with pytest.raises((TypeError, ValueError), match=f"audio_resample: .*{message}"):
        run_resample([sine(10, 1)], **kwargs)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("samples, kwargs, message", [
    ([np.zeros((4, 2, 2), np.float32)], dict(scale=2.0), r"\[time\] or \[time, channels\]"),
    ([np.zeros(4, np.float64)], dict(scale=2.0), "got float64"),
    ([np.zeros(4, np.float32)], dict(scale=-1.0), "must not be negative"),
    ([np.zeros(4, np.float32)], dict(in_rate=0.0, out_rate=1.0), "must be positive"),
    ([np.zeros(0, np.float32)], dict(out_length=3), "from an empty one"),
    ([np.zeros(4, np.float32)], dict(scale=1e12), "more than the limit"),
], ids=["3d", "float64", "negative_scale", "zero_in_rate", "empty_to_some", "huge"])
def test_bad_inputs_are_refused_naming_the_operator(device, samples, kwargs, message):
    with pytest.raises(Exception, match=f"audio_resample.*{message}"):
        run_resample(samples, device, **kwargs)


@pytest.mark.parametrize("channels", [1, 2, 9])
def test_the_c_resampler_gives_what_the_numpy_filtering_gives(channels):
    """runtime/csrc/audio_resample.c (when it builds) runs DALI's loop, its sums in DALI's order
    (four lanes for mono); the numpy path sums each output's taps in another order: within 2e-5
    of each other on unit-scale noise, every quality, up and down, and the same length."""
    from penstock.kernels import audio_resampling
    from penstock.runtime import native
    if native.audio_resample() is None:
        pytest.skip(f"the C resampler cannot be built here: {native.problem('audio_resample')}")
    signal = (0.5 * np.random.default_rng(channels).standard_normal((3001, channels))).astype(np.float32)
    for quality in (0.0, 50.0, 100.0):
        for in_rate, out_rate in ((44100, 16000), (16000, 44100), (22050, 16000), (8000, 7)):
            with_c = audio_resampling.resample(signal, in_rate, out_rate, quality, native=native.audio_resample)
            with_numpy = audio_resampling.resample(signal, in_rate, out_rate, quality)
            assert with_c.shape == with_numpy.shape
            np.testing.assert_allclose(with_c, with_numpy, atol=2e-5, rtol=0)
