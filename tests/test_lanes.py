"""The decode stage: blocking calls a batch operator hands to its lanes run on threads of the
executor, in order, and stop with the pipeline; an undeclared lane is an error naming the operator.
CPU work a batch operator hands back (images the GPU decoders refuse) runs on the CPU workers."""
import threading

import numpy as np
import pytest

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
    schema, probe = _register_probe("slow call")
    with devices.emulated_gpu():
        pipe = _pipeline(schema)
        for _ in range(3):
            (out,) = pipe.run()
            np.testing.assert_array_equal(out.as_cpu().as_array()[1], np.ones(3))
        pipe.close()
    assert probe.seen and all(name.startswith("penstock-lane-") and "slow-call-" in name for name in probe.seen)
    assert not [t for t in threading.enumerate() if t.name.startswith("penstock-lane-")]


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
    schema, _ = _register_worker_probe(fail_on=1)
    with devices.emulated_gpu():
        pipeline = _pipeline(schema)
        with pytest.raises(Exception, match="_worker_probe.*call 1 refused"):
            pipeline.run()
        pipeline.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("penstock-")]
