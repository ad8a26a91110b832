"""``readers.numpy``: NumPy arrays (.npy files), whole or a region of each; the .npy header is read
here (load_npy), without unpickling anything."""
from __future__ import annotations

import ast
import os
import re
from typing import NamedTuple

import numpy as np

from penstock import limits, registry
from penstock.contract import OutputSpec, SampleContext
from penstock.operators.readers.file_lists import _one_list, list_base, name_matcher, read_file_list
from penstock.operators.shared.readers import (SAMPLE_READER_ARGS, ShardedReader, o_direct_without_mmap, sharded_epochs,
                                               shuffle_after_epoch_alone)
from penstock.schema import Arg, ArgError, Arguments, OpSchema, given, require_one_of


ROI_STARTS, ROI_ENDS = ("roi_start", "rel_roi_start"), ("roi_end", "rel_roi_end", "roi_shape", "rel_roi_shape")


NUMPY_TYPES = frozenset("?bBhHiIlLqQefd")  # bool, the integers, float16/32/64: what DALI's reader takes


def _one_roi_form(static: dict, per_sample: frozenset) -> None:
    for group in (ROI_STARTS, ROI_ENDS):
        named = [name for name in group if given(static, per_sample, name)]
        if len(named) > 1:
            raise ArgError(f"arguments {' and '.join(repr(name) for name in named)} exclude each other; give one")


registry.register_schema(OpSchema(
    name="readers.numpy",
    class_name="readers.Numpy",
    doc="Reads NumPy arrays from .npy files, each with the type and shape its file holds (C order: files in "
        "Fortran order are transposed in memory, the shape kept), or only a region of each (``roi_*``).\n\n"
        "Give the files one of three ways: ``file_root`` alone, whose files and those of its immediate "
        "sub-folders that match ``file_filter`` are read (the folder's own first, then each sub-folder's, "
        "in sorted order, as in DALI); ``file_list``, a text file of one path per line; or ``files``. Every "
        "file must hold one element type and number of dimensions, that of the first. With device='gpu' the "
        "files are read on the CPU and the arrays moved to the GPU (DALI reads them through GPUDirect Storage).",
    args=(
        Arg("file_root", "path", None, "Folder of the files, or the base of relative paths in file_list/files."),
        Arg("file_filter", "str", "*.npy", "Glob that the names of the files in file_root and its immediate "
            "sub-folders match (case-sensitive); ignored with file_list or files."),
        Arg("file_list", "path", None, "Text file with one path per line, relative to file_root, else to the "
            "list's folder."),
        Arg("files", "paths", None, "Paths of the files (relative to file_root when it is given)."),
        Arg("roi_start", "ints", None, "Start of the region of interest, in elements (one value per axis of "
            "roi_axes, or of the array)."),
        Arg("rel_roi_start", "floats", None, "Start of the region, as fractions of the extents."),
        Arg("roi_end", "ints", None, "End (exclusive) of the region, in elements."),
        Arg("rel_roi_end", "floats", None, "End of the region, as fractions of the extents."),
        Arg("roi_shape", "ints", None, "Size of the region, in elements."),
        Arg("rel_roi_shape", "floats", None, "Size of the region, as fractions of the extents."),
        Arg("roi_axes", "ints", (), "The axes the roi_ values are given for, in their order (default: every "
            "axis, in order).", min=0),
        Arg("out_of_bounds_policy", "str", "error", "A region outside the array: 'error', 'pad' (with "
            "fill_value) or 'trim_to_shape'.", choices=("error", "pad", "trim_to_shape")),
        Arg("fill_value", "float", 0.0, "The padding's value under out_of_bounds_policy='pad'."),
        Arg("cache_header_information", "bool", False, "Accepted for DALI compatibility; each file's header "
            "is read with its data."),
        Arg("register_buffers", "bool", True, "Accepted for DALI compatibility (its 'gpu' form's buffers)."),
        Arg("use_o_direct", "bool", False, "Accepted for DALI compatibility (with dont_use_mmap=True, as "
            "DALI's); files are read through the page cache."),
        *SAMPLE_READER_ARGS,
    ),
    num_inputs=(0, 0),
    num_outputs=1,
    input_names=(),
    is_source=True,
    checks=(require_one_of("file_root", "file_list", "files", what="the files to read"),
            lambda static, per_sample: _one_list(static), _one_roi_form, shuffle_after_epoch_alone,
            o_direct_without_mmap),
))


def list_numpy_files(file_root: str, file_filter: str) -> list[str]:
    """The files of ``file_root`` whose names match ``file_filter``, then those of each immediate
    sub-folder, each folder's in sorted order (DALI's discovery for its numpy reader), relative to
    file_root as DALI names them ('./name', 'folder/name')."""
    if not os.path.isdir(file_root):
        raise FileNotFoundError(f"readers.numpy: file_root '{file_root}' is not a folder")
    folders = ["."] + sorted(entry.name for entry in os.scandir(file_root) if entry.is_dir())
    matches = name_matcher([file_filter], case_sensitive=True)
    paths = []
    for folder in folders:
        names = sorted(entry.name for entry in os.scandir(os.path.join(file_root, folder)) if entry.is_file())
        paths.extend(f"{folder}/{name}" for name in names if matches(name))
    return paths


NPY_MAGIC = b"\x93NUMPY"


NPY_HEADER_LIMIT = 10_000  # np.load's own limit on a header's size (its max_header_size)


class NpyHeader(NamedTuple):
    dtype: np.dtype  # as stored (its byte order)
    shape: tuple[int, ...]
    fortran_order: bool
    data_offset: int
    data_bytes: int


def read_npy_header(handle, path: str) -> NpyHeader:
    """The header of the .npy file open as ``handle`` (at its start), checked: magic string and
    version, a dict literal of exactly 'descr', 'fortran_order' and 'shape', an element type
    readers.numpy takes, and a shape whose data the file holds. Any other file is a ValueError
    naming ``path`` (a SizeClaimError where a size is more than the file holds); numpy's own parser
    lets tokenizer errors through unnamed and allocates what the shape claims before reading."""
    file_size = os.fstat(handle.fileno()).st_size
    prefix = handle.read(12)
    if prefix.startswith(b"PK\x03\x04"):
        raise ValueError(f"'{path}' is an .npz archive of several arrays; readers.numpy reads .npy files")
    if not prefix.startswith(NPY_MAGIC):
        raise ValueError(f"'{path}' is not a .npy file: it starts with {prefix[:6]!r}, not {NPY_MAGIC!r}")
    if len(prefix) < 10:
        raise ValueError(f"'{path}' is cut inside its .npy header ({len(prefix)} bytes)")
    version = (prefix[6], prefix[7])
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise ValueError(f"'{path}': .npy format version {version[0]}.{version[1]}, not 1.0, 2.0 or 3.0")
    start = 10 if version[0] == 1 else 12
    if len(prefix) < start:
        raise ValueError(f"'{path}' is cut inside its .npy header ({len(prefix)} bytes)")
    length = int.from_bytes(prefix[8:start], "little")
    limits.checked_bytes(f"'{path}': its .npy header", length, 1, file_size - start)
    if length > NPY_HEADER_LIMIT:
        raise ValueError(f"'{path}': its .npy header claims {length:,} bytes, more than np.load reads "
                         f"({NPY_HEADER_LIMIT:,})")
    handle.seek(start)
    text = handle.read(length).decode("latin1" if version[0] < 3 else "utf8", errors="replace")
    header = _npy_header_dict(text, path)
    shape, descr = header["shape"], header["descr"]
    if not isinstance(shape, tuple) or not all(isinstance(extent, int) and not isinstance(extent, bool)
                                               for extent in shape):
        raise ValueError(f"'{path}': its .npy header's shape is {shape!r}, not a tuple of integers")
    fortran_order = header["fortran_order"]
    if fortran_order is not True and fortran_order is not False:
        raise ValueError(f"'{path}': its .npy header's fortran_order is {fortran_order!r}, not True or False")
    try:
        dtype = np.lib.format.descr_to_dtype(descr)
    except (TypeError, ValueError) as error:
        raise ValueError(f"'{path}': its .npy header's descr {descr!r} is not an element type ({error})") from None
    if dtype.hasobject:
        raise ValueError(f"'{path}' holds Python objects (pickled); readers.numpy takes bool, integers and floats")
    if dtype.char not in NUMPY_TYPES:
        raise ValueError(f"'{path}' holds {dtype} elements; readers.numpy takes bool, integers and floats")
    data_bytes = limits.checked_bytes(f"'{path}': its .npy header", shape, dtype.itemsize, file_size - start - length)
    return NpyHeader(dtype, shape, fortran_order, start + length, data_bytes)


def _npy_header_dict(text: str, path: str) -> dict:
    try:
        header = ast.literal_eval(text)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        try:  # headers written by Python 2 give their integers an L suffix; np.load takes them
            header = ast.literal_eval(re.sub(r"(?<=\d)L\b", "", text))
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            raise ValueError(f"'{path}': its .npy header is not a Python dict literal: {text[:200]!r}") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        held = f"the keys {', '.join(sorted(map(repr, header)))}" if isinstance(header, dict) else \
            f"a {type(header).__name__}"
        raise ValueError(f"'{path}': its .npy header holds {held}, not a dict of exactly 'descr', 'fortran_order' "
                         "and 'shape'")
    return header


def load_npy(path: str) -> np.ndarray:
    """The array of a .npy file, C-contiguous in native byte order; a clear error naming the file
    for anything else (a pickle, an .npz archive, an element type no operator takes, a header that
    claims more data than the file holds)."""
    try:
        with open(path, "rb") as handle:
            header = read_npy_header(handle, path)
            data = np.empty(header.data_bytes, np.uint8)
            handle.seek(header.data_offset)
            read = handle.readinto(memoryview(data))
    except OSError as error:
        raise ValueError(f"cannot read '{path}' as a .npy array: {error.strerror or error}") from None
    if read != header.data_bytes:  # the file shrank since its size was taken
        raise ValueError(f"'{path}' ends {header.data_bytes - read:,} bytes into the data its .npy header claims")
    array = data.view(header.dtype).reshape(header.shape, order="F" if header.fortran_order else "C")
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    return np.require(array, requirements="C")  # (np.ascontiguousarray makes 0-d arrays 1-d)


def _npy_header(path: str) -> tuple[np.dtype, int]:
    """(element type, number of dimensions) of a .npy file, from its header alone."""
    try:
        with open(path, "rb") as handle:
            header = read_npy_header(handle, path)
    except OSError as error:
        raise ValueError(f"readers.numpy: cannot read '{path}' as a .npy array: {error.strerror or error}") from None
    except ValueError as error:
        raise type(error)(f"readers.numpy: {error}") from None
    return header.dtype.newbyteorder("="), len(header.shape)


@registry.register("readers.numpy", "cpu")
class NumpyReader(ShardedReader):
    def __init__(self, args, context):
        super().__init__(args, context)
        root, file_list, files = args.file_root, args.file_list, args.files
        if files is not None:
            self.sources, base = list(files), root
        elif file_list is not None:
            self.sources, base = read_file_list(file_list, root, labelled=False), list_base(file_list, root)
        else:  # named as DALI's discovery names them: './name' in file_root, 'folder/name' below it
            self.sources, base = list_numpy_files(root, args.file_filter), root
        self.paths = [os.path.join(base, name) if base else name for name in self.sources]
        if not self.paths:
            where = f"'{root}' (file_filter '{args.file_filter}')" if files is None and file_list is None \
                else f"'{file_list}'" if file_list is not None else "files"
            raise ValueError(f"readers.numpy: no files found in {where}")
        self.dtype, self.ndim = _npy_header(self.paths[0])
        self.epochs = sharded_epochs(args, context, len(self.paths), "readers.numpy")
        self._region = any(args[name] is not None for name in ROI_STARTS + ROI_ENDS)

    def load(self, index, sample: SampleContext) -> tuple:
        path = self.paths[index]
        array = load_npy(path)
        if array.dtype != self.dtype or array.ndim != self.ndim:
            raise ValueError(f"Inconsistent data: '{path}' holds {array.ndim}-dimensional {array.dtype} arrays, the "
                             f"first file ('{self.paths[0]}') {self.ndim}-dimensional {self.dtype}: every file must hold "
                             "one type and number of dimensions")
        return (self._region_of(array, path) if self._region else array,)

    def _region_of(self, array: np.ndarray, path: str) -> np.ndarray:
        from penstock.operators.shared.arrays import slice_sample
        args = self.args
        window = Arguments({"axes": tuple(args.roi_axes) or tuple(range(array.ndim)), "anchor": None,
                            "window_shape": None, "start": args.roi_start, "rel_start": args.rel_roi_start,
                            "end": args.roi_end, "rel_end": args.rel_roi_end, "shape": args.roi_shape,
                            "rel_shape": args.rel_roi_shape, "out_of_bounds_policy": args.out_of_bounds_policy,
                            "fill_values": (args.fill_value,)})
        try:
            return np.require(slice_sample(np, window, array), requirements="C")
        except ValueError as error:
            raise ValueError(f"the region of interest of '{path}': {error}") from None

    def declare_outputs(self, inputs):
        return OutputSpec(self.dtype, self.ndim, "")
