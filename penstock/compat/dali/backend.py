"""``nvidia.dali.backend`` (and ``backend_impl``): the tensor types of ``nvidia.dali.tensors``."""
from penstock.compat.dali.tensors import TensorCPU, TensorGPU, TensorListCPU, TensorListGPU  # noqa: F401

__all__ = ["TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]
