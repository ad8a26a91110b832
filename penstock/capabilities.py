"""What an operator may declare beyond the contract (penstock.contract): each capability is a small
class that an implementation inherits, with the methods it then provides. The pipeline and the
executor's plan ask for one with ``isinstance(impl, Capability)`` when they are built, never while
batches run; an operator that declares none has none of these members.

- ``ShrinksOnDecode``, ``Resamples``: a decoder that may decode smaller for the resize after it
  (optimize.let_decoders_shrink).
- ``SharesWindows``, ``LightOnGpu``, ``LightOnCpu``: a GPU decoder that may hand a share of its
  windows to the CPU workers where every other GPU step is light and the CPU stage has no
  per-sample work of its own beyond light steps (optimize.let_decoders_share_windows).
- ``ImagePlanStep``: a GPU image step of the fused image kernel (Pipeline.describe).
- ``PreparesOnCpu``: a batch operator's per-sample preparation, run on the CPU stage (executor.plan).
- ``WantsCpuWorkers``: per-sample work sized for more CPU workers than num_threads (executor.plan).
- ``DecodesOnLoad``: a source whose per-sample load decodes (executor.plan).
- ``ReportsEngines``: which engines did the work (Pipeline.engines).
- ``RoutesSamples``: the split and merge of conditionals (executor.branches, executor.samples).
- ``RunsUserCode``: the user's own code, which stays in the user's process (executor.plan).
"""
from __future__ import annotations

from typing import Callable

__all__ = ["ImagePlanStep", "LightOnCpu", "LightOnGpu", "PreparesOnCpu", "ReportsEngines", "Resamples", "RoutesSamples", "RunsUserCode",
           "SharesWindows", "ShrinksOnDecode", "WantsCpuWorkers", "DecodesOnLoad"]


class ShrinksOnDecode:
    """A decoder that may decode at 1/2, 1/4 or 1/8 scale in the DCT domain for a resize that follows."""

    def decode_smaller_for(self, target: Callable[[int, int], tuple[int, int]]) -> None:
        """Every consumer resamples an image of (height, width) to at most ``target(height,
        width)``: decoding at a smaller scale that stays at least that large, and that the
        consumers resample to the same sizes, changes nothing but the resampling tolerance."""
        raise NotImplementedError


class Resamples:
    """An operator that resamples images (the consumer a decoder may shrink for)."""

    def resampled_size(self, height: int, width: int) -> tuple[int, int] | None:
        """(height, width) the operator resamples an input of (height, width) to, the same for
        every sample (no per-sample arguments decide it), else None."""
        raise NotImplementedError


class SharesWindows:
    """A GPU decoder that may hand a share of its windows to the CPU workers."""

    def share_windows(self) -> None:
        """The rest of the pipeline's GPU work is light (``LightOnGpu``): the decoder's hardware
        engines set its pace, and a share of the windows decoded on the CPU workers beside them pays."""
        raise NotImplementedError


class LightOnGpu:
    """A batch operator whose work on the GPU stage is a copy or a step of the batch's fused image
    kernel, no more (operators.shared.gpu_plan.ExtendsImagePlan: an ImagePlanStep that is light)."""


class LightOnCpu:
    """A per-sample CPU operator whose work is a few numbers a sample (random generators given a
    per-sample argument): it leaves the CPU workers to a GPU decoder's share of the windows."""


class ImagePlanStep:
    """A GPU image operator that extends the batch's deferred image plan
    (penstock.kernels.image_plan): consecutive such steps run as one kernel launch, and
    Pipeline.describe lists the runs of them. One that does nothing else is also ``LightOnGpu``
    (operators.shared.gpu_plan.ExtendsImagePlan)."""

    def build_notes(self):
        return ["on HWC images of up to 4 channels, extends the batch's image plan: runs in the same Triton "
                "kernel launch as the GPU image steps next to it (geometry, colour, normalize, cast, layout)"]


class PreparesOnCpu:
    """A batch operator with per-sample work on the CPU (parsing headers, choosing windows): the
    CPU stage's workers run ``prepare`` when every input is CPU data, and ``run_batch`` gets what
    it returned instead of the inputs."""

    # what prepare() returns is plain data that may come back from a worker process
    preparation_crosses_processes = False
    # what prepare() returns holds data the GPU reads straight out of the worker processes' shared
    # rings (pixels to upload, JPEGs for the GPU's decoders): the rings are then pinned. nvJPEG's
    # hardware decoder is much slower on pageable JPEG data: the training pipeline ran at 17.9-22.3k
    # images/s with pageable rings, 26.9-27.4k with pinned ones (H200, BENCHMARKS.md)
    gpu_reads_preparations = False

    def prepare(self, inputs: tuple, args: dict, sample):
        """One sample's preparation, from its inputs, arguments and SampleContext."""
        raise NotImplementedError


class WantsCpuWorkers:
    """Per-sample work sized for a number of CPU workers, whatever the pipeline's num_threads."""

    def cpu_workers_wanted(self) -> int:
        """CPU workers (threads or processes) the pipeline runs at least. 0: num_threads decides.
        (The mixed decoders' automatic CPU share is sized by the machine's cores, not by
        num_threads, so that a seed gives the same batches whatever the threads.)"""
        raise NotImplementedError


class DecodesOnLoad:
    """A source whose ``load`` decodes each sample (audio, frames): per-sample CPU work, as a CPU
    operator's is, that worker processes take off the interpreter lock of the process where the
    GPU stage (and the training loop) runs."""


class ReportsEngines:
    """An operator that does its work on one engine or another (decoders: CPU or GPU)."""

    @property
    def engines(self) -> list[str]:
        """Which engines did its work so far, in words."""
        raise NotImplementedError


class RoutesSamples:
    """The operators of conditionals (operators.tensor.conditional), which route samples between
    branches; the executor routes a batch operator's samples itself, asking it for the predicates
    and the samples."""

    routes_samples = ""  # "split" or "merge"

    def predicates(self, args: list[dict]) -> list[bool]:
        """The branch each sample takes, from its arguments."""
        raise NotImplementedError

    def samples_of(self, value) -> list:
        """A batch value as one item per sample (on the GPU stage)."""
        raise NotImplementedError


class RunsUserCode:
    """An operator that runs the user's own code (python_function): it runs in this process, where
    the user's state lives, so worker processes are not chosen for a pipeline by default."""
