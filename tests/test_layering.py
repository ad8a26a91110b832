"""The structure the operator contract promises, checked on the source: the pipeline and the
executor know operators only through penstock.contract (they import no operator family and probe
no operator for attributes nobody declared), and kernels/ holds bindings and kernels, not threads
or queues."""
import ast
import pathlib

PACKAGE = pathlib.Path(__file__).parent.parent / "penstock"
ENGINE = [PACKAGE / "pipeline.py", PACKAGE / "optimize.py", PACKAGE / "graph.py",
          *sorted((PACKAGE / "executor").glob("*.py"))]
# getattr on these only: thread-local storage, and a half-made object in __del__
ALLOWED_GETATTR_TARGETS = {"self", "self._local", "_defining"}


def _tree(path):
    return ast.parse(path.read_text(), str(path))


def _imported_modules(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def test_the_engine_imports_no_operator_family():
    for path in ENGINE:
        families = [module for module in _imported_modules(_tree(path)) if module.startswith("penstock.operators")]
        assert not families, f"{path.name} imports {families}: use penstock.contract"


def test_the_engine_probes_no_attribute():
    for path in ENGINE:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr"):
                target = ast.unparse(node.args[0])
                assert node.func.id == "getattr" and target in ALLOWED_GETATTR_TARGETS, \
                    f"{path.name}:{node.lineno}: {ast.unparse(node)}; declare the capability in penstock.contract"


def test_kernels_start_no_thread_and_hold_no_queue():
    for path in sorted((PACKAGE / "kernels").glob("*.py")):
        tree = _tree(path)
        assert "queue" not in set(_imported_modules(tree)), f"{path.name} imports queue"
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "Thread":
                raise AssertionError(f"{path.name}:{node.lineno} makes a thread: threads belong to the executor")
