"""Audio input: decoders.audio over WAV (PCM 8/16/24/32-bit, float), FLAC and Ogg Vorbis files that
soundfile writes (MP3 is left out: DALI's build does not read it), and audio_resample over float
and integer signals, by rates, scale and output length.

Values within a share of the output type's full range (``FullScale``): decoding without
resampling is exact but for Ogg Vorbis (another libvorbis: 2e-7); resampling follows DALI's
positions and window table, and differs in the order of its float32 sums (1e-5 of full scale at
quality 100, whose 128 taps sum the most terms), so integer outputs may differ by a step.
"""
import numpy as np
from cases_audio_io import encoded_audio, tones

from conformance.cases_readers import reader_specs
from conformance.harness import Close, Data, PerSample, Spec
from conformance.samples import _once, f32, folder, on_disk


class FullScale:
    """Values within ``share`` of the output type's full range (at least one step of an integer type)."""

    def __init__(self, share: float):
        self.share = share

    def check(self, name, dali, penstock):
        kind = dali[0].dtype if dali else np.dtype(np.float32)
        atol = self.share if kind.kind == "f" else max(1.0, np.ceil(self.share * np.iinfo(kind).max))
        Close(atol=atol).check(name, dali, penstock)


def files(*made) -> tuple:
    """The input of one case: a batch of encoded files."""
    return (Data(list(made)),)


STEREO, MONO = tones(400, 2, seed=1), tones(300, 1, seed=2)
(WAV,) = files(encoded_audio(STEREO), encoded_audio(MONO, "WAV", "PCM_24"), encoded_audio(tones(250, 3, seed=3)))
FORMATS = {
    f"{fmt.lower()}_{(subtype or '').lower()}": files(encoded_audio(STEREO, fmt, subtype),
                                                      encoded_audio(tones(150, 2, seed=4), fmt, subtype, rate=22050))
    for fmt, subtype in [("WAV", "PCM_U8"), ("WAV", "PCM_16"), ("WAV", "PCM_24"), ("WAV", "PCM_32"),
                         ("WAV", "FLOAT"), ("WAV", "DOUBLE"), ("FLAC", "PCM_16"), ("FLAC", "PCM_24"),
                         ("OGG", "VORBIS")]
}
FORMATS["zero_frames"] = files(encoded_audio(np.zeros((0, 2))), encoded_audio(STEREO))
DECODED = FullScale(1e-6)
RESAMPLED = FullScale(2e-5)
DTYPES = ["types.FLOAT", "types.INT16", "types.INT32"]
RATES = {**{repr(rate): rate for rate in (8000.0, 16000.0, 22050.0, 44100.0, 11025.5, 0.0, -5.0)},
         "per_sample": PerSample(f32(8000), f32(48000), f32(16000)),
         "per_sample_some_kept": PerSample(f32(0), f32(12345), f32(22050))}

SIGNALS = Data([tones(300, 2, seed=5), tones(157, 2, seed=6), tones(64, 2, seed=7)])
MONO_SIGNALS = Data([tones(300, 1, seed=5)[:, 0], tones(99, 1, seed=6)[:, 0], tones(33, 1)[:, 0]])


def scaled(dtype) -> Data:
    """SIGNALS at the full range of an integer type (unsigned: 0 at half range)."""
    info = np.iinfo(dtype)
    middle = (int(info.max) + int(info.min) + 1) / 2
    return Data([(s * (info.max - middle) + middle).round().astype(dtype) for s in SIGNALS.samples])


RESAMPLE_INPUTS = {name: (data,) for name, data in {
    "mono": MONO_SIGNALS, "nine_channels": Data([tones(80, 9, seed=8), tones(41, 9, seed=9)]),
    "empty": Data([np.zeros((0, 2), np.float32), tones(20, 2)]),
    **{np.dtype(t).name: scaled(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32)},
    "float64": Data([s.astype(np.float64) for s in SIGNALS.samples]),
    "int64": Data([np.zeros(5, np.int64)]),
    "three_dims": Data([np.zeros((4, 2, 2), np.float32)]),
}.items()}
RESAMPLE_TYPES = ["types.INT8", "types.UINT8", "types.INT16", "types.UINT16", "types.INT32", "types.UINT32",
                  "types.FLOAT", "types.FLOAT64", "types.INT64"]

SPECS = [
    Spec("decoders.audio", (WAV,), {}, compare=DECODED, grid={
        "@input": {**FORMATS, "garbage": files(np.frombuffer(b"not audio at all" * 8, np.uint8)),
                   "empty": files(np.zeros(0, np.uint8)), "cut_header": files(encoded_audio(STEREO)[:30]),
                   "words": (Data([np.zeros(8, np.int32)]),)},
        "dtype": DTYPES + ["types.UINT8", "types.FLOAT64"],
        "downmix": [True, False],
        "quality": [0.0, 100.0, 150.0],  # unused without sample_rate, as in DALI
    }, refused=("garbage", "empty", "cut_header", "words", "UINT8", "FLOAT64")),
    Spec("decoders.audio", (WAV,), {"sample_rate": 22050.0}, name="decoders.audio_resampled", compare=RESAMPLED,
         grid={
             "@input": FORMATS,
             "sample_rate": RATES,
             "dtype": DTYPES,
             "downmix": [True],
             "quality": [0.0, 12.5, 100.0, 101.0, -1.0],
         }, refused=("101.0", "-1.0")),
    Spec("decoders.audio", (WAV,), {"sample_rate": 12000.0, "downmix": True}, name="decoders.audio_downmixed",
         compare=RESAMPLED, grid={"dtype": DTYPES, "sample_rate": RATES, "@input": FORMATS}),
    Spec("audio_resample", (SIGNALS,), {"scale": 1.5}, compare=RESAMPLED, grid={
        "@input": RESAMPLE_INPUTS,
        "scale": {**{repr(scale): scale for scale in (0.5, 0.37, 2.0, 3.3, 0.0, -1.0)},
                  "per_sample": PerSample(np.float32(0.5), np.float32(1.25), np.float32(2)),
                  "per_sample_1d": PerSample(f32(0.5), f32(1.25), f32(2))},  # DALI takes scalars only
        "quality": [0.0, 33.3, 100.0, 101.0],
        "dtype": RESAMPLE_TYPES,
        "out_length": [10],
        "in_rate": [3.0],
    }, refused=("float64", "int64", "three_dims", "-1.0", "101.0", "FLOAT64", "INT64", "10", "3.0", "per_sample_1d")),
    Spec("audio_resample", (SIGNALS,), {"in_rate": 16000.0, "out_rate": 22050.0}, name="audio_resample_rates",
         compare=RESAMPLED, grid={
             "@input": {name: RESAMPLE_INPUTS[name] for name in ("mono", "nine_channels", "empty", "uint8", "int16")},
             "in_rate": [8000.0, 44100.0, -8.0, PerSample(np.float32(8000), np.float32(16000), np.float32(48000))],
             "out_rate": [8000.0, 0.0, 16000.0, PerSample(np.float32(12000), np.float32(44100), np.float32(7))],
             "dtype": ["types.INT16", "types.UINT8", "types.FLOAT"],
         }, refused=("-8.0",)),
    Spec("audio_resample", (SIGNALS,), {"out_length": 100}, name="audio_resample_length", compare=RESAMPLED,
         grid={
             "@input": {name: RESAMPLE_INPUTS[name] for name in ("mono", "nine_channels", "empty", "int32")},
             "out_length": [1, 0, 999, -1, PerSample(np.int64(5), np.int64(0), np.int64(300))],
             "quality": [0.0, 100.0],
         }, refused=("-1", "empty")),
]


@_once
def nemo_corpus() -> dict:
    """Six clips (8, 16 and 22.05 kHz; one and two channels; WAV and FLAC) and a NeMo manifest with
    texts, durations and offsets, a line without a path and a line that is not JSON."""
    import json
    import os

    import soundfile
    root = folder("nemo_asr")
    lines = ["", "{\"text\": \"no path\"}"]
    for index, (rate, channels) in enumerate([(8000, 1), (16000, 2), (22050, 1), (8000, 2), (16000, 1),
                                              (8000, 1)]):
        path = os.path.join(root, f"clip{index}.{'flac' if index % 2 else 'wav'}")
        soundfile.write(path, tones(rate // 20 + 37 * index, channels, rate=rate, seed=index), rate, subtype="PCM_16")
        entry = {"audio_filepath": path, "duration": round((rate // 20 + 37 * index) / rate, 4),
                 "text": f"clip number {index}"}
        if index == 3:
            entry.update(offset=0.01, duration=0.02)
        if index == 5:
            del entry["duration"], entry["text"]
        lines.append(json.dumps(entry))
    lines.insert(4, "not json")
    manifest = os.path.join(root, "manifest.json")
    with open(manifest, "w") as file:
        file.write("\n".join(lines) + "\n")
    return {"manifests": [manifest]}


# the sample rates (8000 to 22050) are read by the grid, not by the shuffled cases' statistics
SPECS += reader_specs("readers.nemo_asr", {"manifest_filepaths": on_disk(nemo_corpus, "manifests"),
                                           "read_idxs": True, "read_sample_rate": False}, compare=DECODED, grid={
    "downmix": [False],
    "dtype": ["types.INT16", "types.INT32"],
    "sample_rate": [16000.0, 0.0],
    "quality": [0.0, 100.0],
    "read_text": [False],
    "read_sample_rate": [True],
    "min_duration": [0.04],
    "max_duration": [0.05],
})
