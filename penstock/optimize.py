"""Build-time rewrites that change how a graph runs, not what it computes (beyond resampling
tolerance): each one is a function over the graph's nodes and their implementations."""
from __future__ import annotations

from penstock.graph import DataNode, OpNode
from penstock.operators.geometry import fixed_resize_size


def let_decoders_shrink(nodes: list[OpNode], impls: dict, outputs: list[DataNode] = ()) -> None:
    """A decoder whose every consumer is a fixed-size resize may decode at 1/2, 1/4 or 1/8 scale in the
    DCT domain, as long as the decoded window stays at least as large as the resize's output: the
    resize would throw that resolution away anyway. A decoder whose images are also a pipeline
    output (``outputs``) keeps the full resolution: the user sees them."""
    for node in nodes:
        impl = impls.get(node.index)
        if not hasattr(impl, "shrink_target") or not node.outputs:
            continue
        if any(output is node.outputs[0] for output in outputs):
            continue
        consumers = [other for other in nodes
                     if any(dep is node.outputs[0] for dep in other.dependencies())]
        sizes = []
        for consumer in consumers:
            fixed = fixed_resize_size(consumer.static_args) if consumer.schema.name == "resize" else None
            if fixed is None or any(dep is node.outputs[0] for dep in consumer.arg_inputs.values()) \
                    or set(consumer.arg_inputs) & {"resize_x", "resize_y", "size"}:
                break
            sizes.append(fixed)
        else:
            if sizes:
                impl.shrink_target = (max(h for h, _ in sizes), max(w for _, w in sizes))
