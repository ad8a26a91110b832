"""Audio files decoded from memory through libsndfile (the ``soundfile`` binding, which bundles it):
WAV (PCM 8/16/24/32-bit and float), FLAC, Ogg Vorbis, MP3 and the other formats libsndfile reads.

``decode_audio`` is what ``decoders.audio`` and ``readers.nemo_asr`` run per sample: the file's
header read first and its claimed length (and the resampled length) checked against a sample limit
before anything is allocated, then the samples as DALI gives them (frames x channels, or frames
when downmixed), resampled to a rate when asked, in the requested type.
"""
from __future__ import annotations

import contextlib
import io
import re
from typing import Callable

import numpy as np

from penstock.kernels import audio_resampling
from penstock.limits import SizeClaimError

# a header claiming more samples (frames x channels) than this is refused before decoding: 2^31
# float32 values are 8 GiB, about 12 hours of 48 kHz stereo
DEFAULT_MAX_SAMPLES = 1 << 31

# the types DALI's decoder gives; libsndfile converts to each itself (sf_readf_short, _int, _float)
DECODED_TYPES = {np.dtype(np.int16): "int16", np.dtype(np.int32): "int32", np.dtype(np.float32): "float32"}


class AudioDecodeError(ValueError):
    """A file that is not audio libsndfile can read, or is truncated or corrupt."""


def _bytes_of(data) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    return np.ascontiguousarray(data, np.uint8).tobytes()


@contextlib.contextmanager
def _opened(data, what: str):
    """The file open for reading, its header checked; libsndfile's errors as AudioDecodeError."""
    import soundfile
    encoded = _bytes_of(data)
    if not encoded:
        raise AudioDecodeError(f"{what}: cannot decode audio: the encoded data is empty")
    try:
        with soundfile.SoundFile(io.BytesIO(encoded)) as file:
            if file.frames < 0 or file.channels <= 0 or file.samplerate <= 0:
                raise AudioDecodeError(f"{what}: its header claims {file.frames} frames of {file.channels} channels "
                                       f"at {file.samplerate} Hz")
            yield file
    except (soundfile.SoundFileError, RuntimeError) as error:
        # soundfile names the stream object it read from; the reason is what follows it
        reason = re.sub(r"^Error opening <[^>]*>: ", "", str(error))
        raise AudioDecodeError(f"{what}: cannot decode audio: {reason}") from None


def _check_claim(what: str, frames: int, channels: int, max_samples: int | None, claim: str) -> None:
    if max_samples is not None and frames * channels > max_samples:
        raise SizeClaimError(f"{what}: {claim} {frames:,} frames x {channels} channels = {frames * channels:,} "
                             f"samples, more than the limit of {max_samples:,}")


# encodings of 16 bits or fewer: libsndfile's float32 is their int16 reading times 2^-15, exactly;
# read as int16 and scaled here it takes a fifth of the time libsndfile's own conversion takes
_SHORT_SUBTYPES = frozenset({"PCM_16", "PCM_S8", "PCM_U8"})


def _read(file, what: str, dtype: str, frames: int | None = None) -> np.ndarray:
    """``frames`` frames from where the file stands (default: every frame the header claims),
    [frames, channels]; fewer is a truncated file."""
    frames = int(file.frames) if frames is None else frames
    scaled = dtype == "float32" and file.subtype in _SHORT_SUBTYPES
    samples = file.read(frames, dtype="int16" if scaled else dtype, always_2d=True)
    if len(samples) < frames:
        raise AudioDecodeError(f"{what}: truncated: its header claims {frames:,} frames, the data holds "
                               f"{len(samples):,}")
    if scaled:
        return np.multiply(samples, np.float32(1.0 / 32768), dtype=np.float32)
    return samples


def audio_info(data, what: str) -> tuple[int, int, int]:
    """(frames, channels, sample rate) from the file's header, without decoding it."""
    with _opened(data, what) as file:
        return int(file.frames), int(file.channels), int(file.samplerate)


def read_samples(data, what: str, *, max_samples: int | None = DEFAULT_MAX_SAMPLES,
                 dtype: str = "float32") -> tuple[np.ndarray, int]:
    """(samples [frames, channels] of ``dtype`` ('float32': in [-1, 1]; 'int16' or 'int32': full
    scale, as libsndfile converts), sample rate). The header's frames x channels is checked
    against ``max_samples`` first; a file that decodes to fewer frames than its header claims is
    refused as truncated."""
    with _opened(data, what) as file:
        _check_claim(what, int(file.frames), int(file.channels), max_samples, "its header claims")
        return _read(file, what, dtype), int(file.samplerate)


def downmixed(samples: np.ndarray) -> np.ndarray:
    """The channels' mean [frames] in float32, summed channel after channel with weight
    1 / channels, as DALI's Downmix."""
    weight = np.float32(1.0 / samples.shape[1])
    total = samples[:, 0] * weight
    for channel in range(1, samples.shape[1]):
        total += samples[:, channel] * weight
    return total


def decode_audio(data, what: str, *, sample_rate: float | None = None, downmix: bool = False,
                 dtype=np.float32, quality: float = 50.0, max_samples: int | None = DEFAULT_MAX_SAMPLES,
                 window: Callable[[int, int], tuple[int, int]] | None = None,
                 rate_out: str = "target", native_resample=None) -> tuple[np.ndarray, np.float32]:
    """(samples, rate) as DALI's decoders.audio gives them for one encoded file.

    samples: [frames, channels], or [frames] when ``downmix`` (the channels' mean); float32 in
    [-1, 1], or int16 / int32 at full scale. ``sample_rate`` given and positive and not the file's:
    resampled to it with DALI's windowed sinc of ``quality`` (then converted to the integer types by
    DALI's rule, not libsndfile's). rate: ``sample_rate`` when given (as DALI, even when it is 0 or
    negative, which leave the audio as it is), else the file's, as float32; with ``rate_out="file"``
    always the file's (readers.nemo_asr's rate output).

    ``native_resample``: runtime.native.audio_resample, or None (kernels.audio_resampling.resample).

    ``window(frames, file_rate) -> (offset, length)``, when given, picks the frames decoded (a
    reader's offset and duration), before downmixing and resampling, as DALI's readers do.

    Refused with AudioDecodeError naming ``what``: data libsndfile cannot read, a truncated file;
    with SizeClaimError: a header (or a resampling) claiming more than ``max_samples`` samples,
    before decoding; with ValueError: a type other than those three, a quality outside [0, 100]
    when resampling is asked for."""
    dtype = np.dtype(dtype)
    if rate_out not in ("target", "file"):
        raise ValueError(f"{what}: rate_out is 'target' or 'file', got {rate_out!r}")
    if dtype not in DECODED_TYPES:
        raise ValueError(f"{what}: unsupported output type {dtype}; supported: int16, int32, float32")
    target = None if sample_rate is None else np.float32(sample_rate)
    if target is not None and not 0.0 <= quality <= 100.0:
        raise ValueError(f"{what}: resampling quality must be in [0..100] range, got {quality}")
    with _opened(data, what) as file:
        frames, channels, rate = int(file.frames), int(file.channels), int(file.samplerate)
        if window is not None:
            offset, length = (int(value) for value in window(frames, rate))
            if offset < 0 or length < 0 or offset + length > frames:
                raise AudioDecodeError(f"{what}: the window of {length:,} frames from frame {offset:,} is not within "
                                       f"the file's {frames:,} frames")
            if offset:
                file.seek(offset)
            frames = length
        _check_claim(what, frames, channels, max_samples, "its header claims")
        resampling = target is not None and target > 0 and target != rate
        out_channels = 1 if downmix else channels
        if resampling:
            out_frames = audio_resampling.resampled_length(frames, rate, float(target))
            _check_claim(what, out_frames, out_channels, max_samples,
                         f"resampled from {rate} to {float(target):g} Hz it has")
        mixing = downmix and channels > 1
        rate_given = np.float32(rate if target is None or rate_out == "file" else target)
        if not resampling and not mixing:
            samples = _read(file, what, DECODED_TYPES[dtype], frames)
            return (samples[:, 0] if downmix else samples), rate_given
        samples = _read(file, what, "float32", frames)
    if mixing:
        samples = downmixed(samples)
    elif downmix:
        samples = samples[:, 0]
    if resampling:
        samples = audio_resampling.resample(samples, rate, float(target), quality, dtype=dtype,
                                            native=native_resample)
    else:
        samples = audio_resampling.to_output_type(np, samples, dtype)
    return samples, rate_given
