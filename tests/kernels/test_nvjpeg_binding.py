"""penstock's ctypes binding of nvJPEG's batched decode: nvjpegImage_t against nvJPEG's own header
(a C compiler lays it out; skipped without the header, which ships in the nvidia-nvjpeg wheel of
the GPU extra, or without a compiler), and the two ways each library is loaded."""
import ctypes
import ctypes.util
import glob
import os
import shutil
import subprocess

import pytest

from penstock.kernels import nvjpeg_hardware
from penstock.kernels.c_library import load_twice


def _header():
    try:
        import nvidia
    except ImportError:
        return None
    for directory in nvidia.__path__:
        found = sorted(glob.glob(os.path.join(directory, "cu*", "include", "nvjpeg.h")))
        if found:
            return found[-1]
    return None


def test_image_structure_matches_the_header(tmp_path):
    header, compiler = _header(), shutil.which("cc") or shutil.which("gcc")
    if header is None or compiler is None:
        pytest.skip("needs nvJPEG's header (pip install 'penstock[gpu]') and a C compiler")
    # the few CUDA runtime types the header names
    (tmp_path / "cuda_runtime_api.h").write_text("typedef struct CUstream_st* cudaStream_t;\ntypedef int cudaError_t;\n")
    (tmp_path / "library_types.h").write_text("typedef int libraryPropertyType;\n")
    source = tmp_path / "layout.c"
    source.write_text('#include <stddef.h>\n#include <stdio.h>\n#include "nvjpeg.h"\nint main(void) {\n'
                      'printf("%zu %zu %zu\\n", sizeof(nvjpegImage_t), offsetof(nvjpegImage_t, channel), '
                      'offsetof(nvjpegImage_t, pitch));\nreturn 0;\n}\n')
    binary = tmp_path / "layout"
    subprocess.run([compiler, f"-I{tmp_path}", f"-I{os.path.dirname(header)}", str(source), "-o", str(binary)],
                   check=True)
    printed = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split()
    structure = nvjpeg_hardware.Image
    assert [int(value) for value in printed] == [ctypes.sizeof(structure), structure.channel.offset,
                                                 structure.pitch.offset]
    assert nvjpeg_hardware.IMAGE_FIELDS.itemsize == ctypes.sizeof(structure)


def test_a_library_is_loaded_keeping_and_releasing_the_lock():
    quick, slow = load_twice(ctypes.util.find_library("c"), {"abs": [ctypes.c_int]})
    assert isinstance(quick, ctypes.PyDLL) and not isinstance(slow, ctypes.PyDLL)
    assert quick.abs(-3) == 3 and slow.abs(-4) == 4


class _RecordingNvjpeg:
    """Stands in for nvJPEG's library: records the calls, fails the decodes it is told to."""

    def __init__(self):
        self.calls, self.failing = [], set()

    def nvjpegDecodeBatchedInitialize(self, handle, state, count, threads, output_format):
        self.calls.append(("initialize", count))
        return nvjpeg_hardware.STATUS_SUCCESS

    def nvjpegDecodeBatchedEx(self, handle, state, data, lengths, images, params, stream):
        self.calls.append(("decode", len(self.calls)))
        return 7 if len(self.calls) in self.failing else nvjpeg_hardware.STATUS_SUCCESS


def test_the_decode_state_is_set_up_once_per_batch_size_and_again_after_a_failure():
    from types import SimpleNamespace

    from penstock.runtime.nvjpeg_decoder import HardwareJpegDecoder
    recording = _RecordingNvjpeg()
    decoder = object.__new__(HardwareJpegDecoder)
    decoder.library = SimpleNamespace(slow=recording)
    decoder.handle, decoder.output_format = ctypes.c_void_p(), nvjpeg_hardware.OUTPUT_RGBI
    batch = SimpleNamespace(state=ctypes.c_void_p(), count=4, data=None, lengths=None, images=None, params=None,
                            initialized_for=0, status=-1)

    def initializations(counts):
        recording.calls.clear()
        statuses = []
        for count in counts:
            batch.count = count
            statuses.append(decoder.decode(batch, 0))
        return [call[1] for call in recording.calls if call[0] == "initialize"], statuses

    assert initializations([4, 4, 4]) == ([4], [0, 0, 0])
    assert initializations([4, 3, 3, 4]) == ([3, 4], [0, 0, 0, 0])
    recording.failing = {1}  # the next call (a decode) fails: the state is set up again after it
    assert initializations([4, 4, 4]) == ([4], [7, 0, 0])
    assert batch.status == 0
