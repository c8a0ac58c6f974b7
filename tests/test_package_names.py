"""The four folders are imported only by their installed names (onnx_dml_lowering.ir, ...).

pytest runs with the repository root on sys.path (`python -m pytest` puts the working directory
there, and tests/ is a package, so its parent is inserted too: `from tests.builders import ...` needs
it). There, `import ir` would load ir/ a second time as another module, with its own DmlLowerError
class that `except DmlLowerError` elsewhere does not catch. So no file may name the folders bare;
relative imports and onnx_dml_lowering.* are fine. The packages also carry PEP 561 markers."""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("compiler", "ir", "lowering", "runtime")
SCANNED = (*FOLDERS, "tests", "benchmarks")
IMPORTERS = ("import_module", "__import__")           # importlib.import_module("ir"), __import__("ir")


def bare_imports(source: str, filename: str = "<case>") -> "list[tuple[int, str]]":
    """(line, module) for every absolute import of one of the folders by its bare name."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else []
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) in IMPORTERS):
            names = [] if node.args[0].value.startswith(".") else [node.args[0].value]
        else:
            continue
        found += [(node.lineno, name) for name in names if name.split(".")[0] in FOLDERS]
    return found


@pytest.mark.parametrize("source, expected", [
    ("import ir", ["ir"]),
    ("import ir.graph as g", ["ir.graph"]),
    ("import numpy, lowering", ["lowering"]),
    ("from lowering.node import NodeInfo", ["lowering.node"]),
    ("from compiler import compile_model", ["compiler"]),
    ("def f():\n    from runtime import check\n", ["runtime"]),
    ("if TYPE_CHECKING:\n    import compiler.cli\n", ["compiler.cli"]),
    ("importlib.import_module('runtime.oracle')", ["runtime.oracle"]),
    ("__import__('ir')", ["ir"]),
    ("from . import ir", []),
    ("from .ir import Graph", []),
    ("from ..lowering import node", []),
    ("from onnx_dml_lowering.ir import Graph", []),
    ("import onnx_dml_lowering.compiler", []),
    ("import irony, compilers, runtimes", []),
    ("import_module('.graph', __name__)", []),
    ("import_module(name)", []),
])
def test_bare_import_finder(source, expected):
    assert [name for _, name in bare_imports(source)] == expected


def test_no_file_imports_a_folder_by_its_bare_name():
    files = [p for top in SCANNED for p in sorted((ROOT / top).rglob("*.py"))]
    assert len(files) > 100                              # the scan saw the code base
    offenders = [f"{p.relative_to(ROOT)}:{line}: {name}"
                 for p in files for line, name in bare_imports(p.read_text(encoding="utf-8"), str(p))]
    assert not offenders, "import these as onnx_dml_lowering.<name> or relatively:\n" + "\n".join(offenders)


def test_every_package_is_marked_typed_and_ships_the_marker():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    dirs = setuptools["package-dir"]
    for package in setuptools["packages"]:
        top, _, rest = package.removeprefix("onnx_dml_lowering.").partition(".")
        folder = ROOT / dirs[f"onnx_dml_lowering.{top}"] / rest.replace(".", "/")
        if not any(folder.glob("*.py")) and package in setuptools["package-data"]:
            continue        # a folder of data only (the DirectML hosts' C sources): listed, no Python
        assert (folder / "__init__.py").is_file(), package
    for top in FOLDERS:
        assert (ROOT / dirs[f"onnx_dml_lowering.{top}"] / "py.typed").is_file(), top
    assert "py.typed" in setuptools["package-data"]["*"]
