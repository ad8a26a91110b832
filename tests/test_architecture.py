"""docs/architecture.md's worked example of adding an operator runs as written: the operator
registers, passes its case on both devices, and its GPU form matches its CPU form."""
import pathlib
import re

import numpy as np
from conftest import assert_close
from operator_cases import Case, image_op, ragged_images, run_case

from penstock import registry

DOC = pathlib.Path(__file__).parent.parent / "docs" / "architecture.md"


def test_the_worked_example_adds_an_operator_on_both_devices(scratch_registry):
    operator_code, case_code = re.findall(r"```python\n(.*?)```", DOC.read_text().split("## Adding an operator")[1],
                                          re.S)
    exec(compile(operator_code, str(DOC), "exec"), {})
    assert registry.devices("invert") == ["cpu", "gpu"]
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
