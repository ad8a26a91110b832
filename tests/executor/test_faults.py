"""Faults injected into running pipelines: a worker process killed or crashing in native code, a
source that raises or never returns, a file deleted between epochs, no memory for the worker
processes' shared rings, Ctrl-C and close() while workers are busy. Each gives the documented
error in the caller, within seconds, and leaves no thread or process behind."""
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from helpers_data import assert_no_penstock_threads, make_class_tree, no_hang  # noqa: F401

import penstock
from penstock import fn, pipeline_def, types
from penstock.kernels import image_codecs

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture()
def tree(tmp_path):
    make_class_tree(str(tmp_path), {"a": 24, "b": 24}, height=64, width=80)
    return str(tmp_path)


@pipeline_def(batch_size=8, num_threads=2, seed=1, worker_processes=True, device_id=None)
def decode(root):
    jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="Reader")
    return fn.resize(fn.decoders.image(jpegs, output_type=types.RGB), resize_x=32, resize_y=32), labels


def _no_children_left(timeout=3.0):
    until = time.monotonic() + timeout
    while multiprocessing.active_children() and time.monotonic() < until:
        time.sleep(0.05)
    assert not multiprocessing.active_children(), multiprocessing.active_children()


def test_a_killed_worker_process_is_an_error_naming_its_samples(tree, monkeypatch):
    real_decode = image_codecs.decode

    def dies_on_a_file(data, *args, **kwargs):  # the forked workers inherit this
        if os.environ.get("PENSTOCK_TEST_DIE") and len(data) % 7 == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return real_decode(data, *args, **kwargs)
    monkeypatch.setattr(image_codecs, "decode", dies_on_a_file)
    monkeypatch.setenv("PENSTOCK_TEST_DIE", "1")
    pipe = decode(tree)
    started = time.monotonic()
    with pytest.raises(penstock.PipelineError, match=r"worker process stopped unexpectedly \(killed by SIGKILL "
                                                      r"\(out of memory\?\)\) while computing the samples from '.*\.jpg'"):
        for _ in range(6):
            pipe.run()
    assert time.monotonic() - started < 5
    pipe.close()
    assert_no_penstock_threads()
    _no_children_left()


def test_a_segfault_in_native_code_is_an_error_naming_its_samples(tree, monkeypatch):
    import ctypes
    real_decode = image_codecs.decode

    def crashes(data, *args, **kwargs):
        if os.environ.get("PENSTOCK_TEST_CRASH"):
            ctypes.string_at(0)  # reads address 0: SIGSEGV in the worker process
        return real_decode(data, *args, **kwargs)
    monkeypatch.setattr(image_codecs, "decode", crashes)
    monkeypatch.setenv("PENSTOCK_TEST_CRASH", "1")
    import faulthandler
    enabled = faulthandler.is_enabled()
    faulthandler.disable()  # the forked workers inherit it: no crash report of the expected segfault
    try:
        pipe = decode(tree)
        with pytest.raises(penstock.PipelineError, match=r"killed by SIGSEGV\) while computing the samples from"):
            pipe.run()
        pipe.close()
    finally:
        if enabled:
            faulthandler.enable()
    assert_no_penstock_threads()
    _no_children_left()


def test_a_source_that_raises_is_raised_by_run():
    def source(info):
        if info.iteration == 2:
            raise ValueError("the feed broke")
        return np.full(3, info.idx_in_batch, np.float32)

    @pipeline_def(batch_size=2, num_threads=1, seed=1, device_id=None)
    def fed():
        return fn.external_source(source=source, batch=False)
    pipe = fed()
    pipe.run(), pipe.run()
    with pytest.raises(Exception, match="the feed broke"):
        pipe.run()
    pipe.close()
    assert_no_penstock_threads()


@pytest.mark.parametrize("failing_reply", [1, 3])
def test_an_error_storing_a_worker_process_reply_is_raised_by_run(monkeypatch, failing_reply):
    """The samples of a reply the dispatcher thread fails to store are in no queue any more: they
    fail with the error, which run() raises, rather than leave the GPU stage waiting for them."""
    from conftest import gpu_or_emulated

    from penstock.executor import processes
    store, replies = processes.WorkerProcesses._store_reply, []

    def failing(self, *arguments):
        replies.append(1)
        if len(replies) == failing_reply:
            raise RuntimeError("storing broke")
        return store(self, *arguments)
    monkeypatch.setattr(processes.WorkerProcesses, "_store_reply", failing)

    @pipeline_def(batch_size=8, num_threads=2, seed=1, device_id=0, worker_processes=True)
    def boxes():
        source = fn.external_source(source=lambda: [np.full((3, 4), 0.25, np.float32)] * 8, batch=True)
        return fn.bb_flip(source, horizontal=fn.random.coin_flip()).gpu()
    with gpu_or_emulated():
        pipe = boxes()
        with pytest.raises(Exception, match="storing broke"):
            for _ in range(10):
                pipe.run()
        pipe.close()
    assert_no_penstock_threads()


def test_a_source_that_never_returns_is_reported_after_the_timeout():
    release = __import__("threading").Event()

    def source():
        release.wait(30)
        return [np.zeros(2, np.float32)] * 2

    @pipeline_def(batch_size=2, num_threads=1, seed=1, device_id=None, timeout=0.5)
    def stuck():
        return fn.external_source(source=source, batch=True)
    pipe = stuck()
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"timeout of 0.5 s; the producer thread is in external_source's next "
                                           r"batch \(iteration 0\)"):
        pipe.run()
    assert time.monotonic() - started < 3
    release.set()
    pipe.close()
    assert_no_penstock_threads()


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_file_deleted_between_epochs(tree, on_error):
    @pipeline_def(batch_size=8, num_threads=2, seed=1, device_id=None, on_error=on_error)
    def read():
        jpegs, labels = fn.readers.file(file_root=tree, name="Reader")
        return fn.decoders.image(jpegs), labels
    pipe = read()
    for _ in range(6):  # the first epoch: 48 files
        pipe.run()
    victim = os.path.join(tree, "b", "img_005.jpg")
    os.remove(victim)
    if on_error == "raise":
        with pytest.raises(penstock.PipelineError, match=r"readers\.file failed on sample from '.*img_005\.jpg'.*"
                                                          r"No such file"):
            for _ in range(6):
                pipe.run()
    else:
        delivered = 0
        for _ in range(6):
            images, _ = pipe.run()
            delivered += pipe.last_epoch_info.valid
        assert delivered == 47 and [s.source for s in pipe.skipped()] == [os.path.join("b", "img_005.jpg")]  # as file_root sees it (DALI's source_info)
    pipe.close()
    assert_no_penstock_threads()


def test_no_memory_for_the_worker_processes_is_a_clear_error(tree, monkeypatch):
    import errno

    from penstock.executor import shared_ring
    made = []
    real_init = shared_ring.SharedRing.__init__

    def second_fails(self, *args, **kwargs):
        made.append(1)
        if len(made) == 2:
            raise OSError(errno.ENOMEM, "Cannot allocate memory")
        real_init(self, *args, **kwargs)
    monkeypatch.setattr(shared_ring.SharedRing, "__init__", second_fails)

    @pipeline_def(batch_size=4, num_threads=3, seed=1, device_id=0, worker_processes=True)
    def prepared():  # a GPU pipeline's per-sample preparation uses the rings (emulated GPU here)
        jpegs, _ = fn.readers.file(file_root=tree)
        return fn.decoders.image(jpegs, device="mixed")
    with penstock.devices.emulated_gpu():
        pipe = prepared()
        with pytest.raises(OSError, match="could not start its worker processes.*worker_processes=False"):
            pipe.run()
        pipe.close()
    _no_children_left()
    assert_no_penstock_threads()


def test_close_right_after_run_with_busy_worker_processes_is_quick(tree):
    for _ in range(3):
        pipe = decode(tree)
        pipe.run()
        started = time.monotonic()
        pipe.close()
        assert time.monotonic() - started < 2
        _no_children_left()
    assert_no_penstock_threads()


def test_ctrl_c_stops_a_pipeline_with_worker_processes_within_two_seconds(tree):
    script = textwrap.dedent(f"""
        import sys, time
        sys.path[:0] = [{HERE!r}, {os.path.dirname(HERE)!r}]
        from test_faults import decode
        pipe = decode({tree!r})
        pipe.run()
        print("running", flush=True)
        try:
            while True:
                pipe.run()
        except KeyboardInterrupt:
            started = time.monotonic()
            pipe.close()
            print(f"closed {{time.monotonic() - started:.2f}}", flush=True)
            raise
    """)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    assert process.stdout.readline().strip() == "running"
    time.sleep(0.3)
    interrupted = time.monotonic()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=20)
    assert time.monotonic() - interrupted < 2.5, (out, err[-2000:])
    assert process.returncode != 0 and "KeyboardInterrupt" in err


def test_close_during_a_slow_gpu_step_waits_for_that_step_only_then_releases_the_gpu_stage(monkeypatch):
    """close() while the GPU stage is inside a slow operator (emulated GPU): close() waits for that
    operator to return, the stage stops at its next cancellation point (the batch's next operator
    never runs), the GPU stage's close runs once its thread has stopped, and no thread is left."""
    import threading

    from penstock.executor.gpu_stage import GpuStage
    seconds, closed = [], []
    slow, inside, finished = threading.Event(), threading.Event(), threading.Event()

    def first(batch):
        if slow.is_set() and not inside.is_set():  # close() comes while it sleeps
            seconds.append("close")
            inside.set()
            time.sleep(1.0)
            finished.set()
        return batch

    def second(batch):
        seconds.append(None)
        return batch

    @pipeline_def(batch_size=2, num_threads=1, device_id=0, seed=3, prefetch_queue_depth=1)
    def two_gpu_steps():
        images = fn.external_source(source=lambda: [np.zeros((4, 4, 3), np.uint8)] * 2)
        images = fn.torch_python_function(images.gpu(), function=first, batch_processing=True)
        return fn.torch_python_function(images, function=second, batch_processing=True)

    close = GpuStage.close
    monkeypatch.setattr(GpuStage, "close", lambda self: closed.append(
        [thread.name for thread in threading.enumerate() if thread.name == "penstock-gpu"]) or close(self))
    with penstock.devices.emulated_gpu():
        pipe = two_gpu_steps()
        pipe.build()
    pipe.run()
    slow.set()
    assert inside.wait(timeout=60)
    pipe.close()
    assert finished.is_set()  # the step it was in ran to its end
    assert seconds[-1] == "close"  # the batch stopped between its operators: its second did not run
    assert closed == [[]]  # the GPU stage's close ran, once, after its thread had stopped
    assert_no_penstock_threads(timeout=0.0)
