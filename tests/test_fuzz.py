"""Property-based tests (Hypothesis) of the decoders and the file reader: mutated image files either
decode or fail with DecodeError, never another exception; the reader delivers every file's bytes
exactly once per epoch and shard, whatever the batch size and shard count.

CI runs a small example budget; `PENSTOCK_FUZZ_EXAMPLES=5000 python3 -m pytest tests/test_fuzz.py`
runs a longer search.
"""
import os

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import hostile_files as hostile  # noqa: E402
from test_hostile_files import DECODERS, _run  # noqa: E402

from penstock import fn, pipeline_def  # noqa: E402
from penstock.kernels import image_codecs  # noqa: E402

EXAMPLES = int(os.environ.get("PENSTOCK_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize="PENSTOCK_FUZZ_EXAMPLES" not in os.environ,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

PHOTO = hostile.photo(40, 48, seed=11)
SEEDS = {
    "JPEG": hostile.pillow_encoded(PHOTO, "JPEG"),
    "progressive JPEG": hostile.pillow_encoded(PHOTO, "JPEG", progressive=True),
    "CMYK JPEG": hostile.pillow_encoded(PHOTO, "JPEG", "CMYK"),
    "oriented JPEG": hostile.with_orientation(PHOTO, 6),
    "PNG": hostile.pillow_encoded(PHOTO, "PNG"),
    "GIF": hostile.pillow_encoded(PHOTO, "GIF", mode="P"),
    "BMP": hostile.pillow_encoded(PHOTO, "BMP"),
    "WebP": hostile.pillow_encoded(PHOTO, "WEBP"),
    "TIFF": hostile.pillow_encoded(PHOTO, "TIFF"),
}


@st.composite
def mutated_files(draw):
    """A seed file with a few bytes overwritten, a range deleted or repeated, or cut short."""
    data = bytearray(SEEDS[draw(st.sampled_from(sorted(SEEDS)))].tobytes())
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["overwrite", "delete", "repeat", "truncate"]))
        at = draw(st.integers(0, len(data) - 1))
        if kind == "overwrite":
            data[at:at + 4] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 64))]
        elif kind == "repeat":
            data[at:at] = data[at:at + draw(st.integers(1, 64))]
        else:
            del data[max(at, 3):]
        if len(data) < 4:
            break
    return np.frombuffer(bytes(data), np.uint8).copy()


@FUZZ
@given(data=mutated_files(), name=st.sampled_from(DECODERS))
def test_mutated_files_decode_or_fail_with_a_decode_error(data, name):
    try:
        image, _ = _run(name, data)
    except image_codecs.DecodeError:
        return
    except ValueError as error:  # a fixed window outside the (mutated) size: named as such
        assert "falls outside" in str(error)
        return
    assert image.dtype == np.uint8 and image.ndim == 3 and image.size > 0


@FUZZ
@given(files=st.lists(st.binary(min_size=0, max_size=64), min_size=1, max_size=12),
       batch_size=st.integers(1, 5), num_shards=st.integers(1, 3), shuffle=st.booleans())
def test_the_file_reader_delivers_every_file_once_per_epoch_and_shard(tmp_path_factory, files, batch_size,
                                                                      num_shards, shuffle):
    if len(files) < num_shards:
        num_shards = len(files)
    root = tmp_path_factory.mktemp("fuzz")
    paths = []
    for index, content in enumerate(files):
        path = root / f"file_{index:02d}.bin"
        path.write_bytes(content)
        paths.append(str(path))

    @pipeline_def(batch_size=batch_size, num_threads=1, seed=5)
    def read(shard_id):
        data, labels = fn.readers.file(files=paths, random_shuffle=shuffle, shard_id=shard_id,
                                       num_shards=num_shards, name="Reader")
        return data, labels
    for epoch_count in (1, 2):
        delivered = []
        for shard in range(num_shards):
            pipe = read(shard)
            for _ in range(epoch_count):
                while True:
                    data, labels = pipe.run()
                    info = pipe.last_epoch_info
                    delivered.extend((int(label[0]), bytes(sample))
                                     for sample, label in zip(list(data)[:info.valid], list(labels)[:info.valid]))
                    if info.last:
                        break
            pipe.close()
        expected = sorted((index, content) for index, content in enumerate(files)) * epoch_count
        assert sorted(delivered) == sorted(expected)
