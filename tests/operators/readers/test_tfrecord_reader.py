"""readers.tfrecord against records serialized by protobuf itself (tf.train.Example's schema, built
here from its .proto definition, packed as TensorFlow writes it and unpacked as proto2 does): every
feature kind and type, defaults for missing features, index files against scanning, shards, the
dict of outputs DALI programs index, and the errors that name the file."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import encode, pillow_decode, smooth_image
from helpers_data import no_hang  # noqa: F401  (autouse: a test that hangs fails instead)
from helpers_data import read_one_epoch
import penstock
from penstock import fn, limits, pipeline_def, tfrecord

protobuf = pytest.importorskip("google.protobuf")


def example_class(packed: bool):
    """tf.train.Example, built from feature.proto and example.proto's message definitions."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    proto = descriptor_pb2.FileDescriptorProto(name=f"example_{packed}.proto", package=f"tf_{int(packed)}",
                                               syntax="proto3" if packed else "proto2")
    FieldType, Label = descriptor_pb2.FieldDescriptorProto, descriptor_pb2.FieldDescriptorProto

    def message(name, *fields):
        made = proto.message_type.add(name=name)
        for number, (field, kind, label, type_name) in enumerate(fields, 1):
            added = made.field.add(name=field, number=number, type=kind, label=label)
            if type_name:
                added.type_name = f".tf_{int(packed)}.{type_name}"
            if kind in (FieldType.TYPE_FLOAT, FieldType.TYPE_INT64):
                added.options.packed = packed
        return made

    repeated, optional = Label.LABEL_REPEATED, Label.LABEL_OPTIONAL
    message("BytesList", ("value", FieldType.TYPE_BYTES, repeated, None))
    message("FloatList", ("value", FieldType.TYPE_FLOAT, repeated, None))
    message("Int64List", ("value", FieldType.TYPE_INT64, repeated, None))
    feature = message("Feature", ("bytes_list", FieldType.TYPE_MESSAGE, optional, "BytesList"),
                      ("float_list", FieldType.TYPE_MESSAGE, optional, "FloatList"),
                      ("int64_list", FieldType.TYPE_MESSAGE, optional, "Int64List"))
    feature.oneof_decl.add(name="kind")
    for field in feature.field:
        field.oneof_index = 0
        if packed:
            field.proto3_optional = False
    features = message("Features", ("feature", FieldType.TYPE_MESSAGE, repeated, "Features.FeatureEntry"))
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=FieldType.TYPE_STRING, label=optional)
    entry.field.add(name="value", number=2, type=FieldType.TYPE_MESSAGE, label=optional,
                    type_name=f".tf_{int(packed)}.Feature")
    message("Example", ("features", FieldType.TYPE_MESSAGE, optional, "Features"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tf_{int(packed)}.Example"))


def serialized(packed: bool, values: dict) -> bytes:
    """An Example of {name: bytes | list of int | list of float}."""
    example = example_class(packed)()
    for name, value in values.items():
        feature = example.features.feature[name]
        if isinstance(value, bytes):
            feature.bytes_list.value.append(value)
        elif all(isinstance(item, int) for item in value):
            feature.int64_list.value.extend(value)
        else:
            feature.float_list.value.extend(value)
    return example.SerializeToString()


def write_records(path, payloads: list[bytes]) -> list[tuple[int, int]]:
    """A TFRecord file (length, its CRC, data, its CRC; the CRCs are not checked, by DALI either)."""
    entries, offset = [], 0
    with open(path, "wb") as handle:
        for payload in payloads:
            record = len(payload).to_bytes(8, "little") + bytes(4) + payload + bytes(4)
            handle.write(record)
            entries.append((offset, len(record)))
            offset += len(record)
    return entries


def images(count: int) -> list[bytes]:
    return [encode(smooth_image(20 + index, 30 - index, seed=index), "JPEG", quality=95) for index in range(count)]


FEATURES = {
    "image/encoded": tfrecord.FixedLenFeature((), tfrecord.string, ""),
    "image/class/label": tfrecord.FixedLenFeature([1], tfrecord.int64, -1),
    "image/object/bbox/xmin": tfrecord.VarLenFeature(tfrecord.float32, 0.0),
    "points": tfrecord.VarLenFeature([2], tfrecord.int64, 0),
    "matrix": tfrecord.FixedLenFeature([2, 2], tfrecord.float32, 0.5),
}


def records_of(count: int) -> list[dict]:
    rng = np.random.default_rng(0)
    made = []
    for index, jpeg in enumerate(images(count)):
        record = {"image/encoded": jpeg, "image/class/label": [index - 2],  # negative labels too
                  "image/object/bbox/xmin": [float(value) for value in rng.random(index % 3)] or [],
                  "points": [int(value) for value in rng.integers(-2**40, 2**40, 2 * (index % 4))],
                  "other": [1.5, 2.5]}
        if index % 2:
            record["matrix"] = [1.0, 2.0, 3.0, 4.0]
        made.append({name: value for name, value in record.items() if not isinstance(value, list) or value})
    return made


def read_all(batch_size: int = 3, **reader_args) -> list[dict]:
    """One epoch of samples, each a dict of the features' arrays (the reader returns a dict)."""
    names = list(reader_args["features"])

    def outputs():
        read = fn.readers.tfrecord(name="Reader", **reader_args)
        assert isinstance(read, dict)
        return tuple(read[name] for name in names)
    return [dict(zip(names, sample)) for sample in read_one_epoch(outputs, batch_size, seed=5)]


def expected_sample(record: dict) -> dict:
    """What each feature gives, written from the feature definitions (DALI's TFRecord parser)."""
    return {"image/encoded": np.frombuffer(record["image/encoded"], np.uint8),
            "image/class/label": np.array(record["image/class/label"], np.int64),
            "image/object/bbox/xmin": np.array(record.get("image/object/bbox/xmin", []), np.float32),
            "points": np.array(record.get("points", []), np.int64).reshape(-1, 2),
            "matrix": np.array(record.get("matrix", [0.5] * 4), np.float32).reshape(2, 2)}


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("indexed", [True, False])
def test_every_feature_kind_reads_as_protobuf_wrote_it(tmp_path, packed, indexed):
    records = records_of(7)
    paths, indexes = [], []
    for part, chunk in enumerate((records[:4], records[4:])):
        path = tmp_path / f"part-{part}.tfrecord"
        entries = write_records(path, [serialized(packed, record) for record in chunk])
        (tmp_path / f"part-{part}.idx").write_text("".join(f"{offset} {size}\n" for offset, size in entries))
        paths.append(str(path))
        indexes.append(str(tmp_path / f"part-{part}.idx"))
    read = read_all(path=paths, index_path=indexes if indexed else None, features=FEATURES)
    assert len(read) == len(records)
    for got, record in zip(read, records):
        for name, want in expected_sample(record).items():
            assert got[name].dtype == want.dtype and got[name].shape == want.shape, name
            np.testing.assert_array_equal(got[name], want, err_msg=name)


def test_dali_programs_decode_the_images_they_read(tmp_path):
    from penstock.compat.dali import fn as dali_fn, tfrecord as tfrec
    jpegs = images(4)
    entries = write_records(tmp_path / "a.tfrecord", [serialized(True, {"image/encoded": jpeg, "label": [i]})
                                                      for i, jpeg in enumerate(jpegs)])
    (tmp_path / "a.idx").write_text("".join(f"{offset} {size}\n" for offset, size in entries))

    @pipeline_def(batch_size=4, num_threads=2, device_id=None)
    def pipe():
        inputs = dali_fn.readers.tfrecord(path=[str(tmp_path / "a.tfrecord")], index_path=[str(tmp_path / "a.idx")],
                                          features={"image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                                                    "label": tfrec.FixedLenFeature([1], tfrec.int64, -1)})
        return dali_fn.decoders.image(inputs["image/encoded"]), inputs["label"]

    built = pipe()
    built.build()
    decoded, labels = built.run()
    for index, (image, jpeg) in enumerate(zip(decoded, jpegs)):
        assert np.abs(np.array(image).astype(int) - pillow_decode(jpeg)).max() <= 4
        assert np.array(labels[index]).tolist() == [index]
    built.close()


def test_shards_read_every_record_once(tmp_path):
    write_records(tmp_path / "a.tfrecord", [serialized(True, {"n": [index]}) for index in range(10)])
    features = {"n": tfrecord.FixedLenFeature([1], tfrecord.int64, -1)}
    seen = [int(sample["n"][0]) for shard in range(3)
            for sample in read_all(path=[str(tmp_path / "a.tfrecord")], features=features, shard_id=shard,
                                   num_shards=3, random_shuffle=True)]
    assert sorted(seen) == list(range(10))


def test_bad_records_features_and_indexes_are_clear_errors(tmp_path):
    path = tmp_path / "a.tfrecord"
    entries = write_records(path, [serialized(True, {"n": [1, 2]}), serialized(True, {"n": [3]})])
    wrong_count = {"n": tfrecord.FixedLenFeature([1], tfrecord.int64, -1)}
    with pytest.raises(penstock.PipelineError, match=r"a\.tfrecord \(record at byte 0\).*'n'.*2 values"):
        read_all(batch_size=2, path=[str(path)], features=wrong_count)
    stale = tmp_path / "stale.idx"
    stale.write_text(f"{entries[0][0]} {entries[0][1]}\n{entries[1][0] + 3} {entries[1][1] - 3}\n")
    with pytest.raises(penstock.PipelineError, match=r"a\.tfrecord.*not a TFRecord record"):
        read_all(batch_size=2, path=[str(path)], index_path=[str(stale)], features={
            "n": tfrecord.VarLenFeature(tfrecord.int64, 0)})
    with pytest.raises(ValueError, match="readers.tfrecord.*index_path.*1 index files for 2"):
        read_all(path=[str(path), str(path)], index_path=[str(stale)], features=wrong_count)
    with pytest.raises(ValueError, match="readers.tfrecord.*features.*dict"):
        read_all(path=[str(path)], features=["n"])
    with pytest.raises(ValueError, match="tensors of strings"):
        tfrecord.VarLenFeature(tfrecord.string, "")
    (tmp_path / "cut.tfrecord").write_bytes(path.read_bytes()[:-5])
    with pytest.raises(limits.SizeClaimError, match=r"cut\.tfrecord': the record at byte \d+ .* claims \d+ bytes, "
                                                  r"more than the \d+ bytes the file holds there"):
        read_all(path=[str(tmp_path / "cut.tfrecord")], features=wrong_count)


def test_truncated_records_and_fields_are_refused_naming_the_file_and_the_record(tmp_path):
    """Where a record ends inside a field, or the file inside a record, the error says so: the
    length prefixes and every field's length are checked against what holds them."""
    whole = serialized(True, {"n": [1, 2]})
    entries = write_records(tmp_path / "a.tfrecord", [whole, whole + b"\x15\x00\x00"])  # field 2: 2 of 4 bytes
    features = {"n": tfrecord.VarLenFeature(tfrecord.int64, 0)}
    with pytest.raises(penstock.PipelineError, match=rf"a\.tfrecord \(record at byte {entries[1][0]}\): not a valid "
                                                     r"tf.train.Example: field 2 at byte \d+ of its message claims 4 "
                                                     r"bytes, more than the 2") as raised:
        read_all(batch_size=2, path=[str(tmp_path / "a.tfrecord")], features=features)
    assert isinstance(raised.value.__cause__, limits.SizeClaimError)
    write_records(tmp_path / "b.tfrecord", [whole + b"\x08\x80"])  # a varint cut at the message's end
    with pytest.raises(penstock.PipelineError, match=r"b\.tfrecord \(record at byte 0\): not a valid tf.train.Example "
                                                     r"\(a varint cut short at byte \d+ of its message\)"):
        read_all(batch_size=1, path=[str(tmp_path / "b.tfrecord")], features=features)
    data = (tmp_path / "a.tfrecord").read_bytes()
    for cut, problem in ((entries[1][0] + 5, r"a truncated record at byte \d+ \(inside its 8-byte length\)"),
                         (len(data) - 1, r"the record at byte \d+ .* claims \d+ bytes, more than the \d+ bytes")):
        (tmp_path / "cut.tfrecord").write_bytes(data[:cut])
        with pytest.raises(ValueError, match=rf"'.*cut\.tfrecord': {problem}"):
            read_all(path=[str(tmp_path / "cut.tfrecord")], features=features)


def test_int64_values_keep_their_low_64_bits_as_protobuf_reads_them(tmp_path):
    """A varint of 10 bytes may carry bits past the 64th: protobuf drops them (numpy would refuse)."""
    example_type = example_class(packed=False)
    record = serialized(False, {"n": [-1]})
    assert record.endswith(b"\xff\x01")  # -1: nine bytes of ones and a last 1
    overflowing = record[:-1] + b"\x7f"
    assert list(example_type.FromString(overflowing).features.feature["n"].int64_list.value) == [-1]
    write_records(tmp_path / "a.tfrecord", [overflowing])
    [sample] = read_all(batch_size=1, path=[str(tmp_path / "a.tfrecord")],
                        features={"n": tfrecord.FixedLenFeature([1], tfrecord.int64, 0)})
    assert sample["n"].tolist() == [-1]
