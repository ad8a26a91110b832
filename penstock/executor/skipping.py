"""``on_error="skip"``: samples an operator failed on are left out of their batch and replaced.

A batch is refilled once its CPU stage has finished, in iteration order, by the stage that takes
batches in order after the CPU workers (the GPU stage, or the consumer when there is none). With a
reader, the replacement of a failed sample is the last sample still in its epoch (``Reader.lend``),
computed on the CPU workers with the failed sample's random draws; that sample leaves the epoch,
which ends one sample sooner: the batch that held it (one of the epoch's last) marks it as padding,
as it marks a short last batch. So every other sample of the epoch is delivered exactly once, each
batch keeps its size, and the batches depend only on which samples fail, not on how far ahead the
pipeline has read. Without a reader (fed data) there is no spare sample: the failed one is left out
and its batch is one sample shorter.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from penstock.executor.jobs import Job, Skipped
from penstock.executor.plan import ExecutionPlan
from penstock.executor.samples import SampleRunner


def refill(job: Job, plan: ExecutionPlan, runner: SampleRunner, run_on_workers) -> None:
    """Replaces the failed samples of a batch whose CPU stage has finished (``job.failed``) and
    pads out the samples its reader lent to earlier batches; records each failure in
    ``job.skipped``. A failure that is not an operator's fails the batch."""
    readers = [(key, source) for key, source, _ in plan.sources if source.lends_samples]
    info = job.epoch_info
    if info is None or not readers:
        _leave_out_failed(job, plan)
        return
    key, reader = readers[0]  # one reader: checked when the pipeline is built
    start = info.index * job.size
    valid = _still_in_epoch(reader, info, start, info.valid)
    unfilled = set()
    while job.failed and job.error is None:
        failures, job.failed = sorted(job.failed.items()), {}
        replaced = []
        for index, error in failures:
            if index >= valid:  # padding: a copy of a valid sample takes its place below
                unfilled.add(index)
                continue
            _record(job, index, error)
            lent = reader.lend(info.epoch, start + index)
            valid = _still_in_epoch(reader, info, start, valid)
            if lent is None:  # it was the epoch's last sample: the batch's padding starts there
                unfilled.add(index)
                continue
            job.source_items[key][index], source_info = lent
            if job.source_infos:
                job.source_infos[index] = source_info
            replaced.append(index)
        run_on_workers([_computation(job, runner, index) for index in replaced])
    if job.error is None:
        _pad(job, valid, unfilled)


def _still_in_epoch(reader, info, start: int, valid: int) -> int:
    """How many of the batch's first samples are still in the epoch (the rest were lent out)."""
    end = reader.epoch_end(info.epoch)
    return valid if end is None else max(0, min(valid, end - start))


def _record(job: Job, index: int, error) -> None:
    source = error.source or (job.source_infos[index] if job.source_infos else f"sample {index}")
    job.skipped.append(Skipped(source, error.operator, error.reason or str(error)))


def _computation(job: Job, runner: SampleRunner, index: int):
    def compute() -> None:
        try:
            kept = runner.compute(*runner.request(job, index), job)
        except BaseException as error:  # the replacement failed too: replaced in turn
            job.record_failure(index, error)
            return
        runner.store_computed(job, index, kept)
    return compute


def _pad(job: Job, valid: int, unfilled: set) -> None:
    """The batch with its first ``valid`` samples real and the rest padding; padding slots without
    a value (their sample failed) repeat the last real sample, as a padded last batch does."""
    if valid < job.epoch_info.valid:
        job.epoch_info = replace(job.epoch_info, valid=valid)
    if not unfilled:
        return
    filled = [index for index in range(job.size) if index not in unfilled]
    if not filled:  # every sample failed or left: nothing to repeat
        _leave_out(job, set(range(job.size)))
        return
    copied = valid - 1 if valid > 0 else filled[0]
    for index in sorted(unfilled):
        for slot, column in enumerate(job.values):
            buffer = job.buffers[slot]
            if buffer is not None and isinstance(column[copied], np.ndarray) and column[copied].base is buffer:
                buffer[index] = buffer[copied]
                column[index] = buffer[index]
            else:
                column[index] = column[copied]


def _leave_out_failed(job: Job, plan: ExecutionPlan) -> None:
    """Fed data has no spare samples: the failed ones are left out of the batch."""
    left_out = set()
    for index, error in sorted(job.failed.items()):
        _record(job, index, error)
        left_out.add(index)
    job.failed = {}
    _leave_out(job, left_out)


def _leave_out(job: Job, left_out: set) -> None:
    """The batch without the samples ``left_out``: its other samples keep their order, values,
    items and random draws; its outputs are no longer one dense buffer."""
    keep = [index for index in range(job.size) if index not in left_out]
    job.values = [[column[index] for index in keep] for column in job.values]
    job.buffers = [None] * len(job.buffers)
    job.source_items = {key: [items[index] for index in keep] for key, items in job.source_items.items()}
    if job.source_infos:
        job.source_infos = [job.source_infos[index] for index in keep]
    job.params = {key: None if draws is None else _taken(draws, keep) for key, draws in job.params.items()}
    if job.epoch_info is not None:
        job.epoch_info = replace(job.epoch_info, valid=sum(1 for index in keep if index < job.epoch_info.valid))
    job.size = len(keep)


def _taken(draws, keep: list):
    """The random draws of the samples at ``keep`` (a list, an array, or UniformBlocks)."""
    return [draws[index] for index in keep] if isinstance(draws, list) else draws[keep]
