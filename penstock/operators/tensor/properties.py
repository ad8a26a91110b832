"""``get_property``: what is known of each sample besides its data (its source_info, its layout), as
a 1-D uint8 array of the text, on both devices."""
from __future__ import annotations

import numpy as np

from penstock import devices, registry
from penstock.contract import BatchOperator, OutputSpec, SampleOperator
from penstock.schema import REQUIRED, Arg, OpSchema


def _property_bytes(key: str, source_info: str, layout: str) -> np.ndarray:
    text = source_info if key == "source_info" else layout
    return np.frombuffer(text.encode(), np.uint8).copy()


registry.register_schema(OpSchema(
    name="get_property", class_name="GetProperty", num_inputs=(1, 1),
    doc="A property of each sample as a 1-D uint8 array of its text (as in DALI): 'source_info' (where the "
        "sample came from: its file name) or 'layout'.",
    args=(Arg("key", "str", REQUIRED, "The property.", choices=("source_info", "layout")),)))


def _has_source_info(data) -> bool:
    """Whether the samples of ``data`` (an output in the pipeline's graph) carry DALI's source_info: a
    reader's first output does (the file), and an operator's outputs do where one of its data inputs
    does (argument inputs do not count); external_source's and generators' samples have none."""
    node = data.op_node
    if "readers" in node.schema.name.split("."):
        return data.index == 0
    return any(_has_source_info(input_) for input_ in node.inputs)


class PropertyDeclaration:
    def __init__(self, args, context):
        super().__init__(args, context)
        node = context.graph_node
        # outside a pipeline's graph (eager calls) every sample keeps what its batch was given
        self._has_source_info = node is None or not node.inputs or _has_source_info(node.inputs[0])

    def declare_outputs(self, inputs):
        self._layout = inputs[0].layout
        return OutputSpec(np.dtype(np.uint8), 1, "")

    def _source_info(self, info: str) -> str:
        return info if self._has_source_info else ""


@registry.register("get_property", "cpu")
class GetProperty(PropertyDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        return _property_bytes(args.key, self._source_info(sample.source_info), self._layout)


@registry.register("get_property", "gpu", requires=devices.gpu_problem)
class GetPropertyGpu(PropertyDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        import torch
        infos = batch.source_infos or [""] * len(args)
        return [torch.as_tensor(_property_bytes(a.key, self._source_info(info), self._layout)).to(batch.device)
                for a, info in zip(args, infos)]
