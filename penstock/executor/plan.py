"""What the executor works out once, before the first batch: which operator runs on which stage,
which per-sample values outlive the CPU stage and where a batch keeps them, which outputs may be
written straight into a batch buffer, and whether worker processes can run the CPU stage."""
from __future__ import annotations

import multiprocessing
from dataclasses import dataclass
from typing import Any, NamedTuple

from penstock.capabilities import DecodesOnLoad, PreparesOnCpu, RoutesSamples, RunsUserCode, WantsCpuWorkers
from penstock.contract import BatchOperator, SourceOperator, WholeBatchOperator

PREPARED = -1  # the output position under which a batch operator's per-sample preparation is kept

Ref = tuple[int, int]  # (operator key, output position): one value of a sample


class Source(NamedTuple):
    """One source of the plan: its key in a sample's values, the operator and its output count."""

    key: int
    impl: SourceOperator
    num_outputs: int


@dataclass
class Step:
    """One operator of the plan, with where its inputs come from (keys into a sample's values)."""

    key: int
    impl: Any
    inputs: tuple[Ref, ...]
    arg_inputs: dict[str, Ref]
    num_outputs: int


@dataclass(frozen=True)
class ExecutionPlan:
    """The operators by stage and the slots of the values a batch keeps, fixed at build time."""

    sources: tuple[Source, ...]
    worker_sources: tuple[Source, ...]  # the sources whose items the CPU stage's workers load
    source_keys: tuple[int, ...]  # their keys
    steps: tuple[Step, ...]  # every other operator in graph order: each draws its random values
    cpu_steps: tuple[Step, ...]  # per-sample operators, run by the CPU stage
    whole_batch_steps: tuple[Step, ...]  # CPU operators on whole batches, run after the CPU stage
    gpu_steps: tuple[Step, ...]  # batch operators, run by the GPU stage
    prepared_on_cpu: tuple[Step, ...]  # batch operators whose per-sample preparation the CPU stage runs
    outputs: tuple[Ref, ...]  # the pipeline's outputs, in order
    # the per-sample values kept after the CPU stage (pipeline outputs computed on the CPU, and the
    # CPU values the GPU stage reads), each with its slot in a job's ``values``
    kept: dict[Ref, int]
    dense_slots: frozenset[int]  # kept slots of pipeline outputs: stored in one batch buffer when they fit
    dense_outputs: dict[int, int]  # step key -> kept slot of the pipeline output it may write into directly
    # kept slots of what the per-sample CPU operators make: worker processes write these into their
    # rows of a batch buffer shared with them, once a batch has shown the rows' shape
    shared_slots: frozenset[int]
    # the shared slots that are not pipeline outputs and that GPU operators take (copied to the GPU):
    # their buffers live where the pipeline may pin them
    upload_slots: frozenset[int]
    prepared_slots: frozenset[int]  # kept slots of per-sample preparations (the GPU stage's inputs)
    gpu_reads_rings: bool  # the GPU reads some preparations out of the workers' rings (gpu_reads_preparations)
    can_use_processes: bool  # fork exists and every preparation may cross to this process
    has_branches: bool  # conditionals route samples (executor.branches)
    routes: dict[int, str]  # step key -> "split" or "merge", of the steps that route samples (RoutesSamples)
    # kept slots read straight from a source's batch of items (items_are_values), not computed by
    # the CPU stage: slot -> source key
    passed_slots: dict[int, int]
    computed_slots: tuple[int, ...]  # the other kept slots: what the CPU stage stores
    worker_step_keys: frozenset[int]  # the steps whose random draws the CPU stage's workers read

    @classmethod
    def build(cls, sources: list[Source], steps: list[Step],
              outputs: list[Ref]) -> "ExecutionPlan":
        routes = {step.key: step.impl.routes_samples for step in steps if isinstance(step.impl, RoutesSamples)}
        late = _after_whole_batch(steps, routes)
        cpu_steps = tuple(step for step in steps if not isinstance(step.impl, (BatchOperator, WholeBatchOperator))
                          and step.key not in late)
        whole_batch_steps = tuple(step for step in steps if isinstance(step.impl, WholeBatchOperator) or step.key in late)
        gpu_steps = tuple(step for step in steps if isinstance(step.impl, BatchOperator))
        gpu_keys = {step.key for step in gpu_steps}
        prepared_on_cpu = tuple(step for step in gpu_steps if _prepares_on_cpu(step, gpu_keys))
        _check_whole_batch_consumers(whole_batch_steps, (*cpu_steps, *prepared_on_cpu))
        kept = _kept_values(outputs, (*whole_batch_steps, *gpu_steps), prepared_on_cpu, gpu_keys)
        dense_slots = frozenset(kept[ref] for ref in outputs if ref in kept)
        shared_slots = frozenset(slot for (key, position), slot in kept.items()
                                 if position != PREPARED and key in {step.key for step in cpu_steps})
        taken_on_gpu = {kept[ref] for step in gpu_steps for ref in step.inputs if ref in kept}
        passed = {key for key, source, _ in sources if source.items_are_values}
        passed_slots = {slot: ref[0] for ref, slot in kept.items()
                        if ref[0] in passed and ref[1] == 0 and slot not in dense_slots}
        taken_on_cpu = {ref[0] for step in (*cpu_steps, *prepared_on_cpu)
                        for ref in (*step.inputs, *step.arg_inputs.values())}
        worker_sources = tuple(source for source in sources if source.key not in passed or source.key in taken_on_cpu
                               or any(ref[0] == source.key and slot not in passed_slots for ref, slot in kept.items()))
        return cls(
            sources=tuple(sources), worker_sources=worker_sources,
            source_keys=tuple(key for key, _, _ in worker_sources), steps=tuple(steps),
            cpu_steps=cpu_steps, whole_batch_steps=whole_batch_steps, gpu_steps=gpu_steps, prepared_on_cpu=prepared_on_cpu, outputs=tuple(outputs),
            kept=kept, dense_slots=dense_slots,
            dense_outputs=_dense_outputs(outputs, cpu_steps, kept),
            shared_slots=shared_slots, upload_slots=(shared_slots & taken_on_gpu) - dense_slots,
            prepared_slots=frozenset(slot for (_, position), slot in kept.items() if position == PREPARED),
            gpu_reads_rings=any(step.impl.gpu_reads_preparations for step in prepared_on_cpu),
            can_use_processes="fork" in multiprocessing.get_all_start_methods() and all(
                step.impl.preparation_crosses_processes for step in prepared_on_cpu),
            has_branches=bool(routes), routes=routes,
            passed_slots=passed_slots, computed_slots=tuple(slot for slot in range(len(kept)) if slot not in passed_slots),
            worker_step_keys=frozenset(step.key for step in (*cpu_steps, *prepared_on_cpu)))

    def cpu_workers(self, num_threads: int) -> int:
        """The CPU stage's workers: num_threads, or more where an operator's per-sample work is
        sized for more (WantsCpuWorkers)."""
        wanted = (step.impl.cpu_workers_wanted() for step in (*self.cpu_steps, *self.prepared_on_cpu)
                  if isinstance(step.impl, WantsCpuWorkers))
        return max(1, num_threads, *wanted)

    def uses_processes(self, requested: bool | None) -> bool:
        """Whether worker processes run the CPU stage: when ``requested`` and they can be used. None
        chooses them when there is per-sample CPU work (an operator's, or a source's decoding):
        their Python runs in parallel, where threads take turns for one interpreter lock (and the
        GPU stage, or the training loop, has this process's interpreter to itself), unless an
        operator runs the user's own code, which stays with the user's state in this process."""
        if requested is None:
            decoding = any(isinstance(source, DecodesOnLoad) for _, source, _ in self.worker_sources)
            requested = bool(self.prepared_on_cpu or self.cpu_steps or decoding) and \
                not any(isinstance(step.impl, RunsUserCode) for step in self.steps)
        return bool(requested) and self.can_use_processes


def _after_whole_batch(steps: list[Step], routes: dict[int, str]) -> set[int]:
    """The keys of the per-sample CPU operators that take, directly or not, what a whole-batch
    operator makes: they run after it, sample by sample, with the whole-batch operators (not on the
    CPU stage, which has finished by then). Operators that route samples stay on the CPU stage."""
    made = {step.key for step in steps if isinstance(step.impl, WholeBatchOperator)}
    late = set()
    for step in steps:  # graph order: a step's producers come before it
        if isinstance(step.impl, (BatchOperator, WholeBatchOperator)) or step.key in routes:
            continue
        if any(ref[0] in made or ref[0] in late for ref in (*step.inputs, *step.arg_inputs.values())):
            late.add(step.key)
    return late


def _check_whole_batch_consumers(whole_batch_steps: tuple, per_sample_steps: tuple) -> None:
    """The per-sample CPU stage cannot take what a whole-batch operator makes: that runs after
    the batch's per-sample work (contract.WholeBatchOperator)."""
    made = {step.key: step.impl.name for step in whole_batch_steps}
    for step in per_sample_steps:
        for ref in (*step.inputs, *step.arg_inputs.values()):
            if ref[0] in made:
                raise ValueError(f"{step.impl.name}: takes the output of {made[ref[0]]}, which works on whole batches "
                                 "after the per-sample CPU operators; on the CPU, put it last (or run both on the GPU)")


def _prepares_on_cpu(step: Step, gpu_keys: set[int]) -> bool:
    """Whether a batch operator's per-sample preparation runs on the CPU stage: it has one, and all
    its inputs are CPU data."""
    return isinstance(step.impl, PreparesOnCpu) and \
        not any(ref[0] in gpu_keys for ref in (*step.inputs, *step.arg_inputs.values()))


def _kept_values(outputs: list[Ref], gpu_steps: tuple[Step, ...], prepared_on_cpu: tuple[Step, ...],
                 gpu_keys: set[int]) -> dict[Ref, int]:
    wanted = [ref for ref in outputs if ref[0] not in gpu_keys]
    prepared_keys = {step.key for step in prepared_on_cpu}
    for step in gpu_steps:
        if step.key in prepared_keys:
            wanted.append((step.key, PREPARED))
        else:
            wanted.extend(ref for ref in (*step.inputs, *step.arg_inputs.values()) if ref[0] not in gpu_keys)
    return {ref: slot for slot, ref in enumerate(dict.fromkeys(wanted))}


def _dense_outputs(outputs: list[Ref], cpu_steps: tuple[Step, ...], kept: dict[Ref, int]) -> dict[int, int]:
    dense = {}
    for ref in outputs:
        step = next((s for s in cpu_steps if s.key == ref[0]), None)
        if step is not None and step.num_outputs == 1 and ref[0] not in dense and ref in kept:
            dense[ref[0]] = kept[ref]
    return dense
