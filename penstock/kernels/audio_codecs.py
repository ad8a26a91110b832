"""Audio files decoded from memory through libsndfile (the ``soundfile`` binding, which bundles it):
WAV (PCM 8/16/24/32-bit and float), FLAC, Ogg Vorbis, MP3 and the other formats libsndfile reads.

``decode_audio`` is what ``decoders.audio`` and ``readers.nemo_asr`` run per sample: the file's
header read first and its claimed length checked against a sample limit before anything is
allocated, then the samples as DALI gives them (frames x channels, or frames when downmixed),
resampled to a rate when asked, in the requested type.
"""
from __future__ import annotations

import io

import numpy as np

from penstock.limits import SizeClaimError

# a header claiming more samples (frames x channels) than this is refused before decoding: 2^31
# float32 values are 8 GiB, about 12 hours of 48 kHz stereo
DEFAULT_MAX_SAMPLES = 1 << 31


class AudioDecodeError(ValueError):
    """A file that is not audio libsndfile can read, or is truncated or corrupt."""


def audio_info(data, what: str) -> tuple[int, int, int]:
    """(frames, channels, sample rate) from the file's header, without decoding it."""
    import soundfile
    try:
        with soundfile.SoundFile(io.BytesIO(_bytes_of(data))) as file:
            return int(file.frames), int(file.channels), int(file.samplerate)
    except (soundfile.SoundFileError, RuntimeError) as error:
        raise AudioDecodeError(f"{what}: cannot read audio: {error}") from None


def _bytes_of(data) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    return np.ascontiguousarray(data, np.uint8).tobytes()


def read_samples(data, what: str, *, max_samples: int | None = DEFAULT_MAX_SAMPLES,
                 dtype: str = "float32") -> tuple[np.ndarray, int]:
    """(samples [frames, channels] of ``dtype`` ('float32': in [-1, 1]; 'int16' or 'int32': full
    scale, as libsndfile converts), sample rate). The header's frames x channels is checked
    against ``max_samples`` first; a file that decodes to fewer frames than its header claims is
    refused as truncated."""
    import soundfile
    try:
        with soundfile.SoundFile(io.BytesIO(_bytes_of(data))) as file:
            frames, channels, rate = int(file.frames), int(file.channels), int(file.samplerate)
            if frames < 0 or channels <= 0:
                raise AudioDecodeError(f"{what}: its header claims {frames} frames of {channels} channels")
            if max_samples is not None and frames * channels > max_samples:
                raise SizeClaimError(f"{what}: its header claims {frames:,} frames x {channels} channels = "
                                     f"{frames * channels:,} samples, more than the limit of {max_samples:,}")
            samples = file.read(frames, dtype=dtype, always_2d=True)
    except (soundfile.SoundFileError, RuntimeError) as error:
        raise AudioDecodeError(f"{what}: cannot decode audio: {error}") from None
    if len(samples) < frames:
        raise AudioDecodeError(f"{what}: truncated: its header claims {frames:,} frames, the data holds "
                               f"{len(samples):,}")
    return samples, rate
