"""Every file the tool writes goes through the one writer (runtime/output_file.py, issue 35): a
call that creates or replaces a file (open for writing, onnx.save, numpy's save, a zip opened for
writing, Path.write_*, os.replace / rename, a temporary file) appears only in the functions listed
here, each of which writes the temporary the writer hands it or a scratch folder of its own. A new
write elsewhere fails this test until it goes through the writer (or is listed, with its reason)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ir", "lowering", "runtime", "compiler")

ALLOWED = {
    ("runtime/output_file.py", "staged"): "the writer: its temporary",
    ("runtime/output_file.py", "_replace"): "the writer: the rename over the target",
    ("runtime/output_file.py", "write_bytes.write"): "a callback of the writer: the temporary",
    ("runtime/output_file.py", "write_text.write"): "a callback of the writer: the temporary",
    ("runtime/npz.py", "save_npz"): "the zip written to staged()'s temporary",
    ("compiler/optimize/rewrite.py", "save_model"): "onnx.save_model to staged()'s temporary",
    ("compiler/optimize/rewrite.py", "_write_external"): "the data file at staged()'s temporary",
    ("compiler/zoo/junit.py", "write_junit"): "the JUnit file at write_file()'s temporary",
    ("runtime/output_file.py", "_pour"): "the writer: a device, FIFO or descriptor, in place",
    ("compiler/ep/level1.py", "level1_model"): "onnxruntime's optimized model, in a scratch folder of its own",
    ("compiler/zoo/model_check.py", "run_one"): "a worker's report, in a scratch folder of its own",
    ("compiler/cli/program.py", "_discard_output"): "stdout or stderr onto os.devnull once its reader went away or "
                                                    "it failed (opens, never creates)",
    ("compiler/cli/program.py", "_open_standard_streams"): "descriptors 0-2 the caller closed, onto os.devnull, and "
                                                          "Python's streams over them (opens, never creates)",
    ("compiler/ep/verify.py", "<module>"): "the scratch folder of --verify (a dataclass default), its own",
    ("compiler/ep/verify.py", "verify_placement"): "the level-1 model handed to ort_host, in that scratch folder",
    ("runtime/directml/ort_dml.py", "create"): "onnxruntime.dll's optimised model, in a scratch folder of its own",
    ("compiler/ep/measure_registrations.py", "main"): "the measured table, where that developer's script is told",
    ("compiler/ep/measure_registrations.py", "measure"): "its checkpoint after each opset, a file it is told",
    ("compiler/ep/measure_registrations.py", "_save"): "the registration table it measures and its checkpoint: a "
                                                         "developer's script (not a command), files it names",
    ("runtime/directml/wine.py", "_log_start"): "the test hook DML_LOWER_TEST_HOST_START_LOG: a line appended per "
                                                "host start to the file a test names (never set by a user)",
    ("runtime/directml/setup.py", "setup"): "make directml: setup.json into the DirectML home it builds",
    ("runtime/directml/setup.py", "wheel_dlls"): "make directml: the wheel's dlls into that home's bin/",
    ("runtime/directml/setup.py", "build_d3d12"): "make directml: a vkd3d-proton build in a scratch folder",
    ("compiler/conformance/staging.py", "staged_suite"): "conformance export: the staging folder its files are "
                                                         "written into by the writer (mkdtemp), its own",
    ("compiler/conformance/staging.py", "_move_in"): "conformance export: the finished staging folder renamed to "
                                                     "the suite's place (nothing is written: renames only)",
    ("compiler/conformance/staging.py", "_merge"): "conformance export: the finished suite's files renamed into "
                                                   "an existing suite folder, the manifest last (renames only)",
}


def _mode(call: ast.Call) -> str:
    """The mode string of an open()-like call ('' when not given as a literal)."""
    given = call.args[1:2] + [k.value for k in call.keywords if k.arg == "mode"]
    return next((a.value for a in given if isinstance(a, ast.Constant) and isinstance(a.value, str)), "")


def _writes(call: ast.Call) -> bool:
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
    if name in ("open", "ZipFile") and owner not in ("os",):
        return any(c in _mode(call) for c in "wax+")
    if owner == "os" and name in ("replace", "rename", "open"):
        return name != "open" or any(isinstance(a, ast.Attribute) and a.attr in ("O_WRONLY", "O_RDWR", "O_CREAT")
                                     for a in ast.walk(call))
    return ((owner == "onnx" and name in ("save", "save_model", "save_tensor"))
            or (owner in ("np", "numpy") and name in ("save", "savez", "savez_compressed", "savetxt"))
            or (owner == "tempfile" and name in ("mkstemp", "NamedTemporaryFile", "TemporaryDirectory", "mkdtemp"))
            or name in ("write_text", "write_bytes") and isinstance(func, ast.Attribute)
            or name == "write" and any(k.arg == "xml_declaration" for k in call.keywords))     # ElementTree.write


def _sites(path: Path) -> "set[tuple[str, str]]":
    found = set()

    def visit(node: ast.AST, scope: "list[str]") -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, scope + [child.name])
                continue
            if isinstance(child, ast.Call) and _writes(child):
                found.add((path.relative_to(ROOT).as_posix(), ".".join(scope) or "<module>"))
            visit(child, scope)
    visit(ast.parse(path.read_text(), str(path)), [])
    return found


def test_every_write_goes_through_the_one_writer():
    sites = set().union(*(_sites(p) for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))))
    assert sites - set(ALLOWED) == set(), "a file written outside runtime/output_file.py"
    assert set(ALLOWED) - sites == set(), "listed but no longer writing: take it off ALLOWED"
