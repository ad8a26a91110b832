"""decoders.audio and the decode it runs per file (penstock.kernels.audio_codecs.decode_audio), on
files soundfile writes here: WAV PCM 8/16/24/32-bit and float, FLAC, Ogg Vorbis and MP3.

References and tolerances: soundfile's own reading of the same file, exact (both read it with
libsndfile, in float32 or at the integer type's full scale), but MP3 within 1e-6 of full scale
(libsndfile's MP3 decoder gives values a float32 rounding apart from one read to the next); the
signal that was written, within a step of the file's sample size (PCM, FLAC); the downmix against
the mean of soundfile's channels within float32 rounding (1e-6); resampling against the analytic
sine at the new rate within 1e-3 away from the ends (quality 50: 16 lobes; the ends see the zeros
outside the signal) and against scipy's resample_poly within 2e-3 (scipy's own filter differs by
that much). DALI's own results are compared in the conformance tier
(tests/conformance/cases_audio_io.py).
Hostile files: truncated, corrupt, empty, of a format libsndfile does not read, and headers
claiming billions of samples (refused before anything is allocated for them).
"""
from __future__ import annotations

import io
import tracemalloc

import numpy as np
import pytest
import soundfile
from conftest import run_operator
from scipy.signal import resample_poly

from penstock import fn, limits, types
from penstock.kernels.audio_codecs import AudioDecodeError, decode_audio

RATE = 16000


def sine(frames: int = 800, channels: int = 2, rate: int = RATE, amplitude: float = 0.6) -> np.ndarray:
    """A sine a channel, each at its own frequency (440 Hz, 1 kHz, ...), [frames, channels] float64."""
    t = np.arange(frames) / rate
    return np.stack([amplitude * np.sin(2 * np.pi * (440 + 560 * c) * t + c) for c in range(channels)], axis=1)


def encoded(signal: np.ndarray, fmt: str = "WAV", subtype: str | None = "PCM_16", rate: int = RATE) -> np.ndarray:
    buffer = io.BytesIO()
    soundfile.write(buffer, signal, rate, format=fmt, subtype=subtype)
    return np.frombuffer(buffer.getvalue(), np.uint8).copy()


def soundfile_read(data: np.ndarray, dtype: str = "float32") -> np.ndarray:
    return soundfile.read(io.BytesIO(data.tobytes()), dtype=dtype, always_2d=True)[0]


# (format, subtype, the step of the file's samples: what writing it may change a value by)
FORMATS = [("WAV", "PCM_U8", 1 / 128), ("WAV", "PCM_16", 1 / 32768), ("WAV", "PCM_24", 2 ** -23),
           ("WAV", "PCM_32", 2 ** -24), ("WAV", "FLOAT", 2 ** -24), ("FLAC", "PCM_16", 1 / 32768),
           ("FLAC", "PCM_24", 2 ** -23), ("OGG", "VORBIS", None), ("MP3", None, None)]


@pytest.mark.parametrize("fmt, subtype, step", FORMATS, ids=[f"{f}-{s}" for f, s, _ in FORMATS])
def test_every_format_decodes_as_soundfile_reads_it(fmt, subtype, step):
    signal = sine(600, 2)
    data = encoded(signal, fmt, subtype)
    samples, rate = decode_audio(data, "file")
    expected = soundfile_read(data)
    assert samples.dtype == np.float32 and samples.shape == expected.shape
    assert rate.dtype == np.float32 and rate == RATE
    tolerance = 1e-6 if fmt == "MP3" else 0.0
    np.testing.assert_allclose(samples, expected, rtol=0, atol=tolerance)
    if step is not None:  # lossless: the signal written, to the file's precision
        np.testing.assert_allclose(samples, signal, rtol=0, atol=step)
    for dtype in ("int16", "int32"):
        as_integers, _ = decode_audio(data, "file", dtype=np.dtype(dtype))
        assert as_integers.dtype == np.dtype(dtype)
        np.testing.assert_allclose(as_integers, soundfile_read(data, dtype), rtol=0,
                                   atol=np.ceil(tolerance * np.iinfo(dtype).max))


@pytest.mark.parametrize("fmt, subtype", [("WAV", "PCM_16"), ("WAV", "PCM_U8"), ("FLAC", "PCM_16"),
                                           ("AIFF", "PCM_S8")])
def test_every_16_bit_value_decodes_to_libsndfiles_float(fmt, subtype):
    """Encodings of 16 bits or fewer are read as int16 and scaled by 2^-15: libsndfile's own float
    reading of every value, to the bit."""
    every_value = np.arange(-32768, 32768, dtype=np.int16)[:, None]
    data = encoded(every_value, fmt, subtype)
    samples, _ = decode_audio(data, "file")
    np.testing.assert_array_equal(samples, soundfile_read(data))


def test_downmix_is_the_mean_of_the_channels_and_one_dimensional():
    data = encoded(sine(500, 3), "WAV", "PCM_24")
    mixed, _ = decode_audio(data, "file", downmix=True)
    assert mixed.shape == (500,) and mixed.dtype == np.float32
    np.testing.assert_allclose(mixed, soundfile_read(data).astype(np.float64).mean(axis=1), rtol=0, atol=1e-6)
    as_integers, _ = decode_audio(data, "file", downmix=True, dtype=np.int16)
    expected = np.round(soundfile_read(data).astype(np.float64).mean(axis=1) * 32767)
    np.testing.assert_allclose(as_integers, expected, rtol=0, atol=1)
    mono = encoded(sine(300, 1))
    single, _ = decode_audio(mono, "file", downmix=True)
    np.testing.assert_array_equal(single, soundfile_read(mono)[:, 0])


@pytest.mark.parametrize("out_rate, up, down", [(8000, 1, 2), (22050, 441, 320), (44100, 441, 160)])
def test_resampling_follows_the_sine_and_scipy(out_rate, up, down):
    signal = sine(1600, 1, amplitude=0.8)
    data = encoded(signal, "WAV", "FLOAT")
    samples, rate = decode_audio(data, "file", sample_rate=out_rate)
    assert rate == np.float32(out_rate)
    assert samples.shape == (int(np.ceil(1600 * out_rate / RATE)), 1)
    inner = slice(int(0.01 * out_rate), -int(0.01 * out_rate))
    t = np.arange(len(samples)) / out_rate
    np.testing.assert_allclose(samples[inner, 0], 0.8 * np.sin(2 * np.pi * 440 * t)[inner], rtol=0, atol=1e-3)
    scipy_result = resample_poly(soundfile_read(data)[:, 0].astype(np.float64), up, down)[:len(samples)]
    np.testing.assert_allclose(samples[inner, 0], scipy_result[inner], rtol=0, atol=2e-3)


def test_halving_the_rate_keeps_every_other_sample():
    """The windowed sinc is 1 at its centre and 0 at every other whole input sample."""
    data = encoded(sine(400, 2), "WAV", "FLOAT")
    samples, _ = decode_audio(data, "file", sample_rate=RATE / 2)
    np.testing.assert_allclose(samples, soundfile_read(data)[::2], rtol=0, atol=1e-6)


def test_resampled_integers_are_full_scale_and_downmixed_first():
    data = encoded(sine(700, 2), "WAV", "PCM_16")
    floats, _ = decode_audio(data, "file", sample_rate=11025, downmix=True)
    integers, _ = decode_audio(data, "file", sample_rate=11025, downmix=True, dtype=np.int32)
    assert floats.shape == integers.shape == (int(np.ceil(700 * 11025 / RATE)),)
    np.testing.assert_allclose(integers / 2 ** 31, floats, rtol=0, atol=1e-6)
    both, _ = decode_audio(data, "file", sample_rate=11025)
    np.testing.assert_allclose(floats, both.astype(np.float64).mean(axis=1), rtol=0, atol=1e-6)


def test_rate_given_but_not_positive_or_the_files_own_leaves_the_audio():
    data = encoded(sine(100, 1))
    plain, _ = decode_audio(data, "file")
    for given in (0.0, -5.0, float(RATE)):
        samples, rate = decode_audio(data, "file", sample_rate=given)
        np.testing.assert_array_equal(samples, plain)
        assert rate == np.float32(given)


def test_a_window_of_frames_is_decoded_before_downmixing_and_resampling():
    data = encoded(sine(600, 2), "WAV", "FLOAT")
    whole = soundfile_read(data)
    samples, rate = decode_audio(data, "file", window=lambda frames, rate: (100, 300), rate_out="file")
    np.testing.assert_array_equal(samples, whole[100:400])
    resampled, rate = decode_audio(data, "file", sample_rate=8000, downmix=True, rate_out="file",
                                   window=lambda frames, rate: (frames - 200, 200))
    assert rate == RATE and resampled.shape == (100,)
    np.testing.assert_allclose(resampled, whole[400::2].mean(axis=1), rtol=0, atol=1e-6)
    with pytest.raises(AudioDecodeError, match="file: the window of 500 frames from frame 200 is not within"):
        decode_audio(data, "file", window=lambda frames, rate: (200, 500))


def test_zero_frames_give_an_empty_output():
    data = encoded(np.zeros((0, 2)))
    for sample_rate in (None, 8000):
        samples, rate = decode_audio(data, "file", sample_rate=sample_rate)
        assert samples.shape == (0, 2) and rate == (sample_rate or RATE)


def test_bad_types_and_quality_are_refused():
    data = encoded(sine(50, 1))
    with pytest.raises(ValueError, match="file: unsupported output type uint8"):
        decode_audio(data, "file", dtype=np.uint8)
    for sample_rate in (8000, 0):  # as DALI: checked whenever a rate is given, used or not
        with pytest.raises(ValueError, match=r"quality must be in \[0..100\]"):
            decode_audio(data, "file", sample_rate=sample_rate, quality=101)
    decode_audio(data, "file", quality=101)


def flac_claiming(frames: int) -> bytes:
    """A FLAC file whose STREAMINFO claims ``frames`` samples (36 bits) it does not hold."""
    data = bytearray(encoded(sine(200, 1), "FLAC", "PCM_16").tobytes())
    field = int.from_bytes(data[8 + 13:8 + 18], "big")  # STREAMINFO follows 'fLaC' and its block header
    field = (field & ~((1 << 36) - 1)) | frames
    data[8 + 13:8 + 18] = field.to_bytes(5, "big")
    return bytes(data)


def test_a_header_claiming_billions_of_samples_is_refused_before_decoding():
    data = flac_claiming((1 << 36) - 1)
    tracemalloc.start()
    try:
        with pytest.raises(limits.SizeClaimError, match="file: its header claims 68,719,476,735 frames"):
            decode_audio(data, "file")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20
    small = encoded(sine(1000, 2))
    with pytest.raises(limits.SizeClaimError, match="more than the limit of 1,000"):
        decode_audio(small, "file", max_samples=1000)
    with pytest.raises(limits.SizeClaimError, match=r"resampled from 16000 to 1e\+12 Hz"):
        decode_audio(small, "file", sample_rate=1e12)


@pytest.mark.parametrize("make, message", [
    (lambda: encoded(sine(400, 1), "FLAC")[:300], "cannot decode audio|truncated"),
    (lambda: np.frombuffer(flac_claiming(100000), np.uint8), "cannot decode audio|truncated"),
    (lambda: encoded(sine(400, 1), "OGG", "VORBIS")[:200], "cannot decode audio"),
    (lambda: encoded(sine(400, 1))[:30], "cannot decode audio"),
    (lambda: np.random.default_rng(0).integers(0, 256, 500, dtype=np.uint8), "Format not recognised"),
    (lambda: np.zeros(0, np.uint8), "the encoded data is empty"),
    (lambda: np.frombuffer(b"\x89PNG\r\n\x1a\n" + bytes(200), np.uint8), "cannot decode audio"),
], ids=["truncated_flac", "flac_claiming_more", "truncated_ogg", "wav_header_cut", "random", "empty", "png"])
def test_hostile_files_are_refused_naming_the_file(make, message):
    with pytest.raises(AudioDecodeError, match=f"^file: .*({message})"):
        decode_audio(make(), "file")


# ---- the operator --------------------------------------------------------------------------------
def test_operator_outputs_and_per_sample_rates():
    files = [encoded(sine(300, 2)), encoded(sine(200, 1), "FLAC", "PCM_24", rate=22050)]
    rates = [np.float32(8000), np.float32(0)]

    def graph(node):
        samples, rate = fn.decoders.audio(node, dtype=types.INT16, downmix=True,
                                          sample_rate=fn.external_source(source=lambda: rates, batch=True))
        return samples, rate
    samples, rate = run_operator(graph, files)
    assert [s.shape for s in samples] == [(150,), (200,)] and all(s.dtype == np.int16 for s in samples)
    assert [r.shape for r in rate] == [(), ()] and [float(r) for r in rate] == [8000.0, 0.0]
    assert all(r.dtype == np.float32 for r in rate)
    np.testing.assert_array_equal(samples[1], soundfile_read(files[1], "int16")[:, 0])


def test_operator_errors_name_the_operator_and_the_sample():
    files = [encoded(sine(100, 1)), np.frombuffer(b"RIFF" + bytes(60), np.uint8)]
    with pytest.raises(Exception, match=r"decoders.audio: sample 1: cannot decode audio"):
        run_operator(lambda node: fn.decoders.audio(node), files)
    with pytest.raises(Exception, match=r"decoders.audio: sample 0: its header claims"):
        run_operator(lambda node: fn.decoders.audio(node, max_samples=10), files[:1])


def test_operator_refuses_bad_arguments_and_inputs_where_called():
    data = encoded(sine(50, 1))
    with pytest.raises(ValueError, match="decoders.audio: argument 'dtype'"):
        run_operator(lambda node: fn.decoders.audio(node, dtype=types.UINT8), [data])
    with pytest.raises(ValueError, match="decoders.audio: argument 'quality'"):
        run_operator(lambda node: fn.decoders.audio(node, sample_rate=8000, quality=-1), [data])
    with pytest.raises(Exception, match="decoders.audio: .*encoded"):
        run_operator(lambda node: fn.decoders.audio(node), [data.astype(np.int32)])
