"""``penstock demo``: the ResNet-50 training pipeline for one epoch over an ImageNet-like folder made
from the photographs bundled with penstock (or over the user's own folder), then a PNG grid of the
augmented samples."""
from __future__ import annotations

import os
import sys
import time

import cv2
import numpy as np

from penstock.data import sample_photo_paths
from penstock.recipes import IMAGENET_MEAN, IMAGENET_STD, imagenet_train


def make_sample_dataset(out_dir: str, count: int = 512, classes: int = 8, seed: int = 0) -> str:
    """Writes ``count`` JPEGs in ``classes`` class folders, cut from the bundled photographs at random
    windows, sizes (short side 300-500 px), aspect ratios and JPEG qualities. Returns out_dir."""
    marker = os.path.join(out_dir, f".complete-{count}-{classes}-{seed}")
    if os.path.exists(marker):
        return out_dir
    rng = np.random.default_rng(seed)
    photos = [cv2.imread(path, cv2.IMREAD_COLOR) for path in sample_photo_paths()]
    for index in range(count):
        photo = photos[index % len(photos)]
        height, width = photo.shape[:2]
        fraction = rng.uniform(0.5, 1.0)
        crop_height, crop_width = int(height * fraction), int(width * rng.uniform(0.5, 1.0))
        top = int(rng.integers(0, height - crop_height + 1))
        left = int(rng.integers(0, width - crop_width + 1))
        window = photo[top:top + crop_height, left:left + crop_width]
        short_side = int(rng.integers(300, 501))
        scale = short_side / min(crop_height, crop_width)
        image = cv2.resize(window, (int(crop_width * scale), int(crop_height * scale)), interpolation=cv2.INTER_CUBIC)
        if rng.random() < 0.5:
            image = image[:, ::-1]
        folder = os.path.join(out_dir, f"class_{index % classes:02d}")
        os.makedirs(folder, exist_ok=True)
        cv2.imwrite(os.path.join(folder, f"img_{index:05d}.jpg"), np.ascontiguousarray(image),
                    [cv2.IMWRITE_JPEG_QUALITY, int(rng.integers(85, 96))])
    open(marker, "w").close()
    return out_dir


def sample_grid(batch: np.ndarray, columns: int = 8, count: int = 32) -> np.ndarray:
    """Normalized CHW samples back to an RGB uint8 grid image (HWC)."""
    samples = batch[:count].astype(np.float32)
    samples = samples * np.asarray(IMAGENET_STD, np.float32)[:, None, None] + np.asarray(IMAGENET_MEAN, np.float32)[:, None, None]
    samples = np.clip(samples, 0, 255).astype(np.uint8).transpose(0, 2, 3, 1)
    rows = -(-len(samples) // columns)
    height, width = samples.shape[1:3]
    grid = np.full((rows * (height + 4) + 4, columns * (width + 4) + 4, 3), 255, np.uint8)
    for index, sample in enumerate(samples):
        row, column = divmod(index, columns)
        grid[4 + row * (height + 4):4 + row * (height + 4) + height,
             4 + column * (width + 4):4 + column * (width + 4) + width] = sample
    return grid


def progress(done: int, total: int, started: float, stream=None) -> None:
    stream = stream or sys.stderr  # the current one, looked up at each call
    width = 30
    filled = int(width * done / max(total, 1))
    elapsed = time.perf_counter() - started
    rate = done / elapsed if elapsed > 0 else 0.0
    stream.write(f"\r  [{'#' * filled}{'.' * (width - filled)}] {done}/{total} images  {rate:,.0f} images/s")
    stream.flush()


def default_device() -> str:
    """'gpu' where the GPU decoders and operators can run here, else 'cpu'."""
    from penstock import registry
    return "gpu" if "mixed" in registry.available_devices("decoders.image_random_crop") else "cpu"


def check_class_folder(data: str) -> None:
    """Raises, saying what a folder-per-class data set looks like, when ``data`` is not one."""
    if not os.path.isdir(data):
        raise FileNotFoundError(f"--data '{data}' is not a folder; give a folder with one sub-folder of images "
                                "per class (data/cat/1.jpg, data/dog/2.jpg, ...)")
    entries = list(os.scandir(data))
    if not any(entry.is_dir() for entry in entries):
        held = f"it holds {len(entries)} files directly" if entries else "it is empty"
        raise ValueError(f"--data '{data}' has no class sub-folders ({held}); put the images of each class in a "
                         "sub-folder of its own (data/cat/1.jpg, data/dog/2.jpg, ...)")


def run_demo(data: str | None, batch_size: int, num_threads: int, out_path: str, work_dir: str,
             images: int, device: str | None = None) -> dict:
    device = device or default_device()
    if data is None:
        data = make_sample_dataset(os.path.join(work_dir, f"demo-data-{images}"), count=images)
        print(f"made an ImageNet-like folder of {images} JPEGs from the bundled photographs in {data}")
    check_class_folder(data)
    pipe = imagenet_train(data, device=device, batch_size=batch_size, num_threads=num_threads,
                          device_id=None if device == "cpu" else 0, seed=42)
    try:
        return _run_epoch(pipe, data, device, batch_size, num_threads, out_path)
    finally:
        pipe.close()


def _run_epoch(pipe, data, device, batch_size, num_threads, out_path) -> dict:
    pipe.build()
    total = pipe.epoch_size("Reader")
    print(f"ResNet-50 training pipeline on {device.upper()}: file reader -> random-crop decode -> resize 224 "
          f"-> flip + normalize (FP16, CHW); batch {batch_size}, {num_threads} threads, {total} images")
    from penstock.plugin.pytorch import ClassificationIterator, LastBatchPolicy
    iterator = ClassificationIterator(pipe, reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL)
    started = time.perf_counter()
    first = next(iterator)[0]["data"]  # the first batch includes start-up (threads, file list)
    first_done = time.perf_counter()
    grid_batch = first.cpu().numpy()
    seen = 0
    progress(len(first), total, started)
    for step in iterator:
        seen += len(step[0]["data"])
        progress(len(first) + seen, total, started)
    finished = time.perf_counter()
    sys.stderr.write("\n")
    grid = sample_grid(grid_batch)
    if not cv2.imwrite(out_path, cv2.cvtColor(grid, cv2.COLOR_RGB2BGR)):
        raise OSError(f"could not write the grid to '{out_path}'")
    if seen:
        rate = seen / (finished - first_done)
        print(f"{rate:,.0f} images/s over the {seen} images after the first batch ({finished - first_done:.2f} s; "
              f"the first batch of {len(first)}, start-up included, took {first_done - started:.2f} s)")
    else:  # the whole folder fits in one batch: its time includes starting the pipeline
        rate = len(first) / (finished - started)
        print(f"{rate:,.0f} images/s over all {len(first)} images, one batch, start-up included "
              f"({finished - started:.2f} s); a folder of several batches measures the steady rate")
    engines = [", ".join(names) for names in pipe.engines().values() if names]
    print(f"decoded by: {engines[0] if engines else 'libjpeg-turbo on CPU threads'}")
    print(f"wrote {min(len(grid_batch), 32)} augmented samples to {out_path}")
    return {"images_per_second": rate, "images": len(first) + seen, "grid": out_path}
