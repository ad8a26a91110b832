"""``nvidia.dali.types``: the same constants (DALIDataType, DALIImageType, DALIInterpType, layouts),
Constant, and the SampleInfo and BatchInfo an external_source callback receives."""
import numpy as np

from penstock.graph import constant_batch
from penstock.operators.readers.external import BatchInfo, SampleInfo  # noqa: F401
from penstock.types import *  # noqa: F401,F403
from penstock.types import Constant as ScalarConstant
from penstock.types import DALIDataType, DALIImageType, DALIInterpType, TensorLayout, to_numpy_dtype  # noqa: F401

CPU_ONLY_DEVICE_ID = None  # DALI's device_id of a pipeline without a GPU


class Constant(ScalarConstant):
    """DALI's ``types.Constant``: a scalar without ``shape``, ``layout`` or ``device`` stays an
    operand of arithmetic (a ScalarConstant); anything else (an array, a list, a shape, a device, a
    layout) is a constant batch right away: the DataNode of fn.constant."""

    def __new__(cls, value, dtype=None, shape=None, layout=None, device=None, **kwargs):
        scalar = np.ndim(value) == 0 and not isinstance(value, (list, tuple))
        if scalar and device is None and layout is None and not kwargs and (shape is None or len(shape) == 0):
            return super().__new__(cls)
        return constant_batch(value, dtype, shape, layout, device, **kwargs)

    def __init__(self, value, dtype=None, shape=None, layout=None, device=None, **kwargs):
        super().__init__(value, dtype)


def to_numpy_type(dali_type):
    """The numpy scalar type of a DALIDataType (types.FLOAT -> numpy.float32), as DALI's."""
    return to_numpy_dtype(dali_type).type


def to_dali_type(dtype) -> DALIDataType:
    """The DALIDataType of a numpy (or torch) type, as DALI's."""
    return DALIDataType(to_numpy_dtype(dtype).name)
