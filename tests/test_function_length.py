"""No function over 60 lines in runtime/ and compiler/ (docs/architecture.md, "Style the code
follows"): every longer one is listed here with why, and a listed one that is no longer long (or
no longer there) fails too, so the list only shrinks."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 60
# "package/module.py:Class.function" -> why it is longer than LIMIT lines
EXCEPTIONS: "dict[str, str]" = {}


def long_functions(root: Path = ROOT, packages: "tuple[str, ...]" = ("runtime", "compiler")) -> "dict[str, int]":
    """'package/module.py:Outer.name' -> lines, for every function (methods and nested ones too)
    longer than LIMIT, from its def line to its last line."""
    found: "dict[str, int]" = {}

    def visit(node: ast.AST, where: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert child.end_lineno is not None
                length = child.end_lineno - child.lineno + 1
                if length > LIMIT:
                    found[f"{where}:{prefix}{child.name}"] = length
                visit(child, where, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, where, f"{prefix}{child.name}.")
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            visit(ast.parse(path.read_text(encoding="utf-8")), path.relative_to(root).as_posix(), "")
    return found


def test_no_function_over_the_limit_but_the_listed_ones():
    found = long_functions()
    assert {name: length for name, length in found.items() if name not in EXCEPTIONS} == {}
    assert [name for name in EXCEPTIONS if name not in found] == [], "no longer long: take it off the list"


def test_a_long_function_is_found(tmp_path):
    """The check can fail: a 61-line function, a method and a nested one are each found."""
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "runtime").mkdir()
    (tmp_path / "runtime" / "m.py").write_text(
        f"def short():\n    pass\n\n\ndef long():\n{body}\n\n\nclass C:\n    def method(self):\n"
        + "\n".join(f"        y{i} = {i}" for i in range(LIMIT)) + "\n\n    def ok(self):\n        def inner():\n"
        + "\n".join(f"            z{i} = {i}" for i in range(LIMIT)) + "\n        return inner\n")
    assert long_functions(tmp_path, ("runtime",)) == {"runtime/m.py:long": LIMIT + 1, "runtime/m.py:C.method": LIMIT + 1,
                                                      "runtime/m.py:C.ok.inner": LIMIT + 1,
                                                      "runtime/m.py:C.ok": LIMIT + 3}
