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


registry.register_schema(OpSchema(
    name="dump_image", class_name="DumpImage", num_inputs=(1, 1), input_names=("input",),
    doc="Writes each image (uint8 HWC, 1 or 3 channels) to '<index in batch>-<suffix>-0.ppm' in the working "
        "directory as an ASCII PPM (P3) or PGM (P2) file, as DALI does, and passes it on unchanged. For debugging.",
    args=(Arg("suffix", "str", "", "Suffix of the file names."),
          Arg("input_layout", "str", "HWC", "Layout of the images (HWC)."))))


@registry.register("dump_image", "cpu")
class DumpImage(SampleOperator):
    def declare_outputs(self, inputs):
        spec = inputs[0]
        if spec.dtype is not None and spec.dtype != np.uint8 or spec.ndim not in (None, 3):
            raise ValueError(f"{self.name}: writes uint8 HWC images, got {spec.ndim}-dimensional {spec.dtype} samples")
        return spec

    def run(self, inputs, args, sample, out=None):
        image = np.asarray(inputs[0])
        if image.ndim != 3 or image.shape[2] not in (1, 3) or image.dtype != np.uint8:
            raise ValueError(f"expected a uint8 HWC image of 1 or 3 channels, got {image.dtype} of shape {image.shape}")
        height, width, channels = image.shape
        rows = "\n".join(" ".join(map(str, row)) + " " for row in image.reshape(height, width * channels).tolist())
        with open(f"{sample.index}-{args.suffix}-0.ppm", "w") as file:
            file.write(f"{'P3' if channels == 3 else 'P2'}\n{width} {height}\n255\n{rows}\n")
        return image
