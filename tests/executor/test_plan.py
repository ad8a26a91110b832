"""executor.plan on small graphs of stand-in operators: which stage runs each operator, which
values a batch keeps after the CPU stage (and where), which outputs may be written straight into a
batch buffer, and when worker processes run the CPU stage."""
import pytest

from penstock.capabilities import DecodesOnLoad, PreparesOnCpu, RoutesSamples, RunsUserCode, WantsCpuWorkers
from penstock.contract import BatchOperator, SampleOperator, SourceOperator, WholeBatchOperator
from penstock.executor.plan import PREPARED, ExecutionPlan, Source, Step


def impl(*kinds, name="op", **declared):
    """An operator implementation of ``kinds`` (contract classes and capabilities) that declares
    ``declared`` (class attributes and methods); plan building only asks what it declares."""
    return type(name, kinds, {"name": name, **declared})({}, None)


def source(key, **declared):
    return Source(key, impl(SourceOperator, name=f"source{key}", **declared), 1)


def step(key, kind, *inputs, num_outputs=1, arg_inputs=None, name=None):
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return Step(key, impl(*kinds, name=name or f"step{key}"), tuple((ref, 0) for ref in inputs),
                {name: (ref, 0) for name, ref in (arg_inputs or {}).items()}, num_outputs)


def test_each_operator_runs_on_its_stage():
    steps = [step(1, SampleOperator, 0), step(2, WholeBatchOperator, 1), step(3, BatchOperator, 2)]
    plan = ExecutionPlan.build([source(0)], steps, [(3, 0)])
    assert [s.key for s in plan.cpu_steps] == [1]
    assert [s.key for s in plan.whole_batch_steps] == [2]
    assert [s.key for s in plan.gpu_steps] == [3]
    assert plan.steps == tuple(steps) and plan.source_keys == (0,)
    # what outlives the CPU stage: the whole-batch operator's input, then the GPU stage's
    assert plan.kept == {(1, 0): 0, (2, 0): 1}
    assert not plan.has_branches and plan.routes == {}


def test_per_sample_work_after_a_whole_batch_operator_runs_with_it():
    steps = [step(1, WholeBatchOperator, 0), step(2, SampleOperator, 1), step(3, SampleOperator, 0)]
    plan = ExecutionPlan.build([source(0)], steps, [(2, 0), (3, 0)])
    assert [s.key for s in plan.cpu_steps] == [3]
    assert [s.key for s in plan.whole_batch_steps] == [1, 2]


def test_a_batch_operators_preparation_on_the_cpu_cannot_take_a_whole_batch_output():
    steps = [step(1, WholeBatchOperator, 0, name="pad"), step(2, (BatchOperator, PreparesOnCpu), 1, name="decode")]
    with pytest.raises(ValueError, match="decode: takes the output of pad, which works on whole batches"):
        ExecutionPlan.build([source(0)], steps, [(2, 0)])


def test_outputs_computed_on_the_cpu_are_kept_once_and_may_be_written_in_place():
    steps = [step(1, SampleOperator, 0), step(2, SampleOperator, 1, num_outputs=2)]
    plan = ExecutionPlan.build([source(0)], steps, [(1, 0), (2, 0), (1, 0)])
    assert plan.kept == {(1, 0): 0, (2, 0): 1}
    assert plan.dense_slots == {0, 1}
    assert plan.dense_outputs == {1: 0}  # step 2 has two outputs: threads do not write it into a buffer
    assert plan.shared_slots == {0, 1}  # worker processes write both into their rows
    assert plan.computed_slots == (0, 1) and plan.passed_slots == {}


def test_a_preparation_on_the_cpu_is_kept_in_place_of_its_inputs():
    prepares = (BatchOperator, PreparesOnCpu)
    steps = [step(1, SampleOperator, 0), step(2, prepares, 1), step(3, prepares, 2)]  # step 3 takes GPU data
    plan = ExecutionPlan.build([source(0)], steps, [(3, 0)])
    assert [s.key for s in plan.prepared_on_cpu] == [2]
    assert plan.kept == {(2, PREPARED): 0} and plan.prepared_slots == {0}
    assert plan.worker_step_keys == {1, 2}


def test_items_that_are_values_pass_the_cpu_stage_by():
    """A source whose items are its values (random draws) that only the GPU stage reads is not
    loaded by the workers: its slot is read from the batch's items."""
    sources = [source(0), source(5, items_are_values=True)]
    steps = [step(1, SampleOperator, 0), step(2, BatchOperator, 1, arg_inputs={"angle": 5})]
    plan = ExecutionPlan.build(sources, steps, [(2, 0)])
    assert plan.kept == {(1, 0): 0, (5, 0): 1}
    assert plan.passed_slots == {1: 5} and plan.computed_slots == (0,)
    assert plan.source_keys == (0,)
    # read by a CPU operator too: the workers load it
    steps = [step(1, SampleOperator, 0, arg_inputs={"angle": 5}), step(2, BatchOperator, 1, arg_inputs={"angle": 5})]
    assert ExecutionPlan.build(sources, steps, [(2, 0)]).source_keys == (0, 5)


def test_operators_that_route_samples_are_noted():
    split = impl(SampleOperator, RoutesSamples, name="split", routes_samples="split")
    merge = impl(SampleOperator, RoutesSamples, name="merge", routes_samples="merge")
    steps = [Step(1, split, ((0, 0),), {}, 1), Step(2, merge, ((1, 0),), {}, 1)]
    plan = ExecutionPlan.build([source(0)], steps, [(2, 0)])
    assert plan.has_branches and plan.routes == {1: "split", 2: "merge"}


def test_cpu_workers_are_num_threads_or_what_an_operator_wants():
    wants = impl(SampleOperator, WantsCpuWorkers, cpu_workers_wanted=lambda self: 6)
    plan = ExecutionPlan.build([source(0)], [Step(1, wants, ((0, 0),), {}, 1)], [(1, 0)])
    assert plan.cpu_workers(2) == 6 and plan.cpu_workers(8) == 8
    plain = ExecutionPlan.build([source(0)], [step(1, SampleOperator, 0)], [(1, 0)])
    assert plain.cpu_workers(0) == 1 and plain.cpu_workers(3) == 3


def test_worker_processes_are_chosen_for_per_sample_work_that_is_not_the_users():
    per_sample = ExecutionPlan.build([source(0)], [step(1, SampleOperator, 0)], [(1, 0)])
    users_code = ExecutionPlan.build([source(0)], [step(1, (SampleOperator, RunsUserCode), 0)], [(1, 0)])
    sources_only = ExecutionPlan.build([source(0)], [], [(0, 0)])
    if not per_sample.can_use_processes:
        pytest.skip("no fork on this platform")
    assert per_sample.uses_processes(None) and per_sample.uses_processes(True) and not per_sample.uses_processes(False)
    assert not users_code.uses_processes(None) and users_code.uses_processes(True)
    assert not sources_only.uses_processes(None)


def test_worker_processes_are_chosen_for_a_source_that_decodes_on_the_gpu_path():
    decoding = Source(0, impl(DecodesOnLoad, SourceOperator, name="decoding"), 1)
    only_gpu_steps = ExecutionPlan.build([decoding], [step(1, BatchOperator, 0)], [(1, 0)])
    if not only_gpu_steps.can_use_processes:
        pytest.skip("no fork on this platform")
    assert only_gpu_steps.uses_processes(None)
    assert not ExecutionPlan.build([source(0)], [step(1, BatchOperator, 0)], [(1, 0)]).uses_processes(None)


def test_preparations_that_cannot_cross_processes_keep_the_work_on_threads():
    stays = ExecutionPlan.build([source(0)], [step(1, (BatchOperator, PreparesOnCpu), 0)], [(1, 0)])
    assert not stays.can_use_processes and not stays.uses_processes(True)
    crosses = impl(BatchOperator, PreparesOnCpu, preparation_crosses_processes=True, gpu_reads_preparations=True)
    plan = ExecutionPlan.build([source(0)], [Step(1, crosses, ((0, 0),), {}, 1)], [(1, 0)])
    assert plan.gpu_reads_rings and plan.uses_processes(None) == plan.can_use_processes
