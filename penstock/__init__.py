"""penstock: data pipelines that keep accelerators fed.

Define a pipeline with ``@pipeline_def`` over ``fn.*`` operators or as a ``Pipeline`` subclass with
``ops.*`` objects; run it with ``pipe.run()`` or hand it to ``penstock.plugin.pytorch``.
"""
from penstock import fn, ops, types
from penstock.batch import Batch
from penstock.executor import PipelineError, Skipped
from penstock.graph import DataNode, GpuFallbackWarning
from penstock.pipeline import Pipeline, pipeline_def

__version__ = "0.1.0"
__all__ = ["Batch", "DataNode", "GpuFallbackWarning", "Pipeline", "PipelineError", "Skipped", "fn", "ops", "pipeline_def", "types"]
