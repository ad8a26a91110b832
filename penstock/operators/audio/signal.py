"""Audio operators (signal): ``preemphasis_filter`` and ``nonsilent_region``, as DALI 2.4's CPU
operators compute them (dali/operators/audio/preemphasis_filter_op.cc, nonsilence_op.h and
dali/kernels/signal/moving_mean_square.cc).

The rules are written once against the array API numpy and torch share; the CPU form applies them
to one sample, the GPU form to the batch's samples padded into one tensor.

Pre-emphasis works in float32 (float64 for float64 input), as DALI multiplies by a float
coefficient, and converts to the output type by penstock.numeric's rule (rounded, halves away from
zero, saturated) on both devices.

The non-silent region compares each sample's moving mean square (the mean of the squares over the
last ``window_length`` samples, the signal zero before its start) with ``reference_power`` (the
largest of them by default) times 10^(cutoff_db / 10). DALI keeps a running sum of squares, adding
the new square and subtracting the one leaving the window: exactly in int64 for 8- and 16-bit
integers, in float32 for other types, the sum started afresh every ``reset_interval`` samples for
floats. Its rounding leaves a residue in the sum after a loud stretch (about 1e-6 of the loud
power), which can exceed a low threshold, so begin and length depend on it. Here the additions and
subtractions of each reset interval are laid out in order on one row (a "tape") and accumulated by
one cumsum over all rows: numpy accumulates float32 in order, the very sums DALI's loop makes. The
GPU form accumulates the same tape in float64 (torch's float32 cumsum adds in an order of its own,
which differs between devices): its sums are the exact ones, without DALI's residue, so its begin
and length can differ from the CPU's where that residue or the rounding of a window's power decides
the comparison with the threshold.
"""
from __future__ import annotations

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.contract import BatchOperator, OutputSpec, SampleOperator
from penstock.operators.shared.gpu_plan import batch_of, tensors_of
from penstock.schema import Arg, OpSchema

BORDERS = ("zero", "clamp", "reflect")
# DALI's PREEMPH_TYPES and NONSILENCE_TYPES
PREEMPHASIS_TYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32,
                                                np.uint64, np.int64, np.float32, np.float64))
NONSILENCE_TYPES = PREEMPHASIS_TYPES[:-1]

registry.register_schema(OpSchema(
    name="preemphasis_filter", class_name="PreemphasisFilter",
    doc="Applies a pre-emphasis filter: Y[t] = X[t] - coeff * X[t-1], and Y[0] = X[0] - coeff * X_border with "
        "X_border 0 ('zero'), X[0] ('clamp') or X[1] ('reflect'). A sample of several dimensions is filtered as "
        "its elements in order (as DALI). Types: 8- to 64-bit integers, float32 and float64, in and out.",
    args=(Arg("preemph_coeff", "float", 0.97, "Preemphasis coefficient ``coeff``.", per_sample=True),
          Arg("border", "str", "clamp", "Border value policy: 'zero', 'clamp' or 'reflect'.", choices=BORDERS),
          Arg("dtype", "dtype", types.FLOAT, "Data type for the output.")),
    input_names=("input",)))

registry.register_schema(OpSchema(
    name="nonsilent_region", class_name="NonsilentRegion",
    doc="Leading and trailing silence detection in a 1-D audio signal: outputs the index of the first sample of "
        "the non-silent region and its length (int32 scalars). A window is silent when 10 * log10(short-term "
        "power / reference_power) < cutoff_db, the short-term power the mean square over window_length samples; "
        "the region starts window_length - 1 samples before its first loud window ends. A silent signal gives "
        "length 0 (and begin 0); with the default reference (the signal's largest power) a signal of zeros is "
        "all loud, as in DALI.",
    args=(Arg("cutoff_db", "float", -60.0, "The threshold, in dB, below which the signal is considered silent."),
          Arg("window_length", "int", 2048, "Size of the sliding window of the short-term power (at most the "
              "signal's length is used).", min=1),
          Arg("reference_power", "float", 0.0, "The reference power of the dB scale; 0 (the default): the largest "
              "short-term power of the signal.", min=0.0),
          Arg("reset_interval", "int", 8192, "Samples after which the running sum of squares of float input is "
              "computed afresh (a multiple of window_length, or -1: never); integer input is never reset.")),
    num_outputs=2, input_names=("input",)))


# ---- pre-emphasis ----------------------------------------------------------------------------------
def check_type(dtype, allowed, op_name: str, what: str = "input") -> None:
    if dtype is not None and np.dtype(dtype) not in allowed:
        raise TypeError(f"{op_name}: takes {what} of type {', '.join(t.name for t in allowed)}, got {np.dtype(dtype)}")


def emphasized(xp, work, coefficients, border: str):
    """The filtered rows of ``work`` (samples by row, float), each row by its coefficient (a column)."""
    if xp is np:  # in place in the result: no temporaries the size of the signal
        result = np.empty_like(work)
        np.multiply(work[:, :-1], coefficients, out=result[:, 1:])
        np.subtract(work[:, 1:], result[:, 1:], out=result[:, 1:])
        result[:, :1] = work[:, :1]
    else:
        result = work * 1
        result[:, 1:] = work[:, 1:] - coefficients * work[:, :-1]
    if border != "zero":
        edge = work[:, 1:2] if border == "reflect" else work[:, :1]
        result[:, :1] = work[:, :1] - coefficients * edge
    return result


def check_preemphasis_sample(size: int, border: str, op_name: str) -> None:
    if border == "reflect" and size == 1:
        raise ValueError(f"{op_name}: border 'reflect' takes X[1] as the border value, and a sample of one element "
                         "has none; use border 'clamp' or 'zero'")


class PreemphasisDeclaration:
    def declare_outputs(self, inputs):
        check_type(inputs[0].dtype, PREEMPHASIS_TYPES, self.name)
        out_type = types.to_numpy_dtype(self.args.dtype)
        check_type(out_type, PREEMPHASIS_TYPES, self.name, "dtype")
        return inputs[0].but(dtype=out_type)


@registry.register("preemphasis_filter", "cpu")
class PreemphasisFilter(PreemphasisDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        data = np.asarray(inputs[0])
        check_type(data.dtype, PREEMPHASIS_TYPES, self.name)
        out_type = types.to_numpy_dtype(args.dtype)
        flat = data.reshape(1, -1)
        check_preemphasis_sample(flat.shape[1], args.border, self.name)
        if args.preemph_coeff == 0 or flat.shape[1] == 0:
            return numeric.saturate(data, out_type)  # DALI converts the input as it is
        work = np.float64 if data.dtype == np.float64 else np.float32
        result = numeric.saturate(emphasized(np, flat.astype(work, copy=False), np.array([[args.preemph_coeff]], np.float32)
                                             .astype(work), args.border), out_type)
        if args.border == "zero":
            result[:, 0] = numeric.saturate(flat[:, 0], out_type)
        return result.reshape(data.shape)


@registry.register("preemphasis_filter", "gpu", requires=devices.gpu_problem)
class PreemphasisFilterGpu(PreemphasisDeclaration, BatchOperator):
    """The batch's samples filtered at once: where they lie back to back in one buffer (a packed
    batch) and share their arguments, along that buffer, each sample's first element by its border
    rule; otherwise flattened and padded into one tensor."""

    def run_batch(self, inputs, args, batch):
        import torch
        packed, _ = batch_of(inputs[0])
        joined = self._along_the_buffer(packed, args)
        if joined is not None:
            return joined
        samples = tensors_of(packed)
        if not samples:
            return []
        in_type = types.to_numpy_dtype(samples[0].dtype)
        check_type(in_type, PREEMPHASIS_TYPES, self.name)
        out_type = types.to_torch_dtype(types.to_numpy_dtype(args[0].dtype))
        border = args[0].border
        sizes = [sample.numel() for sample in samples]
        for size in sizes:
            check_preemphasis_sample(size, border, self.name)
        device = samples[0].device
        work = torch.float64 if in_type == np.float64 else torch.float32
        coefficients = np.array([[a.preemph_coeff] for a in args], np.float32)
        on_device, converted_as_is = to_device(device, [coefficients, coefficients[:, 0] == 0])
        rows = torch.nn.utils.rnn.pad_sequence([sample.reshape(-1) for sample in samples], batch_first=True)
        filtered = emphasized(torch, rows.to(work), on_device.to(work), border)
        # where DALI converts the input as it is: a coefficient of 0, and the first element with border 'zero'
        direct = converted_as_is[:, None].expand_as(filtered).clone()
        if border == "zero":
            direct[:, 0] = True
        converted = torch.where(direct, saturated(torch, rows, out_type), saturated(torch, filtered, out_type))
        return [row[:size].reshape(sample.shape) for row, size, sample in zip(converted, sizes, samples)]


    def _along_the_buffer(self, packed, args):
        """The filtered batch as a PackedBatch, for float samples back to back in one buffer with
        one (non-zero) coefficient, border and float output type; else None."""
        import torch

        from penstock.batch import PackedBatch
        first = args[0] if len(args) else None
        if not isinstance(packed, PackedBatch) or first is None or not first.preemph_coeff or \
                any(a is not first and (a.preemph_coeff, a.border, a.dtype) != (first.preemph_coeff, first.border,
                                                                              first.dtype) for a in args):
            return None
        in_type, out_type = types.to_numpy_dtype(packed.buffer.dtype), types.to_numpy_dtype(first.dtype)
        sizes = [int(np.prod(shape)) for shape in packed.shapes]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        if in_type.kind != "f" or out_type.kind != "f" or list(packed.offsets) != offsets[:-1].tolist() or \
                not sizes or min(sizes) == 0:
            return None
        for size in sizes:
            check_preemphasis_sample(size, first.border, self.name)
        check_type(in_type, PREEMPHASIS_TYPES, self.name)
        work = torch.float64 if in_type == np.float64 else torch.float32
        signal = packed.buffer[:int(offsets[-1])].to(work)
        coefficient = float(np.float32(first.preemph_coeff))
        result = torch.empty_like(signal)
        torch.mul(signal[:-1], coefficient, out=result[1:])  # the product rounded first, as on the CPU
        torch.sub(signal[1:], result[1:], out=result[1:])
        starts, = to_device(signal.device, [offsets[:-1]])
        if first.border == "zero":  # DALI converts the first element as it is
            result[starts] = signal[starts]
        else:
            edge = signal[starts + 1] if first.border == "reflect" else signal[starts]
            result[starts] = signal[starts] - coefficient * edge
        return PackedBatch(result.to(types.to_torch_dtype(out_type)), packed.offsets, packed.shapes)


def saturated(torch, tensor, dtype):
    """penstock.numeric.saturate's rule (integers: rounded halves away from zero) on a tensor."""
    if tensor.is_floating_point() and not dtype.is_floating_point:
        tensor = numeric.round_halves_away(torch, tensor)
    elif not tensor.is_floating_point() and tensor.dtype != torch.uint64:
        tensor = tensor.to(torch.int64)  # clamped to the output's range in a type that holds both
    return numeric.saturate_tensor(tensor, dtype)


# ---- the non-silent region ---------------------------------------------------------------------------
def accumulates_exactly(dtype) -> bool:
    """DALI sums the squares of 8- and 16-bit integers in int64 (exact), of other types in float32."""
    dtype = np.dtype(dtype)
    return dtype.kind in "iu" and dtype.itemsize <= 2


def square_rows(xp, rows, dtype):
    """The squares as DALI's accumulator holds them: int64, or float32 squared in float32."""
    if accumulates_exactly(dtype):
        wide = rows.astype(np.int64) if xp is np else rows.to(xp.int64)
    else:
        wide = rows.astype(np.float32) if xp is np else rows.to(xp.float32)
    return wide * wide


def tape_indices(lengths, windows, reset_interval: int):
    """(tape, positions): ``tape`` has one row for each reset interval of each sample, the positions
    in the padded squares (each sample's row of squares preceded by ``width - 1`` zeros, ``width``
    the largest window, and followed by at least one zero) of what DALI's running sum adds and
    subtracts, in order: the squares of the window before the interval, then for each position its
    square (added) and the square leaving the window (subtracted); the padding's last column (a
    zero) stands in for 'nothing'. ``positions`` (samples by longest length) is where each sample's
    running sums lie in the tape's odd columns from ``width - 1`` on, flattened."""
    width, longest = max(windows), max(lengths)
    rows = []
    for sample, length in enumerate(lengths):
        interval = length if reset_interval == -1 or reset_interval >= length else reset_interval
        rows += [(sample, first, min(interval, length - first)) for first in range(0, length, interval)]
    columns = max(count for _, _, count in rows)
    row_length = longest + width  # of the padded squares
    nothing = row_length - 1
    tape = np.full((len(rows), width - 1 + 2 * columns), nothing, np.int64)
    positions = np.zeros((len(lengths), longest), np.int64)
    for row, (sample, first, count) in enumerate(rows):
        window = windows[sample]
        start = sample * row_length + width - 1  # the sample's first square
        before = np.arange(max(first - window + 1, 0), first)
        tape[row, width - 1 - before.size:width - 1] = start + before
        at = np.arange(first, first + count)
        tape[row, width - 1::2][:count] = start + at
        leaving = at - window + 1
        tape[row, width::2][:count] = np.where(leaving >= 0, start + leaving, nothing)
        positions[sample, first:first + count] = row * columns + np.arange(count)
    return tape, positions


def to_device(device, arrays: list):
    """Arrays as tensors on the device, uploaded without waiting for the GPU (from pageable memory
    the copy would wait for the work queued before it)."""
    from penstock.runtime.pinned import to_device as upload
    return upload(device, arrays)


def moving_mean_squares(xp, squares, lengths, windows, reset_interval: int, accumulator):
    """The samples' moving mean squares (float32, samples by longest length, zero past each sample's
    end) from their ``squares`` (1-D arrays of DALI's accumulator type), the running sums
    accumulated in ``accumulator``: one gather and one cumsum for the batch."""
    width = max(windows)
    tape, positions = tape_indices(lengths, windows, reset_interval)
    shape = (len(squares), max(lengths) + width)
    if xp is np:
        padded = np.zeros(shape, squares[0].dtype)
    else:
        padded = xp.zeros(shape, dtype=squares[0].dtype, device=squares[0].device)
        tape, positions = to_device(padded.device, [tape, positions])
    for sample, values in enumerate(squares):
        padded[sample, width - 1:width - 1 + values.shape[0]] = values
    gathered = padded.reshape(-1)[tape]
    gathered = gathered.astype(accumulator) if xp is np else gathered.to(accumulator)
    gathered[:, width::2] *= -1  # the subtracted squares (integers and floats negate exactly)
    # numpy accumulates in order, in the given type: DALI's running sum, rounding for rounding
    sums = np.cumsum(gathered, axis=1, dtype=accumulator) if xp is np else xp.cumsum(gathered, dim=1)
    running = sums[:, width - 1::2].reshape(-1)[positions]
    running = running.astype(np.float32) if xp is np else running.to(xp.float32)
    scale = np.array([np.float32(1) / np.float32(window) for window in windows], np.float32)[:, None]
    return running * (scale if xp is np else to_device(running.device, [scale])[0])


def threshold_factor(cutoff_db: float) -> np.float32:
    """10^(cutoff_db / 10) in float32, as DALI's DecibelToMagnitude (the division a product with 0.1f)."""
    return np.power(np.float32(10), np.float32(cutoff_db) * (np.float32(1) / np.float32(10)))


def regions(xp, mms, lengths, windows, args):
    """(begins, lengths) of the samples' non-silent regions (int32 arrays) from their moving mean
    squares (samples by longest length)."""
    valid = np.arange(mms.shape[1])[None, :] < np.array(lengths)[:, None]
    given = np.array([a.reference_power for a in args], np.float32)
    factors = np.array([threshold_factor(a.cutoff_db) for a in args], np.float32)
    if xp is not np:
        valid, given, factors = to_device(mms.device, [valid, given, factors])
    largest = (mms * valid).max(1) if xp is np else (mms * valid).amax(1)  # (the squares are never negative)
    references = xp.where(given == 0, largest, given)
    loud = (mms >= (references * factors)[:, None]) & valid
    found = loud.any(1)
    first = loud.argmax(1) if xp is np else loud.to(xp.uint8).argmax(1)
    last = mms.shape[1] - 1 - (loud[:, ::-1].argmax(1) if xp is np else loud.flip(1).to(xp.uint8).argmax(1))
    window = np.array(windows) if xp is np else xp.tensor(windows, device=mms.device)
    begin = xp.clip(first - (window - 1), 0, None) if xp is np else (first - (window - 1)).clamp(min=0)
    begin, length = begin * found, (last + 1 - begin) * found
    return (begin.astype(np.int32), length.astype(np.int32)) if xp is np else \
        (begin.to(xp.int32), length.to(xp.int32))


def check_nonsilence_input(sample, op_name: str) -> None:
    if sample.ndim != 1:
        raise ValueError(f"{op_name}: takes 1-D signals, got a sample of shape {tuple(sample.shape)}")


def reset_for(args, dtype, op_name: str) -> int:
    """The reset interval DALI uses: -1 for integer input; else checked as DALI checks it."""
    if np.dtype(dtype).kind != "f":
        return -1
    interval = args.reset_interval
    if interval != -1 and (interval <= 0 or interval % args.window_length):
        raise ValueError(f"{op_name}: argument 'reset_interval' shall be -1 or a positive multiple of "
                         f"window_length; got reset_interval {interval}, window_length {args.window_length}")
    return interval


class NonsilenceDeclaration:
    def declare_outputs(self, inputs):
        check_type(inputs[0].dtype, NONSILENCE_TYPES, self.name)
        if inputs[0].ndim not in (None, 1):
            raise ValueError(f"{self.name}: takes 1-D signals, got {inputs[0].ndim} dimensions")
        scalar = OutputSpec(np.dtype(np.int32), 0, "", ())
        return scalar, scalar


@registry.register("nonsilent_region", "cpu")
class NonsilentRegion(NonsilenceDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        data = np.asarray(inputs[0])
        check_type(data.dtype, NONSILENCE_TYPES, self.name)
        check_nonsilence_input(data, self.name)
        interval = reset_for(args, data.dtype, self.name)
        if not data.shape[0]:
            return np.array(0, np.int32), np.array(0, np.int32)  # DALI's result for an empty signal
        window = min(args.window_length, data.shape[0])
        accumulator = np.int64 if accumulates_exactly(data.dtype) else np.float32
        mms = moving_mean_squares(np, [square_rows(np, data, data.dtype)], [data.shape[0]], [window], interval,
                                  accumulator)
        begins, lengths = regions(np, mms, [data.shape[0]], [window], [args])
        return begins[0], lengths[0]


@registry.register("nonsilent_region", "gpu", requires=devices.gpu_problem)
class NonsilentRegionGpu(NonsilenceDeclaration, BatchOperator):
    """The batch's moving mean squares from one gather and one cumsum over all its samples."""

    def run_batch(self, inputs, args, batch):
        import torch
        samples = tensors_of(inputs[0])
        if not samples:
            return [], []
        dtype = types.to_numpy_dtype(samples[0].dtype)
        check_type(dtype, NONSILENCE_TYPES, self.name)
        for sample in samples:
            check_nonsilence_input(sample, self.name)
        interval = reset_for(args[0], dtype, self.name)
        lengths = [int(sample.shape[0]) for sample in samples]
        present = [index for index, length in enumerate(lengths) if length]
        begins = torch.zeros(len(samples), dtype=torch.int32, device=samples[0].device)
        sizes = torch.zeros_like(begins)  # DALI's (0, 0) for an empty signal
        if present:
            windows = [min(args[i].window_length, lengths[i]) for i in present]
            accumulator = torch.int64 if accumulates_exactly(dtype) else torch.float64
            mms = moving_mean_squares(torch, [square_rows(torch, samples[i], dtype) for i in present],
                                      [lengths[i] for i in present], windows, interval, accumulator)
            found = regions(torch, mms, [lengths[i] for i in present], windows, [args[i] for i in present])
            where, = to_device(begins.device, [np.asarray(present, np.int64)])
            begins[where], sizes[where] = found
        return list(begins.unbind()), list(sizes.unbind())
