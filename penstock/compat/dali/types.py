"""``nvidia.dali.types``: the same constants (DALIDataType, DALIImageType, DALIInterpType, layouts),
Constant, and the SampleInfo and BatchInfo an external_source callback receives."""
from penstock.operators.external import BatchInfo, SampleInfo  # noqa: F401
from penstock.types import *  # noqa: F401,F403
from penstock.types import Constant, DALIDataType, DALIImageType, DALIInterpType, TensorLayout, to_numpy_dtype  # noqa: F401

CPU_ONLY_DEVICE_ID = None  # DALI's device_id of a pipeline without a GPU
ScalarConstant = Constant


def to_numpy_type(dali_type):
    """The numpy scalar type of a DALIDataType (types.FLOAT -> numpy.float32), as DALI's."""
    return to_numpy_dtype(dali_type).type


def to_dali_type(dtype) -> DALIDataType:
    """The DALIDataType of a numpy (or torch) type, as DALI's."""
    return DALIDataType(to_numpy_dtype(dtype).name)
