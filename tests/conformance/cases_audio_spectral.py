"""Speech features against DALI's CPU operators: spectrogram, power_spectrum, mel_filter_bank, mfcc,
to_decibels, on sines plus noise of 0.1 to 0.5 s at 16 kHz (float32).

Tolerances: both libraries transform in float32 (DALI with ffts, penstock with scipy.fft), so
spectra agree within a relative 1e-4 of each value plus an absolute part scaled to the spectrum's
largest values; the mel filter bank and the DCT are float32 sums of products (relative 1e-4);
decibels within 1e-3 dB.
"""
import numpy as np

from conformance.harness import Close, Data, Spec

RATE = 16000


def signals(durations=(0.1, 0.23, 0.5), seed=0, shape=lambda signal: signal, layout=None) -> Data:
    """Sines of a few frequencies plus noise, one signal per duration."""
    rng = np.random.default_rng(seed)
    samples = []
    for duration in durations:
        t = np.arange(int(duration * RATE)) / RATE
        tone = sum(amplitude * np.sin(2 * np.pi * frequency * t + rng.uniform(0, 2 * np.pi))
                   for frequency, amplitude in ((220.0, 0.5), (1250.0, 0.3), (5100.0, 0.2)))
        samples.append(shape((tone + 0.05 * rng.standard_normal(t.size)).astype(np.float32)))
    return Data(samples, layout)


def spectrograms(nfft=512, step=160, layout="ft", power=2) -> Data:
    """Power spectrograms of the signals (numpy: Hann windows, zero-padded at the ends)."""
    result = []
    for signal in signals().samples:
        padded = np.pad(signal, nfft // 2)
        count = (len(padded) - nfft) // step + 1
        frames = np.stack([padded[i * step:i * step + nfft] for i in range(count)]) * np.hanning(nfft)
        spectrum = np.abs(np.fft.rfft(frames, axis=1)) ** power
        result.append(np.ascontiguousarray(spectrum if layout == "tf" else spectrum.T, np.float32))
    return Data(result, layout)


SPECTRUM = Close(atol=0.05, rtol=1e-4)

SPECS = [
    Spec("spectrogram", (signals(),), {}, compare=SPECTRUM, grid={
        "@input": {"n_by_1": (signals(shape=lambda s: s[:, None]),), "1_by_n": (signals(shape=lambda s: s[None]),),
                   "short": (Data([np.float32([0.5, -1.0, 2.0]), np.float32([1.0])]),),
                   "two_channels": (signals(shape=lambda s: np.stack([s, s], 1)),),
                   "float64": (signals(shape=lambda s: s.astype(np.float64)),),
                   "empty": (Data([np.zeros(0, np.float32)]),)},
        "nfft": [400, 1024, 513],
        "window_length": [400, 256, 2, 100],
        "window_step": [160, 100, 1000, 0],
        "window_fn": {"ramp": list(np.linspace(0, 1, 512)), "wrong_length": [1.0, 2.0]},
        "power": [1, 3],
        "center_windows": [False],
        "reflect_padding": [False],
        "layout": ["tf", "xy"],
    }, refused=("two_channels", "float64", "empty", "2", "0", "wrong_length", "3", "xy")),
    # windows longer than the signals: uncentred ones (DALI's quotient truncates towards zero), zero padding
    Spec("spectrogram", (signals((0.03, 0.031)),), {"window_length": 512, "window_step": 256,
                                                    "center_windows": False}, name="spectrogram_uncentred",
         compare=SPECTRUM, grid={"window_length": [600, 900], "window_step": [100]}, refused=("900",)),
    Spec("spectrogram", (signals((0.01, 0.004)),), {"window_length": 400, "window_step": 64, "nfft": 512},
         name="spectrogram_short", compare=SPECTRUM, grid={"reflect_padding": [False], "layout": ["tf"]}),
]

MEL = Close(atol=1e-3, rtol=1e-4)


def mel_spectrograms(nfilter=40, layout="ft") -> Data:
    """Mel spectrograms of the signals (librosa-style filters in numpy), their logarithm as an MFCC takes them."""
    result = []
    for spectrum in spectrograms(layout="ft").samples:
        edges = np.linspace(0, spectrum.shape[0] - 1, nfilter + 2)
        bins = np.arange(spectrum.shape[0])
        weights = np.maximum(0, np.minimum((bins - edges[:-2, None]) / np.diff(edges)[:-1, None],
                                           (edges[2:, None] - bins) / np.diff(edges)[1:, None]))
        mel = np.log(weights @ spectrum + 1e-6).astype(np.float32)
        result.append(mel if layout == "ft" else np.ascontiguousarray(mel.T))
    return Data(result, layout)


SPECS += [
    Spec("mel_filter_bank", (spectrograms(),), {"sample_rate": RATE, "nfilter": 64}, compare=MEL, grid={
        "@input": {"tf": (spectrograms(layout="tf"),), "no_layout": (Data(spectrograms().samples),),
                   "magnitude": (spectrograms(power=1),), "nfft_400": (spectrograms(nfft=400),),
                   "batch_of_3d": (Data([np.stack([s, s]) for s in spectrograms().samples], "cft"),),
                   "1d": (Data([s[:, 0].copy() for s in spectrograms().samples]),),
                   "no_f": (Data(spectrograms().samples, "ab"),),
                   "float64": (Data([s.astype(np.float64) for s in spectrograms().samples], "ft"),)},
        "nfilter": [1, 128, 0],
        "sample_rate": [44100.0, 8000.0, 0.0],
        "freq_low": [100.0, 3999.0, 9000.0],
        "freq_high": [3000.0, 8000.0, 12000.0, 20000.0],
        "normalize": [False],
        "mel_formula": ["htk", "mel"],
    }, refused=("no_f", "float64", "0", "0.0", "9000.0", "20000.0", "mel")),
    Spec("mel_filter_bank", (spectrograms(),), {"sample_rate": RATE, "freq_low": 20.0, "freq_high": 7600.0},
         name="mel_filter_bank_htk", compare=MEL, grid={"mel_formula": ["htk"], "nfilter": [80]}),
    Spec("mfcc", (mel_spectrograms(),), {}, compare=MEL, grid={
        "@input": {"tf": (mel_spectrograms(layout="tf"),), "3d": (Data([np.stack([s, s]) for s in
                                                                       mel_spectrograms().samples], "cft"),),
                   "1d": (Data([s[:, 0].copy() for s in mel_spectrograms().samples]),),
                   "few_rows": (Data([s[:5].copy() for s in mel_spectrograms().samples]),)},
        "n_mfcc": [13, 40, 64, 0],
        "dct_type": [1, 3, 4, 5],
        "normalize": [True],
        "axis": [1, 2, -1],
        "lifter": [22.0, -3.0],
    }, refused=("1d", "0", "5", "2", "-1")),
    Spec("mfcc", (mel_spectrograms(),), {"normalize": True}, name="mfcc_normalized", compare=MEL,
         grid={"dct_type": {"type_1": 1, "type_3": 3, "type_4": 4}, "axis": [1], "n_mfcc": [13]},
         refused=("type_1",)),
    Spec("to_decibels", (spectrograms(),), {}, compare=Close(atol=1e-3, rtol=1e-5), grid={
        "@input": {"mel": (mel_spectrograms(),), "zeros": (Data([np.zeros((3, 4), np.float32)]),),
                   "negative": (Data([-np.ones((3, 4), np.float32), np.float32([[0.0, -2.0, 0.5]])]),),
                   "1d": (Data([s[:, 0].copy() for s in spectrograms().samples]),),
                   "empty": (Data([np.zeros((0, 3), np.float32)]),),
                   "float64": (Data([s.astype(np.float64) for s in spectrograms().samples]),)},
        "multiplier": [20.0, 1.0],
        "reference": {"1.0": 1.0, "100.0": 100.0, "-2.0": -2.0, "zero": 0.0},
        "cutoff_db": [-80.0, 0.0, -1000.0],
    }, refused=("float64", "zero")),
    Spec("power_spectrum", (signals(),), {}, compare=SPECTRUM, grid={
        "@input": {"2d": (Data([np.stack([s[:300], s[:300]]) for s in signals().samples]),),
                   "3d": (Data([np.zeros((2, 3, 8), np.float32) + 1]),),
                   "4d": (Data([np.ones((2, 2, 2, 8), np.float32)]),),
                   "two_values": (Data([np.float32([1.0, 2.0])]),),
                   "three_values": (Data([np.float32([1.0, 2.0, 4.0])]),),
                   "float64": (signals(shape=lambda s: s.astype(np.float64)),)},
        "nfft": [512, 1000, 64, 0, 2],
        "axis": {"0": 0, "-2": -2, "out_of_range": 1},
        "power": [1, 3],
    }, refused=("4d", "two_values", "float64", "2", "3", "out_of_range")),
]
