"""Cases of the audio input operators (penstock.operators.decoders.audio and
penstock.operators.audio.resample) for the coverage test; the operators' own tests are in
tests/operators/decoders/test_audio_decoder.py and tests/operators/audio/test_resample.py.

References: ``windowed_sinc``, DALI's filter written directly in float64 (the sinc and the Hann
window evaluated exactly at each tap, one matrix product), where penstock interpolates a float32
table of the window: within 1e-3 on the sines used here. decoders.audio: soundfile's reading of
each file, resampled by ``windowed_sinc`` to the requested rate (within 1e-3), and the rate output
exactly.
"""
from __future__ import annotations

import io

import numpy as np
import soundfile
from operator_cases import Case, on_device

from penstock import fn

RATE = 16000


def tones(frames: int, channels: int, rate: int = RATE, seed: int = 0) -> np.ndarray:
    """Sines of a few hundred Hz to 2 kHz, one a channel, [frames, channels] float32."""
    frequencies = np.random.default_rng(seed).uniform(200, 2000, channels)
    t = np.arange(frames)[:, None] / rate
    return (0.7 * np.sin(2 * np.pi * frequencies[None, :] * t + np.arange(channels))).astype(np.float32)


def encoded_audio(signal: np.ndarray, fmt: str = "WAV", subtype: str | None = "PCM_16", rate: int = RATE) -> np.ndarray:
    """The file soundfile writes, as the 1-D uint8 sample the decoder takes."""
    buffer = io.BytesIO()
    soundfile.write(buffer, signal, rate, format=fmt, subtype=subtype)
    return np.frombuffer(buffer.getvalue(), np.uint8).copy()


def windowed_sinc(signal: np.ndarray, in_rate: float, out_rate: float, lobes: int = 16) -> np.ndarray:
    """DALI's resampling in float64: output j is the sum over inputs i of x[i] sinc(t - i)
    hann((t - i) / lobes), t = j * in_rate / out_rate, for ceil(length * out_rate / in_rate) outputs."""
    count = int(np.ceil(len(signal) * out_rate / in_rate))
    distance = (np.arange(count) * in_rate / out_rate)[:, None] - np.arange(len(signal))[None, :]
    window = np.where(np.abs(distance) < lobes, 0.5 * (1 + np.cos(np.pi * distance / lobes)), 0.0)
    return (np.sinc(distance) * window) @ signal.astype(np.float64)


def _signals():
    return [tones(300, 2, seed=1), tones(157, 2, seed=2), tones(64, 2, seed=3)]


def _files():
    return [encoded_audio(tones(300, 2, seed=1)), encoded_audio(tones(200, 1, seed=2), "FLAC", "PCM_24"),
            encoded_audio(tones(250, 2, seed=3, rate=22050), "OGG", "VORBIS", rate=22050)]


def _decoded(samples, outputs):
    """Checks both outputs (audio, rate) against soundfile's reading resampled to 22050 Hz."""
    audio, rates = outputs
    for index, (data, decoded, rate) in enumerate(zip(samples, audio, rates)):
        original, file_rate = soundfile.read(io.BytesIO(data.tobytes()), dtype="float32", always_2d=True)
        expected = original if file_rate == 22050 else windowed_sinc(original, file_rate, 22050)
        assert decoded.dtype == np.float32 and decoded.shape == expected.shape, f"sample {index}: {decoded.shape}"
        np.testing.assert_allclose(decoded, expected, rtol=0, atol=1e-3, err_msg=f"sample {index}")
        assert rate.dtype == np.float32 and rate.shape == () and rate == 22050


CASES = {
    "decoders.audio": Case(_files, lambda node, device: tuple(fn.decoders.audio(node, sample_rate=22050)), _decoded),
    "audio_resample": Case(_signals, lambda node, device: fn.audio_resample(on_device(node, device), in_rate=16000,
                                                                            out_rate=22050),
                           lambda samples, _: [windowed_sinc(s, 16000, 22050) for s in samples], max_abs=1e-3),
}
