"""``on_error="skip"``: samples an operator failed on are left out of their batch and replaced.

A batch is refilled once its CPU stage has finished, in iteration order, by the stage that takes
batches in order after the CPU workers (the GPU stage, or the consumer when there is none). With a
reader, the replacement of a failed sample is the last sample still in its epoch (``Reader.lend``),
computed on the CPU workers with the failed sample's random draws; that sample leaves the epoch,
which ends one sample sooner. When that last sample is in the batch being refilled, its value there
(the original or a replacement) moves to the failed place, and a failure of its own is recorded
first. The batch that held the samples lent out (one of the epoch's last) marks them as padding, as
it marks a short last batch. So every other sample of the epoch is delivered exactly once, each
batch keeps its size, and the batches depend only on which samples fail, not on how far ahead the
pipeline has read.

The edges: a batch that ends the epoch (nothing of the epoch comes after it) is marked ``last``; a
batch left with no sample of its epoch is emptied (``size`` 0), and the consumer never hands it out
(the epoch ended with an earlier batch); an epoch whose every sample failed fails, naming the
files. Without a reader (fed data) there is no spare sample: the failed one is left out and its
batch is one sample shorter; a batch whose every sample failed fails the same way.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from penstock.draws import of_samples
from penstock.executor.jobs import Job, PipelineError, Skipped
from penstock.executor.plan import ExecutionPlan
from penstock.executor.samples import SampleRunner

NAMED_FAILURES = 10  # samples an "every sample failed" error names; skipped() lists them all


def refill(job: Job, plan: ExecutionPlan, runner: SampleRunner, run_on_workers) -> None:
    """Replaces the failed samples of a batch whose CPU stage has finished (``job.failed``) and
    pads out the samples its reader lent to earlier batches; records each failure in
    ``job.skipped``. A failure that is not an operator's fails the batch."""
    readers = [(key, source) for key, source, _ in plan.sources if source.lends_samples]
    info = job.epoch_info
    if info is None or not readers:
        _leave_out_failed(job)
        return
    key, reader = readers[0]  # one reader: checked when the pipeline is built
    start = info.index * job.size
    unfilled = set()  # padding places whose own sample failed: they repeat a real sample below
    while job.failed and job.error is None:
        failures, job.failed = dict(job.failed), {}
        replaced = []
        while failures:
            index = min(failures)
            error = failures.pop(index)
            if start + index >= _epoch_end(reader, info, start, job.size):  # lent out: recorded where it went
                unfilled.add(index)
                continue
            _record(job, index, error)
            if _replace(job, key, reader, info, start, index, failures, unfilled):
                replaced.append(index)
        run_on_workers([_computation(job, runner, index) for index in replaced])
    if job.error is None:
        _finish(job, _epoch_end(reader, info, start, job.size) - start, unfilled, reader)


def _epoch_end(reader, info, start: int, size: int) -> int:
    """How many positions of the epoch's order are still in it; when none was lent out and this
    batch is not the epoch's last, a bound past this batch (all that its refill needs to know)."""
    end = reader.epoch_end(info.epoch)
    if end is not None:
        return end
    return start + info.valid if info.last else start + size + 1


def _replace(job: Job, key, reader, info, start: int, index: int, failures: dict, unfilled: set) -> bool:
    """Puts the epoch's last sample still in it in place ``index`` (whose sample failed); False
    when ``index`` was itself the last (it becomes padding)."""
    while True:
        last = _epoch_end(reader, info, start, job.size) - 1
        lent = reader.lend(info.epoch, start + index)
        if last == start + index:  # the epoch's last sample: the batch's padding starts here
            unfilled.add(index)
            return False
        if last >= start + job.size:  # a later batch's sample, which no batch has used yet
            job.source_items[key][index], source_info = lent
            if job.source_infos:
                job.source_infos[index] = source_info
            return True
        # a place of this batch: the reader lends the sample its order put there, but that place
        # may hold a replacement by now, or a sample that failed in this round
        other = last - start
        if other in failures:  # recorded, as it was still in the epoch; the next one is taken
            _record(job, other, failures.pop(other))
            unfilled.add(other)
            continue
        job.source_items[key][index] = job.source_items[key][other]
        if job.source_infos:
            job.source_infos[index] = job.source_infos[other]
        return True


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


def _finish(job: Job, still_in_epoch: int, unfilled: set, reader) -> None:
    """The batch's epoch bookkeeping after its refill: ``still_in_epoch`` of its places (from the
    first) hold samples of the epoch, the rest are padding."""
    info = job.epoch_info
    valid = max(0, min(info.valid, still_in_epoch))
    if valid == 0:
        if info.index == 0:  # no sample of the epoch is left
            job.error = every_sample_failed(job.skipped, f"epoch {info.epoch} of {_reader_in_words(reader)}")
        _leave_out(job, set(range(job.size)))  # else the epoch ended with an earlier batch
        return
    job.epoch_info = replace(info, valid=valid, last=info.last or still_in_epoch <= job.size)
    _pad(job, valid, unfilled)


def _reader_in_words(reader) -> str:
    meta = reader.reader_meta()
    shards = meta["number_of_shards"]
    return reader.name + (f" (shard {meta['shard_id']} of {shards})" if shards > 1 else "")


def every_sample_failed(skipped: list, where: str) -> PipelineError:
    """The error of a batch or an epoch with no sample left: it names the samples and why."""
    named = "; ".join(f"'{record.source}' ({record.operator}: {record.reason})"
                      for record in skipped[:NAMED_FAILURES])
    more = f"; and {len(skipped) - NAMED_FAILURES} more" if len(skipped) > NAMED_FAILURES else ""
    operators = sorted({record.operator for record in skipped})
    return PipelineError(f"on_error='skip': every sample of {where} failed, so there is nothing to deliver "
                         f"({len(skipped)} samples): {named}{more}", ", ".join(operators))


def _pad(job: Job, valid: int, unfilled: set) -> None:
    """Padding places without a value (their sample failed) repeat the batch's last real sample,
    as a padded last batch does."""
    copied = valid - 1
    for index in sorted(unfilled):
        for slot, column in enumerate(job.values):
            buffer = job.buffers[slot]
            if buffer is not None and isinstance(column[copied], np.ndarray) and column[copied].base is buffer:
                buffer[index] = buffer[copied]
                column[index] = buffer[index]
            else:
                column[index] = column[copied]


def _leave_out_failed(job: Job) -> None:
    """Fed data has no spare samples: the failed ones are left out of the batch."""
    left_out = set()
    for index, error in sorted(job.failed.items()):
        _record(job, index, error)
        left_out.add(index)
    job.failed = {}
    if left_out and len(left_out) == job.size:
        job.error = every_sample_failed(job.skipped, f"batch {job.iteration}")
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
    job.params = {key: None if draws is None else of_samples(draws, keep) for key, draws in job.params.items()}
    if job.epoch_info is not None:
        job.epoch_info = replace(job.epoch_info, valid=sum(1 for index in keep if index < job.epoch_info.valid))
    job.size = len(keep)
