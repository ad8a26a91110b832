"""Each case: the same operator call under NVIDIA DALI and penstock.compat.dali gives the same
outputs (dtype, shapes, layout, values), or both refuse it."""
import pytest

pytest.importorskip("nvidia.dali")

from conformance.cases import CASES  # noqa: E402
from conformance.harness import check, params  # noqa: E402


@pytest.mark.parametrize("case", params(CASES))
def test_operator(case):
    check(case)
