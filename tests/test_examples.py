"""The examples run, on small data, and show what they say they show."""
import os
import subprocess
import sys

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def run(name, *args):
    result = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_flowers_multilabel(tmp_path):
    printed = run("flowers_multilabel.py", "--images", "24", "--batch-size", "8", "--work-dir", str(tmp_path))
    assert "images (8, 224, 224, 3)" in printed and "labels (8, 2)" in printed and "images/s" in printed


def test_imagenet_training_loss_falls(tmp_path):
    printed = run("imagenet_training.py", "--steps", "40", "--images", "96", "--size", "40", "--batch-size", "24",
                  "--work-dir", str(tmp_path))
    summary = printed.strip().splitlines()[-1]
    first, last = (float(value) for value in summary.split("loss ")[1].split(" over")[0].split(" -> "))
    assert last < first and "validation accuracy" in summary and "inference on" in summary


def test_streaming_rotate(tmp_path):
    chart = tmp_path / "chart.png"
    printed = run("streaming_rotate.py", "--samples", "64", "--batch-size", "16", "--out", str(chart))
    assert "| penstock, CPU |" in printed and "(16, 200, 200, 3)" in printed and chart.exists()
