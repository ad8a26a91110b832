"""Conformance cases of the audio operators (signal): preemphasis_filter and nonsilent_region on
synthetic signals (sines plus noise, with silent stretches of exact zeros or of a low noise floor),
0.1 to 0.5 s at 16 kHz, float32 and int16. Both are compared exactly: pre-emphasis computes in
DALI's float32, and the non-silent region sums squares as DALI's running sum does."""
import numpy as np

from conformance.harness import Data, PerSample, Spec
from conformance.samples import f32

RATE = 16000


def speech(dtype="float32", floor=0.0, lengths=(1600, 4800, 8000), seed=0) -> Data:
    """Sines plus noise, loud over a stretch of each signal and ``floor`` times as loud elsewhere."""
    samples = []
    for index, length in enumerate(lengths):
        rng = np.random.default_rng(seed + index)
        t = np.arange(length) / RATE
        signal = 0.5 * np.sin(2 * np.pi * (220 + 110 * index) * t) + 0.05 * rng.standard_normal(length)
        begin, end = sorted(rng.integers(0, length, 2))
        signal[:begin] *= floor
        signal[end:] *= floor
        samples.append(np.round(signal * 20000).astype(np.int16) if dtype == "int16" else signal.astype(dtype))
    return Data(samples)


FLOATS = speech()
QUIET_FLOOR = speech(floor=1e-3, seed=10)  # the floor's power near -60 dB of the loud stretch's

SPECS = [
    Spec("preemphasis_filter", (FLOATS,), {}, grid={
        "@input": {"i16": (speech("int16"),), "f64": (speech("float64"),), "u8": (Data([np.arange(200, dtype=np.uint8)]
                                                                                     * 3),),
                   "f32_2d": (Data([np.linspace(-1, 1, 60, dtype=np.float32).reshape(6, 10)] * 3),),
                   "one_element": (Data([np.float32([0.5])] * 3),), "f16": (speech("float16"),)},
        "preemph_coeff": {"0.0": 0.0, "0.5": 0.5, "-0.9": -0.9, "1.5": 1.5,
                          "per_sample": PerSample(f32(0.9), f32(0.0), f32(0.5)),
                          "per_sample_0d": PerSample(np.float32(0.97), np.float32(0.1), np.float32(-0.3))},
        "border": ["zero", "clamp", "reflect", "wrap"],
        "dtype": ["types.INT16", "types.UINT8", "types.INT32", "types.FLOAT64", "types.INT64", "types.FLOAT16"],
    }, refused=("f16", "wrap", "FLOAT16")),
    # integer input converted to integers, every border
    Spec("preemphasis_filter", (speech("int16", floor=0.01),), {"dtype": "types.INT16", "preemph_coeff": 0.9},
         name="preemphasis_filter_i16", grid={"border": ["zero", "reflect"]}),
    Spec("nonsilent_region", (FLOATS,), {}, grid={
        "@input": {"i16": (speech("int16"),), "quiet_floor": (QUIET_FLOOR,), "i16_quiet_floor": (speech(
                   "int16", floor=1e-2, seed=20),), "i32": (Data([np.int32(s) * 1000 for s in speech("int16").samples]),),
                   "u8": (Data([np.uint8(128 + s // 256) for s in speech("int16").samples]),),
                   "silent": (Data([np.zeros(1600, np.float32), np.zeros(3000, np.float32), np.zeros(5, np.float32)]),),
                   "short": (Data([np.float32([0.0, 1.0, 0.0]), np.float32([2.0]), np.float32([0.0, 0.0, 0.5, 0.0])]),),
                   "f64": (speech("float64"),), "f32_2d": (Data([np.ones((40, 2), np.float32)] * 3),)},
        "cutoff_db": [-20.0, -40.0, -80.0, -100.0],
        "window_length": [256, 512, 4096],
        "reference_power": [0.01, 1.0, -1.0],
        "reset_interval": [-1, 2048, 4096, 1000],
    }, refused=("f64", "f32_2d", "-1.0", "1000")),
    # the quiet floor where DALI's float32 running sum decides: windows and cutoffs around its level
    Spec("nonsilent_region", (QUIET_FLOOR,), {"cutoff_db": -60.0, "window_length": 256, "reset_interval": 1024},
         name="nonsilent_region_quiet", grid={
             "cutoff_db": [-50.0, -70.0, -80.0],
             "window_length": [128, 1024],
             "reset_interval": [-1, 256, 4096],
         }),
    # integer input is never reset: DALI ignores reset_interval (no multiple of window_length needed)
    Spec("nonsilent_region", (speech("int16", floor=1e-2, seed=30),), {"window_length": 300, "reset_interval": 1000,
                                                                       "cutoff_db": -45.0},
         name="nonsilent_region_i16"),
]
