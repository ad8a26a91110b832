"""The executor: per-sample work spread over worker threads, errors raised in the caller's thread
naming the file, and no thread left behind however a pipeline ends."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import penstock
from helpers_data import assert_no_penstock_threads, deadline, make_flat_files, penstock_threads
from helpers_data import no_hang  # noqa: F401  (autouse: a test that hangs fails instead)
from penstock import fn, pipeline_def
from penstock.operators.readers.external import ExternalSource
from penstock.plugin.pytorch import GenericIterator

SEED = 1234


@pytest.fixture(autouse=True)
def no_threads_left():
    """Every test here leaves no penstock thread behind (once its pipelines are unreachable)."""
    gc.collect()  # pipelines earlier tests let go of, kept only by a cycle, close as they are collected
    before = set(penstock_threads())  # a leak of an earlier test is that test's failure, not this one's
    yield
    gc.collect()
    assert_no_penstock_threads(ignore=before)


@pytest.fixture(scope="module")
def image_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("images"))
    return root, make_flat_files(root, 6, height=16, width=16)


def decode_pipeline(root, files, batch_size=3, num_threads=2, **kwargs):
    @pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=None, seed=SEED, **kwargs)
    def pipeline():
        jpegs, labels = fn.readers.file(file_root=root, files=files, name="Reader")
        return fn.resize(fn.decoders.image(jpegs), resize_x=8, resize_y=8), labels

    return pipeline()


def counting_pipeline(source, batch_size=4, num_threads=2, **kwargs):
    @pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=None, seed=SEED, **kwargs)
    def pipeline():
        return fn.external_source(source=source)

    return pipeline()


def numbers(batch_size=4):
    return lambda iteration: [np.array([iteration * batch_size + i]) for i in range(batch_size)]


# ---- threads ---------------------------------------------------------------------------------------------
def test_samples_of_a_batch_run_on_several_worker_threads_at_once(monkeypatch):
    """Two samples of one batch meet at a barrier: that only passes if two workers run at the same
    time (the barrier's wait releases the GIL, as decoding and resizing do)."""
    meeting = threading.Barrier(2, timeout=5)
    workers = []
    original_load = ExternalSource.load

    def load(self, item, sample):
        workers.append(threading.current_thread().name)
        if sample.index < 2 and len(workers) <= 2:
            meeting.wait()  # raises BrokenBarrierError if the other sample is not running alongside
        return original_load(self, item, sample)

    monkeypatch.setattr(ExternalSource, "load", load)
    producers = []

    def source(iteration):
        producers.append(threading.current_thread().name)
        return [np.array([iteration, i]) for i in range(4)]

    pipe = counting_pipeline(source, num_threads=2)
    with deadline(10):
        pipe.run()
        running = sorted(thread.name for thread in penstock_threads())
    assert running == ["penstock-producer", "penstock-worker-0", "penstock-worker-1"]
    assert len(set(workers[:2])) == 2  # the two samples that met were on two threads
    assert all(name.startswith("penstock-worker-") for name in workers)
    assert set(producers) == {"penstock-producer"}  # sources run in order on the producer thread
    pipe.close()


def test_num_threads_sets_the_number_of_workers():
    pipe = counting_pipeline(numbers(), num_threads=3)
    assert not penstock_threads()  # nothing starts before the first run
    pipe.run()
    assert sorted(thread.name for thread in penstock_threads()) == [
        "penstock-producer", "penstock-worker-0", "penstock-worker-1", "penstock-worker-2"]
    pipe.close()


def test_batches_come_in_order_whatever_the_threads():
    pipe = counting_pipeline(numbers(), num_threads=4, prefetch_queue_depth=3)
    for iteration in range(20):
        (batch,) = pipe.run()
        assert batch.as_array().ravel().tolist() == list(range(iteration * 4, iteration * 4 + 4))
    pipe.close()


# ---- shutdown ------------------------------------------------------------------------------------------
def test_close_stops_every_thread_and_later_runs_fail_clearly():
    pipe = counting_pipeline(numbers())
    pipe.run()
    assert penstock_threads()
    pipe.close()
    assert_no_penstock_threads(timeout=0.5)
    with pytest.raises(RuntimeError, match="shut down"):
        pipe.run()
    pipe.close()  # a second close is harmless


def test_forgotten_pipeline_stops_its_threads_when_collected():
    pipe = counting_pipeline(numbers())
    pipe.run()
    iterator = GenericIterator(counting_pipeline(numbers()), ["n"], size=40)
    next(iterator)
    assert len(penstock_threads()) == 6
    del pipe, iterator
    gc.collect()
    assert_no_penstock_threads(timeout=2)


def test_pipeline_left_open_stops_its_threads_at_exit(image_root):
    """At interpreter exit the threads are stopped while Python is whole (an atexit handler registered
    before penstock's runs after it and sees none left)."""
    root, names = image_root
    script = textwrap.dedent(f"""
        import atexit, threading
        atexit.register(lambda: print("left:", [t.name for t in threading.enumerate()
                                                if t.name.startswith("penstock-")]))
        from penstock import fn, pipeline_def

        @pipeline_def(batch_size=2, num_threads=2, device_id=None)
        def pipeline():
            jpegs, labels = fn.readers.file(file_root={root!r}, files={names!r})
            return fn.decoders.image(jpegs), labels

        pipe = pipeline()
        pipe.run()
        print("ran")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONWARNINGS": "error"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ran", "left:", "[]"]


def test_error_in_a_worker_stops_every_thread(image_root, tmp_path):
    root, names = image_root
    (tmp_path / "bad.jpg").write_bytes(b"not an image at all")
    pipe = decode_pipeline(root, [os.path.join(root, names[0]), str(tmp_path / "bad.jpg")], batch_size=2)
    with deadline(10), pytest.raises(penstock.PipelineError):
        pipe.run()
    assert_no_penstock_threads(timeout=0.5)  # without close()


def test_keyboard_interrupt_in_a_source_reaches_the_caller_and_stops_threads():
    def source(iteration):
        if iteration == 2:
            raise KeyboardInterrupt
        return [np.array([iteration])] * 4

    pipe = counting_pipeline(source)
    with deadline(10):
        pipe.run()
        pipe.run()
        with pytest.raises(KeyboardInterrupt):
            pipe.run()
    assert_no_penstock_threads(timeout=0.5)
    with pytest.raises(KeyboardInterrupt):
        pipe.run()  # the pipeline stays failed


def test_keyboard_interrupt_in_a_worker_reaches_the_caller_and_stops_threads(monkeypatch):
    original_load = ExternalSource.load

    def load(self, item, sample):
        if int(item[0][0]) == 6:
            raise KeyboardInterrupt
        return original_load(self, item, sample)

    monkeypatch.setattr(ExternalSource, "load", load)
    pipe = counting_pipeline(numbers())
    with deadline(10):
        assert pipe.run()[0].as_array().ravel().tolist() == [0, 1, 2, 3]
        with pytest.raises(KeyboardInterrupt):
            pipe.run()
    assert_no_penstock_threads(timeout=0.5)


def test_keyboard_interrupt_in_the_training_loop_leaves_no_threads_once_released(image_root):
    root, names = image_root
    pipe = decode_pipeline(root, names)
    iterator = GenericIterator(pipe, ["images", "labels"], reader_name="Reader")
    with pytest.raises(KeyboardInterrupt):
        for _ in iterator:
            raise KeyboardInterrupt  # Ctrl-C in the user's loop, between batches
    del iterator, pipe
    gc.collect()
    assert_no_penstock_threads(timeout=2)


# ---- errors --------------------------------------------------------------------------------------------
def corrupt_files(root, names, tmp_path) -> dict[str, str]:
    with open(os.path.join(root, names[0]), "rb") as handle:
        jpeg = handle.read()
    (tmp_path / "truncated.jpg").write_bytes(jpeg[: len(jpeg) // 3])
    (tmp_path / "text.jpg").write_text("hello, I am not an image")
    (tmp_path / "empty.jpg").write_bytes(b"")
    return {"truncated": str(tmp_path / "truncated.jpg"), "not an image": str(tmp_path / "text.jpg"),
            "empty": str(tmp_path / "empty.jpg"), "missing": str(tmp_path / "missing.jpg"),
            "a folder": str(tmp_path)}


@pytest.mark.parametrize("kind", ["truncated", "not an image", "empty", "missing", "a folder"])
def test_bad_file_raises_pipeline_error_naming_it_again_and_again(image_root, tmp_path, kind):
    root, names = image_root
    bad = corrupt_files(root, names, tmp_path)[kind]
    files = [os.path.join(root, name) for name in names[:4]] + [bad, os.path.join(root, names[4])]
    pipe = decode_pipeline(root, files, batch_size=3, num_threads=2)
    with deadline(10):
        pipe.run()  # the first batch is fine
        with pytest.raises(penstock.PipelineError, match=f"'{bad}'") as first:
            pipe.run()
        with pytest.raises(penstock.PipelineError) as second:
            pipe.run()  # raised again, not a hang and not a later batch
    assert str(second.value) == str(first.value)
    assert first.value.__cause__ is not None  # the original exception is kept


def test_error_names_the_operator_and_comes_in_batch_order(tmp_path, image_root):
    root, names = image_root
    (tmp_path / "bad.jpg").write_bytes(b"\xff\xd8\xff garbage")
    files = [os.path.join(root, name) for name in names[:6]] + [str(tmp_path / "bad.jpg")]
    pipe = decode_pipeline(root, files, batch_size=2, num_threads=2, prefetch_queue_depth=3)
    with deadline(10):
        for _ in range(3):
            pipe.run()  # batches before the bad one arrive although it was prepared ahead
        with pytest.raises(penstock.PipelineError, match=r"^decoders.image failed on sample from '.*bad\.jpg'"):
            pipe.run()


def test_error_in_a_source_reaches_the_caller_unchanged():
    def source():
        raise ValueError("the database is gone")

    pipe = counting_pipeline(source)
    with deadline(10), pytest.raises(ValueError, match="the database is gone"):
        pipe.run()


def test_output_buffers_are_reused_once_nothing_refers_to_them():
    from penstock.executor.buffers import BufferPool
    pool = BufferPool(keep=4)
    first = pool.acquire((2, 3), np.dtype(np.float32))
    held = pool.acquire((2, 3), np.dtype(np.float32))
    assert held is not first  # the first is still referred to (by `first`)
    first_id = id(first)
    del first
    assert id(pool.acquire((2, 3), np.dtype(np.float32))) == first_id
    view = held[0]  # a view (a row handed out as a sample) keeps its buffer from reuse
    del held
    assert pool.acquire((2, 3), np.dtype(np.float32)) is not view.base


def test_a_pipeline_reuses_the_buffers_of_batches_nobody_holds():
    @pipeline_def(batch_size=4, num_threads=2, device_id=None, prefetch_queue_depth=1)
    def pipe():
        return fn.cast(fn.external_source(source=lambda: [np.ones((2, 2), np.uint8)] * 4, batch=True),
                       dtype=penstock.types.FLOAT)

    import weakref
    p = pipe()
    earlier, reused = [], False  # weak references: ids of freed arrays may come back for new ones
    for _ in range(12):
        (batch,) = p.run()
        array = batch.as_array()
        reused = reused or any(ref() is array for ref in earlier)
        earlier.append(weakref.ref(array))
        del batch, array
    p.close()
    assert reused


def test_triton_warm_up_computes_its_cache_key_and_never_raises(monkeypatch):
    """What the first Triton launch of a process waits for (its cache key, a hash of Triton's
    library) is computed by the warm-up a GPU pipeline runs beside its GPU stage; where it cannot
    go on (no GPU here) it stops without raising: the launch reports what fails."""
    import torch
    from triton.runtime import cache

    from penstock import devices
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    cache.triton_key.cache_clear()
    devices.warm_up_triton(torch.device("cuda", 0))
    assert cache.triton_key.cache_info().currsize == 1
