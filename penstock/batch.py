"""Batches: N samples that may differ in shape, with one layout string.

A CPU batch (``Batch``) keeps one numpy array per sample. When every sample was written into one
buffer (the usual case for a pipeline's final, fixed-size outputs) it also keeps that buffer, so
the batch is a dense tensor without a copy.

On the GPU, a ragged batch is one flat buffer with a shape and an offset per sample
(``PackedBatch``): what the decoders write, what the fused image kernel reads and writes, and what
``GpuBatch`` (a pipeline output) hands over. Work on it may be deferred: a ``DeferredBatch`` (the
fused image plan, a decode in flight) runs when ``materialize`` is called.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from penstock import types


class PackedBatch:
    """Samples of one element type in one flat buffer (a torch tensor): sample i is the
    ``shapes[i]`` elements at ``offsets[i]`` (each sample's elements contiguous, row after row).
    Reads as a sequence of per-sample views, made when asked for: a batch has hundreds, and each
    view costs microseconds of the thread that launches the GPU work."""

    def __init__(self, buffer, offsets: list, shapes: list):
        self.buffer = buffer
        self.offsets = offsets
        self.shapes = shapes

    @classmethod
    def of_dense(cls, tensor) -> "PackedBatch":
        """The rows of a dense [N, ...] tensor, without a view per row."""
        shape = tuple(tensor.shape[1:])
        volume = _volume(shape)
        return cls(tensor.reshape(-1), back_to_back(len(tensor), volume), [shape] * len(tensor))

    def __len__(self) -> int:
        return len(self.shapes)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        offset, shape = self.offsets[index], self.shapes[index]
        return self.buffer[offset:offset + _volume(shape)].view(shape)

    def __iter__(self):
        return (self[index] for index in range(len(self)))

    def facts(self) -> tuple:
        """(channels, dtype, device) of HWC samples, without making a view."""
        return (self.shapes[0][-1] if self.shapes else 0), self.buffer.dtype, self.buffer.device

    @property
    def sizes(self) -> list:
        """(height, width) of each HWC sample."""
        return [(shape[0], shape[1]) for shape in self.shapes]

    def uniform_shape(self) -> tuple | None:
        """The one shape of every sample, or None when they differ (or there are none)."""
        return one_value(self.shapes)

    def dense(self):
        """The batch as one [N, ...] view of the buffer when every sample has one shape and they
        lie back to back, else None."""
        shape = self.uniform_shape()
        if shape is None:
            return None
        volume = _volume(shape)
        if list(self.offsets) != back_to_back(len(self.offsets), volume):
            return None
        return self.buffer[:len(self.shapes) * volume].view(len(self.shapes), *shape)

    def layouts(self) -> np.ndarray:
        """Per HWC sample: (address, height, width, row stride in elements), for kernel tables."""
        table = np.empty((len(self.shapes), 4), np.int64)
        if len(self.shapes):
            uniform = self.uniform_shape()
            table[:, 1:3] = uniform[:2] if uniform is not None else [shape[:2] for shape in self.shapes]
            table[:, 3] = table[:, 2] * self.shapes[0][2]
            table[:, 0] = np.asarray(self.offsets, np.int64) * self.buffer.element_size() + self.buffer.data_ptr()
        return table


class DeferredBatch:
    """GPU work planned for a batch and not yet run: the next operator may extend it, or call
    ``materialize`` to get tensors. The executor materializes what reaches a pipeline output."""

    def __len__(self) -> int:
        raise NotImplementedError

    def materialize(self, per_sample: bool = True):
        """Runs the planned work: (per-sample tensors, dense [N, ...] tensor or None); with
        ``per_sample=False`` the list may be None when the dense tensor is there."""
        raise NotImplementedError


def one_value(values):
    """The value every item of ``values`` has, or None (also for no items): compared in C, not item
    by item in Python, for the per-sample lists of a batch (sizes, shapes, argument dicts)."""
    values = values if isinstance(values, (list, tuple)) else list(values)
    if not values:
        return None
    first = values[0]
    try:
        return first if values.count(first) == len(values) else None
    except ValueError:  # items whose comparison is not a bool (arrays)
        return None


def back_to_back(count: int, volume: int) -> list:
    """The offsets of ``count`` samples of ``volume`` elements each, one after the other."""
    return list(range(0, count * volume, volume)) if volume else [0] * count


def _volume(shape) -> int:
    total = 1
    for extent in shape:
        total *= extent
    return total


def not_dense_error(shapes: set, name: str = "") -> ValueError:
    listed = ", ".join(str(shape) for shape in sorted(shapes)[:4])
    which = f"{name}: " if name else ""
    return ValueError(f"{which}the batch is not dense: its samples have {len(shapes)} different shapes "
                      f"({listed}{', ...' if len(shapes) > 4 else ''}); resize or crop to one size, or "
                      "read the samples one by one with .at(i)")


def _data_type(dtype):
    """DALI's name of a numpy or torch element type (types.FLOAT for float32), as DALI's tensors
    report their ``dtype``."""
    return types.DALIDataType(np.dtype(types.to_numpy_dtype(dtype)).name)


class Tensor:
    """One sample of a CPU batch, as DALI's TensorCPU: ``shape()``, ``layout()``, ``dtype`` (a
    types.DALIDataType), and the array itself through numpy's and DLPack's protocols
    (``np.asarray(tensor)`` shares its memory)."""

    device = "cpu"

    def __init__(self, array: np.ndarray, layout: str = ""):
        # a numpy scalar (a 0-d sample) made an array once: its __array_interface__ would point
        # into a temporary that is gone once read
        self._array = np.asarray(array)
        self._layout = layout

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def ndim(self) -> int:
        return self._array.ndim

    def layout(self) -> str:
        return self._layout

    def set_layout(self, layout: str) -> None:
        self._layout = layout or ""

    @property
    def dtype(self):
        return _data_type(self._array.dtype)

    def as_cpu(self) -> "Tensor":
        return self

    def as_array(self) -> np.ndarray:
        return self._array

    def squeeze(self, dim: int | None = None) -> bool:
        """Drops the axes of extent 1 (``dim``: that axis only); returns whether the shape changed, as DALI."""
        shape = self._array.shape
        dropped = [i for i, size in enumerate(shape) if size == 1] if dim is None else [dim % len(shape)]
        self._array = np.squeeze(self._array, axis=tuple(dropped))
        if len(self._layout) == len(shape):
            self._layout = "".join(name for i, name in enumerate(self._layout) if i not in dropped)
        return bool(dropped)

    def data_ptr(self) -> int:
        return self._array.ctypes.data

    @property
    def __array_interface__(self):
        return self._array.__array_interface__

    def __array__(self, dtype=None, copy=None):
        return self._array if dtype is None else self._array.astype(dtype)

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    def __repr__(self):
        layout = f", layout=\"{self._layout}\"" if self._layout else ""
        return f"TensorCPU(dtype={self.dtype}{layout}, shape={self._array.shape})"


class Batch:
    """A batch of samples on the CPU, as ``pipe.run()`` returns it; DALI's TensorListCPU:
    ``batch[i]`` is a Tensor (DALI's TensorCPU), ``at(i)`` the sample as a numpy array,
    ``as_array()`` the whole batch as one array. ``name`` says which output of the pipeline it
    is (for error messages)."""

    device = "cpu"
    name = ""

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

    def __getitem__(self, index: int) -> Tensor:
        if isinstance(index, slice):
            return Batch(self._samples[index], self._layout)
        return Tensor(self._samples[index], self._layout)

    def __iter__(self):
        return (Tensor(sample, self._layout) for sample in self._samples)

    def shape(self) -> list[tuple[int, ...]]:
        return [sample.shape for sample in self._samples]

    def ndim(self) -> int:
        return self._samples[0].ndim if self._samples else (self._dense.ndim - 1 if self._dense is not None else 0)

    def layout(self) -> str:
        return self._layout

    def set_layout(self, layout: str) -> None:
        self._layout = layout or ""

    @property
    def dtype(self):
        """The element type, as DALI names it (types.FLOAT); ``numpy_dtype`` is numpy's."""
        return _data_type(self.numpy_dtype)

    @property
    def numpy_dtype(self) -> np.dtype:
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
            raise not_dense_error(shapes, self.name)
        if not self._samples:
            raise ValueError("the batch is empty, so it has no array shape")
        self._dense = np.stack(self._samples)
        return self._dense

    def as_tensor(self) -> Tensor:
        """The batch as one Tensor of shape [N, ...] (DALI's TensorCPU)."""
        return Tensor(self.as_array(), "N" + self._layout if self._layout else "")

    def as_reshaped_tensor(self, shape) -> Tensor:
        return Tensor(self.as_array().reshape(tuple(shape)))

    def as_cpu(self) -> "Batch":
        return self

    def data_ptr(self) -> int:
        return self.as_array().ctypes.data

    def __array__(self, dtype=None, copy=None):
        array = self.as_array()
        return array if dtype is None else array.astype(dtype)

    def __dlpack__(self, **kwargs):
        return self.as_array().__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.as_array().__dlpack_device__()

    def __repr__(self):
        return f"TensorListCPU(dtype={self.dtype}, layout='{self._layout}', num_samples={len(self)}, " \
               f"shape={self.shape()[:3]}{'...' if len(self) > 3 else ''})"


class GpuBatch:
    """A batch on the GPU: one torch tensor per sample (a list, or a PackedBatch whose views are
    made when asked for), and one dense [N, ...] tensor when the samples were produced together
    with one shape.

    The pipeline's work on it was queued on the pipeline's CUDA stream; every accessor makes the
    caller's current stream wait for that work first (and tells PyTorch's allocator the memory is
    used there), so the batch can be used on any stream without a device-wide synchronization.
    """

    device = "gpu"
    name = ""

    def __init__(self, samples, layout: str = "", dense=None, ready=None):
        """``samples`` may be None when ``dense`` is given: its rows are made when first asked for."""
        self._sample_list = samples if samples is None or isinstance(samples, PackedBatch) else list(samples)
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
        """Sample ``index`` as a torch tensor on the GPU."""
        return self._sync(self._samples[index])

    def __getitem__(self, index: int) -> "GpuTensor":
        return GpuTensor(self.at(index), self._layout)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def shape(self) -> list[tuple[int, ...]]:
        if isinstance(self._sample_list, PackedBatch):
            return [tuple(shape) for shape in self._sample_list.shapes]
        return [tuple(sample.shape) for sample in self._samples]

    def layout(self) -> str:
        return self._layout

    @property
    def dtype(self):
        """The element type, as DALI names it (types.FLOAT); ``torch_dtype`` is torch's."""
        return None if self.torch_dtype is None else _data_type(self.torch_dtype)

    @property
    def torch_dtype(self):
        if isinstance(self._sample_list, PackedBatch):
            return self._sample_list.buffer.dtype
        return self._samples[0].dtype if len(self._samples) else None

    def is_dense_tensor(self) -> bool:
        return self._dense is not None or len(set(self.shape())) <= 1

    def as_tensor(self):
        """The batch as one [N, ...] tensor on the GPU: without a copy when it was produced dense."""
        if self._dense is None:
            shapes = set(self.shape())
            if len(shapes) > 1:
                raise not_dense_error(shapes, self.name)
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
        return f"TensorListGPU(dtype={self.dtype}, layout='{self._layout}', num_samples={len(self)}, " \
               f"shape={self.shape()[:3]}{'...' if len(self) > 3 else ''})"


class GpuTensor:
    """One sample of a GPU batch, as DALI's TensorGPU: ``shape()``, ``layout()``, ``dtype``,
    ``as_cpu()``, and the tensor itself through DLPack and ``__cuda_array_interface__``."""

    device = "gpu"

    def __init__(self, tensor, layout: str = ""):
        self._tensor = tensor
        self._layout = layout

    def shape(self) -> list[int]:
        return list(self._tensor.shape)

    def layout(self) -> str:
        return self._layout

    @property
    def dtype(self):
        return _data_type(self._tensor.dtype)

    def as_cpu(self) -> Tensor:
        return Tensor(self._tensor.cpu().numpy(), self._layout)

    def data_ptr(self) -> int:
        return self._tensor.data_ptr()

    @property
    def __cuda_array_interface__(self):
        return self._tensor.__cuda_array_interface__

    def __dlpack__(self, **kwargs):
        return self._tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._tensor.__dlpack_device__()

    def __repr__(self):
        return f"TensorGPU(dtype={self.dtype}, shape={tuple(self._tensor.shape)})"


def hwc_facts(samples) -> tuple:
    """(channels, dtype, device) of a GPU batch of HWC samples, a PackedBatch or a list of tensors
    (read from the first: the kernels take one of each per batch)."""
    if isinstance(samples, PackedBatch):
        return samples.facts()
    first = samples[0]
    return first.shape[2], first.dtype, first.device
