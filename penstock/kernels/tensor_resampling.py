"""DALI's separable resampling (kernels.cpu_image.resampling_passes) run on torch tensors, on any
axes of any tensor: each pass gathers its taps along one axis and sums their products one after
another in float32, the operations and order of the CPU path, so both devices give the same
values. Used where the fused image plan does not apply (tensor_resize, volumes)."""
from __future__ import annotations

import numpy as np
import torch

from penstock import numeric


def resample_tensor(tensor: torch.Tensor, passes: list, dtype: torch.dtype, *, upload) -> torch.Tensor:
    """``passes`` ((axis, (indices, weights)) each, weights None for nearest neighbours) applied to
    ``tensor``; the result converted to ``dtype`` as DALI converts (integers: to nearest, halves
    away from zero, saturated). ``upload(device, arrays)``: numpy arrays as tensors there."""
    # copies: the taps are kept read-only for the sizes that come again
    arrays = [array for _, (indices, weights) in passes
              for array in (np.array(indices, np.int64), *(() if weights is None else (np.array(weights, np.float32),)))]
    tables = iter(upload(tensor.device, arrays) if arrays else ())
    result = tensor
    if all(weights is None for _, (_, weights) in passes):  # nearest neighbour along every axis: a gather
        for axis, _ in passes:
            result = result.index_select(axis, next(tables))
        return result.contiguous() if result.dtype == dtype else numeric.saturate_tensor(result, dtype)
    for axis, (_, weights) in passes:
        indices = next(tables)
        if weights is None:
            result = result.index_select(axis, indices).to(torch.float32)
            continue
        weights = next(tables)
        shape = [1] * result.dim()
        shape[axis] = indices.shape[0]
        total = None
        for tap in range(indices.shape[1]):
            term = result.index_select(axis, indices[:, tap]).to(torch.float32) * weights[:, tap].reshape(shape)
            total = term if total is None else total.add_(term)
        result = total
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        rounded = torch.trunc(result + torch.copysign(torch.full_like(result, 0.5), result))
        return rounded.clamp_(info.min, info.max).to(dtype)
    return result.to(dtype)
