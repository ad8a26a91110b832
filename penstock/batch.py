"""Batches: N samples that may differ in shape, with one layout string.

A CPU batch keeps one numpy array per sample. When every sample was written into one buffer
(the usual case for a pipeline's final, fixed-size outputs) it also keeps that buffer, so the
batch is a dense tensor without a copy.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def not_dense_error(shapes: set) -> ValueError:
    listed = ", ".join(str(shape) for shape in sorted(shapes)[:4])
    return ValueError(f"the batch is not dense: its samples have {len(shapes)} different shapes "
                      f"({listed}{', ...' if len(shapes) > 4 else ''}); resize or crop to one size, or "
                      "read the samples one by one with .at(i)")


class Batch:
    """A batch of samples on the CPU, as ``pipe.run()`` returns it."""

    def __init__(self, samples: Sequence[np.ndarray], layout: str = "", dense: np.ndarray | None = None):
        self._samples = list(samples)
        self._layout = layout
        self._dense = dense

    @classmethod
    def from_dense(cls, array: np.ndarray, layout: str = "") -> "Batch":
        return cls(list(array), layout, dense=array)

    def __len__(self) -> int:
        return len(self._samples)

    def at(self, index: int) -> np.ndarray:
        return self._samples[index]

    def __getitem__(self, index: int) -> np.ndarray:
        return self._samples[index]

    def __iter__(self):
        return iter(self._samples)

    def shape(self) -> list[tuple[int, ...]]:
        return [sample.shape for sample in self._samples]

    def layout(self) -> str:
        return self._layout

    @property
    def dtype(self) -> np.dtype:
        if not self._samples and self._dense is not None:
            return self._dense.dtype
        return self._samples[0].dtype if self._samples else np.dtype(np.float32)

    def is_dense_tensor(self) -> bool:
        return self._dense is not None or len({sample.shape for sample in self._samples}) <= 1

    def as_array(self) -> np.ndarray:
        """The batch as one [N, ...] array: without a copy when it was produced dense."""
        if self._dense is not None:
            return self._dense
        shapes = {sample.shape for sample in self._samples}
        if len(shapes) > 1:
            raise not_dense_error(shapes)
        if not self._samples:
            raise ValueError("the batch is empty, so it has no array shape")
        self._dense = np.stack(self._samples)
        return self._dense

    as_tensor = as_array

    def as_cpu(self) -> "Batch":
        return self

    def __array__(self, dtype=None, copy=None):
        array = self.as_array()
        return array if dtype is None else array.astype(dtype)

    def __dlpack__(self, **kwargs):
        return self.as_array().__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.as_array().__dlpack_device__()

    def __repr__(self):
        return f"Batch(len={len(self)}, layout='{self._layout}', shapes={self.shape()[:3]}...)"


class GpuBatch:
    """A batch on the GPU: one torch tensor per sample, and one dense [N, ...] tensor when the
    samples were produced together with one shape.

    The pipeline's work on it was queued on the pipeline's CUDA stream; every accessor makes the
    caller's current stream wait for that work first (and tells PyTorch's allocator the memory is
    used there), so the batch can be used on any stream without a device-wide synchronization.
    """

    device = "gpu"

    def __init__(self, samples: list | None, layout: str = "", dense=None, ready=None):
        """``samples`` may be None when ``dense`` is given: its rows are made when first asked for."""
        self._sample_list = None if samples is None else list(samples)
        self._layout = layout
        self._dense = dense
        self._ready = ready  # a torch.cuda.Event recorded after the batch was written, or None

    def _sync(self, tensor):
        if self._ready is not None and tensor.is_cuda:
            import torch
            stream = torch.cuda.current_stream(tensor.device)
            stream.wait_event(self._ready)
            tensor.record_stream(stream)
        return tensor

    @property
    def _samples(self) -> list:
        if self._sample_list is None:
            self._sample_list = list(self._dense)
        return self._sample_list

    def __len__(self) -> int:
        return len(self._dense) if self._sample_list is None else len(self._sample_list)

    def at(self, index: int):
        return self._sync(self._samples[index])

    __getitem__ = at

    def __iter__(self):
        return (self.at(i) for i in range(len(self)))

    def shape(self) -> list[tuple[int, ...]]:
        return [tuple(sample.shape) for sample in self._samples]

    def layout(self) -> str:
        return self._layout

    @property
    def dtype(self):
        return self._samples[0].dtype if self._samples else None

    def is_dense_tensor(self) -> bool:
        return self._dense is not None or len({tuple(s.shape) for s in self._samples}) <= 1

    def as_tensor(self):
        """The batch as one [N, ...] tensor on the GPU: without a copy when it was produced dense."""
        if self._dense is None:
            shapes = {tuple(sample.shape) for sample in self._samples}
            if len(shapes) > 1:
                raise not_dense_error(shapes)
            if not shapes:
                raise ValueError("the batch is empty, so it has no tensor shape")
            import torch
            self._dense = torch.stack([self._sync(s) for s in self._samples])
        return self._sync(self._dense)

    def as_cpu(self) -> Batch:
        if self._dense is not None:
            return Batch.from_dense(self.as_tensor().cpu().numpy(), self._layout)
        return Batch([self.at(i).cpu().numpy() for i in range(len(self))], self._layout)

    def as_array(self) -> np.ndarray:
        return self.as_cpu().as_array()

    def __dlpack__(self, **kwargs):
        return self.as_tensor().__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.as_tensor().__dlpack_device__()

    def __repr__(self):
        return f"GpuBatch(len={len(self)}, layout='{self._layout}', shapes={self.shape()[:3]}...)"
