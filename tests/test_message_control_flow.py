"""No control flow on an exception's message text: callers match errors by type (ir/errors.py,
runtime/ort_messages.py), so rewording a message never changes behaviour.

An exception's text is read in the one place that reads onnxruntime's messages
(runtime/ort_messages.py) and the one that reads onnx's (compiler/onnx_errors.py); everywhere
else a message is only passed on or displayed. The test follows, per function, every name bound
to an exception (`except E as exc:`, a parameter annotated with an exception type) into the text
made from it (`str(exc)`, `exc.args`, a call given `exc`, a name assigned from those), and refuses
what decides on that text: an `in` / `==` comparison, a regex search, a startswith / split ... on it."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("compiler", "ir", "lowering", "runtime")
READERS = {"runtime/ort_messages.py", "compiler/onnx_errors.py"}

# Methods that decide on a string (str's, and re's when given the text).
_STRING_TESTS = {"startswith", "endswith", "find", "rfind", "index", "rindex", "count", "split", "rsplit",
                 "partition", "rpartition"}
_REGEX_TESTS = {"search", "match", "fullmatch", "findall", "finditer", "sub", "subn"}
_MESSAGE_ATTRIBUTES = {"args", "msg", "message"}
# Calls given an exception that do not make text of it (the readers' typed findings included).
_NOT_TEXT = {"isinstance", "type", "getattr", "hasattr", "id", "issubclass",
             "parse_provider_failure", "binding_cannot_convert", "failed_after_placement"}


def _exception_annotation(annotation: "ast.expr | None") -> bool:
    text = ast.unparse(annotation) if annotation is not None else ""
    return "Exception" in text or "Error" in text


def _names(expr: ast.AST) -> "set[str]":
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}


def _bound(target: ast.AST) -> "set[str]":
    """The names an assignment target binds (not those of a subscript or attribute it writes into)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_bound(t) for t in target.elts))
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    return set()


class _Function:
    """The exception names and the text names derived from them in one function (or module body)."""

    def __init__(self, body: "list[ast.stmt]", exceptions: "set[str]") -> None:
        self.exceptions = set(exceptions)
        for node in _walk(body):
            if isinstance(node, ast.ExceptHandler) and node.name:
                self.exceptions.add(node.name)
        self.text: "set[str]" = set()
        changed = True
        while changed:          # names assigned from message text, to a fixed point
            changed = False
            for node in _walk(body):
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if self.is_text(node.value):
                        for target in targets:
                            new = _bound(target) - self.text
                            if new:
                                self.text |= new
                                changed = True

    def is_text(self, expr: ast.AST) -> bool:
        """`expr` holds an exception's message text (or is built from it)."""
        for node in ast.walk(expr):
            if isinstance(node, ast.Name) and node.id in self.text:
                return True
            if isinstance(node, ast.Attribute) and node.attr in _MESSAGE_ATTRIBUTES \
                    and _names(node.value) & self.exceptions:
                return True
            if isinstance(node, ast.Call):
                func = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if func in _NOT_TEXT:
                    continue
                given = [*node.args, *(k.value for k in node.keywords)]
                if any(isinstance(a, ast.Name) and a.id in self.exceptions for a in given):
                    return True
            if isinstance(node, ast.JoinedStr) and _names(node) & self.exceptions:
                return True
        return False


def _walk(body: "list[ast.stmt]"):
    """The nodes of a body, not entering nested functions (each is its own scope)."""
    scope = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    stack: "list[ast.AST]" = [node for node in body if not isinstance(node, scope)]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, scope):
                stack.append(child)


def _scopes(tree: ast.Module):
    yield tree.body, set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            yield node.body, {a.arg for a in args if _exception_annotation(a.annotation)}


def message_decisions(source: str, filename: str = "<case>") -> "list[tuple[int, str]]":
    """(line, code) for every decision made on an exception's message text."""
    found = []
    for body, exceptions in _scopes(ast.parse(source, filename)):
        scope = _Function(body, exceptions)
        if not scope.exceptions:
            continue
        for node in _walk(body):
            decides = False
            if isinstance(node, ast.Compare):
                ops = (ast.In, ast.NotIn, ast.Eq, ast.NotEq)
                decides = any(isinstance(op, ops) for op in node.ops) and \
                    any(scope.is_text(e) for e in [node.left, *node.comparators])
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                method = node.func.attr
                collapse = method in ("split", "rsplit") and not node.args     # whitespace, for display
                if method in _STRING_TESTS and not collapse:
                    decides = scope.is_text(node.func.value)
                if method in _REGEX_TESTS and not decides:
                    decides = any(scope.is_text(a) for a in node.args)
            if decides:
                found.append((node.lineno, ast.unparse(node)))
    return found


@pytest.mark.parametrize("source, decides", [
    ('try:\n    f()\nexcept E as exc:\n    if "memory limit" in str(exc):\n        raise\n', True),
    ('try:\n    f()\nexcept E as exc:\n    found = PATTERN.search(str(exc))\n', True),
    ('try:\n    f()\nexcept E as exc:\n    text = str(exc)\n    if "x" not in text.lower():\n        raise\n', True),
    ('try:\n    f()\nexcept E as exc:\n    reason = str(exc).split("load: ", 1)[-1]\n', True),
    ('try:\n    f()\nexcept E as exc:\n    if exc.args[0] == "no":\n        pass\n', True),
    ('try:\n    f()\nexcept E as exc:\n    if re.match("x", first_line(exc)):\n        pass\n', True),
    ('def probe(region, exc: BaseException):\n    return NODE.search(str(exc))\n', True),
    ('try:\n    f()\nexcept E as exc:\n    if isinstance(exc, MemoryLimitExceeded):\n        raise\n', False),
    ('try:\n    f()\nexcept E as exc:\n    report.error = str(exc)\n', False),
    ('try:\n    f()\nexcept E as exc:\n    raise Mine(f"cannot: {first_line(exc)}") from None\n', False),
    ('try:\n    f()\nexcept OSError as exc:\n    if exc.errno == errno.ENOSPC:\n        pass\n', False),
    ('try:\n    f()\nexcept E as exc:\n    if exc.not_implemented and exc.node in names:\n        cut(exc.node)\n', False),
    ('def f(text: str):\n    return "x" in text\n', False),
    ('try:\n    f()\nexcept E as exc:\n    print(" ".join(str(exc).split()))\n', False),
])
def test_the_scanner_sees_decisions_on_message_text(source, decides):
    assert bool(message_decisions(source)) is decides


def _sources():
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative not in READERS:
                yield relative, path


@pytest.mark.parametrize("relative, path", list(_sources()), ids=lambda v: v if isinstance(v, str) else "")
def test_no_control_flow_on_message_text(relative, path):
    found = message_decisions(path.read_text(encoding="utf-8"), relative)
    assert not found, (f"{relative} decides on an exception's message text (match the error's type; "
                       f"onnxruntime's words are read in runtime/ort_messages.py): "
                       + "; ".join(f"line {line}: {code}" for line, code in found))
