"""Data types, image types, interpolation types and layouts, under DALI's constant names.

Every constant is a member of a small enum, and the module also exposes each member at module
level (``types.FLOAT``, ``types.RGB``, ``types.INTERP_LINEAR``, ``types.NCHW``) as DALI does.
"""
from __future__ import annotations

import enum

import numpy as np


class DALIDataType(enum.Enum):
    """Element types of tensors; ``numpy`` gives the matching numpy dtype."""

    BOOL = "bool"
    UINT8 = "uint8"
    UINT16 = "uint16"
    UINT32 = "uint32"
    UINT64 = "uint64"
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT16 = "float16"
    FLOAT = "float32"
    FLOAT64 = "float64"
    NO_TYPE = "no type"  # DALI's "none given" (an argument's default); no data has it

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(self.value)


class DALIImageType(enum.Enum):
    """Colour spaces of decoded images."""

    RGB = "RGB"
    BGR = "BGR"
    GRAY = "GRAY"
    YCbCr = "YCbCr"  # ITU-R BT.601, Y in 16..235 (color_space_conversion)
    HSV = "HSV"  # OpenCV's: hue in degrees (halved for 8-bit values), saturation and value
    ANY_DATA = "ANY_DATA"

    @property
    def channels(self) -> int:
        return 1 if self is DALIImageType.GRAY else 3


class DALIInterpType(enum.Enum):
    """Resampling filters."""

    INTERP_NN = "nn"
    INTERP_LINEAR = "linear"
    INTERP_CUBIC = "cubic"
    INTERP_LANCZOS3 = "lanczos3"
    INTERP_TRIANGULAR = "triangular"
    INTERP_GAUSSIAN = "gaussian"


# DALI's integer codes of its enums (its C++ values), which DALI programs sometimes pass instead
# of the enum members: interp_type=1 is INTERP_LINEAR
DALI_CODES = {
    DALIInterpType: {0: DALIInterpType.INTERP_NN, 1: DALIInterpType.INTERP_LINEAR, 2: DALIInterpType.INTERP_CUBIC,
                     3: DALIInterpType.INTERP_LANCZOS3, 4: DALIInterpType.INTERP_TRIANGULAR,
                     5: DALIInterpType.INTERP_GAUSSIAN},
    DALIImageType: {0: DALIImageType.RGB, 1: DALIImageType.BGR, 2: DALIImageType.GRAY, 3: DALIImageType.YCbCr,
                    4: DALIImageType.ANY_DATA},
}


class TensorLayout(str, enum.Enum):
    """Named layouts: DALI's ``types.NCHW`` means a per-sample ``CHW`` layout."""

    NCHW = "CHW"
    NHWC = "HWC"
    NFHWC = "FHWC"
    NFCHW = "FCHW"
    SAME = ""


DataType = DALIDataType
ImageType = DALIImageType
InterpType = DALIInterpType

globals().update({member.name: member for enum_type in (DALIDataType, DALIImageType, DALIInterpType,
                                                        TensorLayout) for member in enum_type})
# DALI spells a few types twice.
FLOAT32 = DALIDataType.FLOAT
DOUBLE = DALIDataType.FLOAT64
HALF = DALIDataType.FLOAT16


# (type of the value, value) -> its numpy dtype: the GPU stage asks for the same few on every batch
_NUMPY_DTYPES: dict = {}


def to_numpy_dtype(value: DALIDataType | np.dtype | type | str) -> np.dtype:
    """Accepts a DALIDataType, a numpy dtype or its name, a torch dtype; returns the numpy dtype."""
    try:
        return _NUMPY_DTYPES[(type(value), value)]
    except (KeyError, TypeError):  # (TypeError: a value that does not hash)
        pass
    dtype = _numpy_dtype_of(value)
    try:
        _NUMPY_DTYPES[(type(value), value)] = dtype
    except TypeError:
        pass
    return dtype


def _numpy_dtype_of(value) -> np.dtype:
    if isinstance(value, DALIDataType):
        return value.numpy
    if isinstance(value, str) and value.upper() in DALIDataType.__members__:
        return DALIDataType[value.upper()].numpy
    torch_name = str(value)
    if torch_name.startswith("torch."):
        return np.dtype(torch_name[len("torch."):].replace("half", "float16").replace("float", "float32")
                        if torch_name in ("torch.half", "torch.float") else torch_name[len("torch."):])
    return np.dtype(value)


_TORCH_DTYPE_NAMES = ("uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "bool")
_TORCH_DTYPES: dict = {}  # numpy dtype -> torch dtype, as asked for


def to_torch_dtype(value: DALIDataType | np.dtype | type | str):
    """The torch dtype of a DALIDataType or numpy dtype: the one map between the two (torch is
    imported only when this is called)."""
    dtype = to_numpy_dtype(value)
    found = _TORCH_DTYPES.get(dtype)
    if found is None:
        import torch
        if dtype.name not in _TORCH_DTYPE_NAMES:
            raise TypeError(f"{dtype} has no torch counterpart here (supported: {', '.join(_TORCH_DTYPE_NAMES)})")
        found = _TORCH_DTYPES[dtype] = getattr(torch, dtype.name)
    return found


def layout_string(value: TensorLayout | str | None) -> str:
    """Turns ``types.NCHW`` or a plain string into the per-sample layout string."""
    if value is None:
        return ""
    if isinstance(value, TensorLayout):
        return value.value
    return str(value)


class Constant:
    """A constant operand of arithmetic on data nodes, of a chosen type (DALI's ``types.Constant``):
    ``images * types.Constant(0.5, types.FLOAT16)``; a numpy array broadcasts over each sample.
    (penstock.compat.dali.types.Constant also makes constant batches, as DALI's does.)"""

    def __init__(self, value, dtype=None):
        self.value = value
        self.dtype = _constant_type(value) if dtype is None else np.dtype(to_numpy_dtype(dtype))

    def __repr__(self):
        return f"Constant({self.value!r}, {self.dtype})"


# DALI's constant batches hold 64-bit arrays in 32 bits unless a dtype says otherwise
_NARROWER = {np.dtype(np.float64): np.dtype(np.float32), np.dtype(np.int64): np.dtype(np.int32),
             np.dtype(np.uint64): np.dtype(np.uint32)}


def _constant_type(value) -> np.dtype:
    """The type DALI gives a constant: a numpy scalar keeps its own, a numpy array its own narrowed
    to 32 bits; Python floats are float32, ints int32 and bools bool."""
    if isinstance(value, np.generic):
        return value.dtype
    if isinstance(value, np.ndarray):
        return _NARROWER.get(value.dtype, value.dtype)
    if type(value).__module__.startswith("torch"):  # a tensor keeps its type, as in DALI
        return to_numpy_dtype(value.dtype)
    array = np.asarray(value)
    if array.dtype.kind == "f":
        return np.dtype(np.float32)
    if array.dtype.kind in "iu":
        return np.dtype(np.int32)
    return array.dtype
