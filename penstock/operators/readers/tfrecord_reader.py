"""``readers.tfrecord``: tf.train.Example records in TFRecord files (the format:
tfrecord_format.py; the features' declarations: penstock.tfrecord)."""
from __future__ import annotations

from penstock import registry
from penstock.contract import OutputSpec, SampleContext
from penstock.operators.readers import tfrecord_format
from penstock.operators.readers.record_files import RecordFileReader, index_columns, one_index_each
from penstock.operators.shared.readers import RECORD_READER_ARGS, o_direct_without_mmap, shuffle_after_epoch_moving
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema


def _features_of(static: dict) -> dict:
    features = static.features
    if not isinstance(features, dict) or not features:
        raise ArgError("'features' takes a dict of feature name -> tfrecord.FixedLenFeature / VarLenFeature, "
                       f"got {type(features).__name__}")
    for name, feature in features.items():
        if not isinstance(name, str) or not isinstance(feature, tfrecord_format.Feature):
            raise ArgError(f"'features': {name!r} should name a tfrecord.FixedLenFeature, VarLenFeature or "
                           f"FixedLenSequenceFeature, got {type(feature).__name__}")
    return features


def _tfrecord_files(static: dict, per_sample: frozenset) -> None:
    _features_of(static)
    one_index_each(static)


registry.register_schema(OpSchema(
    name="readers.tfrecord",
    class_name="readers.TFRecord",
    doc="Reads tf.train.Example records from TFRecord files: one output per feature of ``features`` (a dict of "
        "name -> penstock.tfrecord.FixedLenFeature / VarLenFeature / FixedLenSequenceFeature, as "
        "nvidia.dali.tfrecord's), returned as a dict by name, as in DALI. A string feature gives its bytes as a "
        "1-D uint8 array (an encoded image for the decoders), int64 and float32 features arrays of their "
        "values. Samples are the records of the files in order (``index_path``, DALI's tfrecord2idx files, "
        "say where each starts; without them the files are scanned once at build).",
    args=(
        Arg("path", "paths", REQUIRED, "The TFRecord files."),
        Arg("index_path", "paths", None, "One index file per TFRecord file ('offset size' per record, as "
            "tfrecord2idx writes)."),
        Arg("features", "any", REQUIRED, "Feature name -> what to read (penstock.tfrecord)."),
        Arg("use_o_direct", "bool", False, "Accepted for DALI compatibility (with dont_use_mmap=True, as "
            "DALI's); files are read through the page cache."),
        *RECORD_READER_ARGS,
    ),
    num_inputs=(0, 0),
    num_outputs=lambda static: len(static.features),
    output_names=lambda static: tuple(static.features),
    input_names=(),
    is_source=True,
    checks=(_tfrecord_files, shuffle_after_epoch_moving, o_direct_without_mmap),
))


@registry.register("readers.tfrecord", "cpu")
class TFRecordReader(RecordFileReader):
    def __init__(self, args, context):
        super().__init__(args, context)
        self.features = _features_of(args)
        self._wanted = frozenset(self.features)
        self.list_records(args, "readers.tfrecord",
                          lambda index, path: index_columns(index, (0, 1), "readers.tfrecord", "offset size"),
                          tfrecord_format.record_offsets)

    def load(self, index, sample: SampleContext) -> tuple:
        number, offset, size = self.records[index]
        where = self.paths[index]
        values = tfrecord_format.example_values(self.read_at(number, offset, size, where), self._wanted, where)
        return tuple(feature.array(values.get(name), f"{where}, feature '{name}'")
                     for name, feature in self.features.items())

    def declare_outputs(self, inputs):
        return tuple(OutputSpec(feature.dtype, feature.ndim, "") for feature in self.features.values())
