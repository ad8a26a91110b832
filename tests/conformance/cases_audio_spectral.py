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
        result.append((spectrum if layout == "tf" else spectrum.T).astype(np.float32))
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
