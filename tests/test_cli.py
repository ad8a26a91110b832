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
    out = capsys.readouterr().out
    assert "readers.file" in out and "hardware JPEG decode lane: " in out
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


def _one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def test_demo_answers_a_wrong_data_folder_in_one_line(tmp_path, capsys):
    common = ["--device", "cpu", "--batch-size", "4", "--threads", "1", "--out", str(tmp_path / "g.png")]
    missing = _one_line_error(capsys, ["demo", "--data", str(tmp_path / "nowhere"), *common])
    assert missing.startswith("penstock demo: --data") and "is not a folder" in missing
    (tmp_path / "empty").mkdir()
    assert "no class sub-folders (it is empty)" in _one_line_error(capsys, ["demo", "--data", str(tmp_path / "empty"),
                                                                          *common])
    flat = tmp_path / "flat"
    flat.mkdir()
    cv2.imwrite(str(flat / "a.jpg"), cv2.UMat(8, 8, cv2.CV_8UC3).get())
    message = _one_line_error(capsys, ["demo", "--data", str(flat), *common])
    assert "no class sub-folders (it holds 1 files directly)" in message and "sub-folder of its own" in message


def test_cli_rejects_numbers_that_make_no_sense(capsys):
    import pytest
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--batch-size", "0"])
    assert exit_info.value.code == 2
    assert "expected a positive whole number, got 0" in capsys.readouterr().err


def test_demo_on_a_folder_smaller_than_a_batch_reports_a_real_figure(tmp_path, capsys):
    from helpers_data import make_class_tree
    make_class_tree(str(tmp_path / "small"), {"a": 2, "b": 1}, height=64, width=80)
    assert main(["demo", "--data", str(tmp_path / "small"), "--batch-size", "8", "--threads", "1", "--device", "cpu",
                 "--out", str(tmp_path / "grid.png")]) == 0
    printed = capsys.readouterr().out
    assert "over all 3 images, one batch, start-up included" in printed and " 0 images/s" not in printed


def test_the_sample_data_lives_in_the_users_cache_not_in_the_temporary_folder(monkeypatch, tmp_path):
    from penstock.paths import default_work_dir
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_work_dir() == str(tmp_path / "penstock")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_work_dir() == os.path.join(os.path.expanduser("~"), ".cache", "penstock")


def test_demo_refuses_an_output_it_cannot_write_before_any_work(tmp_path, capsys):
    common = ["demo", "--images", "8", "--device", "cpu", "--work-dir", str(tmp_path / "work")]
    assert "the folder" in _one_line_error(capsys, [*common, "--out", str(tmp_path / "missing" / "x.png")])
    assert "end it in .png or .jpg" in _one_line_error(capsys, [*common, "--out", str(tmp_path / "grid")])
    assert "is a folder" in _one_line_error(capsys, [*common, "--out", str(tmp_path)])
    assert not (tmp_path / "work").exists()  # refused before the sample folder was made


def test_bench_refuses_unknown_names_in_one_line_before_any_work(tmp_path, capsys):
    common = ["bench", "--device", "cpu", "--images", "8", "--work-dir", str(tmp_path / "work")]
    assert "unknown name 'torchvison' (did you mean 'torchvision'?)" in _one_line_error(
        capsys, [*common, "--peers", "torchvison"])
    assert "--pipelines: unknown name 'foo'" in _one_line_error(capsys, [*common, "--pipelines", "foo"])
    assert "--peers dali: DALI's pipelines here run on the GPU" in _one_line_error(capsys, [*common, "--peers", "dali"])
    assert not (tmp_path / "work").exists()


def test_demo_on_the_gpu_where_there_is_none_says_so_before_any_work(tmp_path, capsys):
    import pytest
    from conftest import CUDA
    if CUDA:
        pytest.skip("checks a machine without a GPU")
    message = _one_line_error(capsys, ["demo", "--device", "gpu", "--images", "8", "--work-dir", str(tmp_path / "w"),
                                       "--out", str(tmp_path / "g.png")])
    assert "device 'mixed' is not available here" in message
    assert not (tmp_path / "w").exists()
