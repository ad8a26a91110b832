"""The tier needs NVIDIA DALI as its reference: without it, nothing here is collected."""
import importlib.util

import pytest


def _has_dali() -> bool:
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except ModuleNotFoundError:  # no 'nvidia' package at all
        return False


collect_ignore_glob = [] if _has_dali() else ["test_*.py", "cases*.py", "harness.py", "samples.py"]


def pytest_collection_finish(session):
    """The operator cases run in groups: only the selected ones (``-k``) are run."""
    for item in session.items:
        runner = getattr(item.module, "RUNNER", None)
        if runner is not None:
            runner.select(each.callspec.params["case"].id for each in session.items
                          if getattr(each.module, "RUNNER", None) is runner)
            return


@pytest.fixture(scope="session", autouse=True)
def _files(tmp_path_factory):
    """The data sets readers and decoders read are written under pytest's temporary folder."""
    from conformance import samples
    samples.FOLDER = tmp_path_factory.mktemp("conformance")
    yield
