"""The profiling script runs on a small COCO-format set and prints its table."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "benchmarks"))
from make_coco import make_coco  # noqa: E402


def test_stage_profile_of_the_ssd_pipeline(tmp_path):
    make_coco(str(tmp_path), 12, seed=1, sizes=(64, 96))
    result = subprocess.run([sys.executable, os.path.join(HERE, "..", "benchmarks", "stage_profile.py"), "ssd",
                             "--data", str(tmp_path), "--device", "cpu", "--batches", "2", "--warmup", "1",
                             "--batch-size", "4", "--threads", "2"], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ssd on cpu:" in result.stdout and "ms/batch" in result.stdout
