"""The hardware decode lane (runtime/csrc/hardware_lane.c): its thread makes the decode calls of
the batches submitted to it in order, waits for each nvJPEG state's last decode on the GPU first,
sets states up for a new batch size, reports statuses, and stops once the jobs submitted are done.
nvJPEG and the CUDA driver are stood in for by Python functions the lane calls by address; on the
GPU, tests/runtime/test_gpu_decoder.py checks the real calls' pixels against the Python path."""
import ctypes
import os
import shutil
import threading
import time

import pytest

from penstock.runtime import hardware_lane
from penstock.runtime import native

NOT_READY = 600
STATUS = ctypes.c_int


class FakeCalls:
    """Stand-ins for the driver's and nvJPEG's calls; records what the lane called, from which thread."""

    def __init__(self):
        self.log = []
        self.not_ready, self.decode_status, self.record_status = set(), {}, 0
        self.decode_seconds = 0.0
        self.threads = set()
        self.next_event = 100
        self.destroyed, self.released = [], False
        self._callbacks = [  # kept alive while the lane may call them
            ctypes.CFUNCTYPE(STATUS, ctypes.c_void_p)(self._context_set),
            ctypes.CFUNCTYPE(STATUS, ctypes.c_void_p)(self._event_query),
            ctypes.CFUNCTYPE(STATUS, ctypes.c_void_p)(self._event_synchronize),
            ctypes.CFUNCTYPE(STATUS, ctypes.c_void_p, ctypes.c_void_p)(self._event_record),
            ctypes.CFUNCTYPE(STATUS, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                             ctypes.c_int)(self._initialize),
            ctypes.CFUNCTYPE(STATUS, *[ctypes.c_void_p] * 7)(self._decode)]

    def calls(self) -> hardware_lane.Calls:
        fields = ("context_set", "event_query", "event_synchronize", "event_record", "initialize", "decode")
        return hardware_lane.Calls(handle=7, output_format=5, context=42, **{
            field: hardware_lane.address(callback) for field, callback in zip(fields, self._callbacks)})

    def _seen(self, *entry):
        self.threads.add(threading.get_native_id())
        self.log.append(entry)

    def _context_set(self, context):
        self._seen("context", context)
        return 0

    def _event_query(self, event):
        self._seen("query", event)
        return NOT_READY if event in self.not_ready else 0

    def _event_synchronize(self, event):
        self._seen("synchronize", event)
        self.not_ready.discard(event)
        return 0

    def _event_record(self, event, stream):
        self._seen("record", event, stream)
        return self.record_status

    def _initialize(self, handle, state, batch_size, threads, output_format):
        self._seen("initialize", state, batch_size, handle, output_format)
        return 0

    def _decode(self, handle, state, data, lengths, images, params, stream):
        self._seen("decode", state, stream)
        time.sleep(self.decode_seconds)
        return self.decode_status.get(state, 0)

    # the driver's part the lane's owner uses
    def new_event(self):
        self.next_event += 1
        return self.next_event

    def destroy_event(self, event):
        self.destroyed.append(event)

    def closed(self):
        self.released = True


@pytest.fixture
def lane():
    if native.built(hardware_lane.NAME) is None:
        if shutil.which(os.environ.get("CC", "cc")):
            pytest.fail(f"a C compiler is here but the lane was not built: {native.problem(hardware_lane.NAME)}")
        pytest.skip(native.problem(hardware_lane.NAME))
    fake = FakeCalls()
    made = hardware_lane.HardwareLane(fake.calls(), fake)
    yield made, fake
    made.close()


def _job(state, count, stream=9, event=0):
    return hardware_lane.Job(state=state, count=count, stream=stream, event=event or 1000 + state)


def _threads() -> set:
    """The process's threads (native ones too) by id: threads of other tests may end meanwhile."""
    return set(os.listdir("/proc/self/task"))


def test_the_lane_decodes_the_jobs_in_order_on_its_own_thread(lane):
    made, fake = lane
    first, second = _job(1, 4), _job(2, 4)  # a job per nvJPEG state, submitted again for later batches
    for count in (4, 3):
        second.count = count
        for job in (first, second):
            made.submit(job)
        for job in (first, second):
            made.wait(job)
            assert job.done and job.status == 0 and job.cuda_status == 0 and job.seconds >= 0
    assert fake.log[0] == ("context", 42)  # the CUDA context first, once
    assert [entry for entry in fake.log if entry[0] == "decode"] == [("decode", 1, 9), ("decode", 2, 9)] * 2
    # each state set up for its batch size once, and again when the size changes
    assert [entry[1:3] for entry in fake.log if entry[0] == "initialize"] == [(1, 4), (2, 4), (2, 3)]
    assert [entry for entry in fake.log if entry[0] == "record"][:2] == [("record", 1001, 9), ("record", 1002, 9)]
    assert threading.get_native_id() not in fake.threads and len(fake.threads) == 1


def test_a_states_next_decode_waits_for_its_last_one_on_the_gpu(lane):
    made, fake = lane
    fake.not_ready.add(1001)
    job = _job(1, 2)
    made.submit(job)
    made.wait(job)
    calls = [entry[0] for entry in fake.log]
    assert calls.index("synchronize") < calls.index("decode")
    made.submit(job)  # ready now: asked, not waited for
    made.wait(job)
    assert calls.count("synchronize") == 1 == [entry[0] for entry in fake.log].count("synchronize")


def test_a_failed_decode_reports_nvjpegs_status_and_sets_the_state_up_again(lane):
    made, fake = lane
    fake.decode_status[3] = 7
    job = _job(3, 5)
    made.submit(job)
    made.wait(job)
    assert job.status == 7 and job.initialized_for == 0
    fake.decode_status[3] = 0
    made.submit(job)
    made.wait(job)
    assert job.status == 0 and job.initialized_for == 5
    assert [entry[1:3] for entry in fake.log if entry[0] == "initialize"] == [(3, 5), (3, 5)]


def test_a_failed_driver_call_is_raised_by_wait(lane):
    made, fake = lane
    fake.record_status = 1
    job = _job(4, 2)
    made.submit(job)
    with pytest.raises(RuntimeError, match="hardware decode lane: a CUDA driver call failed with status 1"):
        made.wait(job)


def test_closing_runs_the_jobs_submitted_and_stops_the_thread():
    if native.built(hardware_lane.NAME) is None:
        pytest.skip(native.problem(hardware_lane.NAME))
    before = _threads()
    fake = FakeCalls()
    fake.decode_seconds = 0.02
    made = hardware_lane.HardwareLane(fake.calls(), fake)
    lane_threads = _threads() - before
    assert len(lane_threads) == 1
    jobs = [_job(state, 2) for state in (1, 2, 3)]
    for job in jobs:
        made.submit(job)
    made.close()
    assert all(job.done for job in jobs) and len([e for e in fake.log if e[0] == "decode"]) == 3
    assert not lane_threads & _threads()
    with pytest.raises(RuntimeError, match="closed"):
        made.submit(_job(1, 2))
    made.close()  # again: nothing


def test_waiting_releases_the_interpreter_lock(lane):
    made, fake = lane
    fake.decode_seconds = 0.3
    job = _job(5, 1)
    made.submit(job)
    waiter = threading.Thread(target=made.wait, args=(job,))
    waiter.start()
    time.sleep(0.05)  # returns only once the waiter lets go of the lock
    assert sum(range(1000)) and not job.done and waiter.is_alive()
    waiter.join(timeout=5)
    assert job.done


def test_without_a_compiler_there_is_no_lane_and_the_problem_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("CC", "penstock-no-such-compiler")
    monkeypatch.setattr(native, "_built", {})
    monkeypatch.setattr(native, "_problems", {})
    assert native.built(hardware_lane.NAME) is None
    assert "no C compiler ('penstock-no-such-compiler' is not on PATH" in native.problem(hardware_lane.NAME)
    assert hardware_lane.for_nvjpeg(7, 5, None, 0) is None  # the decoder then calls nvJPEG from Python
    monkeypatch.setattr(native, "_built", {})
    monkeypatch.setenv("PENSTOCK_NATIVE", "0")
    assert native.built(hardware_lane.NAME) is None and "PENSTOCK_NATIVE=0" in native.problem(hardware_lane.NAME)


def test_a_build_is_kept_and_reused(tmp_path, monkeypatch):
    if not shutil.which(os.environ.get("CC", "cc")):
        pytest.skip("no C compiler")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(native, "_built", {})
    first = native.built(hardware_lane.NAME)
    assert first is not None and first.startswith(str(tmp_path)) and os.listdir(os.path.dirname(first)) == [
        os.path.basename(first)]  # no partial builds left behind
    monkeypatch.setattr(native, "_built", {})
    monkeypatch.setenv("CC", "penstock-no-such-compiler")  # kept: not built again
    assert native.built(hardware_lane.NAME) == first
