"""preemphasis_filter and nonsilent_region against references written here, and their GPU forms
against their CPU forms in the emulated GPU.

Tolerances: pre-emphasis against scipy.signal.lfilter in float64 within float32 rounding (atol
1e-6 of the signal's scale) for float output, within one unit for integer output (rounded from
float32); the GPU's pre-emphasis equals the CPU's. The non-silent region's begin and length equal
a direct float64 moving mean square's (numpy convolution of the squares) on signals whose windows
lie far from the threshold; where DALI's float32 running sum decides (the residue it leaves after a
loud stretch), they equal a loop written here that sums as DALI does. The GPU's equals the CPU's on
signals whose windows lie far from the threshold (its sums are exact, not DALI's float32 ones).
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.signal
from operator_cases import Case, on_device, run_case

from penstock import fn, types
from penstock.executor.jobs import PipelineError

RATE = 16000


def speech_like(length: int, seed: int, loud=(0.3, 0.7), floor: float = 0.0, dtype=np.float32) -> np.ndarray:
    """A 440 Hz sine plus noise between the fractions ``loud`` of the signal, ``floor`` times it elsewhere."""
    rng = np.random.default_rng(seed)
    t = np.arange(length) / RATE
    signal = 0.5 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(length)
    begin, end = int(loud[0] * length), int(loud[1] * length)
    signal[:begin] *= floor
    signal[end:] *= floor
    if np.dtype(dtype).kind == "i":
        return np.round(signal * 20000).astype(dtype)
    return signal.astype(dtype)


def run(samples, build, device="cpu"):
    """Outputs (a list per output, or a list for one) of ``build(node, device)`` over ``samples``."""
    return run_case(Case(lambda: samples, build, reference=None), device)[1]


def preemphasis(**kwargs):
    return lambda node, device: fn.preemphasis_filter(on_device(node, device), device=device, **kwargs)


def nonsilent(**kwargs):
    return lambda node, device: tuple(fn.nonsilent_region(on_device(node, device), device=device, **kwargs))


# ---- pre-emphasis --------------------------------------------------------------------------------------
def lfilter_reference(signal, coeff, border):
    flat = np.asarray(signal, np.float64).ravel()
    edge = {"zero": 0.0, "clamp": flat[0], "reflect": flat[1]}[border]
    filtered, _ = scipy.signal.lfilter([1.0, -coeff], [1.0], flat, zi=[-coeff * edge])
    return filtered.reshape(np.shape(signal))


@pytest.mark.parametrize("border", ["clamp", "zero", "reflect"])
def test_preemphasis_matches_lfilter(border):
    samples = [speech_like(1600, 1), speech_like(2400, 2), speech_like(800, 3)]
    outputs = run(samples, preemphasis(preemph_coeff=0.95, border=border))
    for sample, output in zip(samples, outputs):
        assert output.dtype == np.float32 and output.shape == sample.shape
        np.testing.assert_allclose(output, lfilter_reference(sample, np.float32(0.95), border), rtol=0, atol=1e-6)


def test_preemphasis_integer_output_per_sample_coefficients_and_shapes():
    samples = [speech_like(1200, 4, dtype=np.int16), speech_like(900, 5, dtype=np.int16)]
    coeffs = [np.float32(0.9), np.float32(0.5)]

    def build(node, device):
        coeff = fn.external_source(source=lambda: coeffs, batch=True)
        return fn.preemphasis_filter(on_device(node, device), device=device, preemph_coeff=coeff, dtype=types.INT16)
    outputs = run(samples, build)
    for sample, coeff, output in zip(samples, coeffs, outputs):
        assert output.dtype == np.int16 and output.shape == sample.shape
        expected = np.clip(lfilter_reference(sample, coeff, "clamp"), -32768, 32767)
        assert np.abs(output - expected).max() <= 1


def test_preemphasis_zero_coefficient_converts_and_empty_sample_passes():
    samples = [np.array([1.4, -2.5, 300.0], np.float32), np.zeros(0, np.float32)]
    kept, empty = run(samples, preemphasis(preemph_coeff=0.0, dtype=types.UINT8))
    np.testing.assert_array_equal(kept, [1, 0, 255])  # rounded and saturated, not filtered
    assert empty.shape == (0,) and empty.dtype == np.uint8


def test_preemphasis_filters_a_sample_of_several_dimensions_flat():
    samples = [speech_like(120, 5).reshape(10, 12), speech_like(96, 6).reshape(8, 12)]
    for sample, output in zip(samples, run(samples, preemphasis(border="reflect"))):
        assert output.shape == sample.shape
        np.testing.assert_allclose(output, lfilter_reference(sample, np.float32(0.97), "reflect"), rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.float64])
@pytest.mark.parametrize("border", ["clamp", "zero", "reflect"])
def test_preemphasis_gpu_equals_cpu(dtype, border):
    samples = [speech_like(700, 6, dtype=dtype), speech_like(1100, 7, dtype=dtype), speech_like(300, 8, dtype=dtype)]
    build = preemphasis(preemph_coeff=0.97, border=border, dtype=types.INT32 if dtype == np.int16 else types.FLOAT)
    for on_gpu, on_cpu in zip(run(samples, build, "gpu"), run(samples, build)):
        assert on_gpu.dtype == on_cpu.dtype
        np.testing.assert_array_equal(on_gpu, on_cpu)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_preemphasis_refuses_bad_input(device):
    with pytest.raises(PipelineError, match="preemphasis_filter.*float16"):
        run([np.ones(10, np.float16)], preemphasis(), device)
    with pytest.raises(PipelineError, match="preemphasis_filter.*reflect"):
        run([np.ones(1, np.float32)], preemphasis(border="reflect"), device)
    with pytest.raises(ValueError, match="preemphasis_filter.*border"):
        run([np.ones(4, np.float32)], preemphasis(border="wrap"), device)


# ---- the non-silent region -------------------------------------------------------------------------------
def direct_region(signal, cutoff_db=-60.0, window=2048, reference_power=None):
    """(begin, length) from the float64 mean square of each window of ``window`` samples ending at
    each position (zeros before the signal)."""
    window = min(window, len(signal))
    squares = np.asarray(signal, np.float64) ** 2
    power = np.convolve(squares, np.ones(window))[:len(signal)] / window
    reference = power.max() if reference_power is None else reference_power
    loud = np.flatnonzero(power >= reference * 10 ** (cutoff_db / 10))
    if loud.size == 0:
        return 0, 0
    begin = max(loud[0] - window + 1, 0)
    return begin, loud[-1] + 1 - begin


def regions_of(outputs):
    begins, lengths = outputs
    assert all(b.dtype == np.int32 and b.shape == () for b in begins + lengths)
    return [(int(b), int(n)) for b, n in zip(begins, lengths)]


SIGNALS = [speech_like(4000, 1, floor=1e-2), speech_like(6000, 2, (0.1, 0.5), floor=1e-2),
           speech_like(2500, 3, (0.0, 0.8), floor=1e-2), speech_like(1500, 4, (0.4, 1.0))]


@pytest.mark.parametrize("kwargs", [{"cutoff_db": -30.0, "window_length": 512}, {"cutoff_db": -20.0, "window_length": 256, "reset_interval": 1024},
                                    {"cutoff_db": -30.0, "window_length": 512, "reference_power": 0.5,
                                     "reset_interval": -1}])
def test_region_matches_direct_moving_mean_square(kwargs):
    expected = [direct_region(s, kwargs.get("cutoff_db", -60.0), kwargs.get("window_length", 2048),
                              kwargs.get("reference_power")) for s in SIGNALS]
    assert regions_of(run(SIGNALS, nonsilent(**kwargs))) == expected
    assert any(begin > 0 for begin, _ in expected) and any(begin + n < len(s) for (begin, n), s in zip(expected, SIGNALS))


def test_region_of_16_bit_integers_is_exact():
    samples = [speech_like(5000, 5, dtype=np.int16), speech_like(3000, 6, (0.5, 0.9), floor=1e-3, dtype=np.int16)]
    expected = [direct_region(s, -50.0, 300) for s in samples]
    assert regions_of(run(samples, nonsilent(cutoff_db=-50.0, window_length=300))) == expected


def dali_running_sum_region(signal, cutoff_db, window, reset_interval):
    """DALI's moving mean square written as its loop: a float32 running sum started afresh every
    ``reset_interval`` positions (moving_mean_square.cc), then the threshold (nonsilence_op.h)."""
    squares = signal.astype(np.float32) ** 2
    power = np.empty(len(signal), np.float32)
    for start in range(0, len(signal), reset_interval):
        total = np.float32(0)
        for position in range(max(start - window + 1, 0), start):
            total = np.float32(total + squares[position])
        for position in range(start, min(start + reset_interval, len(signal))):
            total = np.float32(total + squares[position])
            power[position] = total * (np.float32(1) / np.float32(window))
            if position - window + 1 >= 0:
                total = np.float32(total - squares[position - window + 1])
    threshold = power.max() * np.power(np.float32(10), np.float32(cutoff_db) * np.float32(0.1))
    loud = np.flatnonzero(power >= threshold)
    begin = max(loud[0] - window + 1, 0)
    return begin, loud[-1] + 1 - begin


def test_region_follows_dali_float32_running_sum():
    # silence of exact zeros after a loud stretch: the float32 sum keeps a residue above -80 dB until
    # it is reset, so the region reaches the next reset, not the loud stretch's end
    samples = [speech_like(3000, 7, (0.1, 0.4)), speech_like(2000, 8, (0.2, 0.5))]
    expected = [dali_running_sum_region(s, -80.0, 128, 512) for s in samples]
    assert expected != [direct_region(s, -80.0, 128) for s in samples]
    assert regions_of(run(samples, nonsilent(cutoff_db=-80.0, window_length=128, reset_interval=512))) == expected


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_region_of_silence_and_empty_signals(device):
    samples = [np.zeros(300, np.float32), np.zeros(0, np.float32), speech_like(100, 9)]
    # the largest power of zeros is 0, and every window reaches 0: all loud (as DALI)
    assert regions_of(run(samples, nonsilent(), device)) == [(0, 300), (0, 0), (0, 100)]
    assert regions_of(run(samples, nonsilent(reference_power=1.0, cutoff_db=-20.0), device))[:2] == [(0, 0), (0, 0)]


def test_region_gpu_equals_cpu():
    samples = SIGNALS + [speech_like(9000, 10, (0.2, 0.6), floor=1e-2, dtype=np.int16), np.zeros(0, np.float32)]
    for kwargs in ({}, {"cutoff_db": -25.0, "window_length": 64, "reset_interval": 128}):
        floats = [s.astype(np.float32) for s in samples]
        assert regions_of(run(floats, nonsilent(**kwargs), "gpu")) == regions_of(run(floats, nonsilent(**kwargs)))
    integers = [speech_like(n, n, dtype=np.int16) for n in (700, 1900, 40)]
    build = nonsilent(cutoff_db=-40.0, window_length=100)
    assert regions_of(run(integers, build, "gpu")) == regions_of(run(integers, build))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_region_refuses_bad_input(device):
    with pytest.raises(PipelineError, match="nonsilent_region.*1-D"):
        run([np.ones((4, 5), np.float32)], nonsilent(), device)
    with pytest.raises(PipelineError, match="nonsilent_region.*float64"):
        run([np.ones(10, np.float64)], nonsilent(), device)
    with pytest.raises(PipelineError, match="nonsilent_region.*reset_interval"):
        run([np.ones(10, np.float32)], nonsilent(window_length=4, reset_interval=10), device)
    with pytest.raises(ValueError, match="nonsilent_region.*reference_power"):
        run([np.ones(10, np.float32)], nonsilent(reference_power=-1.0), device)
    # integer input is never reset: any reset_interval goes, as in DALI
    assert regions_of(run([np.ones(10, np.int16)], nonsilent(window_length=4, reset_interval=10), device)) == [(0, 10)]
