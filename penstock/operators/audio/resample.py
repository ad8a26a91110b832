"""audio_resample: DALI's windowed-sinc resampling of [time] or [time, channels] signals, by a ratio
of rates, a scale or an output length (penstock.kernels.audio_resampling holds the resampler).

Values are taken as DALI's AudioResample takes them: integers scaled from their full range to
[-1, 1] (unsigned ones to [0, 1] when the output is unsigned too, else moved to [-1, 1]), floats as
they are (moved to [0, 1] for an unsigned output), and the result scaled to the output type's full
range. The CPU form resamples sample by sample; the GPU form lays every channel of every sample one
after another and filters the whole batch at once with torch.
"""
from __future__ import annotations

import numpy as np

from penstock import devices, registry, types
from penstock.contract import BatchOperator, SampleOperator
from penstock.kernels import audio_resampling
from penstock.kernels.audio_codecs import DEFAULT_MAX_SAMPLES
from penstock.operators.shared.gpu_plan import tensors_of
from penstock.runtime import native
from penstock.schema import Arg, ArgError, OpSchema

NAME = "audio_resample"
TYPES = (types.INT8, types.UINT8, types.INT16, types.UINT16, types.INT32, types.UINT32, types.FLOAT)
NUMPY_TYPES = tuple(np.dtype(t.numpy) for t in TYPES)
FACTORS = (("in_rate", "out_rate"), ("scale",), ("out_length",))


def _one_factor(static: dict, per_sample: frozenset) -> None:
    """As DALI: the two rates together, or scale, or out_length; exactly one of them. A value of 0
    counts as given (scale=0 makes empty signals)."""
    def given(name):
        return name in per_sample or static.get(name) is not None

    if given("in_rate") != given("out_rate"):
        raise ArgError("the arguments 'in_rate' and 'out_rate' must be given together")
    named = [group for group in FACTORS if given(group[0])]
    if len(named) > 1:
        raise ArgError("the sampling rates, 'scale' and 'out_length' cannot be used together")
    if not named:
        raise ArgError("no resampling factor given: give 'scale', 'out_length', or 'in_rate' and 'out_rate'")


registry.register_schema(OpSchema(
    name=NAME, class_name="AudioResample",
    doc="Resamples audio signals ([time] or [time, channels]) with a Hann-windowed sinc whose extent "
        "`quality` sets, as DALI: by the ratio of out_rate to in_rate, by `scale`, or to `out_length` samples.",
    args=(
        Arg("in_rate", "float", None, "Input sampling rate (with out_rate; any unit, the same as out_rate's).",
            per_sample=True, scalar=True),
        Arg("out_rate", "float", None, "Output sampling rate (with in_rate).", per_sample=True, scalar=True),
        Arg("scale", "float", None, "Ratio of the output's sampling rate to the input's: 2 doubles the length.",
            per_sample=True, scalar=True),
        Arg("out_length", "int", None, "The output's length in samples; the ratio is out_length / input length.",
            per_sample=True, scalar=True),
        Arg("quality", "float", 50.0, "Resampling quality, 0 to 100: 0 gives 3 lobes of the sinc, 50 gives 16, "
            "100 gives 64.", min=0.0, max=100.0),
        Arg("dtype", "dtype", None, "Output type (default: the input's); values are scaled to its full range "
            "(floats are taken to span -1..1, unsigned types 0..max with 0 at half range).", choices=TYPES),
    ),
    checks=(_one_factor,),
    also_named=(("experimental.audio_resample", "experimental.AudioResample"),)))


def _checked_input(name: str, dtype, ndim: int | None) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in NUMPY_TYPES:
        raise TypeError(f"{name}: takes {', '.join(t.name for t in NUMPY_TYPES)} signals, got {dtype}")
    if ndim is not None and ndim not in (1, 2):
        raise ValueError(f"{name}: takes [time] or [time, channels] signals, got {ndim} dimensions")
    return dtype


def output_type(args, input_type: np.dtype) -> np.dtype:
    return input_type if args.dtype is None else np.dtype(args.dtype.numpy)


def rates_of(name: str, shape: tuple, args) -> tuple[int, float, float]:
    """(output length, input rate, output rate) of one sample, as DALI reads the arguments (rates
    and scale as float32); refuses values DALI refuses and outputs over the sample limit."""
    length = shape[0]
    if args.in_rate is not None:
        in_rate, out_rate = float(np.float32(args.in_rate)), float(np.float32(args.out_rate))
        if not in_rate > 0:
            raise ValueError(f"{name}: argument 'in_rate': input sampling rates must be positive, got {in_rate}")
        if not out_rate >= 0:
            raise ValueError(f"{name}: argument 'out_rate': output sampling rates must not be negative, got "
                             f"{out_rate}")
        count = audio_resampling.resampled_length(length, in_rate, out_rate)
    elif args.scale is not None:
        in_rate, out_rate = 1.0, float(np.float32(args.scale))
        if not out_rate >= 0:
            raise ValueError(f"{name}: argument 'scale': the scaling factor must not be negative, got {out_rate}")
        count = audio_resampling.resampled_length(length, 1.0, out_rate)
    else:
        count = int(args.out_length)
        if count < 0:
            raise ValueError(f"{name}: argument 'out_length' must not be negative, got {count}")
        if length == 0 and count != 0:
            raise ValueError(f"{name}: cannot make a signal of {count} samples (out_length) from an empty one")
        in_rate, out_rate = float(length or 1), float(count or 1)
    channels = shape[1] if len(shape) > 1 else 1
    if count * channels > DEFAULT_MAX_SAMPLES:
        raise ValueError(f"{name}: the output would hold {count:,} x {channels} samples, more than the limit of "
                         f"{DEFAULT_MAX_SAMPLES:,}")
    return count, in_rate, out_rate


def normalized(xp, values, input_type: np.dtype, out_type: np.dtype):
    """The signal as float32 the resampler takes (DALI's ConvertInput): integers divided by their
    type's maximum; moved from [-1, 1] to [0, 1] for an unsigned output, or from [0, 1] to [-1, 1]
    for an unsigned input and a signed (or float) output."""
    if input_type.kind != "f":
        scale = float(np.float32(1) / np.float32(np.iinfo(input_type).max))
        values = (values.astype(np.float32) if xp is np else values.float()) * scale
    if out_type.kind == "u" and input_type.kind != "u":
        return (values + 1) * 0.5
    if out_type.kind != "u" and input_type.kind == "u":
        return values * 2 - 1
    return values


class ResampleDeclaration:
    def declare_outputs(self, inputs):
        spec = inputs[0]
        if spec.dtype is None:
            return spec.but(shape=None)
        input_type = _checked_input(self.name, spec.dtype, spec.ndim)
        return spec.but(dtype=output_type(self.args, input_type), shape=None)


@registry.register(NAME, "cpu")
class AudioResample(ResampleDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        signal = np.asarray(inputs[0])
        input_type = _checked_input(self.name, signal.dtype, signal.ndim)
        out_type = output_type(args, input_type)
        count, in_rate, out_rate = rates_of(self.name, signal.shape, args)
        return audio_resampling.resample(normalized(np, signal, input_type, out_type), in_rate, out_rate,
                                         args.quality, out_length=count, dtype=out_type, native=native.audio_resample)


# outputs filtered at once on the GPU: bounds the [outputs, taps] temporaries
GPU_CHUNK = 1 << 18


@registry.register(NAME, "gpu", requires=devices.gpu_problem)
class AudioResampleGpu(ResampleDeclaration, BatchOperator):
    """Every channel of every sample laid one after another in one signal; the taps' positions are
    worked out on the host (DALI's float32 position arithmetic) and the window, the gather and the
    sums run on the device over the whole batch."""

    def run_batch(self, inputs, args, batch):
        import torch

        from penstock.runtime.pinned import to_device
        samples = tensors_of(inputs[0])
        if not samples:
            return []
        input_type = _checked_input(self.name, types.to_numpy_dtype(samples[0].dtype), None)
        for sample in samples:
            _checked_input(self.name, input_type, sample.dim())
        out_type = output_type(args[0], input_type)
        lobes = audio_resampling.lobes_for_quality(args[0].quality)
        plans = [rates_of(self.name, tuple(sample.shape), a) for sample, a in zip(samples, args)]
        planes, firsts, offsets, bases, lengths, start = [], [], [], [], [], 0
        for sample, (count, in_rate, out_rate) in zip(samples, plans):
            length, channels = sample.shape[0], (sample.shape[1] if sample.dim() == 2 else 1)
            planes.append(normalized(torch, sample, input_type, out_type).reshape(length, channels).T.reshape(-1))
            if count and length:
                first, offset = audio_resampling.tap_positions(count, in_rate, out_rate, lobes)
                firsts.append(np.tile(first, channels))
                offsets.append(np.tile(offset, channels))
                bases.append(np.repeat(start + length * np.arange(channels, dtype=np.int64), count))
                lengths.append(np.full(count * channels, length, np.int64))
            start += length * channels
        signal = torch.cat(planes)[:, None] if planes else None
        outputs = torch.zeros(0, 1, dtype=torch.float32, device=batch.device)
        if firsts:
            first, offset, base, length, taps, table = to_device(batch.device, [
                np.concatenate(firsts), np.concatenate(offsets), np.concatenate(bases), np.concatenate(lengths),
                np.arange(2 * lobes, dtype=np.float32), audio_resampling.window_table(lobes)])
            center = audio_resampling.table_center(lobes)
            outputs = torch.cat([
                audio_resampling.filter_taps(torch, signal, first[i:i + GPU_CHUNK], offset[i:i + GPU_CHUNK], taps,
                                             table, center, length[i:i + GPU_CHUNK], base[i:i + GPU_CHUNK])
                for i in range(0, len(first), GPU_CHUNK)])
        converted = audio_resampling.to_output_type(torch, outputs[:, 0], out_type)
        results, start = [], 0
        torch_type = types.to_torch_dtype(out_type)
        for sample, (count, _, _) in zip(samples, plans):
            channels = sample.shape[1] if sample.dim() == 2 else 1
            if count and sample.shape[0]:
                planar = converted[start:start + count * channels].reshape(channels, count)
                start += count * channels
            else:
                planar = torch.zeros(channels, count, dtype=torch_type, device=batch.device)
            results.append(planar.T.contiguous() if sample.dim() == 2 else planar[0])
        return results
