"""``readers.nemo_asr``: speech and its transcripts from NeMo manifests (one JSON object a line:
``audio_filepath``, and optionally ``duration``, ``offset`` and ``text``), the audio decoded on the
workers as ``decoders.audio`` decodes it.

As DALI's reader: paths are used as the manifest gives them; a line that is not a JSON object or has
no ``audio_filepath`` is skipped with a warning; ``min_duration`` / ``max_duration`` filter by the
manifest's ``duration`` (an entry without one counts as -1 s); ``offset`` and ``duration`` choose the
frames read; an entry's index counts the entries its manifest keeps. The sample-rate output is the
file's own rate and the text has no terminating zero, as DALI 2.4 gives them.
"""
from __future__ import annotations

import json
import sys

import numpy as np

from penstock import registry, types
from penstock.capabilities import DecodesOnLoad
from penstock.contract import OutputSpec, SampleContext
from penstock.kernels.audio_codecs import decode_audio
from penstock.operators.shared.readers import (SAMPLE_READER_ARGS, ShardedReader, read_bytes, sharded_epochs,
                                               shuffle_after_epoch_alone)
from penstock.runtime import native
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema

AUDIO_TYPES = (types.INT16, types.INT32, types.FLOAT)


def _check_dtype(static: dict, per_sample: frozenset) -> None:
    if static.dtype not in AUDIO_TYPES:
        raise ArgError(f"argument 'dtype': {static.dtype}; the audio is INT16, INT32 or FLOAT")


NEMO_SCHEMA = registry.register_schema(OpSchema(
    name="readers.nemo_asr",
    class_name="readers.NemoAsr",
    doc="Reads speech (the audio, decoded) and its transcripts from NeMo manifests: one JSON object a line "
        "with ``audio_filepath`` and optionally ``duration`` and ``offset`` (seconds) and ``text``. Outputs: the "
        "audio (frames, or frames x channels without ``downmix``); with ``read_sample_rate`` the file's sample "
        "rate (float32); with ``read_text`` the transcript (uint8, its UTF-8 bytes); with ``read_idxs`` the "
        "entry's index among the entries its manifest keeps (int64, shape (1,)).",
    args=(
        Arg("manifest_filepaths", "paths", REQUIRED, "The manifest files, read in order."),
        Arg("read_sample_rate", "bool", True, "Output each file's sample rate."),
        Arg("read_text", "bool", True, "Output each entry's transcript (empty where it has none)."),
        Arg("read_idxs", "bool", False, "Output each entry's index among the entries its manifest keeps."),
        Arg("sample_rate", "float", -1.0, "Resample the audio to this rate (Hz); 0 or less: the file's own."),
        Arg("quality", "float", 50.0, "Resampling quality, 0 (3 lobes of the sinc filter) to 100 (64 lobes).",
            min=0.0, max=100.0),
        Arg("downmix", "bool", True, "Average the channels into one: the audio is 1-D."),
        Arg("dtype", "dtype", types.FLOAT, "INT16, INT32 (full scale) or FLOAT (in [-1, 1])."),
        Arg("min_duration", "float", 0.0, "Above 0: leave out entries whose duration is shorter."),
        Arg("max_duration", "float", 0.0, "Above 0: leave out entries whose duration is longer."),
        Arg("normalize_text", "bool", None, "Accepted for DALI compatibility (deprecated there); has no effect."),
        *SAMPLE_READER_ARGS,
    ),
    num_inputs=(0, 0),
    num_outputs=lambda static: 1 + bool(static.get("read_sample_rate", True)) + bool(static.get("read_text", True))
    + bool(static.get("read_idxs", False)),
    input_names=(),
    is_source=True,
    checks=(_check_dtype, shuffle_after_epoch_alone),
))


def read_manifest(path: str, min_duration: float, max_duration: float) -> list[dict]:
    """The entries of one manifest that are kept: dicts with audio_filepath, duration (-1: none),
    offset, text and index (the entry's place among the ones kept)."""
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except OSError as error:
        raise ValueError(f"readers.nemo_asr: cannot read the manifest '{path}': {error.strerror}") from None
    entries = []
    for number, line in enumerate(lines, 1):
        try:
            value = json.loads(line)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            print(f"[readers.nemo_asr] Skipping invalid manifest line {number} of '{path}': {line[:200]!r}",
                  file=sys.stderr)
            continue
        audio = value.get("audio_filepath")
        if not isinstance(audio, str) or not audio:
            print(f"[readers.nemo_asr] Skipping manifest line {number} of '{path}' without an audio filepath",
                  file=sys.stderr)
            continue
        duration, offset = _seconds(value, "duration", -1.0, path, number), _seconds(value, "offset", 0.0, path, number)
        if (max_duration > 0 and duration > max_duration) or (min_duration > 0 and duration < min_duration):
            continue
        text = value.get("text", "")
        entries.append({"audio_filepath": audio, "duration": duration, "offset": offset,
                        "text": text if isinstance(text, str) else str(text), "index": len(entries)})
    return entries


def _seconds(entry: dict, key: str, default: float, path: str, number: int) -> float:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"readers.nemo_asr: line {number} of '{path}': '{key}' is {value!r}, not a number of "
                         "seconds")
    return float(value)


def frame_window(frames: int, rate: int, offset: float, duration: float) -> tuple[int, int]:
    """(first frame, frame count) an entry's offset and duration (seconds; duration -1: to the end)
    choose, truncated to whole frames and limited to the file, as DALI's reader does."""
    start = int(offset * rate) if offset >= 0 else 0
    length = int(duration * rate) if duration >= 0 else frames
    return start, max(0, min(length, frames - start))


@registry.register("readers.nemo_asr", "cpu")
class NemoAsrReader(DecodesOnLoad, ShardedReader):
    def __init__(self, args, context):
        super().__init__(args, context)
        manifests = [args.manifest_filepaths] if isinstance(args.manifest_filepaths, str) else \
            list(args.manifest_filepaths)
        self.entries = [entry for manifest in manifests
                        for entry in read_manifest(manifest, args.min_duration, args.max_duration)]
        if not self.entries:
            raise ValueError(f"readers.nemo_asr: no entries in {manifests} (after min_duration / max_duration)")
        self.paths = [entry["audio_filepath"] for entry in self.entries]
        self.texts = [np.frombuffer(entry["text"].encode("utf-8"), np.uint8) for entry in self.entries]
        self.epochs = sharded_epochs(args, context, len(self.entries), "readers.nemo_asr")

    def load(self, index, sample: SampleContext) -> tuple:
        args, entry = self.args, self.entries[index]
        path = entry["audio_filepath"]
        audio, rate = decode_audio(read_bytes(path), f"readers.nemo_asr: '{path}'",
                                   sample_rate=args.sample_rate if args.sample_rate > 0 else None,
                                   downmix=args.downmix, dtype=args.dtype.numpy, quality=args.quality,
                                   window=lambda frames, file_rate: frame_window(frames, file_rate, entry["offset"],
                                                                                 entry["duration"]),
                                   rate_out="file", native_resample=native.audio_resample)
        outputs = [audio]
        if args.read_sample_rate:
            outputs.append(np.float32(rate))
        if args.read_text:
            outputs.append(self.texts[index])
        if args.read_idxs:
            outputs.append(np.array([entry["index"]], np.int64))
        return tuple(outputs)

    def declare_outputs(self, inputs):
        args = self.args
        specs = [OutputSpec(np.dtype(args.dtype.numpy), 1 if args.downmix else 2, "")]
        if args.read_sample_rate:
            specs.append(OutputSpec(np.dtype(np.float32), 0, "", ()))
        if args.read_text:
            specs.append(OutputSpec(np.dtype(np.uint8), 1, ""))
        if args.read_idxs:
            specs.append(OutputSpec(np.dtype(np.int64), 1, "", (1,)))
        return tuple(specs)
