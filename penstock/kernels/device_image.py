"""Images in GPU memory that penstock did not allocate (a decoder's outputs), described without
wrapping each one as a torch tensor: building a tensor per image costs a round of GIL hand-offs
per image, which a busy pipeline cannot afford."""
from __future__ import annotations

_TYPES = {"|u1": "uint8", "<u2": "uint16", "<f4": "float32", "<f2": "float16"}


class DeviceImage:
    """An HWC image: pointer, shape and strides (in elements) from its ``__cuda_array_interface__``,
    and the object that owns the memory (kept alive with this description)."""

    __slots__ = ("owner", "pointer", "shape", "strides", "dtype", "device")

    def __init__(self, owner, device):
        import torch
        interface = owner.__cuda_array_interface__
        self.owner = owner
        self.pointer = interface["data"][0]
        self.shape = tuple(interface["shape"])
        self.dtype = getattr(torch, _TYPES[interface["typestr"]])
        itemsize = self.dtype.itemsize
        strides = interface.get("strides")
        if strides is None:
            self.strides = (self.shape[1] * self.shape[2], self.shape[2], 1)
        else:
            self.strides = tuple(stride // itemsize for stride in strides)
        self.device = device

    def data_ptr(self) -> int:
        return self.pointer

    def stride(self, dimension: int) -> int:
        return self.strides[dimension]

    def tensor(self):
        """The image as a torch tensor sharing its memory."""
        import torch
        return torch.as_tensor(self.owner, device=self.device)
