"""executor.jobs on its own: errors that name the operator and the sample (and cross processes
whole), a batch's first error and its failures under on_error="skip", the count of finished
samples, the seconds of each stage summed over threads, and calls handed to the CPU workers."""
import itertools
import pickle
import threading

import pytest

from penstock.executor.jobs import (Job, PipelineError, StageTimes, WorkerCalls, as_tuple, call_operator,
                                    finish_samples)


def test_call_operator_names_the_operator_and_the_sample():
    def too_small():
        raise ValueError("too small")
    assert call_operator("flip", "a.jpg", lambda x, y: x + y, 1, 2) == 3
    with pytest.raises(PipelineError, match=r"^resize failed on sample from 'a\.jpg': ValueError: too small$") as raised:
        call_operator("resize", "a.jpg", too_small)
    error = raised.value
    assert (error.operator, error.source) == ("resize", "a.jpg") and error.reason.startswith("ValueError")
    assert isinstance(error.__cause__, ValueError)
    with pytest.raises(PipelineError, match=r"^resize failed: KeyError: 'k'$"):  # no source to name
        call_operator("resize", "", {}.__getitem__, "k")


def test_call_operator_passes_a_pipeline_error_through_unchanged():
    inner = PipelineError("decoders.image failed", "decoders.image", "b.png", "bad file")

    def fails():
        raise inner
    with pytest.raises(PipelineError) as raised:
        call_operator("outer", "c.png", fails)
    assert raised.value is inner


def test_a_pipeline_error_pickles_with_its_fields_and_cause():
    try:
        call_operator("crop", "d.jpg", lambda: [][1])
    except PipelineError as error:
        sent = error
    received = pickle.loads(pickle.dumps(sent))
    assert type(received) is PipelineError and str(received) == str(sent)
    assert (received.operator, received.source, received.reason) == ("crop", "d.jpg", sent.reason)
    assert type(received.__cause__) is IndexError
    assert any("raised in a penstock worker process" in note for note in received.__cause__.__notes__)


def test_a_cause_that_does_not_pickle_is_dropped():
    error = PipelineError("op failed", "op")
    error.__cause__ = RuntimeError(threading.Lock())  # a lock does not pickle
    received = pickle.loads(pickle.dumps(error))
    assert str(received) == "op failed" and received.__cause__ is None


def test_as_tuple_makes_the_outputs_a_tuple():
    assert as_tuple([1, 2], 1) == ([1, 2],)
    assert as_tuple([1, 2], 2) == (1, 2)


def test_a_job_keeps_its_first_error():
    job = Job(iteration=0)
    first, second = RuntimeError("first"), RuntimeError("second")
    job.record_error(first)
    job.record_error(second)
    assert job.error is first


def test_failures_under_skip_are_kept_per_sample_and_others_fail_the_batch():
    operator_failure = PipelineError("op failed", "op")
    skipping = Job(iteration=0, skip_failures=True)
    skipping.record_failure(3, operator_failure)
    assert skipping.failed == {3: operator_failure} and skipping.error is None
    skipping.record_failure(1, MemoryError())  # not an operator's failure: the batch fails
    assert isinstance(skipping.error, MemoryError) and list(skipping.failed) == [3]
    strict = Job(iteration=0)
    strict.record_failure(3, operator_failure)
    assert strict.failed == {} and strict.error is operator_failure


def test_a_job_is_done_once_its_last_sample_finished():
    job = Job(iteration=0, size=3, finished=itertools.count())
    finish_samples([(job, 0), (job, 1)])
    assert not job.done.is_set()
    error = RuntimeError("worker failed")
    finish_samples([(job, 2)], error)
    assert job.done.is_set() and job.error is error


def test_stage_times_sum_what_each_thread_recorded():
    times = StageTimes()
    times.of_this_thread()["resize"] += 1.5
    assert times.of_this_thread() is times.of_this_thread()

    def record():
        mine = times.of_this_thread()
        mine["resize"] += 0.5
        mine["decode"] += 2.0
    thread = threading.Thread(target=record)
    thread.start()
    thread.join()
    assert times.totals() == {"resize": 2.0, "decode": 2.0}


def _woken_workers(calls_of):
    """A wake that starts a worker thread, which takes the calls waiting."""
    def wake():
        threading.Thread(target=lambda: calls_of[0].run_waiting()).start()
    return wake


def test_worker_calls_run_on_the_workers_and_return_once_all_ran():
    calls_of = []
    calls = WorkerCalls(_woken_workers(calls_of), threading.Event())
    calls_of.append(calls)
    assert not calls
    ran = []
    calls.run([lambda i=i: ran.append((i, threading.current_thread())) for i in range(3)])
    assert sorted(i for i, _ in ran) == [0, 1, 2] and not calls
    assert threading.current_thread() not in {thread for _, thread in ran}
    calls.run([])  # nothing to hand over: returns at once


def test_worker_calls_raise_the_first_calls_error():
    calls_of = []
    calls = WorkerCalls(_woken_workers(calls_of), threading.Event())
    calls_of.append(calls)

    def failing(error):
        def call():
            raise error
        return call
    with pytest.raises(ValueError, match="first"):
        calls.run([lambda: None, failing(ValueError("first")), failing(KeyError("second"))])


def test_worker_calls_stop_waiting_when_the_pipeline_shuts_down():
    stopping = threading.Event()
    calls = WorkerCalls(lambda: stopping.set(), stopping)  # no worker takes the call; the pipeline closes
    with pytest.raises(RuntimeError, match="shut down"):
        calls.run([lambda: None])
