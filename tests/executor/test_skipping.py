"""executor.skipping on one batch at a time, with a stand-in reader and sample runner: a failed
sample is replaced by the last sample still in its epoch (which leaves the epoch), fed data leaves
it out, and a batch or an epoch with no sample left fails naming the samples."""
import numpy as np
import pytest

from penstock.contract import EpochInfo, Reader, SourceOperator
from penstock.executor.jobs import Job, PipelineError, Skipped
from penstock.executor.plan import ExecutionPlan, Source
from penstock.executor.skipping import every_sample_failed, refill


class EpochReader(Reader):
    """An epoch of ``size`` items in order; lending takes its last sample out of it."""

    name = "readers.file"

    def __init__(self, size):
        super().__init__({}, None)
        self.end = None  # samples still in the epoch (None: all of them)
        self.size = size

    def lend(self, epoch, position):
        last = (self.size if self.end is None else self.end) - 1
        self.end = last
        return (f"item{last}", f"file{last}") if last > position else None

    def epoch_end(self, epoch):
        return self.end

    def reader_meta(self):
        return {"number_of_shards": 1, "shard_id": 0}


class Runner:
    """Computes a sample from its item, as the CPU stage would (stores it in the job's values)."""

    def request(self, job, index):
        return (job.source_items[0][index],)

    def compute(self, item, job):
        return f"computed {item}"

    def store_computed(self, job, index, kept):
        job.values[0][index] = kept


def run_inline(calls):
    for call in calls:
        call()


def batch(first, size=4, valid=4, last=False, index=0, failed=()):
    """Job of the epoch's samples first..first+size-1, with the samples at ``failed`` (indices in the batch) failed."""
    positions = range(first, first + size)
    return Job(iteration=index, size=size, source_items={0: [f"item{p}" for p in positions]},
               source_infos=[f"file{p}" for p in positions], values=[[f"computed item{p}" for p in positions]],
               buffers=[None], params={7: np.arange(size)}, epoch_info=EpochInfo(0, valid, last, index),
               skip_failures=True, failed={i: PipelineError("failed", "decoders.image", f"file{first + i}", "bad")
                                          for i in failed})


def plan_of(source):
    return ExecutionPlan.build([Source(0, source, 1)], [], [(0, 0)])


def test_a_failed_sample_is_replaced_by_the_last_one_still_in_the_epoch():
    reader = EpochReader(8)
    job = batch(0, failed=[1])
    refill(job, plan_of(reader), Runner(), run_inline)
    assert job.values[0] == ["computed item0", "computed item7", "computed item2", "computed item3"]
    assert job.source_infos[1] == "file7" and job.size == 4
    assert job.skipped == [Skipped("file1", "decoders.image", "bad")] and job.error is None
    assert job.epoch_info == EpochInfo(0, 4, False, 0) and reader.epoch_end(0) == 7
    # the epoch's last batch: the sample lent out is padding now
    last = batch(4, last=True, index=1)
    refill(last, plan_of(reader), Runner(), run_inline)
    assert last.epoch_info == EpochInfo(0, 3, True, 1) and last.skipped == []


def test_fed_data_leaves_the_failed_samples_out():
    job = batch(0, failed=[0, 2])
    refill(job, plan_of(SourceOperator({}, None)), Runner(), run_inline)
    assert job.size == 2 and job.values[0] == ["computed item1", "computed item3"]
    assert job.source_items[0] == ["item1", "item3"] and job.source_infos == ["file1", "file3"]
    np.testing.assert_array_equal(job.params[7], [1, 3])  # the kept samples' random draws
    assert [record.source for record in job.skipped] == ["file0", "file2"]
    assert job.epoch_info.valid == 2


def test_a_batch_of_fed_data_whose_every_sample_failed_fails():
    job = batch(0, size=2, failed=[0, 1])
    refill(job, plan_of(SourceOperator({}, None)), Runner(), run_inline)
    assert isinstance(job.error, PipelineError)
    assert "every sample of batch 0 failed" in str(job.error) and "'file0'" in str(job.error)


def test_an_epoch_whose_every_sample_failed_fails():
    reader = EpochReader(2)
    job = batch(0, size=2, valid=2, last=True, failed=[0, 1])
    refill(job, plan_of(reader), Runner(), run_inline)
    assert "every sample of epoch 0 of readers.file failed" in str(job.error)


def test_every_sample_failed_names_the_first_samples_and_counts_the_rest():
    skipped = [Skipped(f"file{i}", "decoders.image" if i % 2 else "resize", "bad") for i in range(12)]
    error = every_sample_failed(skipped, "batch 3")
    assert str(error).startswith("on_error='skip': every sample of batch 3 failed, so there is nothing to "
                                 "deliver (12 samples): 'file0' (resize: bad); 'file1' (decoders.image: bad)")
    assert str(error).endswith("; and 2 more") and "'file10'" not in str(error)
    assert error.operator == "decoders.image, resize"


@pytest.mark.parametrize("failed", [[0], [3], [0, 3]])
def test_the_batch_keeps_its_size_while_the_epoch_has_spare_samples(failed):
    reader = EpochReader(12)
    job = batch(0, failed=failed)
    refill(job, plan_of(reader), Runner(), run_inline)
    assert job.size == 4 and len(job.skipped) == len(failed)
    assert sorted(job.values[0]) == sorted(f"computed item{p}" for p in
                                           [*(p for p in range(4) if p not in failed), *range(11, 11 - len(failed), -1)])
    assert reader.epoch_end(0) == 12 - len(failed)
