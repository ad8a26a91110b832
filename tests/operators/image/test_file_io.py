"""io.file.read: the bytes of the files named by the samples, against Python's own read of the files
and against DALI's operator."""
import numpy as np
import pytest

from penstock.compat import dali as penstock_dali


def encoded(path, dtype=np.uint8):
    return np.frombuffer(str(path).encode(), np.uint8).astype(dtype)


def read(library, paths, **arguments):
    fn = library.fn

    @library.pipeline_def(batch_size=len(paths), num_threads=2, device_id=None)
    def pipe():
        return fn.io.file.read(fn.external_source(source=[paths], cycle=True), **arguments)
    built = pipe()
    built.build()
    (out,) = built.run()
    return out.layout(), [np.array(out[index]) for index in range(len(paths))]


@pytest.fixture
def files(tmp_path):
    contents = {"a.bin": bytes(range(256)) * 3, "b.txt": "naïve text".encode(), "c": b"\x00"}
    for name, data in contents.items():
        (tmp_path / name).write_bytes(data)
    return tmp_path, contents


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_reads_the_files_whole(files, dtype):
    root, contents = files
    layout, arrays = read(penstock_dali, [encoded(root / name, dtype) for name in contents], dont_use_mmap=True)
    assert layout == ""
    for array, name in zip(arrays, contents):
        assert array.dtype == np.uint8 and array.ndim == 1
        assert array.tobytes() == (root / name).read_bytes()


def test_an_empty_file_gives_an_empty_array(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    assert read(penstock_dali, [encoded(tmp_path / "empty")])[1][0].shape == (0,)


@pytest.mark.parametrize("sample, message", [
    (np.frombuffer(b"/no/such/file", np.uint8), "cannot read '/no/such/file'"),
    (np.frombuffer(b"/tmp/x", np.uint8).astype(np.int32), "1-D uint8 array"),
    (np.frombuffer(b"/tmp/x", np.uint8).reshape(1, -1), "1-D uint8 array"),
])
def test_refuses_what_dali_refuses(sample, message):
    with pytest.raises(Exception, match=message):
        read(penstock_dali, [sample])


def test_same_as_dali(files):
    dali = pytest.importorskip("nvidia.dali")
    root, contents = files
    paths = [encoded(root / name) for name in contents]
    expected_layout, expected = read(dali, paths)
    layout, got = read(penstock_dali, paths)
    assert layout == expected_layout
    for array, want in zip(got, expected):
        assert array.dtype == want.dtype and np.array_equal(array, want)


def test_dump_image_writes_dalis_files_and_passes_the_images_on(tmp_path, monkeypatch):
    dali = pytest.importorskip("nvidia.dali")
    images = [np.arange(60, dtype=np.uint8).reshape(4, 5, 3), np.arange(6, dtype=np.uint8).reshape(2, 3, 1)]
    written = {}
    for name, library in (("dali", dali), ("penstock", penstock_dali)):
        folder = tmp_path / name
        folder.mkdir()
        monkeypatch.chdir(folder)

        @library.pipeline_def(batch_size=2, num_threads=1, device_id=None)
        def pipe():
            return library.fn.dump_image(library.fn.external_source(lambda: images, batch=True, layout="HWC"),
                                         suffix="x")
        (out,) = pipe().run()
        for index, image in enumerate(images):
            np.testing.assert_array_equal(np.asarray(out.at(index)), image)
        written[name] = {path.name: path.read_bytes() for path in folder.iterdir()}
    assert written["penstock"] == written["dali"] and set(written["dali"]) == {"0-x-0.ppm", "1-x-0.ppm"}
