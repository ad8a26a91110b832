"""``nvidia.dali.types``: the same constants (DALIDataType, DALIImageType, DALIInterpType, layouts)."""
from penstock.types import *  # noqa: F401,F403
from penstock.types import DALIDataType, DALIImageType, DALIInterpType, TensorLayout  # noqa: F401
