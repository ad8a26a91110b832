"""The penstock command: demo (the main job), bench, info and docs, on small sizes."""
import os

import cv2

from penstock.cli import main


def test_demo_runs_an_epoch_and_writes_the_grid(tmp_path, capsys):
    out = tmp_path / "grid.png"
    assert main(["demo", "--images", "24", "--batch-size", "8", "--threads", "2", "--device", "cpu",
                 "--out", str(out), "--work-dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "images/s" in printed and "decoded by" in printed
    grid = cv2.imread(str(out))
    assert grid is not None and grid.shape[0] > 224 and grid.shape[1] > 224
    classes = os.listdir(tmp_path / "demo-data-24")
    assert len([c for c in classes if c.startswith("class_")]) == 8


def test_bench_prints_a_table(tmp_path, capsys):
    assert main(["bench", "--device", "cpu", "--images", "16", "--batch-size", "4", "--threads", "2",
                 "--batches", "1", "--peers", "none", "--pipelines", "val", "--work-dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "| val | penstock (cpu) |" in printed and "worker processes" in printed


def test_bench_on_the_gpu_prints_the_gpu_table(tmp_path, capsys):
    import pytest
    from conftest import CUDA
    if not CUDA:
        pytest.skip("needs a CUDA GPU (the machine without one is checked below)")
    assert main(["bench", "--device", "gpu", "--images", "16", "--batch-size", "4", "--threads", "2",
                 "--batches", "1", "--peers", "none", "--pipelines", "val", "--work-dir", str(tmp_path)]) == 0
    assert "| val | penstock (gpu) |" in capsys.readouterr().out


def test_info_and_docs(capsys):
    assert main(["info"]) == 0
    assert "readers.file" in capsys.readouterr().out
    assert main(["docs"]) == 0
    assert "## fn.resize / ops.Resize" in capsys.readouterr().out


def test_importing_penstock_leaves_the_gpu_checks_for_later():
    """Whether the GPU operators can run is checked when a pipeline asks for them: importing penstock
    does not import PyTorch (seconds) or load CUDA libraries."""
    import subprocess
    import sys
    code = ("import sys, penstock; from penstock import fn, ops, registry; "
            "assert 'torch' not in sys.modules, 'torch imported'; "
            "assert registry.devices('resize') == ['cpu', 'gpu']; print('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={k: v for k, v in os.environ.items() if k != "PENSTOCK_GPU_ON_CPU"})
    assert result.stdout.strip() == "ok", result.stderr[-2000:]


def test_bench_on_the_gpu_says_why_not_where_there_is_none(tmp_path, capsys):
    import pytest
    from conftest import CUDA
    if CUDA:
        pytest.skip("checks a machine without a GPU")
    assert main(["bench", "--device", "gpu", "--images", "8", "--work-dir", str(tmp_path)]) == 2
    assert "decoders.image_random_crop: device 'mixed' is not available here" in capsys.readouterr().err
