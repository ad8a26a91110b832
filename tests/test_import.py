"""Importing penstock, and running and closing a pipeline, leave process-wide settings of other
libraries as they were; ``python -m penstock`` is the ``penstock`` command."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = r"""
import json, sys
import cv2
import numpy
from threadpoolctl import threadpool_info
def settings():
    return {"opencv_threads": cv2.getNumThreads(), "opencv_log_level": cv2.utils.logging.getLogLevel(),
            "blas_threads": sorted(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"),
            "torch_imported": "torch" in sys.modules}
before = settings()
import numpy as np
import penstock
from penstock import fn, pipeline_def
after_import = settings()

@pipeline_def(batch_size=2, num_threads=2, device_id=None)
def pipe():
    return fn.external_source(source=lambda: [np.zeros((4, 4, 3), np.uint8)] * 2, batch=True)
p = pipe()
p.run()
while_running = settings()
p.close()
print(json.dumps({"before": before, "after_import": after_import, "while_running": while_running,
                  "after_close": settings()}))
"""


def test_import_changes_no_setting_of_another_library():
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                [ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])})
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["after_import"] == report["before"], report
    assert not report["after_import"]["torch_imported"], "import penstock should not import torch"
    assert report["while_running"]["opencv_threads"] == 1  # penstock's own calls: one sample per worker
    assert set(report["while_running"]["blas_threads"]) <= {1}
    assert report["after_close"] == {**report["before"], "torch_imported": report["after_close"]["torch_imported"]}


def test_python_m_penstock_is_the_penstock_command():
    result = subprocess.run([sys.executable, "-m", "penstock", "docs", "--ignored"], capture_output=True, text=True,
                            timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("| argument | operators | in penstock |")
