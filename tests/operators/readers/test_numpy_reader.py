"""readers.numpy against numpy's own np.load: which files a folder gives (DALI's discovery), every
element type and byte order, Fortran order, regions of interest against numpy slicing, shards, and
the errors that name the file."""
from __future__ import annotations

import numpy as np
import pytest

from helpers_data import no_hang  # noqa: F401  (autouse: a test that hangs fails instead)
from helpers_data import read_one_epoch
import hostile_files as hostile
import penstock
from penstock import fn


def read_all(batch_size: int = 2, **reader_args) -> list[np.ndarray]:
    """One epoch of the reader's arrays, in the order they came."""
    return [sample for (sample,) in read_one_epoch(lambda: (fn.readers.numpy(name="Reader", **reader_args),),
                                                   batch_size)]


def test_a_folder_gives_its_own_files_then_each_sub_folders_matching_the_filter(tmp_path):
    arrays = {"b.npy": np.arange(6, dtype=np.int16).reshape(2, 3), "a.npy": np.ones((1, 4), np.int16),
              "sub_y/d.npy": np.full((3, 3), 7, np.int16), "sub_x/c.npy": np.zeros((2, 2), np.int16),
              "sub_x/deeper/e.npy": np.zeros((5, 5), np.int16), "sub_x/C.NPY": np.zeros((6, 6), np.int16)}
    for name, array in arrays.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        np.save(tmp_path / name, array) if name.endswith(".npy") else (tmp_path / name).write_bytes(b"x")
    (tmp_path / "sub_x" / "C.NPY").write_bytes((tmp_path / "a.npy").read_bytes())
    (tmp_path / "notes.txt").write_text("not an array")
    read = read_all(file_root=str(tmp_path))
    expected = [arrays[name] for name in ("a.npy", "b.npy", "sub_x/c.npy", "sub_y/d.npy")]  # one level, case-sensitive
    assert len(read) == len(expected)
    for got, want in zip(read, expected):
        np.testing.assert_array_equal(got, want)
    assert [a.shape for a in read_all(file_root=str(tmp_path), file_filter="[ab].npy")] == [(1, 4), (2, 3)]


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "uint16", ">i2", "<i4", ">u4", "int64", "float16",
                                   ">f4", "float64"])
def test_every_element_type_and_byte_order_reads_as_numpy_loads_it(tmp_path, dtype):
    rng = np.random.default_rng(1)
    arrays = [(rng.random((3, 4)) * 100).astype(dtype), (rng.random((2, 5)) * 100).astype(dtype)]
    for index, array in enumerate(arrays):
        np.save(tmp_path / f"{index}.npy", array)
    for got, want in zip(read_all(file_root=str(tmp_path)), arrays):
        assert got.dtype == np.dtype(dtype).newbyteorder("=") and got.dtype.isnative
        np.testing.assert_array_equal(got, want)


def test_fortran_ordered_files_keep_their_shape_and_values(tmp_path):
    array = np.asfortranarray(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    np.save(tmp_path / "f.npy", array)
    [got] = read_all(file_root=str(tmp_path))
    assert got.shape == (2, 3, 4) and got.flags.c_contiguous
    np.testing.assert_array_equal(got, array)


def test_file_list_and_files_name_the_arrays(tmp_path):
    for name in ("x", "y", "z"):
        np.save(tmp_path / f"{name}.npy", np.full((2,), ord(name), np.int32))
    (tmp_path / "list.txt").write_text("z.npy\n\ny.npy\n")
    assert [int(a[0]) for a in read_all(file_list=str(tmp_path / "list.txt"))] == [ord("z"), ord("y")]
    assert [int(a[0]) for a in read_all(file_root=str(tmp_path), files=["y.npy", "x.npy"])] == [ord("y"), ord("x")]


REGIONS = [  # reader arguments, and the same region by numpy slicing of a (6, 8, 3) array
    (dict(roi_start=(1, 2, 0), roi_end=(4, 7, 3)), lambda a: a[1:4, 2:7, :]),
    (dict(roi_start=(2,), roi_shape=(3,), roi_axes=(1,)), lambda a: a[:, 2:5]),
    (dict(rel_roi_start=(0.5, 0.25), rel_roi_end=(1.0, 0.75), roi_axes=(0, 1)), lambda a: a[3:6, 2:6]),
    (dict(rel_roi_shape=(0.5,), roi_axes=(0,)), lambda a: a[0:3]),
    (dict(roi_start=(4,), roi_end=(10,), roi_axes=(1,), out_of_bounds_policy="trim_to_shape"), lambda a: a[:, 4:8]),
]


@pytest.mark.parametrize("reader_args, numpy_slice", REGIONS)
def test_regions_of_interest_are_numpy_slices(tmp_path, reader_args, numpy_slice):
    array = np.arange(6 * 8 * 3, dtype=np.int32).reshape(6, 8, 3)
    np.save(tmp_path / "a.npy", array)
    [got] = read_all(file_root=str(tmp_path), **reader_args)
    np.testing.assert_array_equal(got, numpy_slice(array))


def test_a_region_outside_the_array_is_padded_with_fill_value_or_refused_naming_the_file(tmp_path):
    array = np.arange(12, dtype=np.uint8).reshape(3, 4)
    np.save(tmp_path / "a.npy", array)
    [got] = read_all(file_root=str(tmp_path), roi_start=(-1, 2), roi_end=(2, 6), out_of_bounds_policy="pad",
                     fill_value=99)
    expected = np.full((3, 4), 99, np.uint8)
    expected[1:, :2] = array[:2, 2:]
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(penstock.PipelineError, match=r"a\.npy.*outside|outside.*a\.npy"):
        read_all(file_root=str(tmp_path), roi_start=(0, 2), roi_end=(2, 6))


def test_shards_read_every_file_once(tmp_path):
    for index in range(7):
        np.save(tmp_path / f"{index}.npy", np.array([index], np.int64))
    seen = [int(a[0]) for shard in range(3) for a in read_all(file_root=str(tmp_path), shard_id=shard,
                                                               num_shards=3, random_shuffle=True)]
    assert sorted(seen) == list(range(7))


def test_bad_files_and_arguments_are_clear_errors(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((2, 2), np.float32))
    np.save(tmp_path / "b.npy", np.zeros((2, 2, 2), np.float32))
    with pytest.raises(penstock.PipelineError, match=r"b\.npy.*3-dimensional float32.*a\.npy"):
        read_all(file_root=str(tmp_path))
    (tmp_path / "b.npy").unlink()
    np.save(tmp_path / "c.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(penstock.PipelineError, match=r"c\.npy"):
        read_all(file_root=str(tmp_path))
    with pytest.raises(ValueError, match=r"readers.numpy.*no files found.*'\*\.npz'"):
        read_all(file_root=str(tmp_path), file_filter="*.npz")
    with pytest.raises(ValueError, match="readers.numpy.*roi_end.*roi_shape.*exclude"):
        read_all(file_root=str(tmp_path), roi_end=(1, 1), roi_shape=(1, 1))
    np.savez(tmp_path / "archive.npz", a=np.zeros(2), b=np.ones(2))
    with pytest.raises(ValueError, match=r"archive\.npz.*\.npz archive"):
        read_all(files=[str(tmp_path / "archive.npz")])


HEADER = {"descr": "<f4", "fortran_order": False, "shape": (2, 3)}
MALFORMED = {  # file bytes, and what the error says about them
    "bad magic": (b"\x93NUMPX" + hostile.npy_claiming((2, 3), held=24)[6:], r"not a \.npy file"),
    "a pickle": (b"\x80\x04\x95" + bytes(40), r"not a \.npy file"),
    "bad version": (hostile.npy_file(HEADER, bytes(24), version=(9, 9)), r"format version 9\.9, not 1\.0"),
    "cut inside the prefix": (hostile.npy_claiming((2, 3), held=24)[:9], r"cut inside its \.npy header"),
    "unterminated dict": (hostile.npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,", bytes(24)),
                          r"not a Python dict literal"),
    "not a literal": (hostile.npy_file("__import__('os')", bytes(24)), r"not a Python dict literal"),
    "not a dict": (hostile.npy_file("[1, 2]", bytes(24)), r"holds a list, not a dict of exactly 'descr'"),
    "a key missing": (hostile.npy_file({"descr": "<f4", "shape": (2, 3)}, bytes(24)),
                      r"holds the keys 'descr', 'shape', not"),
    "a key more": (hostile.npy_file({**HEADER, "extra": 1}, bytes(24)),
                   r"'descr', 'extra', 'fortran_order', 'shape', not a dict"),
    "object elements": (hostile.npy_file({**HEADER, "descr": "|O"}, bytes(48)), r"holds Python objects"),
    "strings": (hostile.npy_file({**HEADER, "descr": "<U2"}, bytes(48)), r"holds <U2 elements"),
    "not a type": (hostile.npy_file({**HEADER, "descr": "<q7"}, bytes(48)), r"descr '<q7' is not an element type"),
    "shape of floats": (hostile.npy_file({**HEADER, "shape": (2.0, 3)}, bytes(24)), r"shape is \(2\.0, 3\)"),
    "fortran_order 1": (hostile.npy_file({**HEADER, "fortran_order": 1}, bytes(24)), r"fortran_order is 1"),
    "negative shape": (hostile.npy_claiming((-2, 3), held=24), r"claims a negative size, \(-2, 3\)"),
    "truncated data": (hostile.npy_claiming((2, 3), held=23),
                       r"claims shape \(2, 3\) = 24 bytes, more than the 23 bytes the file holds there"),
    "header past the end": (hostile.npy_file(HEADER, version=(2, 0))[:40], r"\.npy header claims \d+ bytes, more"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_every_malformed_header_is_a_value_error_naming_the_file(tmp_path, case):
    """np.load lets a tokenizer error through for some (without the file's name), and allocates what
    the shape claims before finding the file shorter."""
    data, problem = MALFORMED[case]
    path = tmp_path / "bad.npy"
    path.write_bytes(data)
    np.save(tmp_path / "good.npy", np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=rf"readers\.numpy: '.*bad\.npy'.*{problem}"):
        read_all(files=[str(path)])  # the first file, whose header says what every file holds
    with pytest.raises(penstock.PipelineError, match=rf"failed on sample from '.*bad\.npy'.*{problem}") as raised:
        read_all(batch_size=2, files=[str(tmp_path / "good.npy"), str(path)])
    assert isinstance(raised.value.__cause__, ValueError)


def test_python_2_headers_and_every_format_version_read_as_numpy_reads_them(tmp_path):
    array = np.arange(6, dtype=">i4").reshape(2, 3)
    for version in ((1, 0), (2, 0), (3, 0)):
        (tmp_path / f"{version[0]}.npy").write_bytes(hostile.npy_file({**HEADER, "descr": ">i4"}, array.tobytes(),
                                                                      version=version))
    (tmp_path / "4.npy").write_bytes(hostile.npy_file("{'descr': '>i4', 'fortran_order': False, 'shape': (2L, 3L), }",
                                                      array.tobytes()))
    for path in sorted(tmp_path.iterdir())[:3]:
        np.testing.assert_array_equal(np.load(path), array)
    with pytest.warns(UserWarning, match="Python 2"):
        np.testing.assert_array_equal(np.load(tmp_path / "4.npy"), array)
    for got in read_all(file_root=str(tmp_path)):
        assert got.dtype == np.int32 and got.flags.writeable
        np.testing.assert_array_equal(got, array)


def test_dali_names_read_the_same(tmp_path):
    from penstock.compat.dali import fn as dali_fn, ops as dali_ops
    np.save(tmp_path / "a.npy", np.arange(4, dtype=np.int16))
    assert dali_fn.numpy_reader is dali_fn.readers.numpy
    assert dali_ops.NumpyReader is not None and dali_ops.readers.Numpy is not None
