"""penstock.optimize on small graphs of stand-in operators: a decoder shrinks only for consumers
that all resample to sizes known at build (to the largest of them), and a GPU decoder shares its
windows only where every other GPU step is light."""
from dataclasses import dataclass, field

from penstock.capabilities import LightOnCpu, LightOnGpu, Resamples, SharesWindows, ShrinksOnDecode
from penstock.contract import BatchOperator, SampleOperator
from penstock.optimize import let_decoders_share_windows, let_decoders_shrink


@dataclass(eq=False)
class Node:
    """The part of a graph's OpNode the rewrites read."""

    index: int
    inputs: tuple = ()
    arg_inputs: dict = field(default_factory=dict)
    outputs: tuple = ()

    def dependencies(self):
        return [*self.inputs, *self.arg_inputs.values()]


class Decoder(SampleOperator, ShrinksOnDecode):
    def __init__(self):
        super().__init__({}, None)
        self.target = None

    def decode_smaller_for(self, target):
        self.target = target


class Resize(SampleOperator, Resamples):
    def __init__(self, size):
        super().__init__({}, None)
        self.size = size

    def resampled_size(self, height, width):
        return self.size


class Flip(SampleOperator):
    pass


def graph(*consumers):
    """A decoder (node 0) whose one output each consumer (node 1, 2, ...) takes; node -> impl."""
    decoded = object()
    nodes = [Node(0, outputs=(decoded,))]
    impls = {0: Decoder()}
    for index, (consumer, per_sample) in enumerate(consumers, start=1):
        arg_inputs = {"size": object()} if per_sample else {}
        nodes.append(Node(index, inputs=(decoded,), arg_inputs=arg_inputs, outputs=(object(),)))
        impls[index] = consumer
    return nodes, impls


def test_a_decoder_shrinks_to_the_largest_size_its_consumers_resample_to():
    nodes, impls = graph((Resize((32, 64)), False), (Resize((48, 40)), False))
    let_decoders_shrink(nodes, impls)
    assert impls[0].target(480, 640) == (48, 64)


def test_a_decoder_keeps_its_resolution_for_any_other_consumer():
    for consumers in [((Resize((32, 32)), False), (Flip({}, None), False)),  # one does not resample
                      ((Resize((32, 32)), True),),  # per-sample arguments may choose another size
                      ((Resize(None), False),),  # its size follows from each sample
                      ()]:  # nothing takes the images
        nodes, impls = graph(*consumers)
        let_decoders_shrink(nodes, impls)
        assert impls[0].target is None, consumers


def test_a_decoder_whose_images_are_an_output_keeps_its_resolution():
    nodes, impls = graph((Resize((32, 32)), False))
    let_decoders_shrink(nodes, impls, outputs=[nodes[0].outputs[0]])
    assert impls[0].target is None


class GpuDecoder(BatchOperator, SharesWindows):
    def __init__(self):
        super().__init__({}, None)
        self.sharing = False

    def share_windows(self):
        self.sharing = True


class LightStep(BatchOperator, LightOnGpu):
    pass


class HeavyStep(BatchOperator):
    pass


class LightCpuStep(SampleOperator, LightOnCpu):
    pass


def test_a_gpu_decoder_leaves_its_windows_to_the_gpu_where_the_cpu_workers_have_work_of_their_own():
    """Per-sample CPU work other than light steps (a flip, DALI's SSD example's box crop and encoding)
    takes the cores a share of the windows would use."""
    decoder = GpuDecoder()
    let_decoders_share_windows({0: decoder, 1: LightStep({}, None), 2: LightCpuStep({}, None), 3: Flip({}, None)})
    assert not decoder.sharing


def test_a_gpu_decoder_shares_its_windows_where_the_other_gpu_steps_are_light():
    decoder = GpuDecoder()
    let_decoders_share_windows({0: decoder, 1: LightStep({}, None), 2: LightCpuStep({}, None)})
    assert decoder.sharing
    decoder = GpuDecoder()
    let_decoders_share_windows({0: decoder, 1: LightStep({}, None), 2: HeavyStep({}, None)})
    assert not decoder.sharing
