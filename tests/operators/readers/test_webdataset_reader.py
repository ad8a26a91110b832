"""readers.webdataset against archives written by Python's tarfile: samples grouped by name, each
output's extension options, case, missing files ('empty', 'skip', 'error'), hidden files and folders
left out, element types, DALI's index files (v1.1 and v1.2), shards, and the errors."""
from __future__ import annotations

import io
import tarfile

import numpy as np
import pytest

from conftest import encode, pillow_decode, smooth_image
from helpers_data import no_hang  # noqa: F401  (autouse: a test that hangs fails instead)
from helpers_data import read_one_epoch
import penstock
from penstock import fn, limits, pipeline_def, types


def write_tar(path, files: list[tuple[str, bytes]], format=tarfile.DEFAULT_FORMAT) -> dict[str, tuple[int, int]]:
    """The archive of (name, bytes) in order (a name ending in '/' is a folder) in tarfile's
    ``format``; returns each file's (data offset, size) as tarfile placed it."""
    with tarfile.open(path, "w", format=format) as archive:
        for name, data in files:
            info = tarfile.TarInfo(name.rstrip("/"))
            if name.endswith("/"):
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    with tarfile.open(path, "r:") as archive:
        return {member.name: (member.offset_data, member.size) for member in archive.getmembers() if member.isreg()}


def read_all(ext, batch_size: int = 2, **reader_args) -> list[tuple]:
    def outputs():
        read = fn.readers.webdataset(name="Reader", ext=ext, **reader_args)
        return read if isinstance(read, tuple) else (read,)
    return read_one_epoch(outputs, batch_size, seed=9)


FILES = [("a/0001.jpg", b"jpeg one"), ("a/0001.cls", b"3"), ("a/0001.left.png", b"left one"),
         ("a/0002.PNG", b"png two"), ("a/0002.cls", b"7"),
         ("a/.hidden.jpg", b"never"), ("a/folder/", b""),
         ("0003.jpg", b"jpeg three")]  # no cls


LONG = "d" * 90 + "/ü" + "n" * 120  # past the 100 bytes of a header's name field, and not ASCII


@pytest.mark.parametrize("format", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
def test_samples_group_adjacent_files_by_name_and_outputs_pick_their_extension(tmp_path, format):
    long = [] if format == tarfile.USTAR_FORMAT else [(f"{LONG}.jpg", b"jpeg four"), (f"{LONG}.cls", b"9")]
    write_tar(tmp_path / "a.tar", FILES + long, format)
    read = read_all(["jpg;png", "cls", "left.png"], paths=[str(tmp_path / "a.tar")], case_sensitive_extensions=False)
    assert [tuple(bytes(part) for part in sample) for sample in read] == [
        (b"jpeg one", b"3", b"left one"), (b"png two", b"7", b""), (b"jpeg three", b"", b"")] + \
        [(b"jpeg four", b"9", b"")] * bool(long)
    sensitive = read_all(["jpg;png", "cls"], paths=[str(tmp_path / "a.tar")])
    assert [bytes(sample[0]) for sample in sensitive] == [b"jpeg one", b"", b"jpeg three"] + \
        [b"jpeg four"] * bool(long)  # 'PNG' is not 'png'


def test_missing_files_are_empty_skipped_or_refused(tmp_path):
    write_tar(tmp_path / "a.tar", FILES)
    paths = [str(tmp_path / "a.tar")]
    kept = read_all(["jpg", "cls"], paths=paths, missing_component_behavior="skip")
    assert [bytes(sample[0]) for sample in kept] == [b"jpeg one"]
    with pytest.raises(ValueError, match=r"readers.webdataset: sample 'a/0002' of '.*a\.tar' has no file for ext "
                                         r"\['jpg'\]"):
        read_all(["jpg", "cls"], paths=paths, missing_component_behavior="error")


def test_dtypes_read_the_bytes_as_values(tmp_path):
    values = np.arange(6, dtype=np.float32)
    write_tar(tmp_path / "a.tar", [("s.vec", values.tobytes()), ("s.id", np.array([5], "<i8").tobytes()),
                                   ("t.vec", values[:3].tobytes()), ("t.id", b"\x01\x02\x03")])
    read = read_all(["vec", "id"], paths=[str(tmp_path / "a.tar")], dtypes=[types.FLOAT, types.UINT8])
    np.testing.assert_array_equal(read[0][0], values)
    assert read[1][1].tolist() == [1, 2, 3]
    with pytest.raises(penstock.PipelineError, match=r"a\.tar:t.*'id'.*3 bytes, not a whole number of int64"):
        read_all(["vec", "id"], paths=[str(tmp_path / "a.tar")], dtypes=[types.FLOAT, types.INT64])


@pytest.mark.parametrize("version", ["v1.1", "v1.2"])
def test_dali_index_files_give_the_same_samples(tmp_path, version):
    jpegs = [encode(smooth_image(16, 20 + index, seed=index), "JPEG", quality=95) for index in range(3)]
    files = [(f"{index:04d}.{ext}", data) for index, jpeg in enumerate(jpegs)
             for ext, data in (("jpg", jpeg), ("cls", str(index).encode()))]
    placed = write_tar(tmp_path / "a.tar", files)
    lines = [f"{version} {len(jpegs)}"]
    for index in range(len(jpegs)):
        fields = []
        for ext in ("jpg", "cls"):
            name = f"{index:04d}.{ext}"
            fields += [ext, *map(str, placed[name])] + ([name] if version == "v1.2" else [])
        lines.append(" ".join(fields))
    (tmp_path / "a.idx").write_text("\n".join(lines) + "\n")
    for index_paths in ([str(tmp_path / "a.idx")], None):
        @pipeline_def(batch_size=3, num_threads=2, device_id=None)
        def pipe():
            images, labels = fn.readers.webdataset(paths=[str(tmp_path / "a.tar")], index_paths=index_paths,
                                                   ext=["jpg", "cls"])
            return fn.decoders.image(images), labels

        built = pipe()
        built.build()
        images, labels = built.run()
        for index, (image, label) in enumerate(zip(images, labels)):
            assert np.abs(np.array(image).astype(int) - pillow_decode(jpegs[index])).max() <= 4
            assert bytes(np.array(label)) == str(index).encode()
        built.close()


def test_shards_read_every_sample_once(tmp_path):
    write_tar(tmp_path / "a.tar", [(f"{index}.txt", str(index).encode()) for index in range(5)])
    write_tar(tmp_path / "b.tar", [(f"{index}.txt", str(index).encode()) for index in range(5, 9)])
    seen = [int(bytes(sample[0])) for shard in range(2)
            for sample in read_all(["txt"], paths=[str(tmp_path / "a.tar"), str(tmp_path / "b.tar")], shard_id=shard,
                                   num_shards=2, random_shuffle=True)]
    assert sorted(seen) == list(range(9))


def test_bad_archives_and_arguments_are_clear_errors(tmp_path):
    write_tar(tmp_path / "a.tar", FILES)
    (tmp_path / "not.tar").write_bytes(b"\x00" * 10 + b"junk" * 300)
    with pytest.raises(ValueError, match=r"readers.webdataset: cannot read '.*not\.tar'"):
        read_all(["jpg"], paths=[str(tmp_path / "not.tar")])
    with pytest.raises(ValueError, match="readers.webdataset.*index_paths.*1 index files for 2"):
        read_all(["jpg"], paths=[str(tmp_path / "a.tar")] * 2, index_paths=[str(tmp_path / "a.tar")])
    with pytest.raises(ValueError, match="readers.webdataset.*'dtypes' gives 1 types for 2 outputs"):
        read_all(["jpg", "cls"], paths=[str(tmp_path / "a.tar")], dtypes=[types.UINT8])
    (tmp_path / "bad.idx").write_text("v9 3\n")
    with pytest.raises(ValueError, match=r"index '.*bad\.idx'.*v1\.1 N"):
        read_all(["jpg"], paths=[str(tmp_path / "a.tar")], index_paths=[str(tmp_path / "bad.idx")])
    with pytest.raises(ValueError, match="readers.webdataset: no samples"):
        read_all(["wav"], paths=[str(tmp_path / "a.tar")], missing_component_behavior="skip")


# ---- archives and indexes that are not what they claim ---------------------------------------------
EIGHT = [(f"{index:04d}.{ext}", data) for index in range(8)
         for ext, data in (("jpg", b"j" * 600), ("cls", b"%d" % index))]


def _header_offsets(path) -> list[int]:
    with tarfile.open(path, "r:") as archive:
        return [member.offset for member in archive.getmembers()]


@pytest.mark.parametrize("into", [0, 100, 511])
def test_an_archive_cut_inside_a_member_header_is_refused_naming_the_archive_and_the_byte(tmp_path, into):
    """tarfile reads such an archive as a shorter one (4 of its 8 samples here, without a word)."""
    write_tar(tmp_path / "a.tar", EIGHT)
    header = _header_offsets(tmp_path / "a.tar")[8]  # the fifth sample's first file
    (tmp_path / "cut.tar").write_bytes((tmp_path / "a.tar").read_bytes()[:header + into])
    where = f"ends at byte {header:,} without tar's end-of-archive block" if into == 0 else \
        f"is cut inside the member header at byte {header:,} \\({into} of its 512 bytes\\)"
    with pytest.raises(ValueError, match=rf"readers.webdataset: cannot read '.*cut\.tar' as an uncompressed tar "
                                         rf"archive: it {where}"):
        read_all(["jpg", "cls"], paths=[str(tmp_path / "cut.tar")])


def test_an_archive_cut_inside_a_members_data_is_refused_before_reading(tmp_path):
    placed = write_tar(tmp_path / "a.tar", EIGHT)
    offset, size = placed["0005.jpg"]
    (tmp_path / "cut.tar").write_bytes((tmp_path / "a.tar").read_bytes()[:offset + size - 1])
    with pytest.raises(limits.SizeClaimError, match=rf"'.*cut\.tar' .*: the member header at byte {offset - 512:,} "
                                                    rf"\('0005\.jpg'\) claims 600 bytes, more than the 599 bytes"):
        read_all(["jpg", "cls"], paths=[str(tmp_path / "cut.tar")])


def test_a_damaged_header_and_data_after_the_end_are_refused(tmp_path):
    write_tar(tmp_path / "a.tar", EIGHT)
    data = bytearray((tmp_path / "a.tar").read_bytes())
    header = _header_offsets(tmp_path / "a.tar")[6]
    damaged = data.copy()
    damaged[header + 5] ^= 0x20  # a letter of its name
    (tmp_path / "damaged.tar").write_bytes(damaged)
    with pytest.raises(ValueError, match=rf"damaged\.tar'.*the member header at byte {header:,} is not a tar header"):
        read_all(["jpg", "cls"], paths=[str(tmp_path / "damaged.tar")])
    (tmp_path / "joined.tar").write_bytes(bytes(data) + bytes(data))
    with pytest.raises(ValueError, match=rf"joined\.tar'.*holds data at byte {len(data):,}, after its end-of-archive"):
        read_all(["jpg", "cls"], paths=[str(tmp_path / "joined.tar")])


def _index(placed, count: int) -> list[str]:
    return [f"jpg {placed[f'{index:04d}.jpg'][0]} 600 cls {placed[f'{index:04d}.cls'][0]} 1" for index in range(count)]


@pytest.mark.parametrize("header, lines, problem", [
    ("v1.1 8", 7, r"says 8 samples and lists 7"),
    ("v1.1 6", 7, r"says 6 samples and lists 7"),
    ("v1.1 seven", 7, r"does not start with 'v1\.1 N'"),
    ("v1.1 7", -1, r"line 8: offsets and sizes are integers"),
    ("v1.1 7", -2, r"line 8: the 'cls' file at byte \d+ of '.*a\.tar' claims 100,000 bytes, more than"),
    ("v1.1 7", -3, r"line 8: the 'jpg' file's offset -5 is outside '.*a\.tar'"),
])
def test_an_index_that_disagrees_with_itself_or_its_archive_is_refused_naming_it(tmp_path, header, lines, problem):
    placed = write_tar(tmp_path / "a.tar", EIGHT)
    entries = _index(placed, 7 if lines > 0 else 6)
    if lines < 0:
        entries.append({-1: "jpg 512 600 cls x 1", -2: f"jpg 512 600 cls {placed['0006.cls'][0]} 100000",
                        -3: "jpg -5 600 cls 0 1"}[lines])
    (tmp_path / "a.idx").write_text("\n".join([header, *entries]) + "\n")
    with pytest.raises(ValueError, match=rf"readers.webdataset: index '.*a\.idx'.*{problem}"):
        read_all(["jpg", "cls"], paths=[str(tmp_path / "a.tar")], index_paths=[str(tmp_path / "a.idx")])


def test_dali_names(tmp_path):
    from penstock.compat.dali import fn as dali_fn, ops as dali_ops
    assert dali_fn.readers.webdataset is fn.readers.webdataset and dali_ops.readers.Webdataset is not None
