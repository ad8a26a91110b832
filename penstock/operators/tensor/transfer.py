"""Moving data between devices: ``DataNode.gpu()`` adds ``_to_gpu`` to the graph."""
from __future__ import annotations

import numpy as np

from penstock import devices, registry
from penstock.capabilities import LightOnGpu
from penstock.columns import ArrayColumn, RaggedColumn
from penstock.contract import BatchOperator
from penstock.schema import OpSchema

registry.register_schema(OpSchema(
    name="_to_gpu", class_name="_ToGpu",
    doc="Copies CPU samples to the GPU (what DataNode.gpu() adds to the graph).",
    input_names=("input",)))


@registry.register("_to_gpu", "mixed", requires=devices.gpu_problem)
class ToGpu(LightOnGpu, BatchOperator):
    """CPU samples to the GPU: one copy from pinned memory for the whole batch, kept as one
    PackedBatch when the samples share a dtype."""

    def run_batch(self, inputs, args, batch):
        from penstock.runtime.pinned import upload_arrays, upload_packed, upload_ragged, upload_rows
        if isinstance(inputs[0], RaggedColumn) and inputs[0].complete:  # as the worker processes sent it
            return upload_ragged(batch.device, inputs[0])
        if isinstance(inputs[0], ArrayColumn) and inputs[0].complete and len(inputs[0]):  # labels, draws
            return upload_rows(batch.device, inputs[0].array)
        samples = [np.asarray(sample, order="C") for sample in inputs[0]]  # (ascontiguousarray makes 0-d 1-d)
        if not samples:
            return []
        if len({s.dtype for s in samples}) == 1:  # dense or ragged (boxes, labels): no view per sample
            return upload_packed(batch.device, samples)
        return upload_arrays(batch.device, samples)
