"""The benchmark scripts: the profiling script runs on a small COCO-format set and prints its table; the
large-photograph recipe makes images of the size asked for, read as a folder-per-class set."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "benchmarks"))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from make_coco import make_coco  # noqa: E402


def test_stage_profile_of_the_ssd_pipeline(tmp_path):
    make_coco(str(tmp_path), 12, seed=1, sizes=(64, 96))
    result = subprocess.run([sys.executable, os.path.join(HERE, "..", "benchmarks", "stage_profile.py"), "ssd",
                             "--data", str(tmp_path), "--device", "cpu", "--batches", "2", "--warmup", "1",
                             "--batch-size", "4", "--threads", "2"], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ssd on cpu:" in result.stdout and "ms/batch" in result.stdout


def test_large_photographs_have_their_size_and_read_as_a_class_tree(tmp_path):
    from make_photos import make_photo

    from penstock import fn, pipeline_def
    sizes = [make_photo(index, str(tmp_path), 2, 0.05, seed=3) for index in range(4)]
    assert all(size > 0 for size in sizes)

    @pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=str(tmp_path))
        return fn.decoders.image(jpegs), labels
    built = pipe()
    built.build()
    images, labels = built.run()
    built.close()
    for index in range(4):
        height, width, channels = images.at(index).shape
        assert channels == 3 and abs(height * width - 0.05e6) < 0.002e6  # the megapixels asked for
        assert 1.0 <= max(height, width) / min(height, width) <= 16 / 9 + 0.01  # 3:4 to 16:9, either way
    assert sorted(int(label) for label in labels.as_array().ravel()) == [0, 0, 1, 1]


def test_side_by_side_measures_each_case_per_core_count(tmp_path):
    from helpers_data import make_class_tree
    make_class_tree(str(tmp_path), {"a": 8, "b": 8}, height=40, width=48)
    result = subprocess.run([sys.executable, os.path.join(HERE, "..", "benchmarks", "side_by_side.py"), "--data",
                             str(tmp_path), "--cases", "cpu-train", "--runners", "penstock", "--rounds", "1",
                             "--seconds", "0.3", "--warmup", "1", "--batch-size", "4", "--cores", "1"],
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| cpu-train")]
    assert len(rows) == 1 and rows[0].split("|")[3].strip() == "1" and "failed" not in rows[0]


@pytest.mark.parametrize("pipeline", ["train", "train-full"])
def test_the_dispatchers_cost_per_sample_is_measured(tmp_path, pipeline):
    from helpers_data import make_class_tree
    make_class_tree(str(tmp_path), {"a": 8, "b": 8}, height=40, width=48)
    result = subprocess.run([sys.executable, os.path.join(HERE, "..", "benchmarks", "dispatcher_cost.py"), "--data",
                             str(tmp_path), "--pipeline", pipeline, "--batches", "3", "--batch-size", "8"],
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "us per sample" in result.stdout and "ms per batch" in result.stdout


def test_the_dispatchers_cost_per_sample_is_measured_for_the_ssd_pipeline(tmp_path):
    scripts = os.path.join(HERE, "..", "benchmarks")
    made = subprocess.run([sys.executable, os.path.join(scripts, "make_coco.py"), str(tmp_path), "12", "--sizes", "64",
                           "96"], capture_output=True, text=True, timeout=240)
    assert made.returncode == 0, made.stderr[-3000:]
    result = subprocess.run([sys.executable, os.path.join(scripts, "dispatcher_cost.py"), "--data", str(tmp_path),
                             "--pipeline", "ssd", "--batches", "2", "--batch-size", "4"], capture_output=True,
                            text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "us per sample" in result.stdout


def test_torchvision_runs_the_ssd_pipeline_as_its_detection_references_do(tmp_path):
    """The torchvision peer of the SSD cases: its images, and its encoding of each image's boxes
    against the example's anchors, which decodes back to boxes inside the image."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    pytest.importorskip("pycocotools")
    from side_by_side import torchvision_ssd_batches
    from ssd_training import STDS, ssd_anchors
    from torchvision.models.detection import _utils as detection_utils
    make_coco(str(tmp_path), 12, seed=1, sizes=(64, 96))
    batches = torchvision_ssd_batches("cpu", str(tmp_path), 4, 1)
    images, offsets, classes = next(batches)
    batches.close()
    anchors = torch.from_numpy(ssd_anchors(300) * 300)
    assert images.shape == (4, 3, 300, 300) and images.dtype == torch.float32
    assert offsets.shape == (4, len(anchors), 4) and classes.shape == (4, len(anchors))
    positive = classes > 0
    assert positive.any()
    coder = detection_utils.BoxCoder(weights=tuple(1.0 / std for std in STDS))
    boxes = coder.decode_single(offsets[positive], anchors.expand(4, -1, -1)[positive])
    assert (boxes[:, 2:] > boxes[:, :2]).all() and (boxes >= -1e-3).all() and (boxes <= 300 + 1e-3).all()
