"""NVIDIA DALI's Python surface over penstock: ``from penstock.compat.dali import fn, math, ops, tfrecord,
types, pipeline_def`` and ``from penstock.compat.dali.pipeline import Pipeline`` behave as their DALI
namesakes. Differences from DALI are deliberate and listed in docs/dali.md."""
from penstock.compat.dali import fn, math, ops, tfrecord, types
from penstock.compat.dali.pipeline import DataNode, Pipeline, pipeline_def

__all__ = ["DataNode", "Pipeline", "fn", "math", "ops", "pipeline_def", "tfrecord", "types"]
