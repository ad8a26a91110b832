"""``nvidia.dali.tensors`` (also ``nvidia.dali.backend``): the types of what ``pipe.run()`` returns.
A CPU output is a TensorListCPU (penstock.batch.Batch), each of its samples a TensorCPU; a GPU
output a TensorListGPU of TensorGPUs."""
from penstock.batch import Batch as TensorListCPU
from penstock.batch import GpuBatch as TensorListGPU
from penstock.batch import GpuTensor as TensorGPU
from penstock.batch import Tensor as TensorCPU

__all__ = ["TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]
