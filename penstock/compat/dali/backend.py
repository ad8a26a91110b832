"""``nvidia.dali.backend`` (and ``backend_impl``): the tensor types of ``nvidia.dali.tensors``."""
from penstock.compat.dali.tensors import TensorCPU, TensorGPU, TensorListCPU, TensorListGPU  # noqa: F401

__all__ = ["TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]


def __getattr__(name: str):
    if name == "__cuda_version__":  # the CUDA version the GPU work runs on (torch's), as DALI's 12020
        import torch
        if torch.version.cuda is None:
            return 0
        major, minor = (int(part) for part in torch.version.cuda.split(".")[:2])
        return major * 1000 + minor * 10
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
