"""Backend kinds are types: the text a user gives (`--backends`, the Python API, a saved file's
labels) is parsed once, by runtime/backend_names.py, into a BackendName; everywhere else code asks
that object what the backend is (`is_provider`, `lowering`, `from_dml_ep`, ...).

The test refuses, outside that module, any comparison of a string with a backend-name literal:
`== "ort"`, `!= "cpu"`, `in ("cpu", "ort")`, `.startswith("ort-")`, `.removeprefix("saved:")`.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("compiler", "ir", "lowering", "runtime")
PARSER = "runtime/backend_names.py"

NAMES = {"cpu", "ort", "dml", "ort-cpu", "ort-dml"}
PREFIXES = ("ort:", "ort-", "saved:")
# The same word naming another kind than a backend, with why (file -> literal -> reason).
OTHER_KINDS = {
    "compiler/cli/optimize.py": {"dml": "optimize --for dml: the rewrite target, not a backend"},
    "compiler/inspection.py": {"dml": "inspect --ep dml: the EP a placement is predicted for, not a backend"},
    "compiler/ep/overview.py": {"dml": "a node's side in the placement picture (dml / cpu), not a backend"},
}
_PREFIX_CALLS = {"startswith", "endswith", "removeprefix", "removesuffix"}


def _is_backend_literal(node: ast.AST, other: "dict[str, str]") -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value not in other and (node.value in NAMES or node.value.startswith(PREFIXES))
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_backend_literal(e, other) for e in node.elts)
    if isinstance(node, ast.JoinedStr):          # f"ort:{provider}"
        return bool(node.values) and _is_backend_literal(node.values[0], other)
    return False


def findings(source: str, where: str = "<test>") -> "list[str]":
    """Each comparison with a backend-name literal in `source`: 'file:line: the code'."""
    other = OTHER_KINDS.get(where, {})
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            compares = all(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops)
            if compares and any(_is_backend_literal(side, other) for side in sides):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in _PREFIX_CALLS and node.args and _is_backend_literal(node.args[0], other)):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def _sources() -> "list[Path]":
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def test_no_module_but_the_parser_compares_backend_name_text():
    found = []
    for path in _sources():
        where = path.relative_to(ROOT).as_posix()
        if where != PARSER:
            found += findings(path.read_text(encoding="utf-8"), where)
    assert not found, "backend names compared as text (ask the BackendName instead):\n" + "\n".join(found)


@pytest.mark.parametrize("code", [
    'if name == "ort": pass', 'ok = backend != "cpu"', 'x = name in ("cpu", "ort")', 'x = "dml" in names',
    'x = name.startswith("ort-")', 'x = label.removeprefix("saved:")', 'x = name == f"ort:{provider}"',
    'x = name in {"ort-cpu", "ort-dml"}', 'x = key.startswith(("saved:", "other"))'])
def test_the_check_finds_each_form(code):
    assert findings(code), code


@pytest.mark.parametrize("code", [
    'x = backend.is_provider', 'x = name.lowering is Lowering.STAND_INS', 'x = op == "NonZero"',
    'x = name.startswith("onnx::")', 'x = {"cpu": 1}["cpu"]', 'x = f"{backend}:{output}"'])
def test_the_check_leaves_other_code_alone(code):
    assert not findings(code), code


def test_each_other_kind_is_still_there():
    """An exemption whose file no longer compares that word is stale: it goes."""
    for where, words in OTHER_KINDS.items():
        source = (ROOT / where).read_text(encoding="utf-8")
        assert findings(source, "<no exemption>"), f"{where}: {sorted(words)} no longer compared there"


def test_the_parser_is_where_the_names_are_spelt():
    """The exemption is real: the parser holds every name and prefix the test looks for (if they
    moved elsewhere, the test above would see them there)."""
    tree = ast.parse((ROOT / PARSER).read_text(encoding="utf-8"))
    spelt = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert NAMES | set(PREFIXES) <= spelt
