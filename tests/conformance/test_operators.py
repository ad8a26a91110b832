"""Each case: the same operator call under NVIDIA DALI and penstock.compat.dali gives the same
outputs (dtype, shapes, layout, values), or both refuse it."""
import pytest

pytest.importorskip("nvidia.dali")

from conformance.cases import CASES  # noqa: E402
from conformance.harness import Runner, params  # noqa: E402

RUNNER = Runner(CASES)


@pytest.mark.parametrize("case", params(CASES))
def test_operator(case):
    RUNNER.check(case)
