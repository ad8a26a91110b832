"""``io.file.read``: the bytes of the files whose paths the samples hold (each a 1-D uint8 or int8
array of the path's UTF-8 bytes, as DALI takes them), read on the CPU workers."""
from __future__ import annotations

import numpy as np

from penstock import registry
from penstock.contract import OutputSpec, SampleOperator
from penstock.schema import Arg, OpSchema

PATH_TYPES = (np.dtype(np.uint8), np.dtype(np.int8))

registry.register_schema(OpSchema(
    name="io.file.read", class_name="io.file.Read", num_inputs=(1, 1), input_names=("filepaths",),
    doc="Reads whole files: each sample is a path as a 1-D uint8 (or int8) array of its UTF-8 bytes "
        "(``np.frombuffer(path.encode(), np.uint8)``), each output the file's bytes as a 1-D uint8 array. An empty "
        "file gives an empty array.",
    args=(Arg("dont_use_mmap", "bool", False, "Accepted for DALI compatibility: files are read with plain reads."),
          Arg("use_o_direct", "bool", False, "Accepted for DALI compatibility: files are read through the page "
              "cache."))))


def _path(sample: np.ndarray) -> str:
    if sample.dtype not in PATH_TYPES or sample.ndim != 1:
        raise TypeError(f"expected a file path as a 1-D uint8 array of its UTF-8 bytes, got {sample.dtype} of shape "
                        f"{sample.shape}")
    return sample.view(np.uint8).tobytes().decode("utf-8", errors="surrogateescape")


@registry.register("io.file.read", "cpu")
class FileRead(SampleOperator):
    def declare_outputs(self, inputs):
        spec = inputs[0]
        if spec.dtype is not None and spec.dtype not in PATH_TYPES or spec.ndim not in (None, 1):
            raise ValueError(f"{self.name}: expects file paths as 1-D uint8 (or int8) arrays of their UTF-8 bytes, got "
                             f"{spec.ndim}-dimensional {spec.dtype} samples")
        return OutputSpec(np.dtype(np.uint8), 1, "")

    def run(self, inputs, args, sample, out=None):
        path = _path(inputs[0])
        try:
            return np.fromfile(path, np.uint8)
        except OSError as error:
            raise OSError(f"cannot read '{path}': {error.strerror or error}") from None
