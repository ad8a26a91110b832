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
        """The spectrograms of 1-D signals: on the CPU one by one (rules.spectrogram); on the GPU one
        kernel cuts and weighs every window of the batch (kernels.triton_audio) and one FFT
        transforms them all."""
        nfft, step, padding, window = self.framing()
        window_length = len(window)
        counts = []
        for index, signal in enumerate(signals):
            length = signal.shape[0]
            count = rules.count_windows(length, window_length, step, padding != "none")
            if count <= 0:
                raise ValueError(f"{self.name}: sample {index}'s signal ({length} samples) is too short for "
                                 f"windows of {window_length} samples without center_windows")
            counts.append(count)
        if xp is np:
            return [rules.spectrogram(signal, window, nfft, step, padding, self.args.power, self.args.layout == "tf")
                    for signal in signals]
        from penstock.kernels.triton_audio import window_table, windowed_frames
        from penstock.runtime.pinned import to_device
        device = _device_of(signals)
        joined = signals[0] if len(signals) == 1 else xp.cat(signals)
        table, = to_device(device, [window_table([signal.shape[0] for signal in signals], counts, window_length,
                                                 step, padding != "none")])
        frames = windowed_frames(joined, table[0], table[1], table[2], rules.on_device(window, device), nfft,
                                 padding == "reflect")
        power = rules.spectrum(xp, frames, nfft, self.args.power)[:sum(counts)]
        parts = xp.split(power, counts)
        if self.args.layout == "tf":
            return [part.contiguous() for part in parts]
        return [part.T.contiguous() for part in parts]


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


def _grouped(samples: list, key) -> dict:
    """Sample indices by ``key(sample)``: the samples one matrix product can take together."""
    groups: dict = {}
    for index, sample in enumerate(samples):
        groups.setdefault(key(sample), []).append(index)
    return groups


class MatrixAlongAxis:
    """An operator that multiplies every sample's ``axis`` by a table fixed by its arguments and that
    axis's extent: ``axis_of(ndim)`` and ``matrix_of(extent)`` say which; the GPU form multiplies the
    samples of one extent in one matrix product."""

    def declare_outputs(self, inputs):
        check_float32(inputs[0].dtype, self.name)
        self._layout = inputs[0].layout
        return OutputSpec(FLOAT32, inputs[0].ndim, inputs[0].layout)

    def transform(self, xp, samples: list) -> list:
        for sample in samples:
            check_float32(_dtype_of(sample), self.name)
        axes = [self.axis_of(sample.ndim) for sample in samples]
        results = [None] * len(samples)
        for (axis, extent), indices in _grouped(list(zip(axes, samples)),
                                                lambda pair: (pair[0], pair[1].shape[pair[0]])).items():
            matrix = self.matrix_of(extent)
            if xp is not np:
                matrix = rules.on_device(matrix, _device_of(samples))
            for index, result in zip(indices, rules.apply_along_axis(xp, matrix, [samples[i] for i in indices], axis)):
                results[index] = result
        return results


class MatrixAlongAxisCpu(MatrixAlongAxis, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        return self.transform(np, [np.asarray(inputs[0])])[0]


class MatrixAlongAxisGpu(MatrixAlongAxis, BatchOperator):
    def run_batch(self, inputs, args, batch):
        import torch
        samples = tensors_of(inputs[0])
        return self.transform(torch, samples) if samples else []


# ---- mel filter bank ------------------------------------------------------------------------------
def _mel_checks(static: dict, per_sample: frozenset) -> None:
    if static.sample_rate <= 0:
        raise ArgError(f"sample_rate should be > 0, got {static.sample_rate}")
    freq_high = static.freq_high if static.freq_high > 0 else 0.5 * static.sample_rate
    if not static.freq_low < freq_high <= static.sample_rate:
        raise ArgError(f"freq_high should be within the range (freq_low, sample_rate/2]; got freq_low "
                       f"{static.freq_low}, freq_high {freq_high}, sample_rate {static.sample_rate}")


registry.register_schema(OpSchema(
    name="mel_filter_bank", class_name="MelFilterBank",
    doc="A mel spectrogram from a spectrogram: nfilter triangular filters, evenly spaced in mel from freq_low to "
        "freq_high, over its frequency axis (the layout's 'f'; without a layout the second last axis, the first "
        "of 2-D samples, the only one of 1-D samples), whose bins are those of an FFT of 2 * (bins - 1) points at "
        "sample_rate.",
    args=(Arg("nfilter", "int", 128, "Number of mel filters.", min=1),
          Arg("sample_rate", "float", 44100.0, "Sampling rate of the audio signal."),
          Arg("freq_low", "float", 0.0, "The minimum frequency.", min=0.0),
          Arg("freq_high", "float", 0.0, "The maximum frequency (0: sample_rate / 2)."),
          Arg("normalize", "bool", True, "Filters of unit area (each divided by half its width in Hz); else of "
              "peak 1."),
          Arg("mel_formula", "str", "slaney", "The mel scale: 'slaney' (linear below 1 kHz, logarithmic above, "
              "librosa's default) or 'htk' (2595 * log10(1 + f / 700)).", choices=("slaney", "htk"))),
    checks=(_mel_checks,)))


class MelFilterBankRules:
    def axis_of(self, ndim: int) -> int:
        if not self._layout:
            return max(ndim - 2, 0)
        if "f" not in self._layout:
            raise ValueError(f"{self.name}: 'f' axis not present in the layout; got '{self._layout}'")
        return self._layout.index("f")

    def matrix_of(self, extent: int) -> np.ndarray:
        args = self.args
        return rules.mel_matrix(args.nfilter, extent, args.sample_rate, args.freq_low, args.freq_high, args.normalize,
                                args.mel_formula)


@registry.register("mel_filter_bank", "cpu")
class MelFilterBank(MelFilterBankRules, MatrixAlongAxisCpu):
    pass


@registry.register("mel_filter_bank", "gpu", requires=devices.gpu_problem)
class MelFilterBankGpu(MelFilterBankRules, MatrixAlongAxisGpu):
    pass


# ---- MFCC -----------------------------------------------------------------------------------------
def _mfcc_checks(static: dict, per_sample: frozenset) -> None:
    if static.normalize and static.dct_type == 1:
        raise ArgError("Ortho-normalization is not supported for DCT type I (normalize with dct_type 1)")


registry.register_schema(OpSchema(
    name="mfcc", class_name="MFCC",
    doc="Mel-frequency cepstral coefficients from a mel spectrogram (2-D to 4-D): the first n_mfcc coefficients "
        "of a DCT over ``axis`` (DALI's DCT: half scipy.fft.dct's unnormalized sums, or the orthonormal basis), "
        "liftered where lifter is not 0.",
    args=(Arg("n_mfcc", "int", 20, "Number of coefficients (at most the axis's extent: more give the extent).",
              min=1),
          Arg("dct_type", "int", 2, "The DCT's type: 1, 2, 3 or 4.", choices=(1, 2, 3, 4)),
          Arg("normalize", "bool", False, "An orthonormal DCT (not for type 1)."),
          Arg("axis", "int", 0, "The axis transformed.", min=0),
          Arg("lifter", "float", 0.0, "Liftering coefficient: coefficient i is multiplied by "
              "1 + lifter / 2 * sin(pi * (i + 1) / lifter) where lifter is not 0.")),
    checks=(_mfcc_checks,)))


class MfccRules:
    def axis_of(self, ndim: int) -> int:
        if not 2 <= ndim <= 4:
            raise ValueError(f"{self.name}: takes samples of 2 to 4 dimensions, got {ndim}")
        if self.args.axis >= ndim:
            raise ValueError(f"{self.name}: Axis {self.args.axis} is out of bounds [0, {ndim})")
        return self.args.axis

    def matrix_of(self, extent: int) -> np.ndarray:
        args = self.args
        if args.dct_type == 1 and extent <= 1:
            raise ValueError(f"{self.name}: DCT type I requires an input length > 1, got {extent}")
        return rules.dct_matrix(extent, min(args.n_mfcc, extent), args.dct_type, args.normalize, args.lifter)


@registry.register("mfcc", "cpu")
class Mfcc(MfccRules, MatrixAlongAxisCpu):
    pass


@registry.register("mfcc", "gpu", requires=devices.gpu_problem)
class MfccGpu(MfccRules, MatrixAlongAxisGpu):
    pass


# ---- decibels -------------------------------------------------------------------------------------
def _decibel_checks(static: dict, per_sample: frozenset) -> None:
    if static.reference is not None and static.reference == 0:
        raise ArgError("`reference` argument can't be zero (leave it out for each sample's maximum)")


registry.register_schema(OpSchema(
    name="to_decibels", class_name="ToDecibels",
    doc="Magnitudes to decibels: multiplier * log10(max(10^(cutoff_db / multiplier), x / reference)), with each "
        "sample's largest value as the reference where none is given (1 where that is not positive).",
    args=(Arg("multiplier", "float", 10.0, "Factor of the logarithm: 10 for powers, 20 for amplitudes."),
          Arg("reference", "float", None, "Reference magnitude (DALI's 0.0 default: each sample's maximum); not 0."),
          Arg("cutoff_db", "float", -200.0, "The smallest ratio to the reference, in dB: lower values saturate.")),
    checks=(_decibel_checks,)))


class DecibelDeclaration:
    def declare_outputs(self, inputs):
        check_float32(inputs[0].dtype, self.name)
        return inputs[0].but(dtype=FLOAT32)

    def fixed_inverse_reference(self) -> np.float32 | None:
        """1 / reference where one is given (DALI's product with the inverse), else None."""
        return None if self.args.reference is None else np.float32(1) / np.float32(self.args.reference)

    def decibels(self, xp, values, inverse_reference):
        return rules.decibels(xp, values, inverse_reference, self.args.multiplier,
                              rules.min_ratio(self.args.cutoff_db, self.args.multiplier))


@registry.register("to_decibels", "cpu")
class ToDecibels(DecibelDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        data = np.asarray(inputs[0])
        check_float32(data.dtype, self.name)
        inverse_reference = self.fixed_inverse_reference()
        if inverse_reference is None:
            largest = max(float(data.max()), 0.0) if data.size else 0.0  # DALI's search starts from 0
            inverse_reference = np.float32(1) / np.float32(largest or 1.0)
        return self.decibels(np, data, inverse_reference)


@registry.register("to_decibels", "gpu", requires=devices.gpu_problem)
class ToDecibelsGpu(DecibelDeclaration, BatchOperator):
    """The batch flattened into one tensor: each sample's maximum in one scatter, the decibels in one pass."""

    def run_batch(self, inputs, args, batch):
        import torch
        samples = tensors_of(inputs[0])
        if not samples:
            return []
        check_float32(_dtype_of(samples[0]), self.name)
        sizes = [sample.numel() for sample in samples]
        flat = torch.cat([sample.reshape(-1) for sample in samples])
        inverse_reference = self.fixed_inverse_reference()
        if inverse_reference is None:
            owner = _upload(samples, np.repeat(np.arange(len(samples)), sizes))
            largest = torch.zeros(len(samples), dtype=flat.dtype, device=flat.device).scatter_reduce(
                0, owner, flat, "amax", include_self=True)  # from 0 up, as DALI's search
            inverse_reference = (1.0 / torch.where(largest == 0, torch.ones_like(largest), largest))[owner]
        values = self.decibels(torch, flat, inverse_reference)
        return [part.reshape(sample.shape) for part, sample in zip(torch.split(values, sizes), samples)]


# ---- power spectrum (CPU only, as in DALI) --------------------------------------------------------
def _power_spectrum_checks(static: dict, per_sample: frozenset) -> None:
    if static.nfft is not None and 0 < static.nfft < rules.MIN_NFFT:
        raise ArgError(f"nfft must be at least {rules.MIN_NFFT}, got {static.nfft}")


registry.register_schema(OpSchema(
    name="power_spectrum", class_name="PowerSpectrum",
    doc="The power (|X|^2) or magnitude (|X|) spectrum of 1-D to 3-D float32 samples along ``axis``: nfft // 2 + 1 "
        "bins of an FFT of nfft points (default the axis's extent; the data zero-padded, or cut, to it).",
    args=(Arg("nfft", "int", None, "Size of the FFT (default, or not positive: the extent of the axis)."),
          Arg("axis", "int", -1, "The axis transformed; any negative value is the last."),
          Arg("power", "int", 2, "2 for the power spectrum, 1 for the magnitude.", choices=(1, 2))),
    checks=(_power_spectrum_checks,)))


@registry.register("power_spectrum", "cpu")
class PowerSpectrum(SampleOperator):
    def declare_outputs(self, inputs):
        check_float32(inputs[0].dtype, self.name)
        return inputs[0].but(dtype=FLOAT32, shape=None)

    def run(self, inputs, args, sample, out=None):
        data = np.asarray(inputs[0])
        check_float32(data.dtype, self.name)
        if not 1 <= data.ndim <= 3:
            raise ValueError(f"{self.name}: takes samples of 1 to 3 dimensions, got {data.ndim}")
        axis = data.ndim - 1 if args.axis < 0 else args.axis
        if axis >= data.ndim:
            raise ValueError(f"{self.name}: Transform axis {axis} is out of bounds [0, {data.ndim})")
        nfft = args.nfft if args.nfft is not None and args.nfft > 0 else data.shape[axis]
        if nfft < rules.MIN_NFFT:
            raise ValueError(f"{self.name}: the FFT size must be at least {rules.MIN_NFFT}; sample {sample.index} "
                             f"has {data.shape[axis]} values along axis {axis} (give nfft)")
        return np.ascontiguousarray(rules.spectrum(np, data, nfft, args.power, axis))
