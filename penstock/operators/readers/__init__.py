"""Readers and fed sources."""
from penstock.operators.readers import files, coco, lmdb_readers, record_readers, external  # noqa: F401  (registers the family's operators)
