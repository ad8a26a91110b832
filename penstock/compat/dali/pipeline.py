"""``nvidia.dali.pipeline``: Pipeline, pipeline_def and DataNode are penstock's own."""
from penstock.graph import DataNode
from penstock.pipeline import Pipeline, pipeline_def

__all__ = ["DataNode", "Pipeline", "pipeline_def"]
