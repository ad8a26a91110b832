"""The tier needs NVIDIA DALI as its reference: without it, nothing here is collected."""
import importlib.util


def _has_dali() -> bool:
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except ModuleNotFoundError:  # no 'nvidia' package at all
        return False


collect_ignore_glob = [] if _has_dali() else ["test_*.py", "cases*.py", "harness.py"]
