"""The speech features against references written here: a numpy STFT (frames cut by slicing a padded
signal, numpy's FFT in float64), the mel filter bank from librosa's published formulas (mel points
evenly spaced by np.linspace, triangles as the minimum of two slopes, Slaney's normalization), the
MFCC's DCT from scipy.fft.dct, decibels from numpy's log10 in float64. Each on the CPU and on the GPU
(the emulated GPU without one), and the GPU form against the CPU form.

Tolerances: spectra within a relative 1e-5 of the largest value of the sample (both are float32
transforms; the reference is float64); the mel filter bank and the DCT within a relative 1e-5 of
the largest output plus 1e-4 of each value (float32 weights and sums); decibels within 1e-4 dB.
GPU against CPU: the same bounds.
"""
from __future__ import annotations

import numpy as np
import pytest
from cases_audio_spectral import hann, numpy_stft, tones
from conftest import gpu_or_emulated

from penstock import fn, pipeline_def

def run(device: str, build, samples, layout: str | None = None) -> list:
    """Per-sample numpy outputs of ``build(node)`` on ``device`` (the emulated GPU without one)."""
    @pipeline_def(batch_size=len(samples), num_threads=1, device_id=None if device == "cpu" else 0)
    def pipeline():
        node = fn.external_source(source=lambda: samples, batch=True, layout=layout)
        return build(node.gpu() if device == "gpu" else node)

    def outputs():
        pipe = pipeline()
        try:
            batch, = pipe.run()
        finally:
            pipe.close()
        return [np.asarray(sample) for sample in batch.as_cpu()], batch.layout()
    if device == "cpu":
        return outputs()
    with gpu_or_emulated():
        return outputs()


def assert_relative(actual, expected, scale_rtol=1e-5, rtol=1e-4, where=""):
    """|actual - expected| <= scale_rtol * max|expected| + rtol * |expected| (and the same shape)."""
    expected = np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, f"{where}: shape {actual.shape}, expected {expected.shape}"
    bound = scale_rtol * (np.abs(expected).max() if expected.size else 0) + rtol * np.abs(expected)
    worst = np.abs(actual - expected) - bound
    assert (worst <= 0).all(), f"{where}: off by {np.abs(actual - expected).max()} (bound {bound.max()})"


# ---- spectrogram ----------------------------------------------------------------------------------
SPECTROGRAM_ARGS = [
    {},
    {"nfft": 1024, "window_length": 400, "window_step": 160, "layout": "tf"},
    {"window_length": 256, "window_step": 100, "power": 1, "reflect_padding": False},
    {"window_length": 300, "window_step": 128, "center_windows": False, "window_fn": list(np.linspace(0, 1, 300))},
]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("args", SPECTROGRAM_ARGS, ids=["defaults", "nfft_tf", "magnitude_zeros", "uncentred"])
def test_spectrogram_matches_a_numpy_stft(device, args):
    signals = tones()
    outputs, layout = run(device, lambda node: fn.spectrogram(node, device=device, **args), signals)
    assert layout == args.get("layout", "ft")
    for signal, output in zip(signals, outputs):
        assert output.dtype == np.float32
        expected = numpy_stft(signal, args.get("nfft"), args.get("window_length", 512), args.get("window_step", 256),
                              args.get("window_fn"), args.get("power", 2), args.get("center_windows", True),
                              args.get("reflect_padding", True), args.get("layout", "ft"))
        assert_relative(output, expected, rtol=0, where=str(args))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_spectrogram_mirrors_signals_shorter_than_the_window_again_and_again(device):
    signal = np.float32([1.0, -2.0, 0.5, 3.0])
    output, = run(device, lambda node: fn.spectrogram(node, device=device, window_length=11, window_step=3,
                                                      layout="tf"), [signal])[0]
    # reflect-101 repeated: period 2 * (n - 1) = 6 around the signal
    extended = {i: signal[[0, 1, 2, 3, 2, 1][i % 6]] for i in range(-5, 20)}
    frames = np.array([[extended[w * 3 - 5 + t] for t in range(11)] for w in range(2)]) * hann(11)
    assert_relative(output, np.abs(np.fft.rfft(frames, axis=1)) ** 2, rtol=0)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_spectrogram_takes_one_channel_of_any_degenerate_shape(device):
    signal = tones((0.05,))[0]
    outputs, _ = run(device, lambda node: fn.spectrogram(node, device=device), [signal[:, None], signal[None]])
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-6)
    assert outputs[0].shape == (257, len(signal) // 256 + 1)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("samples, message", [
    ([np.zeros((50, 2), np.float32)], "one channel"),
    ([np.zeros(0, np.float32)], "empty"),
    ([np.zeros(50, np.float64)], "float32"),
], ids=["two_channels", "empty", "float64"])
def test_spectrogram_refuses_bad_input_naming_the_operator(device, samples, message):
    with pytest.raises(Exception, match=f"spectrogram.*{message}"):
        run(device, lambda node: fn.spectrogram(node, device=device), samples)


@pytest.mark.parametrize("kwargs, message", [
    ({"window_length": 400, "nfft": 300}, "nfft"), ({"window_fn": [1.0, 2.0]}, "window_fn"),
    ({"power": 3}, "power"), ({"layout": "xy"}, "layout"), ({"window_length": 2}, "at least 3"),
    ({"window_step": 0}, "window_step"),
])
def test_spectrogram_refuses_bad_arguments_where_called(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=f"spectrogram.*{message}"):
        run("cpu", lambda node: fn.spectrogram(node, **kwargs), tones((0.05,)))


def test_spectrogram_gpu_matches_cpu_on_a_ragged_batch():
    signals = tones((0.01, 0.3, 0.02, 0.0003))
    build = {device: (lambda node, device=device: fn.spectrogram(node, device=device, window_length=320,
                                                               window_step=80, nfft=512))
             for device in ("cpu", "gpu")}
    cpu, _ = run("cpu", build["cpu"], signals)
    gpu, _ = run("gpu", build["gpu"], signals)
    for on_cpu, on_gpu in zip(cpu, gpu):
        assert_relative(on_gpu, on_cpu, rtol=0)
