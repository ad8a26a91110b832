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
from cases_audio_spectral import (RATE, dali_dct, hann, librosa_mel, log_mels, numpy_decibels, numpy_stft,
                                  power_spectrograms, tones)
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


# ---- mel filter bank ------------------------------------------------------------------------------
MEL_ARGS = [
    {"sample_rate": RATE, "nfilter": 40},
    {"sample_rate": RATE, "nfilter": 64, "freq_low": 300.0, "freq_high": 6000.0, "mel_formula": "htk"},
    {"sample_rate": RATE, "nfilter": 20, "normalize": False, "freq_high": 12000.0},
    {"nfilter": 128},
]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("layout", ["ft", "tf"])
@pytest.mark.parametrize("args", MEL_ARGS, ids=["slaney", "htk_band", "peak_one_above_nyquist", "defaults"])
def test_mel_filter_bank_matches_librosas_formulas(device, layout, args):
    spectra = power_spectrograms()
    samples = spectra if layout == "ft" else [np.ascontiguousarray(s.T) for s in spectra]
    outputs, out_layout = run(device, lambda node: fn.mel_filter_bank(node, device=device, **args), samples, layout)
    assert out_layout == layout
    weights = librosa_mel(args.get("sample_rate", 44100.0), 510, args["nfilter"], args.get("freq_low", 0.0),
                          args.get("freq_high"), args.get("mel_formula") == "htk", args.get("normalize", True))
    for spectrum, output in zip(spectra, outputs):
        expected = weights @ spectrum.astype(np.float64)
        assert output.dtype == np.float32
        assert_relative(output, expected if layout == "ft" else expected.T, where=str(args))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_mel_filter_bank_takes_the_f_axis_of_any_layout(device):
    spectra = [np.stack([s, 2 * s]) for s in power_spectrograms()[:2]]
    outputs, _ = run(device, lambda node: fn.mel_filter_bank(node, device=device, sample_rate=RATE, nfilter=16),
                     spectra, "cft")
    weights = librosa_mel(RATE, 510, 16)
    for spectrum, output in zip(spectra, outputs):
        assert_relative(output, np.einsum("mf,cft->cmt", weights, spectrum.astype(np.float64)))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_mel_filter_bank_refuses_a_layout_without_f(device):
    with pytest.raises(Exception, match="mel_filter_bank.*'f'"):
        run(device, lambda node: fn.mel_filter_bank(node, device=device), power_spectrograms()[:1], "ab")


@pytest.mark.parametrize("kwargs", [{"freq_low": 9000.0, "sample_rate": RATE}, {"sample_rate": 0.0},
                                    {"freq_high": 50000.0}, {"mel_formula": "mel"}, {"nfilter": 0}])
def test_mel_filter_bank_refuses_bad_arguments_where_called(kwargs):
    with pytest.raises((ValueError, TypeError), match="mel_filter_bank"):
        fn.mel_filter_bank(fn.external_source(source=lambda: [np.ones((3, 4), np.float32)], batch=True), **kwargs)


# ---- MFCC -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("dct_type, normalize", [(1, False), (2, False), (2, True), (3, False), (3, True), (4, True)])
def test_mfcc_is_scipys_dct(device, dct_type, normalize):
    mels = log_mels()
    outputs, _ = run(device, lambda node: fn.mfcc(node, device=device, dct_type=dct_type, normalize=normalize,
                                                  n_mfcc=13), mels)
    for mel, output in zip(mels, outputs):
        assert_relative(output, dali_dct(mel, dct_type, normalize)[:13])


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_mfcc_lifters_along_the_axis_and_keeps_at_most_the_axis_extent(device):
    mels = log_mels()  # 11 to 21 frames along axis 1: fewer than n_mfcc
    outputs, _ = run(device, lambda node: fn.mfcc(node, device=device, axis=1, n_mfcc=50, lifter=-7.0), mels)
    for mel, output in zip(mels, outputs):
        frames = mel.shape[1]
        assert output.shape == (40, frames)
        lifter = 1 + (-3.5) * np.sin(np.pi * np.arange(1, frames + 1) / -7.0)
        assert_relative(output, dali_dct(mel, axis=1) * lifter)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("samples, kwargs, message", [
    ([np.ones(5, np.float32)], {}, "2 to 4 dimensions"), ([np.ones((3, 4), np.float32)], {"axis": 2}, "out of bounds"),
    ([np.ones((1, 4), np.float32)], {"dct_type": 1}, "type I"), ([np.ones((3, 4), np.float64)], {}, "float32"),
], ids=["1d", "axis", "dct1_of_one", "float64"])
def test_mfcc_refuses_bad_input_naming_the_operator(device, samples, kwargs, message):
    with pytest.raises(Exception, match=f"mfcc.*{message}"):
        run(device, lambda node: fn.mfcc(node, device=device, **kwargs), samples)


def test_mfcc_refuses_normalizing_dct_type_1_where_called():
    with pytest.raises(ValueError, match="mfcc.*type I"):
        fn.mfcc(fn.external_source(source=lambda: [np.ones((3, 4), np.float32)], batch=True), dct_type=1,
                normalize=True)


# ---- decibels -------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("kwargs", [{}, {"multiplier": 20.0, "cutoff_db": -60.0}, {"reference": 100.0},
                                    {"reference": -2.0}, {"cutoff_db": -1000.0}])
def test_to_decibels_matches_numpy(device, kwargs):
    samples = [*power_spectrograms()[:2], np.zeros((2, 3), np.float32), np.float32([[-1.0, 0.0, 0.25]])]
    outputs, _ = run(device, lambda node: fn.to_decibels(node, device=device, **kwargs), samples)
    for sample, output in zip(samples, outputs):
        multiplier = kwargs.get("multiplier", 10.0)
        smallest = multiplier * np.log10(float(np.nextafter(np.float32(0), np.float32(1))))  # float32's smallest ratio
        expected = numpy_decibels(sample, multiplier, kwargs.get("reference"), max(kwargs.get("cutoff_db", -200.0),
                                                                                   smallest))
        assert output.dtype == np.float32 and output.shape == sample.shape
        np.testing.assert_allclose(output, expected, atol=1e-4, rtol=1e-5)


def test_to_decibels_refuses_a_zero_reference_where_called():
    with pytest.raises(ValueError, match="to_decibels.*reference"):
        fn.to_decibels(fn.external_source(source=lambda: [np.ones(3, np.float32)], batch=True), reference=0.0)


# ---- power spectrum (CPU only) --------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, axis", [({}, -1), ({"nfft": 64, "power": 1}, -1), ({"axis": 0, "nfft": 10}, 0),
                                          ({"axis": -2}, -1)])
def test_power_spectrum_matches_numpy(kwargs, axis):
    samples = [np.stack([signal[:200], signal[100:300]]) for signal in tones()]
    outputs, _ = run("cpu", lambda node: fn.power_spectrum(node, **kwargs), samples)
    for sample, output in zip(samples, outputs):
        magnitude = np.abs(np.fft.rfft(sample.astype(np.float64), n=kwargs.get("nfft"), axis=axis))
        assert_relative(output, magnitude ** kwargs.get("power", 2), rtol=0)


@pytest.mark.parametrize("samples, kwargs, message", [
    ([np.ones((2, 2, 2, 8), np.float32)], {}, "1 to 3 dimensions"), ([np.ones(2, np.float32)], {}, "at least 3"),
    ([np.ones(8, np.float32)], {"axis": 1}, "out of bounds"), ([np.ones(8, np.float64)], {}, "float32"),
], ids=["4d", "two_values", "axis", "float64"])
def test_power_spectrum_refuses_bad_input_naming_the_operator(samples, kwargs, message):
    with pytest.raises(Exception, match=f"power_spectrum.*{message}"):
        run("cpu", lambda node: fn.power_spectrum(node, **kwargs), samples)


# ---- the GPU forms against the CPU forms, on ragged batches ----------------------------------------
@pytest.mark.parametrize("build", [
    lambda node, device: fn.mel_filter_bank(fn.spectrogram(node, device=device, nfft=400, window_length=300,
                                                           window_step=100), device=device, sample_rate=RATE),
    lambda node, device: fn.mfcc(fn.to_decibels(fn.mel_filter_bank(fn.spectrogram(
        node, device=device, layout="tf"), device=device, nfilter=40), device=device), device=device, axis=1),
], ids=["mel_spectrogram", "mfcc_of_decibels"])
def test_gpu_features_match_the_cpu_on_a_ragged_batch(build):
    signals = tones((0.05, 0.31, 0.02))
    cpu, cpu_layout = run("cpu", lambda node: build(node, "cpu"), signals)
    gpu, gpu_layout = run("gpu", lambda node: build(node, "gpu"), signals)
    assert cpu_layout == gpu_layout
    for on_cpu, on_gpu in zip(cpu, gpu):
        assert_relative(on_gpu, on_cpu)


def test_the_gpu_kernel_cuts_the_windows_the_cpu_table_gives():
    """The GPU form cuts every window of the batch in one kernel (kernels.triton_audio), its index
    computed from the window's start, its signal's length and place: the windows of frame_indices,
    weighed by the window function and zero-padded to nfft, for every padding, short signals
    (reflected again and again) and signals just around the window's length; the rows past the
    batch's (the FFT's bucket) are zeros."""
    import torch

    from penstock.kernels import audio_spectral as rules
    from penstock.kernels.triton_audio import bucketed_rows, window_table, windowed_frames
    for padding in ("reflect", "zero", "none"):
        for window_length, step, nfft in ((8, 3, 8), (5, 5, 8), (16, 4, 16), (6, 2, 4)):
            lengths = [n for n in (1, 2, 3, 7, 8, 9, 40, 41)
                       if rules.count_windows(n, window_length, step, padding != "none") > 0]
            counts = [rules.count_windows(n, window_length, step, padding != "none") for n in lengths]
            signals = [np.arange(1, n + 1, dtype=np.float32) * (k + 1) for k, n in enumerate(lengths)]
            window = np.linspace(0.5, 1.5, window_length).astype(np.float32)
            want = np.concatenate([np.append(signal, np.float32(0))[rules.frame_indices(len(signal), window_length, step, padding)]
                                   for signal in signals]) * window
            want = np.pad(want, ((0, 0), (0, max(0, nfft - window_length))))[:, :nfft]
            device = "cuda" if torch.cuda.is_available() else "cpu"  # compiled on a GPU, else interpreted
            table = torch.from_numpy(window_table(lengths, counts, window_length, step, padding != "none")).to(device)
            got = windowed_frames(torch.from_numpy(np.concatenate(signals)).to(device), table[0], table[1], table[2],
                                  torch.from_numpy(window).to(device), nfft, padding == "reflect").cpu().numpy()
            assert got.shape == (bucketed_rows(sum(counts)), nfft)
            np.testing.assert_array_equal(got[:sum(counts)], want)
            assert not got[sum(counts):].any()


def test_the_cpu_frames_are_the_index_tables_windows():
    """The CPU form frames a signal as a strided view of it padded once at each end, or through
    frame_indices where one reflection does not cover the windows' reach: the same windows as the
    index table for every padding, short signals and signals just around the window's length."""
    from penstock.kernels import audio_spectral as rules
    for padding in ("reflect", "zero", "none"):
        for window_length, step in ((8, 3), (5, 5), (16, 4), (7, 1)):
            for length in (1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 40, 41):
                if rules.count_windows(length, window_length, step, padding != "none") <= 0:
                    continue
                signal = np.arange(1, length + 1, dtype=np.float32)
                want = np.append(signal, 0)[rules.frame_indices(length, window_length, step, padding)]
                np.testing.assert_array_equal(rules.framed(signal, window_length, step, padding), want,
                                              err_msg=f"{padding}, window {window_length} step {step}, length {length}")
