"""``nvidia.dali.types``: the same constants (DALIDataType, DALIImageType, DALIInterpType, layouts),
Constant, and the SampleInfo and BatchInfo an external_source callback receives."""
from penstock.operators.external import BatchInfo, SampleInfo  # noqa: F401
from penstock.types import *  # noqa: F401,F403
from penstock.types import Constant, DALIDataType, DALIImageType, DALIInterpType, TensorLayout  # noqa: F401

CPU_ONLY_DEVICE_ID = None  # DALI's device_id of a pipeline without a GPU
ScalarConstant = Constant
