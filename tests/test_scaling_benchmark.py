"""benchmarks/scaling.py on CPU pipelines (gloo): one and two ranks under torchrun, the ranks taking
the same number of steps and delivering the data set exactly once, the CPU threads divided among
the ranks by default."""
import json
import os
import subprocess
import sys

from helpers_data import make_class_tree

HERE = os.path.dirname(os.path.abspath(__file__))


def _run_scaling(tmp_path, *arguments) -> tuple:
    """scaling.py on CPU pipelines over tmp_path/data: (the finished process, its JSON rows)."""
    result = tmp_path / "scaling.json"
    completed = subprocess.run(
        [sys.executable, os.path.join(HERE, "..", "benchmarks", "scaling.py"), "--data", str(tmp_path / "data"),
         "--device", "cpu", "--runners", "penstock", "--crop", "32", "--json", str(result), *arguments],
        capture_output=True, text=True, timeout=240, cwd=str(tmp_path))
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed, json.loads(result.read_text())


def test_one_and_two_ranks_under_torchrun(tmp_path):
    data = tmp_path / "data"
    make_class_tree(str(data), {"a": 13, "b": 10}, height=40, width=48)
    completed, rows = _run_scaling(tmp_path, "--gpus", "1,2", "--batch-size", "4", "--steps", "3", "--check")
    assert [(row["gpus"], row["status"]) for row in rows] == [(1, "ok"), (2, "ok")]
    one, two = rows
    assert one["steps_per_epoch"] == [6] and two["steps_per_epoch"] == [3, 3]  # 23 files: shards of 12 and 11
    assert one["exactly_once"] == two["exactly_once"] == "yes"
    cores = len(os.sched_getaffinity(0))
    assert two["threads_per_rank"] == [max(1, cores // 2)] * 2 and one["threads_per_rank"] == [cores]
    assert two["efficiency"] > 0 and "| penstock | 2 |" in completed.stdout


def test_ranks_stepping_their_own_models(tmp_path):
    """--loop local-step: the same step without DistributedDataParallel (no all-reduce between the ranks)."""
    data = tmp_path / "data"
    make_class_tree(str(data), {"a": 5, "b": 4}, height=40, width=48)
    _, [row] = _run_scaling(tmp_path, "--gpus", "2", "--batch-size", "2", "--steps", "2", "--loop", "local-step")
    assert row["status"] == "ok" and row["steps_per_epoch"] == [3, 3] and row["images_per_second"] > 0
