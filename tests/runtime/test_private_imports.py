"""No runtime module imports another module's private (underscore) names: what one module uses of
another is its public surface."""
import ast
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[2] / "runtime"


def test_no_private_name_is_imported_across_runtime_modules():
    found = []
    for path in sorted(RUNTIME.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                names = [alias.name for alias in node.names]
                modules = (node.module or "").split(".")
                found += [f"{path.name}: {node.module} {name}" for name in names + modules
                          if name.startswith("_") and not name.startswith("__")]
    assert RUNTIME.joinpath("interpreter.py").exists() and found == []
