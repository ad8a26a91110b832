"""No file penstock reads can make it run code: the package never unpickles what it reads (np.load
with allow_pickle, pickle.load, torch.load) nor evaluates text (eval, marshal); literal_eval only
where a format is defined as a Python literal. Checked on the source, so that a new reader cannot
bring it back."""
import ast
import pathlib

PACKAGE = pathlib.Path(__file__).parent.parent / "penstock"
FORBIDDEN_CALLS = {"eval", "literal_eval", "pickle.load", "pickle.Unpickler", "torch.load", "marshal.loads",
                   "marshal.load", "dill.load", "dill.loads", "yaml.load", "yaml.unsafe_load"}
ALLOWED = {
    ("executor/jobs.py", "pickle.loads"),  # a round trip of an exception penstock holds, never bytes it read
    # the .npy header is a Python dict literal (numpy's own reader takes it the same way); literals
    # build no objects but dicts, tuples, strings and numbers, and the header is at most 10,000 bytes
    ("operators/readers/numpy_reader.py", "literal_eval"),
}


def _calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node, ast.unparse(node.func)


def test_nothing_read_is_unpickled_or_evaluated():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        for node, name in _calls(ast.parse(path.read_text(), str(path))):
            short = name.removeprefix("np.").removeprefix("numpy.").removeprefix("ast.")
            if (where, short) in ALLOWED:
                continue
            if short in FORBIDDEN_CALLS or short == "pickle.loads":
                found.append(f"{where}:{node.lineno} {name}")
            for keyword in node.keywords:
                if keyword.arg == "allow_pickle" and not (isinstance(keyword.value, ast.Constant)
                                                          and keyword.value.value is False):
                    found.append(f"{where}:{node.lineno} {name}(allow_pickle={ast.unparse(keyword.value)})")
            if short in ("load", "lib.format.read_array") and name.startswith(("np.", "numpy.")) and \
                    not any(keyword.arg == "allow_pickle" for keyword in node.keywords):
                found.append(f"{where}:{node.lineno} {name} without allow_pickle=False")
    assert not found, "code that can run what a file holds:\n" + "\n".join(found)
