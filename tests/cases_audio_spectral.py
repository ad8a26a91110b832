"""Coverage cases of the speech features (penstock.operators.audio.spectral), and the references
tests/operators/audio/test_spectral.py shares: a numpy STFT cut by slicing, in float64.

Tolerances: spectra of signals of amplitude about 1 (values up to about 2e4) within 0.05 plus a
relative 1e-4 (float32 transforms against float64).
"""
from __future__ import annotations

import numpy as np
from operator_cases import Case, on_device

from penstock import fn

RATE = 16000


def tones(durations=(0.1, 0.137, 0.2), seed=0) -> list:
    """Sines plus noise at 16 kHz, float32, one signal per duration."""
    rng = np.random.default_rng(seed)
    signals = []
    for duration in durations:
        t = np.arange(int(duration * RATE)) / RATE
        tone = 0.6 * np.sin(2 * np.pi * 440 * t) + 0.3 * np.sin(2 * np.pi * 3100 * t + 1.0)
        signals.append((tone + 0.05 * rng.standard_normal(t.size)).astype(np.float32))
    return signals


def hann(length):
    return 0.5 * (1 - np.cos(2 * np.pi * (np.arange(length) + 0.5) / length))


def numpy_stft(signal, nfft=None, window_length=512, window_step=256, window=None, power=2, center=True,
               reflect=True, layout="ft"):
    """The STFT cut by slicing: the signal padded by half a window (mirrored without the edge, or
    zeros), windows every window_step, each zero-padded to nfft."""
    nfft = nfft or window_length
    window = hann(window_length) if window is None else np.asarray(window, np.float64)
    signal = signal.astype(np.float64)
    if center:
        half = window_length // 2
        padded = np.pad(signal, (half, window_length - half), mode="reflect" if reflect else "constant")
        count = len(signal) // window_step + 1
    else:
        padded, count = signal, (len(signal) - window_length) // window_step + 1
    frames = np.stack([padded[i * window_step:i * window_step + window_length] for i in range(count)]) * window
    magnitude = np.abs(np.fft.rfft(frames, n=nfft, axis=1))
    result = magnitude ** 2 if power == 2 else magnitude
    return result if layout == "tf" else result.T


def _spectrogram_reference(samples, _):
    return [numpy_stft(signal, window_length=400, window_step=160, nfft=512) for signal in samples]


CASES = {
    "spectrogram": Case(lambda: tones(), lambda node, device: fn.spectrogram(
        on_device(node, device), device=device, window_length=400, window_step=160, nfft=512),
        _spectrogram_reference, max_abs=0.05, rtol=1e-4),
}


# ---- mel filter bank: librosa's published formulas (librosa.filters.mel, librosa.mel_frequencies) ----
def hz_to_mel(frequencies, htk=False):
    frequencies = np.asarray(frequencies, np.float64)
    if htk:
        return 2595.0 * np.log10(1.0 + frequencies / 700.0)
    f_sp, min_log_hz, min_log_mel, logstep = 200.0 / 3, 1000.0, 15.0, np.log(6.4) / 27.0
    return np.where(frequencies >= min_log_hz, min_log_mel + np.log(np.maximum(frequencies, 1e-10) / min_log_hz)
                    / logstep, frequencies / f_sp)


def mel_to_hz(mels, htk=False):
    mels = np.asarray(mels, np.float64)
    if htk:
        return 700.0 * (10.0 ** (mels / 2595.0) - 1.0)
    f_sp, min_log_hz, min_log_mel, logstep = 200.0 / 3, 1000.0, 15.0, np.log(6.4) / 27.0
    return np.where(mels >= min_log_mel, min_log_hz * np.exp(logstep * (mels - min_log_mel)), f_sp * mels)


def librosa_mel(sample_rate, nfft, nfilter=128, freq_low=0.0, freq_high=None, htk=False, normalize=True):
    """(nfilter, nfft // 2 + 1) weights: triangles between mel points evenly spaced from freq_low to
    freq_high, the minimum of the rising and the falling slope; Slaney's normalization divides each
    by half its width in Hz."""
    freq_high = sample_rate / 2 if freq_high is None else freq_high
    frequencies = np.fft.rfftfreq(nfft, 1.0 / sample_rate)
    points = mel_to_hz(np.linspace(hz_to_mel(freq_low, htk), hz_to_mel(freq_high, htk), nfilter + 2), htk)
    widths = np.diff(points)
    ramps = points[:, None] - frequencies[None, :]
    weights = np.maximum(0, np.minimum(-ramps[:-2] / widths[:-1, None], ramps[2:] / widths[1:, None]))
    if normalize:
        weights *= (2.0 / (points[2:nfilter + 2] - points[:nfilter]))[:, None]
    return weights


def _mel_reference(samples, _):
    return [librosa_mel(RATE, 510, 40) @ sample.astype(np.float64) for sample in samples]


def power_spectrograms() -> list:
    return [numpy_stft(signal, nfft=510, window_length=400, window_step=160).astype(np.float32) for signal in tones()]


def log_mels() -> list:
    weights = librosa_mel(RATE, 510, 40)
    return [np.log(weights @ spectrum + 1e-6).astype(np.float32) for spectrum in power_spectrograms()]


def dali_dct(values, dct_type=2, normalize=False, axis=0):
    """DALI's DCT from scipy's: the orthonormal one as scipy's, else half scipy's unnormalized sums."""
    import scipy.fft
    result = scipy.fft.dct(values.astype(np.float64), type=dct_type, axis=axis, norm="ortho" if normalize else None)
    return result if normalize else result / 2


def _mfcc_reference(samples, _):
    lifter = 1 + 11.0 * np.sin(np.pi * np.arange(1, 14) / 22.0)
    return [dali_dct(sample)[:13] * lifter[:, None] for sample in samples]


def numpy_decibels(values, multiplier=10.0, reference=None, cutoff_db=-200.0):
    values = values.astype(np.float64)
    reference = reference if reference is not None else (values.max() if values.size and values.max() > 0 else 1.0)
    return multiplier * np.log10(np.maximum(10.0 ** (cutoff_db / multiplier), values / reference))


CASES.update({
    "mel_filter_bank": Case(power_spectrograms, lambda node, device: fn.mel_filter_bank(
        on_device(node, device), device=device, sample_rate=RATE, nfilter=40), _mel_reference, max_abs=1e-2,
        rtol=1e-4),
    "mfcc": Case(log_mels, lambda node, device: fn.mfcc(on_device(node, device), device=device, n_mfcc=13,
                                                        lifter=22.0), _mfcc_reference, max_abs=1e-3, rtol=1e-4),
    "to_decibels": Case(power_spectrograms, lambda node, device: fn.to_decibels(
        on_device(node, device), device=device, cutoff_db=-80.0),
        lambda samples, _: [numpy_decibels(s, cutoff_db=-80.0) for s in samples], max_abs=1e-3),
    "power_spectrum": Case(tones, lambda node, device: fn.power_spectrum(node, nfft=2048),
                           lambda samples, _: [np.abs(np.fft.rfft(s.astype(np.float64), n=2048)) ** 2 for s in samples],
                           max_abs=0.05, rtol=1e-4),
})
