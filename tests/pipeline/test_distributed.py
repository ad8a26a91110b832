"""Sharding under torch.distributed: readers take their shard from the process's rank and the job's
world size when none is given (penstock.distributed), explicit arguments win, PENSTOCK_AUTO_SHARD=0
turns it off; under torchrun (2 CPU processes, gloo) the ranks together deliver the data set
exactly once per epoch and take the same number of steps under every last-batch policy."""
import json
import os
import subprocess
import sys

import pytest

from penstock import distributed, fn, pipeline_def

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture()
def clean_environment(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "PENSTOCK_AUTO_SHARD"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _reader_shard(paths, **reader_args):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def read():
        data, _ = fn.readers.file(files=paths, name="Reader", **reader_args)
        return data
    pipe = read()
    meta = pipe.reader_meta("Reader")
    pipe.close()
    return meta["shard_id"], meta["number_of_shards"]


def test_outside_a_distributed_job_a_reader_reads_everything(clean_environment):
    assert distributed.place() is None
    assert _reader_shard(["a", "b", "c"]) == (0, 1)


def test_under_torchrun_a_reader_takes_its_ranks_shard(clean_environment):
    clean_environment.setenv("RANK", "1")
    clean_environment.setenv("WORLD_SIZE", "3")
    clean_environment.setenv("LOCAL_RANK", "1")
    assert distributed.place() == distributed.Place(1, 3, 1)
    assert distributed.device_id() == 1
    assert _reader_shard(["a", "b", "c", "d"]) == (1, 3)
    assert _reader_shard(["a", "b", "c", "d"], shard_id=0, num_shards=2) == (0, 2)  # explicit ones win
    with pytest.raises(ValueError, match="give both shard_id and num_shards, or neither"):
        _reader_shard(["a", "b", "c", "d"], shard_id=0)
    clean_environment.setenv("PENSTOCK_AUTO_SHARD", "0")
    assert distributed.place() is None and _reader_shard(["a", "b", "c", "d"]) == (0, 1)


def test_a_single_process_job_is_not_sharded(clean_environment):
    clean_environment.setenv("RANK", "0")
    clean_environment.setenv("WORLD_SIZE", "1")
    assert distributed.place() is None


@pytest.mark.parametrize("count", [40, 43])  # shards of 20 and 20, and of 21 and 22
def test_two_processes_under_torchrun_deliver_the_data_set_exactly_once(tmp_path, count):
    paths = []
    for index in range(count):
        path = tmp_path / f"file_{index:03d}.bin"
        path.write_bytes(bytes([index]))
        paths.append(str(path))
    (tmp_path / "files.txt").write_text("\n".join(paths))
    batch = 4
    environment = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                             os.path.join(TESTS, "distributed_worker.py"), str(tmp_path / "files.txt"), str(batch),
                             str(tmp_path / "rank")], capture_output=True, text=True, timeout=120, env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    reports = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]
    assert [report["PARTIAL"]["shard_id"] for report in reports] == [0, 1]
    assert all(report["PARTIAL"]["num_shards"] == 2 for report in reports)
    for policy in ("PARTIAL", "FILL", "DROP"):
        steps = {report[policy]["steps"] for report in reports}
        assert len(steps) == 1, (policy, steps)  # every rank the same number of steps
        assert steps == {2 * reports[0][policy]["length"]}
        length = reports[0][policy]["length"]
        for epoch in range(2):
            delivered = sorted(label for report in reports for label in report[policy]["delivered"][epoch])
            if policy == "PARTIAL":  # the data set, exactly once
                assert delivered == list(range(count))
            elif policy == "FILL":  # full batches: the data set, and padding from the shards
                assert set(delivered) == set(range(count)) and len(delivered) == 2 * batch * length
            else:  # only full batches, the same number on every rank: no sample twice
                assert len(delivered) == len(set(delivered)) == 2 * batch * length == 2 * batch * (count // 2 // batch)
