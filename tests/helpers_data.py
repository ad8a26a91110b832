"""Helpers of the pipeline, executor, reader, external source and iterator tests: tiny data sets
written into a temporary folder (small seeded-random JPEGs, so tests stay fast and the bytes are the
same on every run), a look at penstock's threads, and a deadline that turns a hang into a failure.
"""
from __future__ import annotations

import contextlib
import gc
import os
import signal
import threading
import time

import numpy as np
import pytest
from PIL import Image


def write_jpeg(path: str, height: int = 24, width: int = 32, seed: int = 0, quality: int = 90) -> str:
    """Writes a seeded-random RGB JPEG of (height, width) at ``path``; returns the path."""
    rng = np.random.default_rng(seed)
    # smooth noise compresses to a few hundred bytes and still differs between seeds
    coarse = rng.integers(0, 256, (max(1, height // 4), max(1, width // 4), 3), dtype=np.uint8)
    image = Image.fromarray(coarse).resize((width, height), Image.BILINEAR)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    image.save(path, format="JPEG", quality=quality)
    return path


def make_class_tree(root: str, counts: dict[str, int], height: int = 24, width: int = 32) -> dict[str, list[str]]:
    """A folder-per-class tree: ``counts`` maps class folder name -> number of JPEGs in it.

    Returns class name -> the written paths (sorted). Each image has its own seed.
    """
    written: dict[str, list[str]] = {}
    seed = 0
    for class_name, count in counts.items():
        paths = []
        for index in range(count):
            paths.append(write_jpeg(os.path.join(root, class_name, f"img_{index:03d}.jpg"), height, width, seed))
            seed += 1
        written[class_name] = sorted(paths)
    return written


def make_flat_files(root: str, count: int, height: int = 24, width: int = 32, sizes=None) -> list[str]:
    """``count`` JPEGs directly in ``root``; returns their names relative to root, in order.

    ``sizes``, if given, is a list of (height, width) cycled over the files (for ragged batches).
    """
    names = []
    for index in range(count):
        h, w = sizes[index % len(sizes)] if sizes else (height, width)
        name = f"sample_{index:03d}.jpg"
        write_jpeg(os.path.join(root, name), h, w, seed=1000 + index)
        names.append(name)
    return names


def penstock_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("penstock-")]


def assert_no_penstock_threads(timeout: float = 3.0, ignore=()) -> None:
    """Fails when a thread named penstock-* (other than those in ``ignore``) is still alive after
    ``timeout`` seconds of joining. Pipelines that earlier tests let go of but that wait for the
    cyclic garbage collector (kept by a traceback's frames) are collected first: their __del__
    closes them."""
    gc.collect()
    until = time.monotonic() + timeout
    for thread in penstock_threads():
        if thread not in ignore:
            thread.join(timeout=max(0.0, until - time.monotonic()))
    alive = [thread.name for thread in penstock_threads() if thread not in ignore]
    assert not alive, f"threads left alive: {alive}"


@contextlib.contextmanager
def deadline(seconds: float = 10.0):
    """Fails the test with TimeoutError instead of hanging when the block takes longer than ``seconds``
    (SIGALRM, so the block runs in the test's own thread, as a user's loop would). Nests: an outer
    deadline keeps counting."""
    def expire(signum, frame):
        raise TimeoutError(f"did not finish within {seconds} s (a hang)")

    previous_handler = signal.signal(signal.SIGALRM, expire)
    outer_left, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if outer_left:
            signal.setitimer(signal.ITIMER_REAL, max(outer_left - (time.monotonic() - start), 0.001))


@pytest.fixture(autouse=True)
def no_hang():
    """Autouse in the modules that import it: a test that runs 30 s fails instead of hanging."""
    with deadline(30):
        yield


def read_one_epoch(make_outputs, batch_size: int = 2, seed: int = 3) -> list[tuple]:
    """One epoch of a reader's samples (padding left out, in the order they came), each a tuple of
    numpy arrays, one per output: ``make_outputs()`` calls the reader with name="Reader" inside the
    pipeline's definition and returns its outputs as a tuple."""
    from penstock import pipeline_def

    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=seed)
    def pipe():
        return make_outputs()

    built = pipe()
    built.build()
    size = built.reader_meta("Reader")["shard_size"]
    samples = []
    try:
        while len(samples) < size:
            batches = built.run()
            samples.extend(tuple(np.array(batch[i]) for batch in batches) for i in range(len(batches[0])))
    finally:
        built.close()
    return samples[:size]
