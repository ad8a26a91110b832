"""Numeric rules that every device follows: one function each, used by the CPU operators (numpy),
the GPU operators (torch) and, through the constants they give, the Triton kernels.

Nearest-neighbour resampling takes the source pixel whose area holds the output pixel's centre;
a centre exactly on the boundary of two pixels takes the later one (Pillow's NEAREST and torch's
'nearest-exact' do the same; OpenCV's fixed-point arithmetic rounds such ties either way).

Conversion to an integer type rounds to nearest with halves to even (IEEE 754's default, numpy's
``rint`` and torch's ``round``: unbiased, so averaging many converted values does not drift) and
saturates to the type's range; it never wraps. NaN becomes 0. DALI's own CPU and GPU differ here
(halves away from zero on its CPU, to even on its GPU); penstock's are the same on both.
"""
from __future__ import annotations

import numpy as np

# added to a sample position (float64) before the kernel takes its floor: a position that is
# exactly a pixel boundary but computed a rounding error below it counts as on it. Positions that
# are not boundaries lie at least 1 / (2 * output size) from one.
NEAREST_TIE_EPSILON = 1e-9


def nearest_indices(in_size: int, out_size: int) -> np.ndarray:
    """The source index each output index of a nearest-neighbour resize samples: the floor of
    (i + 0.5) * in_size / out_size, in exact integer arithmetic."""
    positions = (2 * np.arange(out_size, dtype=np.int64) + 1) * in_size // (2 * out_size)
    return np.minimum(positions, in_size - 1)


def integer_bounds(dtype) -> tuple[float, float] | None:
    """(lowest, highest) an integer type holds, as floats for a kernel's clamp; None for float and
    bool types, which are not rounded."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        return None
    info = np.iinfo(dtype)
    return float(info.min), float(info.max)


def _holds(float_type: np.dtype, value: int) -> bool:
    """Whether the float type represents the integer exactly (float32 rounds 2**31 - 1 up to 2**31)."""
    return value <= float(np.finfo(float_type).max) and int(float_type.type(value)) == value


def saturate(values: np.ndarray, dtype) -> np.ndarray:
    """``values`` converted to ``dtype``: to an integer type by rounding (halves away from zero, as
    DALI's CPU operators) and clamping to its range; to bool by ``!= 0``; to a float type as numpy
    converts."""
    dtype = np.dtype(dtype)
    values = np.asarray(values)
    if dtype.kind in "iu" and values.dtype.kind in "iub":
        info, source = np.iinfo(dtype), np.iinfo(values.dtype) if values.dtype.kind != "b" else np.iinfo(np.uint8)
        if source.min < info.min or source.max > info.max:  # clamp, never wrap
            values = np.clip(values, max(info.min, source.min), min(info.max, source.max))
        return values.astype(dtype, copy=False)
    if dtype.kind in "iu" and values.dtype.kind == "f":
        info = np.iinfo(dtype)
        if not _holds(values.dtype, info.max):
            values = values.astype(np.float64)
        # to nearest, halves away from zero (DALI's ConvertSat on the CPU: 0.5 -> 1, -2.5 -> -3); exact
        # here, as values that float32 cannot hold to the unit were made float64 above or saturate
        whole = np.trunc(values)
        with np.errstate(invalid="ignore"):  # infinities have no fraction (inf - inf): they saturate below
            away = np.abs(values - whole) >= 0.5  # exact: the fraction of a float is a float
        rounded = np.asarray(whole + np.copysign(away.astype(values.dtype), values))  # (an array for 0-d too)
        # NaN becomes 0 (not nan_to_num: ten times the time of this, per image)
        not_a_number = np.isnan(rounded)
        if not_a_number.any():
            rounded[not_a_number] = 0.0
        if _holds(values.dtype, info.max):
            return np.clip(rounded, info.min, info.max, out=rounded).astype(dtype)
        # not even float64 holds 2**63 - 1: values that reach it would overflow, so they saturate here
        too_high = rounded >= float(info.max)
        result = np.asarray(np.clip(np.where(too_high, 0, rounded), info.min, None)).astype(dtype)  # (0-d too)
        result[too_high] = info.max
        return result
    if dtype.kind == "b":
        return values != 0
    return values.astype(dtype, copy=False)


def saturate_tensor(tensor, dtype):
    """``saturate`` for a torch tensor and a torch dtype, on the tensor's device, but for halves,
    which go to even, as on DALI's GPU."""
    import torch
    if dtype == torch.bool:
        return tensor != 0
    if dtype.is_floating_point:
        return tensor.to(dtype)
    info = torch.iinfo(dtype)
    if tensor.dtype.is_floating_point:
        # to nearest, halves to even: DALI's GPU conversion (__float2int_rn), as the fused image kernel
        # rounds; the CPU's (saturate) takes halves away from zero, as DALI's CPU operators
        tensor = torch.nan_to_num(torch.round(tensor.double() if info.bits > 16 else tensor), nan=0.0)
        if info.bits == 64:  # float64 cannot hold the bounds of 64-bit types exactly: compare, then set
            low, high = tensor <= float(info.min), tensor >= float(info.max)
            result = tensor.clamp(float(info.min), float(info.max)).to(dtype)
            return result.masked_fill(low, info.min).masked_fill(high, info.max)
        return tensor.clamp(info.min, info.max).to(dtype)
    if tensor.dtype == torch.bool:
        return tensor.to(dtype)
    # bounds the source type can hold: a narrower source needs no clamp where the target is wider
    source = torch.iinfo(tensor.dtype)
    return tensor.clamp(max(info.min, source.min), min(info.max, source.max)).to(dtype)


def normalization_affine(mean, std, scale: float, shift: float, channels: int, op_name: str) -> tuple[tuple, tuple]:
    """``(x - mean) / std * scale + shift`` as per-channel (multipliers, addends): x * m + a.
    ``mean`` and ``std`` hold one value or one per channel."""
    if any(value == 0 for value in std):
        raise ValueError(f"{op_name}: argument 'std' must not contain 0")
    for name, values in (("mean", mean), ("std", std)):
        if len(values) not in (1, channels):
            raise ValueError(f"{op_name}: argument '{name}' has {len(values)} values for {channels}-channel images")
    std = np.broadcast_to(np.asarray(std, np.float64), (channels,))
    mean = np.broadcast_to(np.asarray(mean, np.float64), (channels,))
    return tuple((scale / std).tolist()), tuple((shift - mean * scale / std).tolist())



def cast_as_cpp(values: np.ndarray, dtype) -> np.ndarray:
    """Floats converted as DALI's C++ static_cast: truncated towards zero, integers out of range wrapped."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        with np.errstate(invalid="ignore"):
            return np.trunc(values).astype(np.int64).astype(dtype)
    return values.astype(dtype)


def round_halves_away(xp, values):
    """Float values rounded halves away from zero (in float64), as DALI's conversions to integer
    types round (before saturating); integer values as they are."""
    floating = values.dtype.kind == "f" if xp is np else values.is_floating_point()
    if not floating:
        return values
    wide = values.astype(np.float64) if xp is np else values.double()
    magnitude = xp.floor(xp.abs(wide) + 0.5)
    return xp.where(wide < 0, -magnitude, magnitude)


def promoted(left: np.dtype, right: np.dtype) -> np.dtype:
    """DALI's result type of a binary operation on operands of these types (arithmetic's and the
    element-wise kernel's): T with T gives T; a float with any non-float gives the float; two floats,
    two signed or two unsigned integers give the wider; a signed intX with an unsigned uintY gives
    int(2Y) when X <= Y (capped at int64), else intX; bool with another type gives the other."""
    left, right = np.dtype(left), np.dtype(right)
    if left == right:
        return left
    if left.kind == "b" or right.kind == "b":
        return right if left.kind == "b" else left
    if left.kind == "f" or right.kind == "f":
        if left.kind == "f" and right.kind == "f":
            return max(left, right, key=lambda dtype: dtype.itemsize)
        return left if left.kind == "f" else right
    if left.kind == right.kind:  # both signed or both unsigned
        return max(left, right, key=lambda dtype: dtype.itemsize)
    signed, unsigned = (left, right) if left.kind == "i" else (right, left)
    if signed.itemsize <= unsigned.itemsize:
        return np.dtype(f"int{min(8 * 2 * unsigned.itemsize, 64)}")
    return signed
