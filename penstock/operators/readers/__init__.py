"""Readers and fed sources."""
from penstock.operators.readers import (file_reader, numpy_reader, sequence_reader, coco, lmdb_readers,  # noqa: F401  (registers the family's operators)
                                        tfrecord_reader, webdataset_reader, mxnet_reader, external, nemo_asr,
                                        video_reader)
