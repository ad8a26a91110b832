"""NVIDIA DALI's Python surface over penstock: ``from penstock.compat.dali import fn, math, ops, tfrecord,
types, pipeline_def`` and ``from penstock.compat.dali.pipeline import Pipeline`` behave as their DALI
namesakes. Differences from DALI are deliberate and listed in docs/dali.md."""
import sys

from penstock.compat.dali import backend, data_node, fn, math, ops, plugin_manager, tensors, tfrecord, types
from penstock.compat.dali.data_node import newaxis
from penstock.compat.dali.pipeline import DataNode, Pipeline, pipeline_def

backend_impl = sys.modules[f"{__name__}.backend_impl"] = backend

__all__ = ["DataNode", "Pipeline", "backend", "backend_impl", "data_node", "fn", "math", "newaxis", "ops",
           "pipeline_def", "plugin_manager", "tensors", "tfrecord", "types"]
