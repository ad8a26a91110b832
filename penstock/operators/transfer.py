"""Moving data between devices: ``DataNode.gpu()``."""
from __future__ import annotations

from penstock import registry
from penstock.schema import OpSchema

registry.register_schema(OpSchema(
    name="_to_gpu", class_name="_ToGpu",
    doc="Copies CPU samples to the GPU (what DataNode.gpu() adds to the graph).",
    input_names=("input",)))


