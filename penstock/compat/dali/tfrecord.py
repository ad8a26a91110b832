"""``nvidia.dali.tfrecord``: the features readers.tfrecord reads (penstock.tfrecord)."""
from penstock.tfrecord import (FixedLenFeature, FixedLenSequenceFeature, VarLenFeature, float32, int64,  # noqa: F401
                               string)
