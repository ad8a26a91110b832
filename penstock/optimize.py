"""Build-time rewrites that change how a graph runs, not what it computes (beyond resampling
tolerance): each one is a function over the graph's nodes and their implementations, and asks
them only what the operators declare (penstock.capabilities)."""
from __future__ import annotations

from penstock.capabilities import LightOnCpu, LightOnGpu, Resamples, SharesWindows, ShrinksOnDecode
from penstock.contract import BatchOperator, SampleOperator
from penstock.graph import DataNode, OpNode


def let_decoders_shrink(nodes: list[OpNode], impls: dict, outputs: list[DataNode] = ()) -> None:
    """A decoder whose every consumer resamples (to a size that follows from the image's) may
    decode at 1/2, 1/4 or 1/8 scale in the DCT domain, as long as the decoded window stays at
    least as large as the consumers' outputs: they would throw that resolution away anyway. A
    decoder whose images are also a pipeline output (``outputs``) keeps the full resolution: the
    user sees them. A consumer with per-sample arguments might resample to another size per
    sample: none is assumed."""
    for node in nodes:
        impl = impls.get(node.index)
        if not isinstance(impl, ShrinksOnDecode) or not node.outputs:
            continue
        if any(output is node.outputs[0] for output in outputs):
            continue
        consumers = [other for other in nodes if any(dep is node.outputs[0] for dep in other.dependencies())]
        if not consumers or any(consumer.arg_inputs or not isinstance(impls[consumer.index], Resamples) or
                                impls[consumer.index].resampled_size(64, 64) is None for consumer in consumers):
            continue
        rules = [impls[consumer.index].resampled_size for consumer in consumers]
        impl.decode_smaller_for(lambda height, width, rules=rules: _largest(rule(height, width) for rule in rules))


def let_decoders_share_windows(impls: dict) -> None:
    """A GPU decoder may hand a share of its windows to the CPU workers (``share_windows``) where
    every other GPU step of the pipeline is light (``LightOnGpu``: copies, and the steps of the
    one fused image kernel, as in the ResNet-50 training recipe) and the CPU workers have no
    per-sample work but light steps (``LightOnCpu``: random generators): there the hardware JPEG
    engines set the pace. Where other GPU work follows (RandAugment, box encoding), the engines do
    not, and the share only adds work: the augmentation pipeline ran 8-30% slower with it and SSD
    3-7%. Where other CPU work takes the workers (DALI's SSD example crops and encodes boxes on
    the CPU), the share takes cores that work needs (BENCHMARKS.md)."""
    gpu_impls = [impl for impl in impls.values() if isinstance(impl, BatchOperator)]
    cpu_impls = [impl for impl in impls.values() if isinstance(impl, SampleOperator)]
    if all(isinstance(impl, (LightOnGpu, SharesWindows)) for impl in gpu_impls) and \
            all(isinstance(impl, LightOnCpu) for impl in cpu_impls):
        for impl in gpu_impls:
            if isinstance(impl, SharesWindows):
                impl.share_windows()


def _largest(sizes) -> tuple[int, int]:
    sizes = list(sizes)
    return max(h for h, _ in sizes), max(w for _, w in sizes)
