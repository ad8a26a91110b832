"""The structure the package promises, checked on the source:

- the layers (LAYERS, bottom to top; docs/architecture.md shows the same table): a module imports
  only from its own layer or below, deferred imports inside functions included, and no import
  circle joins modules, whatever their layers;
- the operator families (penstock.operators.<family>) import penstock.operators.shared and the
  layers below, never one another;
- the pipeline and the executor know operators only through penstock.contract (they import no
  operator family and probe no operator for attributes nobody declared);
- kernels/ holds Triton kernels, codec bindings and CPU image maths: no threads, queues or exit
  hooks (what keeps state across calls lives in penstock.runtime)."""
import ast
import fnmatch
import pathlib

PACKAGE = pathlib.Path(__file__).parent.parent / "penstock"

# (layer, module patterns), bottom to top; a module belongs to the first layer with a matching pattern
LAYERS = [
    # columns: a batch's per-sample values as the worker processes send them, data like batch.py's
    # (the runtime's GPU decode reads its images from them)
    ("foundations", ["penstock.types", "penstock.numeric", "penstock.limits", "penstock.batch", "penstock.devices",
                     "penstock.paths", "penstock.sharding", "penstock.columns"]),
    ("kernels", ["penstock.kernels", "penstock.kernels.*"]),
    ("runtime", ["penstock.runtime", "penstock.runtime.*"]),
    ("contract", ["penstock.schema", "penstock.registry", "penstock.contract", "penstock.draws", "penstock.tuning",
                  "penstock.streams", "penstock.capabilities", "penstock.frames"]),
    ("operators", ["penstock.operators", "penstock.operators.*"]),
    ("graph", ["penstock.graph", "penstock.conditionals"]),
    ("engine", ["penstock.executor", "penstock.executor.*", "penstock.optimize"]),
    ("pipeline", ["penstock.pipeline", "penstock.pipeline_*", "penstock.checkpoints", "penstock.distributed"]),
    # fn, ops, api, math, compose, recipes, tfrecord, auto_aug, plugin, compat, data, cli, demo, bench; and
    # eager: like fn, a namespace of operator functions made by api (each call runs a pipeline)
    ("surface", ["penstock", "penstock.*"]),
]
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


def _modules() -> dict:
    """Every module of the package by dotted name -> its path."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imports(modules: dict) -> dict:
    """module -> {(imported penstock module, line)}: every import statement, at the top or inside a
    function, relative ones resolved; ``from package import name`` counts as importing the
    submodule where ``name`` is one."""
    def known(name):
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    found = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        edges = set()
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            else:
                continue
            for target in targets:
                target = known(target) if target.split(".")[0] == "penstock" else None
                if target is not None and target != module:
                    edges.add((target, node.lineno))
        found[module] = edges
    return found


def _layer(module: str) -> int:
    return next(index for index, (_, patterns) in enumerate(LAYERS)
                if any(fnmatch.fnmatchcase(module, pattern) for pattern in patterns))


def _family(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "operators" else None


def test_every_import_points_to_its_own_layer_or_below():
    modules = _modules()
    broken = []
    for module, edges in sorted(_imports(modules).items()):
        for target, line in sorted(edges):
            if _layer(target) > _layer(module):
                broken.append(f"{modules[module].relative_to(PACKAGE.parent)}:{line}: {module} "
                              f"({LAYERS[_layer(module)][0]}) imports {target} ({LAYERS[_layer(target)][0]}), "
                              "a layer above it")
    assert not broken, "imports that point up the layers:\n" + "\n".join(broken)


def test_no_import_circle():
    modules = _modules()
    imports = _imports(modules)
    graph = {module: {target for target, _ in edges} for module, edges in imports.items()}
    # Tarjan's strongly connected components, iteratively
    index, low, stack, on_stack, circles, counter = {}, {}, [], set(), [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = counter[0]
                    counter[0] += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    assert not circles, "modules that import one another, directly or through others (the imports "\
        "that close each circle):\n" + "\n".join(
            f"{modules[module].relative_to(PACKAGE.parent)}:{line}: {module} imports {target}"
            for circle in circles for module in circle for target, line in sorted(imports[module]) if target in circle)


def test_operator_families_import_only_the_shared_package():
    modules = _modules()
    broken = []
    for module, edges in sorted(_imports(modules).items()):
        family = _family(module)
        for target, line in sorted(edges):
            other = _family(target)
            if family is not None and other is not None and other not in (family, "shared"):
                broken.append(f"{modules[module].relative_to(PACKAGE.parent)}:{line}: family '{family}' imports "
                              f"{target} (family '{other}'); share it through penstock.operators.shared")
            if family == "shared" and other not in (None, "shared"):
                broken.append(f"{modules[module].relative_to(PACKAGE.parent)}:{line}: penstock.operators.shared "
                              f"imports {target} (family '{other}')")
    assert not broken, "\n".join(broken)


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


def test_kernels_start_no_thread_and_hold_no_queue_or_exit_hook():
    for path in sorted((PACKAGE / "kernels").glob("*.py")):
        tree = _tree(path)
        for module in set(_imported_modules(tree)) & {"queue", "atexit", "concurrent.futures", "multiprocessing"}:
            raise AssertionError(f"kernels/{path.name} imports {module}: threads, queues, pools and exit hooks "
                                 "belong to penstock.runtime")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "Thread":
                raise AssertionError(f"kernels/{path.name}:{node.lineno} makes a thread: threads belong to "
                                     "penstock.runtime and the executor")
