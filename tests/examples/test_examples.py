"""The examples run, on small data, and show what they say they show."""
import os
import subprocess
import sys

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


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


def test_ssd_training_loss_falls(tmp_path):
    printed = run("ssd_training.py", "--images", "32", "--steps", "60", "--size", "96", "--batch-size", "8",
                  "--threads", "2", "--work-dir", str(tmp_path))
    summary = printed.strip().splitlines()[-1]
    first, last = (float(value) for value in summary.split("loss ")[1].split(" over")[0].split(" -> "))
    assert last < first and "anchors" in summary


def test_ssd_training_feeds_torchvisions_ssdlite_through_tv_tensors(tmp_path):
    import pytest
    pytest.importorskip("torchvision")
    printed = run("ssd_training.py", "--images", "32", "--steps", "40", "--size", "128", "--batch-size", "8",
                  "--threads", "2", "--model", "torchvision", "--work-dir", str(tmp_path))
    summary = printed.strip().splitlines()[-1]
    first, last = (float(value) for value in summary.split("loss ")[1].split(" over")[0].split(" -> "))
    assert last < first and "SSDlite" in summary


def test_streaming_rotate(tmp_path):
    chart = tmp_path / "chart.png"
    printed = run("streaming_rotate.py", "--samples", "64", "--batch-size", "16", "--out", str(chart))
    assert "| penstock, CPU |" in printed and "(16, 200, 200, 3)" in printed and chart.exists()


def test_ddp_training_under_torchrun(tmp_path):
    from helpers_data import make_class_tree
    make_class_tree(str(tmp_path / "data"), {"a": 11, "b": 10}, height=40, width=48)
    environment = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    environment["CUDA_VISIBLE_DEVICES"] = ""  # the CPU path (gloo), on any machine
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                             os.path.join(EXAMPLES, "ddp_training.py"), "--data", str(tmp_path / "data"),
                             "--batch-size", "4", "--size", "32", "--epochs", "2"],
                            capture_output=True, text=True, timeout=300, env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("epoch")]
    # 21 files: shards of 10 and 11, so every rank takes 2 full batches (DROP) each epoch
    assert lines == [line for line in lines if "2 steps on each of 2 processes" in line] and len(lines) == 2, \
        (result.stdout[-2000:], result.stderr[-2000:])


def test_ssd_crop_keeps_boxes_on_their_objects():
    """SSD's random_bbox_crop -> decoders.image_slice (the example's steps): after the crop, each box (ltrb,
    relative to the window) still frames its bright rectangle in the decoded window."""
    import cv2
    import numpy as np

    from penstock import fn, pipeline_def

    height, width = 120, 200
    image = np.full((height, width, 3), 20, np.uint8)
    left, top, right, bottom = 130, 30, 170, 90  # the object, in pixels
    image[top:bottom, left:right] = 250
    data = np.frombuffer(cv2.imencode(".png", image)[1].tobytes(), np.uint8)
    box = np.array([[left / width, top / height, right / width, bottom / height]], np.float32)

    @pipeline_def(batch_size=8, num_threads=1, device_id=None, seed=11)
    def crops():
        encoded = fn.external_source(source=lambda: [data] * 8, batch=True)
        boxes = fn.external_source(source=lambda: [box] * 8, batch=True)
        anchor, shape, cropped, _ = fn.random_bbox_crop(
            boxes, fn.external_source(source=lambda: [np.array([1], np.int32)] * 8, batch=True),
            aspect_ratio=[0.5, 2.0], thresholds=[0.1, 0.3, 0.5], scaling=[0.3, 1.0], bbox_layout="xyXY",
            allow_no_crop=False, num_attempts=50)
        return fn.decoders.image_slice(encoded, anchor, shape), cropped

    pipe = crops()
    windows, boxes = pipe.run()
    pipe.close()
    for index in range(8):
        window, [[x0, y0, x1, y1]] = np.array(windows.at(index)), np.array(boxes.at(index))
        rows, columns = window.shape[:2]
        bright = window[..., 0] > 128
        found_rows, found_columns = np.nonzero(bright.any(1))[0], np.nonzero(bright.any(0))[0]
        assert abs(found_rows[0] - y0 * rows) <= 1.5 and abs(found_rows[-1] + 1 - y1 * rows) <= 1.5
        assert abs(found_columns[0] - x0 * columns) <= 1.5 and abs(found_columns[-1] + 1 - x1 * columns) <= 1.5


def test_speech_features_loss_falls(tmp_path):
    printed = run("speech_features.py", "--clips", "24", "--steps", "30", "--batch-size", "8", "--work-dir",
                  str(tmp_path))
    assert "(8, 64," in printed
    summary = printed.strip().splitlines()[-1]
    first, last = (float(value) for value in summary.split("loss ")[1].split(" over")[0].split(" -> "))
    assert last < first


def test_action_recognition_loss_falls(tmp_path):
    printed = run("action_recognition.py", "--clips", "12", "--steps", "30", "--work-dir", str(tmp_path))
    assert "clips (4, 8, 3, 112, 112)" in printed
    summary = printed.strip().splitlines()[-1]
    first, last = (float(value) for value in summary.split("loss ")[1].split(" over")[0].split(" -> "))
    assert last < first
