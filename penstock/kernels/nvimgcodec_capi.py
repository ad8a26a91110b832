"""nvImageCodec's C API through ctypes, for batch decoding into memory penstock allocates.

Why not nvImageCodec's Python module: it releases and retakes the interpreter lock around every
code stream, every image and inside each batch decode. Beside one busy Python thread (any training
loop) its batch decode of 256 images went from 12 ms to 1.2 s on an H200, and creating a code
stream from 26 us to 6 ms (benchmarks/BENCHMARKS.md). Here the quick calls (parsing a header,
describing an image) keep the lock, and the decode releases it once and runs to the end without
it: no call waits for the lock while the GPU works.

The structures are those of nvImageCodec 0.9 (include/nvimgcodec.h in its wheel);
tests/kernels/test_nvimgcodec_capi.py checks every size and field offset against that header.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
from ctypes import POINTER, Structure, Union, c_char, c_char_p, c_float, c_int, c_size_t, c_uint8, c_uint32, c_void_p

from penstock.kernels.c_library import load_twice
from penstock.kernels.nvjpeg_hardware import load_nvjpeg_globally

MAX_CODEC_NAME_SIZE = 256
MAX_NUM_DIM = 5
MAX_ROI_FILL_CHANNELS = 5
MAX_NUM_PLANES = 32

# nvimgcodecStructureType_t
TYPE_INSTANCE_CREATE_INFO = 2
TYPE_DECODE_PARAMS = 5
TYPE_ORIENTATION = 7
TYPE_REGION = 8
TYPE_CODE_STREAM_VIEW = 9
TYPE_IMAGE_INFO = 11
TYPE_IMAGE_PLANE_INFO = 12
TYPE_BACKEND = 17
TYPE_BACKEND_PARAMS = 29
TYPE_EXECUTION_PARAMS = 30
TYPE_PROPERTIES = 1

STATUS_SUCCESS = 0
PROCESSING_SUCCESS = 1
SAMPLE_UINT8 = 0x0802
BUFFER_STRIDED_DEVICE = 1
BACKEND_CPU_ONLY, BACKEND_GPU_ONLY, BACKEND_HYBRID_CPU_GPU, BACKEND_HW_GPU_ONLY = 1, 2, 3, 4
LOAD_HINT_FIXED = 2
SAMPLEFORMAT_I_Y, SAMPLEFORMAT_I_RGB, SAMPLEFORMAT_I_BGR = 4, 8, 10
COLORSPEC_SRGB, COLORSPEC_GRAY = 1, 2


class _Header(Structure):
    """The fields every nvImageCodec structure starts with."""

    _fields_ = [("struct_type", c_int), ("struct_size", c_size_t), ("struct_next", c_void_p)]


def _structure(name: str, fields: list) -> type:
    return type(name, (Structure,), {"_fields_": _Header._fields_ + fields})


Properties = _structure("Properties", [("version", c_uint32), ("cudart_version", c_uint32)])
Orientation = _structure("Orientation", [("rotated", c_int), ("flip_x", c_int), ("flip_y", c_int)])
ImagePlaneInfo = _structure("ImagePlaneInfo", [
    ("width", c_uint32), ("height", c_uint32), ("row_stride", c_size_t), ("num_channels", c_uint32),
    ("sample_type", c_int), ("precision", c_uint8)])


class _OutOfBoundsValue(Union):
    _fields_ = [("as_uint", c_uint32), ("as_int", c_int), ("as_float", c_float)]


class OutOfBoundsSample(Structure):
    _fields_ = [("value", _OutOfBoundsValue), ("type", c_int)]


Region = _structure("Region", [
    ("ndim", c_int), ("start", c_int * MAX_NUM_DIM), ("end", c_int * MAX_NUM_DIM), ("out_of_bounds_policy", c_int),
    ("out_of_bounds_samples", OutOfBoundsSample * MAX_ROI_FILL_CHANNELS)])
ImageInfo = _structure("ImageInfo", [
    ("codec_name", c_char * MAX_CODEC_NAME_SIZE), ("color_spec", c_int), ("chroma_subsampling", c_int),
    ("sample_format", c_int), ("orientation", Orientation), ("num_planes", c_uint32),
    ("plane_info", ImagePlaneInfo * MAX_NUM_PLANES), ("buffer", c_void_p), ("buffer_kind", c_int),
    ("cuda_stream", c_void_p)])
CodeStreamView = _structure("CodeStreamView", [("image_idx", c_size_t), ("region", Region),
                                               ("bitstream_offset", c_size_t)])
BackendParams = _structure("BackendParams", [("load_hint", c_float), ("load_hint_policy", c_int)])
Backend = _structure("Backend", [("kind", c_int), ("params", BackendParams)])
DecodeParams = _structure("DecodeParams", [("apply_exif_orientation", c_int)])
ExecutionParams = _structure("ExecutionParams", [
    ("device_allocator", c_void_p), ("pinned_allocator", c_void_p), ("max_num_cpu_threads", c_int),
    ("executor", c_void_p), ("device_id", c_int), ("pre_init", c_int), ("skip_pre_sync", c_int),
    ("num_backends", c_int), ("backends", POINTER(Backend))])
InstanceCreateInfo = _structure("InstanceCreateInfo", [
    ("load_builtin_modules", c_int), ("load_extension_modules", c_int), ("extension_modules_path", c_char_p),
    ("create_debug_messenger", c_int), ("debug_messenger_desc", c_void_p), ("message_severity", c_uint32),
    ("message_category", c_uint32)])

STRUCTURES = {"nvimgcodecProperties_t": Properties, "nvimgcodecOrientation_t": Orientation,
              "nvimgcodecImagePlaneInfo_t": ImagePlaneInfo, "nvimgcodecRegion_t": Region,
              "nvimgcodecImageInfo_t": ImageInfo, "nvimgcodecCodeStreamView_t": CodeStreamView,
              "nvimgcodecBackendParams_t": BackendParams, "nvimgcodecBackend_t": Backend,
              "nvimgcodecDecodeParams_t": DecodeParams, "nvimgcodecExecutionParams_t": ExecutionParams,
              "nvimgcodecInstanceCreateInfo_t": InstanceCreateInfo}
_TYPES = {Properties: TYPE_PROPERTIES, Orientation: TYPE_ORIENTATION, ImagePlaneInfo: TYPE_IMAGE_PLANE_INFO,
          Region: TYPE_REGION, ImageInfo: TYPE_IMAGE_INFO, CodeStreamView: TYPE_CODE_STREAM_VIEW,
          BackendParams: TYPE_BACKEND_PARAMS, Backend: TYPE_BACKEND, DecodeParams: TYPE_DECODE_PARAMS,
          ExecutionParams: TYPE_EXECUTION_PARAMS, InstanceCreateInfo: TYPE_INSTANCE_CREATE_INFO}


def new(structure: type, **fields):
    """A structure with its header filled in (type, size, no extension) and the given fields."""
    value = structure(**fields)
    _fill_header(value)
    return value


def _fill_header(value) -> None:
    value.struct_type = _TYPES[type(value)]
    value.struct_size = ctypes.sizeof(value)
    value.struct_next = None
    for name, kind in type(value)._fields_:
        if kind in _TYPES:
            _fill_header(getattr(value, name))
        elif isinstance(kind, type) and issubclass(kind, ctypes.Array) and kind._type_ in _TYPES:
            for item in getattr(value, name):
                _fill_header(item)


_SIGNATURES = {  # every argument a pointer (handles, structures, arrays) unless said otherwise
    "nvimgcodecGetProperties": [c_void_p],
    "nvimgcodecInstanceCreate": [c_void_p, c_void_p],
    "nvimgcodecInstanceDestroy": [c_void_p],
    "nvimgcodecDecoderCreate": [c_void_p, c_void_p, c_void_p, c_char_p],
    "nvimgcodecDecoderDestroy": [c_void_p],
    "nvimgcodecCodeStreamCreateFromHostMem": [c_void_p, c_void_p, c_void_p, c_size_t, c_void_p],
    "nvimgcodecCodeStreamDestroy": [c_void_p],
    "nvimgcodecCodeStreamGetSubCodeStream": [c_void_p, c_void_p, c_void_p],
    "nvimgcodecImageCreate": [c_void_p, c_void_p, c_void_p],
    "nvimgcodecImageDestroy": [c_void_p],
    "nvimgcodecDecoderDecode": [c_void_p, c_void_p, c_void_p, c_int, c_void_p, c_void_p],
    "nvimgcodecFutureWaitForAll": [c_void_p],
    "nvimgcodecFutureGetProcessingStatus": [c_void_p, c_void_p, c_void_p],
    "nvimgcodecFutureDestroy": [c_void_p],
}


def wheel_folder() -> str:
    """The folder of the nvidia-nvimgcodec wheel, found without importing its Python module:
    importing it loads every extension, and those whose libraries are missing print errors."""
    spec = importlib.util.find_spec("nvidia.nvimgcodec")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("nvImageCodec is not installed (nvidia-nvimgcodec-cu13)")
    return spec.submodule_search_locations[0]


def jpeg_extension_names(folder: str) -> list[str]:
    """The extensions of ``folder`` penstock decodes with (nvJPEG's: hardware, CUDA and hybrid JPEG
    backends), or none where it has no nvJPEG extension. nvImageCodec loads every extension of the
    folder it is given, and those whose libraries are not installed (JPEG 2000, TIFF) print errors
    each time a decoder is made."""
    return [name for name in os.listdir(folder) if "nvjpeg" in name and "nvjpeg2k" not in name] \
        if os.path.isdir(folder) else []


class Library:
    """The loaded library: ``quick`` calls keep the interpreter lock (microseconds of work),
    ``slow`` calls release it (the decode, and waiting for it)."""

    def __init__(self, directory: str, extensions: str):
        """The library of the wheel's ``directory``, loading the extensions of folder ``extensions``."""
        load_nvjpeg_globally()  # the JPEG extension finds nvJPEG by name, wherever it was loaded from
        self.extensions = extensions.encode()
        self.quick, self.slow = load_twice(os.path.join(directory, "libnvimgcodec.so.0"), _SIGNATURES)
        properties = new(Properties)
        self.check(self.quick.nvimgcodecGetProperties(ctypes.byref(properties)), "nvimgcodecGetProperties")
        self.version = (properties.version // 1000, properties.version % 1000 // 100)
        if self.version != (0, 9):
            raise ImportError(f"penstock reads nvImageCodec 0.9's structures; this is "
                              f"{self.version[0]}.{self.version[1]}: pip install 'nvidia-nvimgcodec-cu13>=0.9,<0.10'")

    @staticmethod
    def check(status: int, call: str) -> None:
        if status != STATUS_SUCCESS:
            raise RuntimeError(f"nvImageCodec: {call} failed with status {status}")
