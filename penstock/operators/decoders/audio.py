"""decoders.audio: encoded audio files (WAV, FLAC, Ogg Vorbis and what else libsndfile reads) decoded
on the CPU, as DALI's (which has no GPU form): the samples, [time, channels] or [time] when
downmixed, and each file's sampling rate (or the rate it was resampled to) as a float32 scalar.
The decoding itself is penstock.kernels.audio_codecs.decode_audio."""
from __future__ import annotations

import numpy as np

from penstock import registry, types
from penstock.contract import OutputSpec, SampleOperator
from penstock.kernels.audio_codecs import DEFAULT_MAX_SAMPLES, decode_audio
from penstock.runtime import native
from penstock.schema import Arg, ArgError, OpSchema

NAME = "decoders.audio"


def _quality_in_range(static: dict, per_sample: frozenset) -> None:
    """As DALI: the quality is checked where it is used, when sample_rate is given."""
    resampling = "sample_rate" in per_sample or static.get("sample_rate") is not None
    if resampling and not 0.0 <= static.get("quality") <= 100.0:
        raise ArgError(f"argument 'quality': resampling quality must be in [0..100] range, got {static.get('quality')}")


registry.register_schema(OpSchema(
    name=NAME, class_name="decoders.Audio", input_names=("data",), num_outputs=2,
    doc="Decodes audio files (WAV, FLAC, Ogg Vorbis and Opus, and the other formats libsndfile reads) from "
        "encoded bytes. Outputs: the samples ([time, channels], or [time] when downmixed) and the sampling "
        "rate in Hz (float32).",
    args=(
        Arg("downmix", "bool", False, "Average the channels into one: the output is then 1-D."),
        Arg("dtype", "dtype", types.FLOAT, "Output type: FLOAT (in [-1, 1]), INT16 or INT32 (full scale).",
            choices=(types.INT16, types.INT32, types.FLOAT)),
        Arg("sample_rate", "float", None, "The rate, in Hz, to resample the audio to; the rate output is this "
            "value whenever it is given (0 or less leaves the audio at its own rate, as in DALI).",
            per_sample=True),
        Arg("quality", "float", 50.0, "Resampling quality, 0 to 100: 0 gives 3 lobes of the sinc, 50 gives 16, "
            "100 gives 64 (checked only when sample_rate is given, as in DALI)."),
        Arg("max_samples", "int", DEFAULT_MAX_SAMPLES, "Largest file accepted, in samples (frames x channels) "
            "as its header claims them (and after resampling); larger ones are refused before decoding. "
            "penstock's own guard: DALI has no such argument.", min=1),
    ),
    checks=(_quality_in_range,),
))


def sample_name(op_name: str, sample) -> str:
    """How an error names the sample: its index in the batch and, where known, where it came from."""
    where = f" ('{sample.source_info}')" if sample.source_info else ""
    return f"{op_name}: sample {sample.index}{where}"


@registry.register(NAME, "cpu")
class Audio(SampleOperator):
    def declare_outputs(self, inputs):
        data = inputs[0]
        if (data.ndim is not None and data.ndim != 1) or (data.dtype is not None and data.dtype != np.uint8):
            raise TypeError(f"{self.name}: expects encoded audio files (1-D uint8 arrays), but its input holds "
                            f"{data.ndim}-dimensional {data.dtype} samples")
        return (OutputSpec(np.dtype(self.args.dtype.numpy), 1 if self.args.downmix else 2, ""),
                OutputSpec(np.dtype(np.float32), 0, "", ()))

    def run(self, inputs, args, sample, out=None):
        data = np.asarray(inputs[0])
        what = sample_name(self.name, sample)
        if data.ndim != 1 or data.dtype != np.uint8:
            raise TypeError(f"{what}: expected encoded bytes (a 1-D uint8 array), got {data.dtype} of shape "
                            f"{data.shape}")
        samples, rate = decode_audio(data, what, sample_rate=args.sample_rate, downmix=args.downmix,
                                     dtype=args.dtype.numpy, quality=args.quality, max_samples=args.max_samples,
                                     native_resample=native.audio_resample)
        return samples, np.array(rate, np.float32)
