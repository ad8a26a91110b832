"""docs/architecture.md's worked example of adding an operator runs as written: the operator
registers, passes its case on both devices, its GPU form matches its CPU form, and the planner
counts its GPU form as light work."""
import pathlib
import re

import numpy as np
from conftest import assert_close
from operator_cases import Case, image_op, ragged_images, run_case

from penstock import optimize, registry
from penstock.capabilities import SharesWindows
from penstock.contract import BatchOperator

DOC = pathlib.Path(__file__).parent.parent / "docs" / "architecture.md"


def test_the_worked_example_adds_an_operator_on_both_devices(scratch_registry):
    operator_code, case_code = re.findall(r"```python\n(.*?)```", DOC.read_text().split("## Adding an operator")[1],
                                          re.S)
    exec(compile(operator_code, str(DOC), "exec"), {})
    assert registry.devices("invert") == ["cpu", "gpu"]
    assert _planned_as_light(registry.implementations()[("invert", "gpu")])
    from penstock import fn  # fn's functions are made when penstock is imported: make invert's here
    from penstock.api import operator_functions
    from penstock.graph import invoke
    fn.invert = operator_functions("penstock.fn", invoke)["invert"]
    try:
        case = eval(case_code.strip().split(": ", 1)[1].rstrip(","), {"Case": Case, "image_op": image_op,
                                                                      "ragged_images": ragged_images})
        outputs = {}
        for device in ("cpu", "gpu"):
            samples, outputs[device] = run_case(case, device)
            for output, expected in zip(outputs[device], case.reference(samples, None)):
                assert_close(output, np.asarray(expected), where=f"invert on {device}")
    finally:
        del fn.invert


def _planned_as_light(cls) -> bool:
    """Whether a GPU decoder followed by an operator of ``cls`` (and no other GPU work) hands a share
    of its windows to the CPU workers: what the planner does where every other GPU step is light."""
    class Decoder(SharesWindows, BatchOperator):
        shared = False

        def share_windows(self):
            self.shared = True

    decoder = Decoder({}, None)
    optimize.let_decoders_share_windows({0: decoder, 1: cls.__new__(cls)})
    return decoder.shared


def test_a_gpu_operator_that_declares_no_capability_is_planned_as_heavy_gpu_work():
    class Launches(BatchOperator):
        pass

    assert not _planned_as_light(Launches)
