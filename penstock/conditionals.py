"""``if``, ``elif``, ``else``, ``and``, ``or``, ``not`` and ``x if c else y`` on per-sample predicates,
in a pipeline made with ``enable_conditionals=True`` (as in DALI).

The pipeline function is rewritten once, before it runs (``convert``): each ``if`` whose condition
turns out to be a DataNode runs both branches while the graph is defined, each in a ``Scope`` of
its own; a value used in a branch is first split by the predicate (``_split``), so the branch's
operators see only its samples, and every variable a branch assigns is merged back per sample
(``_merge``) after the ``if``. A condition that is a plain Python value keeps Python's meaning, so
ordinary ``if``s (on a function argument, say) run as written. ``and``/``or`` evaluate their right
operand only on the samples that need it, as Python does for one value.

The predicate of an ``if`` must be a CPU batch of scalars (a comparison, ``fn.random.coin_flip()``,
any bool or numeric scalar: non-zero is true), as in DALI. The functions, methods, lambdas, callable
objects and partials the pipeline function calls are rewritten too, except those of penstock, of
installed packages and of the standard library.
"""
from __future__ import annotations

import ast
import functools
import inspect
import os
import sys
import sysconfig
import textwrap
import types as pytypes
import weakref

import numpy as np

from penstock import registry
from penstock.graph import DataNode, Scope, Undefined, add_validated, constant_batch, current_graph

RUNTIME = "_penstock_conditionals"  # the name this module has inside rewritten functions
PREFIX = "_penstock_"  # of the variables the rewriting introduces


NOT_SET = Undefined("", "")  # a variable not set before the `if`


class Branching:
    """One conditional on a per-sample predicate while the graph is defined: its two scopes, the
    values each branch left in the variables, and their merge."""

    def __init__(self, predicate: DataNode, where: str, what: str = "`if`"):
        self.graph = current_graph("if")
        self.parent = self.graph.scope
        if predicate.device != "cpu":
            raise TypeError(f"the condition of the {what} at {where} ({predicate.name}) is on the GPU; conditions "
                            "are CPU batches of scalars, as in DALI: compute them on the CPU")
        predicate = self.graph.bring(predicate) if self.parent is not None else predicate
        self.where = where
        self.true = Scope(self.parent, predicate, True, where)
        self.false = Scope(self.parent, predicate, False, where, sibling=self.true)
        self.true.sibling = self.false
        self.predicate = predicate
        self.values: dict[bool, tuple] = {}

    def enter(self, branch: bool) -> None:
        self.graph.scope = self.true if branch else self.false

    def record(self, branch: bool, values: tuple) -> None:
        self.values[branch] = values
        self.graph.scope = self.parent

    def merge(self, names: tuple) -> tuple:
        self.graph.scope = self.parent
        return tuple(self.merge_value(name, true_value, false_value)
                     for name, true_value, false_value in zip(names, self.values[True], self.values[False]))

    def merge_value(self, name: str, true_value, false_value):
        """One variable after the conditional. As in DALI, tuples, lists and dicts merge item by item
        (both branches must give the same structure), and Python values that differ, or meet a
        batch, become constant batches merged per sample."""
        if true_value is false_value:
            return true_value
        if isinstance(true_value, Undefined) or isinstance(false_value, Undefined):
            return Undefined(name, self.where)
        structures = [value for value in (true_value, false_value) if isinstance(value, (tuple, list, dict))]
        if structures:
            if len(structures) == 1 or type(true_value) is not type(false_value) or \
                    len(true_value) != len(false_value) or \
                    (isinstance(true_value, dict) and true_value.keys() != false_value.keys()):
                raise ValueError("Divergent data found in different branches of `if/else` control flow statement. "
                                 "Variables in all code paths are merged into common output batches. The values "
                                 "assigned to a given variable need to have the same nesting structure in every "
                                 f"code path (both `if` branches): at {self.where}, variable '{name}' is "
                                 f"{true_value!r} in one branch and {false_value!r} in the other (tuples and lists "
                                 "need one length, dicts the same keys)")
            if isinstance(true_value, dict):
                return {key: self.merge_value(f"{name}[{key!r}]", true_value[key], false_value[key])
                        for key in true_value}
            return type(true_value)(self.merge_value(f"{name}[{i}]", a, b)
                                    for i, (a, b) in enumerate(zip(true_value, false_value)))
        if not isinstance(true_value, DataNode) and not isinstance(false_value, DataNode):
            try:
                if type(true_value) is type(false_value) and np.array_equal(true_value, false_value):
                    return true_value
            except Exception:
                pass
        return self._merge_nodes(*(self._as_batch(name, value, true_value, false_value)
                                   for value in (true_value, false_value)))

    def _as_batch(self, name: str, value, true_value, false_value) -> DataNode:
        """A branch's value as a batch: a constant batch of a Python value (made before the split)."""
        if isinstance(value, DataNode):
            return value
        self.graph.scope = self.parent
        try:
            return constant_batch(value)
        except (TypeError, ValueError):
            raise TypeError(f"variable '{name}' is {true_value!r} in one branch of the conditional at {self.where} "
                            f"and {false_value!r} in the other; values that differ per sample must be batches or "
                            "numbers and arrays (which become constant batches)") from None

    def _merge_nodes(self, true_value: DataNode, false_value: DataNode) -> DataNode:
        parts = []
        for value, scope in ((true_value, self.true), (false_value, self.false)):
            self.graph.scope = scope
            value = self.graph.bring(value)
            if value.device == "cpu" and "gpu" in (true_value.device, false_value.device):
                value = value.gpu()  # a branch that left its samples on the CPU joins one on the GPU
            parts.append(value)
        self.graph.scope = self.parent
        schema = registry.get_schema("_merge")
        static, per_sample = schema.validate({"predicate": self.predicate, "where": self.where,
                                              "device": parts[0].device})
        return add_validated(schema, tuple(parts), static, per_sample)


# ---- what rewritten code calls -----------------------------------------------------------------
def condition(test, where: str, what: str = "`if`"):
    """A Branching for a per-sample predicate, else the test's Python truth value (evaluated once)."""
    if isinstance(test, DataNode):
        return Branching(test, where, what)
    if isinstance(test, Undefined):
        raise NameError(test.message)
    return bool(test)


def is_branching(value) -> bool:
    return isinstance(value, Branching)


def static_condition(test, where: str, reason: str) -> bool:
    """The condition of an ``if`` whose branches cannot run per sample (they ``return``, say)."""
    if isinstance(test, DataNode):
        raise TypeError(f"the `if` at {where} has a per-sample condition ({test.name}) but its branches {reason}, "
                        "which cannot differ per sample: assign a variable in each branch instead")
    return bool(test)


def if_expression(test, if_true, if_false, where: str):
    """``if_true() if test else if_false()``, per sample when ``test`` is a DataNode."""
    branching = condition(test, where, "conditional expression")
    if not isinstance(branching, Branching):
        return if_true() if branching else if_false()
    branching.enter(True)
    branching.record(True, (if_true(),))
    branching.enter(False)
    branching.record(False, (if_false(),))
    return branching.merge(("the conditional expression's value",))[0]


def logical_and(left, right, where: str):
    """``left and right()``: right is evaluated on the samples where left is true."""
    if not isinstance(left, DataNode):
        return right() if left else left
    branching = Branching(left, where, "`and`")
    branching.enter(True)
    branching.record(True, (_operand(right(), "and", where),))
    branching.record(False, (branching.predicate,))
    return branching.merge(("the value of `and`",))[0]


def logical_or(left, right, where: str):
    """``left or right()``: right is evaluated on the samples where left is false."""
    if not isinstance(left, DataNode):
        return left if left else right()
    branching = Branching(left, where, "`or`")
    branching.record(True, (branching.predicate,))
    branching.enter(False)
    branching.record(False, (_operand(right(), "or", where),))
    return branching.merge(("the value of `or`",))[0]


def logical_not(value, where: str):
    if isinstance(value, DataNode):
        if value.device != "cpu":
            raise TypeError(f"the operand of `not` at {where} ({value.name}) is on the GPU; logical operators take "
                            "CPU batches of scalar bools, as in DALI")
        return value == False  # noqa: E712  (element-wise: a DataNode's == makes a bool batch)
    return not value


def _operand(value, what: str, where: str):
    if not isinstance(value, DataNode):
        raise TypeError(f"the right operand of `{what}` at {where} is {value!r}; with a per-sample left operand both "
                        "must be batches of scalar bools")
    return value


_rewritten: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # code object -> rewritten code object
_SKIPPED_PATHS = tuple(os.path.realpath(path) + os.sep for path in {
    os.path.dirname(os.path.abspath(__file__)), sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
    sysconfig.get_paths()["platlib"], *[p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]})
_NOT_REWRITTEN_CALLS = {"super", "locals", "globals", "vars", "eval", "exec"}


def call(_penstock_function, /, *args, **kwargs):
    """Calls the function, rewritten first when it is the user's own Python code."""
    return convert_if_users(_penstock_function)(*args, **kwargs)


def convert_if_users(function):
    """The user's function, method, lambda, callable object or functools.partial of one, rewritten
    (as DALI's conditionals convert what the pipeline function calls); anything else as it is.
    A decorated function is its decorator's wrapper: the wrapper is rewritten, and the function it
    wraps when the wrapper calls it, so the decorator keeps its effect."""
    if isinstance(function, functools.partial):
        inner = convert_if_users(function.func)
        return function if inner is function.func else functools.partial(inner, *function.args, **function.keywords)
    if isinstance(function, pytypes.MethodType):
        inner = convert_if_users(function.__func__)
        return function if inner is function.__func__ else pytypes.MethodType(inner, function.__self__)
    if not isinstance(function, pytypes.FunctionType):
        call_method = getattr(type(function), "__call__", None)
        if isinstance(function, type) or not isinstance(call_method, pytypes.FunctionType):
            return function
        inner = convert_if_users(call_method)
        return function if inner is call_method else pytypes.MethodType(inner, function)
    if RUNTIME in function.__code__.co_freevars:  # defined inside rewritten code: rewritten with it
        return function
    filename = os.path.realpath(function.__code__.co_filename)
    if filename.startswith(_SKIPPED_PATHS) or not os.path.exists(filename):
        return function
    try:
        return convert(function)
    except (OSError, TypeError, SyntaxError):  # no source to rewrite: called as it is
        return function


def check_pipeline_definition(function) -> None:
    """A pipeline definition is rewritten when conditionals are on: one marked to be left as written
    (do_not_convert) is refused, as in DALI."""
    if getattr(function, "_penstock_converted", False):
        raise ValueError("Pipeline definition cannot be marked with @do_not_convert.")


def convert(function):
    """``function`` rewritten so that its conditionals may be per sample (module docstring). The
    rewritten code keeps the file name and line numbers of the original, and the function keeps its
    closure's cells (a ``nonlocal`` it assigns is the original's), defaults and attributes."""
    if getattr(function, "_penstock_converted", False):
        return function
    code = _rewritten.get(function.__code__)
    if code is None:
        code = _rewritten[function.__code__] = _rewrite(function)
    cells = dict(zip(function.__code__.co_freevars, function.__closure__ or ()))
    cells[RUNTIME] = pytypes.CellType(sys.modules[__name__])
    converted = pytypes.FunctionType(code, function.__globals__, function.__name__, function.__defaults__,
                                     tuple(cells[name] for name in code.co_freevars))
    converted.__kwdefaults__ = function.__kwdefaults__
    functools.update_wrapper(converted, function)
    converted._penstock_converted = True
    return converted


def _rewrite(function) -> pytypes.CodeType:
    """The code object of the function's definition rewritten, read from its own source (not that of
    the function it wraps, which ``inspect.getsource`` would give for a decorator's wrapper)."""
    lines, first = inspect.findsource(function)
    filename = function.__code__.co_filename
    if function.__name__ == "<lambda>":
        definition = _lambda_definition(function, "".join(lines))
    else:
        tree = ast.parse(textwrap.dedent("".join(inspect.getblock(lines[first:]))))
        definition = tree.body[0]
        if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
            raise TypeError(f"cannot rewrite {function!r}: its source is not a function definition")
        definition.decorator_list = []  # the function object is already what its decorators made
        ast.increment_lineno(tree, first)
    for node in ast.walk(definition):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.body = _returns_as_results(node.body)
    definition = _Rewriter(os.path.basename(filename)).visit(definition)
    free = function.__code__.co_freevars
    module = ast.parse(f"def {PREFIX}factory({', '.join((RUNTIME, *free))}):\n    return {PREFIX}function")
    for node in ast.walk(module):  # the factory's own lines stand at the function's
        if "lineno" in node._attributes:
            ast.copy_location(node, definition)
    factory = module.body[0]
    if isinstance(definition, ast.Lambda):
        factory.body[0].value = definition
    else:
        # defined under another name: the function's own name in its body (a recursive call) stays
        # the global it is, not a variable of the factory
        definition.name = f"{PREFIX}function"
        factory.body.insert(0, definition)
    namespace: dict = {}
    exec(compile(ast.fix_missing_locations(module), filename, "exec"), function.__globals__, namespace)
    code = namespace[f"{PREFIX}factory"](*[None] * (1 + len(free))).__code__
    return code.replace(co_name=function.__code__.co_name, co_qualname=function.__code__.co_qualname)


def _lambda_definition(function, source: str) -> ast.Lambda:
    """The lambda's node in its file's source: the one whose body holds every position of its code
    (the innermost such), else the only one on its line with its parameters."""
    code = function.__code__
    found = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Lambda)]
    positions = [(line, column, end_line, end_column)
                 for line, end_line, column, end_column in getattr(code, "co_positions", lambda: ())()
                 if None not in (line, column, end_line, end_column) and (line, column) != (end_line, end_column)]
    if positions:
        def holds(node):
            body = node.body
            return all((body.lineno, body.col_offset) <= (line, column) and
                       (end_line, end_column) <= (body.end_lineno, body.end_col_offset)
                       for line, column, end_line, end_column in positions)
        found = [node for node in found if holds(node)]
        found = found[-1:] if found else []  # ast.walk goes outwards in: the last is the innermost
    else:
        parameters = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        found = [node for node in found if node.lineno == code.co_firstlineno and
                 tuple(a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)) == parameters]
    if len(found) != 1:
        raise TypeError(f"cannot find the source of {function!r}")
    return found[0]


# ---- the rewriting -------------------------------------------------------------------------------
class _Rewriter(ast.NodeTransformer):
    def __init__(self, filename: str):
        self.filename = filename
        self.count = 0

    def where(self, node) -> str:
        return f"{self.filename}:{node.lineno}"

    def runtime(self, name: str) -> ast.expr:
        return ast.Attribute(ast.Name(RUNTIME, ast.Load()), name, ast.Load())

    def thunk(self, expression: ast.expr) -> ast.Lambda:
        return ast.Lambda(ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                                        kwarg=None, defaults=[]), expression)

    def visit_BoolOp(self, node: ast.BoolOp):
        self.generic_visit(node)
        function = "logical_and" if isinstance(node.op, ast.And) else "logical_or"
        result = node.values[-1]
        for value in reversed(node.values[:-1]):
            result = ast.Call(self.runtime(function), [value, self.thunk(result), ast.Constant(self.where(node))], [])
        return ast.copy_location(result, node)

    def visit_UnaryOp(self, node: ast.UnaryOp):
        self.generic_visit(node)
        if not isinstance(node.op, ast.Not):
            return node
        return ast.copy_location(ast.Call(self.runtime("logical_not"), [node.operand,
                                                                         ast.Constant(self.where(node))], []), node)

    def visit_IfExp(self, node: ast.IfExp):
        self.generic_visit(node)
        return ast.copy_location(ast.Call(self.runtime("if_expression"), [
            node.test, self.thunk(node.body), self.thunk(node.orelse), ast.Constant(self.where(node))], []), node)

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in _NOT_REWRITTEN_CALLS:
            return node
        return ast.copy_location(ast.Call(self.runtime("call"), [node.func, *node.args], node.keywords), node)

    def visit_If(self, node: ast.If):
        names = sorted(_assigned_names(node.body + node.orelse))
        leaves = _leaves_block(node.body + node.orelse)
        self.generic_visit(node)
        where = ast.Constant(self.where(node))
        if leaves:
            node.test = ast.Call(self.runtime("static_condition"), [node.test, where, ast.Constant(leaves)], [])
            return node
        self.count += 1
        branching = f"{PREFIX}if{self.count}"
        saved = {name: f"{PREFIX}if{self.count}_{name.replace('.', '_dot_')}" for name in names}
        names_tuple = ", ".join(names)
        lines = [f"{branching} = {RUNTIME}.condition(__test__, {self.where(node)!r})",
                 f"if not {RUNTIME}.is_branching({branching}):",
                 f"    if {branching}:", "        __body__", "    else:", "        __orelse__", "else:"]
        for name in names:
            lines += ["    try:", f"        {saved[name]} = {name}", "    except (NameError, AttributeError):",
                      f"        {saved[name]} = {RUNTIME}.NOT_SET"]
        lines += [f"    {branching}.enter(True)", "    __body__"]
        lines += _recorded(branching, True, names)
        lines += [f"    {name} = {saved[name]}" for name in names]
        lines += [f"    {branching}.enter(False)", "    __orelse__"]
        lines += _recorded(branching, False, names)
        if names:
            lines.append(f"    ({names_tuple},) = {branching}.merge({tuple(names)!r})")
        replacement = ast.parse("\n".join(lines)).body
        for statement in replacement:  # the template's code stands at the `if`'s line
            for child in ast.walk(statement):
                if "lineno" in child._attributes:
                    ast.copy_location(child, node)
        filled = _Fill({"__test__": node.test, "__body__": node.body, "__orelse__": node.orelse or [ast.Pass()]})
        return [filled.visit(statement) for statement in replacement]


# ---- `return` in branches -----------------------------------------------------------------------
RESULT = f"{PREFIX}result"  # the variable a function's returns in `if` branches assign (merged as the user's)


def _returns_as_results(block: list) -> list:
    """The block with its `if`s that return in every branch made into `if`s that assign RESULT, and
    one `return RESULT` after them, so a per-sample condition merges what the branches return (as
    DALI's rewriting does). ``if c: return a`` followed by statements that return is read as
    ``if c: return a else: <those statements>``. Blocks that return any other way stay as written."""
    block = list(block)
    for position, statement in enumerate(block):
        if not isinstance(statement, ast.If) or not _returns_in(statement):
            continue
        statement.body = _returns_as_results(statement.body)
        statement.orelse = _returns_as_results(statement.orelse)
        rest = block[position + 1:]
        if not statement.orelse and rest and _always_returns(statement.body) and _always_returns(rest):
            statement.orelse, block = _returns_as_results(rest), block[:position + 1]
        if position == len(block) - 1 and _always_returns([statement]) and _returns_only_at_ends([statement]):
            _assign_results([statement])
            return block + [ast.copy_location(ast.Return(ast.Name(RESULT, ast.Load())), statement)]
    return block


def _returns_in(node) -> bool:
    class Finder(_Scoped):
        found = False

        def visit_Return(self, node):
            self.found = True
    finder = Finder()
    finder.visit(node)
    return finder.found


def _always_returns(block: list) -> bool:
    """Every way through the block ends in a `return` (its last statement, or an `if` whose
    branches both always return)."""
    if not block:
        return False
    last = block[-1]
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and _always_returns(last.body) and _always_returns(last.orelse)


def _returns_only_at_ends(block: list) -> bool:
    *head, last = block
    if any(_returns_in(statement) for statement in head):
        return False
    if isinstance(last, ast.If):
        return _returns_only_at_ends(last.body) and _returns_only_at_ends(last.orelse)
    return True


def _assign_results(block: list) -> None:
    last = block[-1]
    if isinstance(last, ast.Return):
        value = last.value if last.value is not None else ast.Constant(None)
        block[-1] = ast.copy_location(ast.Assign([ast.Name(RESULT, ast.Store())], value), last)
    else:
        _assign_results(last.body)
        _assign_results(last.orelse)


def _recorded(branching: str, branch: bool, names: list[str]) -> list[str]:
    """Lines that record each variable's value at the end of a branch (NOT_SET when unbound)."""
    lines = [f"    {PREFIX}values = []"]
    for name in names:
        lines += ["    try:", f"        {PREFIX}values.append({name})", "    except (NameError, AttributeError):",
                  f"        {PREFIX}values.append({RUNTIME}.NOT_SET)"]
    return lines + [f"    {branching}.record({branch}, tuple({PREFIX}values))"]


class _Fill(ast.NodeTransformer):
    """Puts the original test and branches in the template's placeholders (copies for the second use)."""

    def __init__(self, parts: dict):
        self.parts = parts
        self.used: set[str] = set()

    def _part(self, name: str):
        part = self.parts[name]
        if name in self.used:
            import copy
            part = copy.deepcopy(part)
        self.used.add(name)
        return part

    def visit_Expr(self, node: ast.Expr):
        if isinstance(node.value, ast.Name) and node.value.id in ("__body__", "__orelse__"):
            return self._part(node.value.id)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name):
        if node.id == "__test__":
            return self._part("__test__")
        return node


class _Scoped(ast.NodeVisitor):
    """Walks a block without entering the nested functions, classes and comprehensions (their names
    are their own)."""

    def visit_FunctionDef(self, node):
        self.on_definition(node.name)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Lambda(self, node):
        pass

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda

    def on_definition(self, name: str) -> None:
        pass


def _assigned_names(block: list) -> set[str]:
    class Names(_Scoped):
        def __init__(self):
            self.names: set[str] = set()

        def visit_Name(self, node):
            if isinstance(node.ctx, (ast.Store, ast.Del)) and (not node.id.startswith(PREFIX) or node.id == RESULT):
                self.names.add(node.id)

        def visit_Attribute(self, node):
            # an attribute the block sets (obj.a = ...), merged as a variable is, as in DALI
            if isinstance(node.ctx, ast.Store) and _dotted(node):
                self.names.add(_dotted(node))
            self.generic_visit(node)

        def visit_alias(self, node):
            self.names.add((node.asname or node.name).split(".")[0])

        def on_definition(self, name):
            self.names.add(name)

    finder = Names()
    for statement in block:
        finder.visit(statement)
    return finder.names


def _dotted(node) -> str:
    """``a.b.c`` for an attribute of a plain name's attributes, '' for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _leaves_block(block: list) -> str:
    """What in the block leaves it other than by its end (return, break, continue, yield), in words."""
    class Leaves(_Scoped):
        found = ""
        loops = 0  # loops entered inside the block: a break or continue there stays in it

        def visit_Return(self, node):
            self.found = self.found or "contain `return`"

        def visit_Break(self, node):
            if not self.loops:
                self.found = self.found or "contain `break`"

        def visit_Continue(self, node):
            if not self.loops:
                self.found = self.found or "contain `continue`"

        def visit_Yield(self, node):
            self.found = self.found or "contain `yield`"

        visit_YieldFrom = visit_Yield

        def visit_For(self, node):
            self.loops += 1
            self.generic_visit(node)
            self.loops -= 1

        visit_While = visit_AsyncFor = visit_For

    finder = Leaves()
    for statement in block:
        finder.visit(statement)
    return finder.found
