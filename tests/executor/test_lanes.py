"""The decode stage: blocking calls a batch operator hands to its lanes run on threads of the
executor, in order, and stop with the pipeline; an undeclared lane is an error naming the operator.
CPU work a batch operator hands back (images the GPU decoders refuse) runs on the CPU workers."""
import threading
import time

import numpy as np
import pytest
from helpers_data import penstock_threads

from penstock import devices, fn, pipeline_def, registry
from penstock.contract import BatchOperator
from penstock.graph import invoke
from penstock.schema import OpSchema


def _register_probe(lane_used: str):
    schema = registry.register_schema(OpSchema(name="_lane_probe", class_name="_LaneProbe", doc="test"))

    @registry.register("_lane_probe", "gpu")
    class LaneProbe(BatchOperator):
        lanes = (("slow call", 2),)
        seen: list = []

        def run_batch(self, inputs, args, batch):
            done = threading.Event()

            def call():
                LaneProbe.seen.append(threading.current_thread().name)
                done.set()
            batch.run_call(lane_used, call)
            done.wait(timeout=10)
            return inputs[0]
    return schema, LaneProbe


def _pipeline(schema):
    @pipeline_def(batch_size=2, num_threads=1, device_id=0, seed=1)
    def pipe():
        data = fn.external_source(source=lambda: [np.zeros(3, np.float32), np.ones(3, np.float32)], batch=True)
        return invoke(schema, (data.gpu(),), {"device": "gpu"})
    return pipe()


def test_lane_calls_run_on_the_executors_lane_thread(scratch_registry):
    threads_before = set(threading.enumerate())
    schema, probe = _register_probe("slow call")
    with devices.emulated_gpu():
        pipe = _pipeline(schema)
        for _ in range(3):
            (out,) = pipe.run()
            np.testing.assert_array_equal(out.as_cpu().as_array()[1], np.ones(3))
        pipe.close()
    assert probe.seen and all(name.startswith("penstock-lane-") and "slow-call-" in name for name in probe.seen)
    assert not [t for t in penstock_threads() if t not in threads_before and t.name.startswith("penstock-lane-")]


def test_an_undeclared_lane_is_an_error_naming_the_operator(scratch_registry):
    schema, _ = _register_probe("another lane")
    with devices.emulated_gpu():
        pipe = _pipeline(schema)
        with pytest.raises(Exception, match="_lane_probe: no lane 'another lane'; it declares slow call"):
            pipe.run()
        pipe.close()


def _register_worker_probe(fail_on: int | None = None):
    schema = registry.register_schema(OpSchema(name="_worker_probe", class_name="_WorkerProbe", doc="test"))

    @registry.register("_worker_probe", "gpu")
    class WorkerProbe(BatchOperator):
        seen: list = []

        def run_batch(self, inputs, args, batch):
            def call(position):
                def run():
                    WorkerProbe.seen.append(threading.current_thread().name)
                    if position == fail_on:
                        raise ValueError(f"call {position} refused")
                return run
            batch.run_on_workers([call(position) for position in range(3)])
            return inputs[0]
    return schema, WorkerProbe


@pytest.mark.parametrize("worker_processes, thread_prefix", [(False, "penstock-worker-"),
                                                             (True, "penstock-dispatcher")])
def test_cpu_work_handed_back_by_the_gpu_stage_runs_on_the_cpu_workers(scratch_registry, worker_processes,
                                                                        thread_prefix):
    schema, probe = _register_worker_probe()
    probe.seen.clear()
    with devices.emulated_gpu():
        @pipeline_def(batch_size=2, num_threads=2, device_id=0, seed=1, worker_processes=worker_processes)
        def pipe():
            data = fn.external_source(source=lambda: [np.zeros(3, np.float32), np.ones(3, np.float32)], batch=True)
            return invoke(schema, (data.gpu(),), {"device": "gpu"})
        pipeline = pipe()
        for _ in range(2):
            (out,) = pipeline.run()
            np.testing.assert_array_equal(out.as_cpu().as_array()[1], np.ones(3))
        pipeline.close()
    assert len(probe.seen) >= 6 and all(name.startswith(thread_prefix) for name in probe.seen), probe.seen


def test_an_error_in_cpu_work_handed_back_surfaces_naming_the_operator(scratch_registry):
    threads_before = set(threading.enumerate())
    schema, _ = _register_worker_probe(fail_on=1)
    with devices.emulated_gpu():
        pipeline = _pipeline(schema)
        with pytest.raises(Exception, match="_worker_probe.*call 1 refused"):
            pipeline.run()
        pipeline.close()
    assert not set(penstock_threads()) - threads_before


def test_open_runs_on_the_gpu_stage_before_the_first_batch_and_its_errors_reach_run_batch(scratch_registry):
    schema = registry.register_schema(OpSchema(name="_open_probe", class_name="_OpenProbe", doc="test"))

    @registry.register("_open_probe", "gpu")
    class OpenProbe(BatchOperator):
        events: list = []

        def open(self, device, run_call):
            OpenProbe.events.append(("open", threading.current_thread().name, device.type))
            raise OSError("no engine here")

        def run_batch(self, inputs, args, batch):
            OpenProbe.events.append(("run_batch", threading.current_thread().name, None))
            raise OSError("no engine here, again")

    with devices.emulated_gpu():
        pipe = _pipeline(schema)
        with pytest.raises(Exception, match="_open_probe.*no engine here, again"):
            pipe.run()
        pipe.close()
    (opened, thread, device), (ran, run_thread, _) = OpenProbe.events[:2]
    assert (opened, ran, device) == ("open", "run_batch", "cpu") and thread == run_thread == "penstock-gpu"


def test_steps_after_a_decode_run_once_the_next_batchs_decode_is_queued(scratch_registry):
    """A batch's steps up to its last one with lanes run when it starts; the rest after the next
    batch started: the step that reads decoded pixels does not wait for the decode just queued."""
    order = []
    decode = registry.register_schema(OpSchema(name="_decode_probe", class_name="_DecodeProbe", doc="test"))
    after = registry.register_schema(OpSchema(name="_after_probe", class_name="_AfterProbe", doc="test"))

    @registry.register("_decode_probe", "gpu")
    class DecodeProbe(BatchOperator):
        lanes = (("decode", 1),)

        def run_batch(self, inputs, args, batch):
            index = int(np.asarray(inputs[0][0])[0])
            order.append(("decode", index))
            if index == 0:
                time.sleep(0.2)  # the CPU stage has batch 1 ready when batch 0 is started
            return inputs[0]

    @registry.register("_after_probe", "gpu")
    class AfterProbe(BatchOperator):
        def run_batch(self, inputs, args, batch):
            order.append(("after", int(np.asarray(inputs[0][0])[0])))
            return inputs[0]

    counter = iter(range(100))

    @pipeline_def(batch_size=1, num_threads=1, device_id=0, seed=1, prefetch_queue_depth=3)
    def pipe():
        data = fn.external_source(source=lambda: [np.full(1, next(counter), np.float32)], batch=True)
        return invoke(after, (invoke(decode, (data.gpu(),), {"device": "gpu"}),), {"device": "gpu"})

    with devices.emulated_gpu():
        pipeline = pipe()
        outputs = [int(pipeline.run()[0].as_cpu().as_array()[0, 0]) for _ in range(4)]
        pipeline.close()
    assert outputs == [0, 1, 2, 3]
    for batch in range(3):
        if ("decode", batch + 1) in order:
            assert order.index(("decode", batch + 1)) < order.index(("after", batch))
    assert order.index(("decode", 1)) < order.index(("after", 0))
