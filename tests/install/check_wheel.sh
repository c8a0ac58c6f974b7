#!/usr/bin/env bash
# The installed wheel owns nothing at the top level of site-packages: built from a clean clone,
# installed into a fresh venv next to PyPI's unrelated `ir` and `compiler` packages, `dml-lower
# demo` runs from an unrelated directory. `make install-check` runs this (CI does too).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git clone -q "$repo" "$work/clone"
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip
"$work/venv/bin/python" -m pip wheel -q --no-deps -w "$work/dist" "$work/clone" 2> "$work/build.log" || { cat "$work/build.log" >&2; exit 1; }
# setuptools' warning wall about a folder of package data it has to guess at (hosts/) shows at every install
if grep -E "would be ignored|absent from the .packages. configuration" "$work/build.log" >&2; then
    echo "check_wheel: the build warns about package discovery (pyproject.toml [tool.setuptools] packages)" >&2
    exit 1
fi
"$work/venv/bin/python" -m pip install -q "$work"/dist/onnx_dml_lowering-*.whl ir==0.1.61 compiler==0.2.0
cd "$work"                                # an unrelated directory: nothing of the repository on sys.path
# Every file of ours sits under onnx_dml_lowering/ (or is its dist-info or the console script).
"$work/venv/bin/python" - <<'PY'
from importlib.metadata import distribution
files = [str(f) for f in distribution("onnx-dml-lowering").files]
ours = [f for f in files if not f.startswith(("onnx_dml_lowering/", "onnx_dml_lowering-", "../../../bin/"))]
assert not ours, f"files outside the namespace: {ours}"
# PEP 561: each package carries its py.typed marker, so type checkers read the installed hints.
typed = {f.rsplit("/", 2)[-2] for f in files if f.endswith("/py.typed")}
assert {"ir", "lowering", "runtime", "compiler"} <= typed, f"py.typed only in {sorted(typed)}"
# make directml compiles the DirectML hosts from the installed package
hosts = {f.rsplit("/", 1)[-1] for f in files if "/runtime/directml/hosts/" in f}
assert {"dml_host.c", "ort_host.c"} <= hosts, f"DirectML host sources in the wheel: {sorted(hosts)}"
import ir, compiler                      # PyPI's, untouched by ours
assert not hasattr(ir, "DmlLowerError") and "site-packages" in compiler.__file__
print(f"wheel: {len(files)} files, all under onnx_dml_lowering/; PyPI's ir and compiler import beside it")
PY
"$work/venv/bin/dml-lower" --version
"$work/venv/bin/dml-lower" demo | grep '^demo: every example matches ONNX semantics$'
"$work/venv/bin/python" -m onnx_dml_lowering.compiler --version
# The DML EP registration table ships inside the package (inspect --ep dml reads it from there).
"$work/venv/bin/python" -c 'from onnx_dml_lowering.compiler.ep.registry import dml_table; n = sum(map(len, dml_table().values())); assert n >= 404, n; print(f"DML EP table: {n} kernels from the wheel")'
