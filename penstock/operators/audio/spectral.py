"""The speech features, as DALI 2.4's: ``spectrogram``, ``power_spectrum`` (CPU only, as in DALI),
``mel_filter_bank``, ``mfcc`` and ``to_decibels``; float32 in, float32 out.

The maths lives once in penstock.kernels.audio_spectral and is written against numpy and torch
alike: the CPU form runs it on one sample at a time, the GPU form on the whole ragged batch at once
(one gather frames every signal, one FFT transforms every window, one matrix product applies the mel
filter bank or the DCT to every sample whose frequency axis has that extent).
"""
from __future__ import annotations

import numpy as np

from penstock import devices, registry
from penstock.contract import BatchOperator, OutputSpec, SampleOperator
from penstock.kernels import audio_spectral as rules
from penstock.operators.shared.gpu_plan import tensors_of
from penstock.schema import Arg, ArgError, OpSchema

FLOAT32 = np.dtype(np.float32)


def check_float32(dtype, op_name: str) -> None:
    """DALI's speech features take float32 data only."""
    if dtype is not None and np.dtype(dtype) != FLOAT32:
        raise TypeError(f"{op_name}: takes float32 data, got {np.dtype(dtype).name}")


def _dtype_of(sample) -> np.dtype:
    if isinstance(sample, np.ndarray):
        return sample.dtype
    from penstock.types import to_numpy_dtype
    return np.dtype(to_numpy_dtype(sample.dtype))


def _device_of(samples: list):
    return samples[0].device


def _upload(samples: list, array: np.ndarray):
    from penstock.runtime.pinned import to_device
    return to_device(_device_of(samples), [np.ascontiguousarray(array)])[0]


# ---- spectrogram ----------------------------------------------------------------------------------
def _spectrogram_checks(static: dict, per_sample: frozenset) -> None:
    nfft = static.nfft if static.nfft is not None else static.window_length
    if nfft < static.window_length:
        raise ArgError(f"window_length ({static.window_length}) can't be bigger than the FFT size nfft ({nfft})")
    if nfft < rules.MIN_NFFT:
        raise ArgError(f"the FFT size (nfft, else window_length) must be at least {rules.MIN_NFFT}, got {nfft}")
    if static.window_fn is not None and len(static.window_fn) != static.window_length:
        raise ArgError(f"window_fn has {len(static.window_fn)} values; it must have window_length "
                       f"({static.window_length})")


registry.register_schema(OpSchema(
    name="spectrogram", class_name="Spectrogram",
    doc="The spectrogram of a one-channel float32 signal (shape (n,), (n, 1) or (1, n): every extent but one is "
        "1): windows of window_length samples every window_step samples, multiplied by window_fn (a Hann window "
        "by default), transformed by an FFT of nfft points, their power (|X|^2) or magnitude (|X|) in "
        "nfft // 2 + 1 bins; the output is (bins, windows) for layout 'ft', (windows, bins) for 'tf'.",
    args=(Arg("nfft", "int", None, "Size of the FFT (default: window_length); at least window_length.", min=1),
          Arg("window_length", "int", 512, "Window size in samples.", min=1),
          Arg("window_step", "int", 256, "Step between the windows in samples.", min=1),
          Arg("window_fn", "floats", None, "The window's window_length samples (default: a Hann window)."),
          Arg("power", "int", 2, "Exponent of the spectrum's magnitude: 1 (amplitude) or 2 (power).", choices=(1, 2)),
          Arg("center_windows", "bool", True, "Windows centred on multiples of window_step (the signal padded "
              "by half a window on each side); else only windows wholly inside the signal."),
          Arg("reflect_padding", "bool", True, "Pad by mirroring the signal at its edges (else with zeros); "
              "ignored without center_windows."),
          Arg("layout", "layout", "ft", "Output layout: 'ft' (frequency-major) or 'tf' (time-major).",
              choices=("ft", "tf"))),
    checks=(_spectrogram_checks,)))


def one_channel(sample, op_name: str, index: int = 0):
    """The signal as 1-D: a sample of any shape whose extents are all 1 but one (DALI's rule)."""
    shape = tuple(sample.shape)
    length = int(np.prod(shape))
    if length == 0:
        raise ValueError(f"{op_name}: sample {index} is empty (shape {shape}); a spectrogram needs a signal")
    if any(extent not in (1, length) for extent in shape):
        raise ValueError(f"{op_name}: the input must be one channel: 1-D, or all but one extent 1 (such as "
                         f"(n, 1) or (1, n)); got sample {index} of shape {shape}")
    return sample.reshape(length)


class SpectrogramDeclaration:
    def declare_outputs(self, inputs):
        check_float32(inputs[0].dtype, self.name)
        return OutputSpec(FLOAT32, 2, self.args.layout)

    def framing(self) -> tuple[int, int, str, np.ndarray]:
        """(nfft, window_step, padding, window) of the operator's arguments."""
        args = self.args
        padding = ("reflect" if args.reflect_padding else "zero") if args.center_windows else "none"
        window = rules.window_function(args.window_length, args.window_fn)
        return args.nfft if args.nfft is not None else args.window_length, args.window_step, padding, window

    def spectrograms(self, xp, signals: list) -> list:
        """The spectrograms of 1-D signals: one gather frames them all (each signal followed by one zero,
        which out-of-signal indices read), one FFT transforms every window."""
        nfft, step, padding, window = self.framing()
        window_length = len(window)
        indices, offset = [], 0
        for index, signal in enumerate(signals):
            length = signal.shape[0]
            if rules.count_windows(length, window_length, step, padding != "none") <= 0:
                raise ValueError(f"{self.name}: sample {index}'s signal ({length} samples) is too short for "
                                 f"windows of {window_length} samples without center_windows")
            indices.append(rules.frame_indices(length, window_length, step, padding) + offset)
            offset += length + 1
        counts = [len(part) for part in indices]
        index = np.concatenate(indices)
        if xp is np:
            padded = np.concatenate([part for signal in signals for part in (signal, np.zeros(1, FLOAT32))])
            spectra = rules.spectrum(np, padded[index] * window, nfft, self.args.power)
            parts = np.split(spectra, np.cumsum(counts)[:-1])
        else:
            zero = xp.zeros(1, dtype=signals[0].dtype, device=_device_of(signals))
            padded = xp.cat([part for signal in signals for part in (signal, zero)])
            frames = padded[_upload(signals, index)] * rules.on_device(window, padded.device)
            parts = xp.split(rules.spectrum(xp, frames, nfft, self.args.power), counts)
        if self.args.layout == "tf":
            return [np.ascontiguousarray(part) if xp is np else part.contiguous() for part in parts]
        return [np.ascontiguousarray(part.T) if xp is np else part.T.contiguous() for part in parts]


@registry.register("spectrogram", "cpu")
class Spectrogram(SpectrogramDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        data = np.asarray(inputs[0])
        check_float32(data.dtype, self.name)
        return self.spectrograms(np, [one_channel(data, self.name, sample.index)])[0]


@registry.register("spectrogram", "gpu", requires=devices.gpu_problem)
class SpectrogramGpu(SpectrogramDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        import torch
        samples = tensors_of(inputs[0])
        if not samples:
            return []
        check_float32(_dtype_of(samples[0]), self.name)
        return self.spectrograms(torch, [one_channel(sample, self.name, index) for index, sample in enumerate(samples)])
