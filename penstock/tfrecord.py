"""What ``readers.tfrecord`` reads from each record (``nvidia.dali.tfrecord``'s names): a dict of
feature name -> ``FixedLenFeature``, ``VarLenFeature`` or ``FixedLenSequenceFeature``, each of
type ``int64``, ``float32`` or ``string``.

- ``FixedLenFeature(shape, type, default_value)``: exactly ``prod(shape)`` values, shaped
  ``shape`` (``[]`` gives shape ``(1,)``, as in DALI); a ``string`` feature gives the bytes of its
  first value as a 1-D uint8 array. A record without the feature gets ``default_value``.
- ``VarLenFeature(type, default_value)``: all the record's values, 1-D (none where the record
  lacks it). ``VarLenFeature(partial_shape, type, default_value)`` and
  ``FixedLenSequenceFeature(partial_shape, type, default_value)``: shaped
  ``(count / prod(partial_shape), *partial_shape)``.
"""
from __future__ import annotations

from penstock.operators.readers.tfrecord_format import (FixedLenFeature, FixedLenSequenceFeature, VarLenFeature,
                                                         float32, int64, string)

__all__ = ["FixedLenFeature", "FixedLenSequenceFeature", "VarLenFeature", "float32", "int64", "string"]
