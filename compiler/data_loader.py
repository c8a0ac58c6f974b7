"""--data-loader-script FILE.py[:FUNC]: feed sets from a user's Python function (Polygraphy's
convention: FUNC, default load_data, returns or yields dicts of input name to array; each dict is
one iteration). Feed sets come out one at a time, checked against the model's inputs, and every
failure of the script is one line naming it (and the iteration)."""
from __future__ import annotations

from typing import Callable

import hashlib
import importlib.util
import traceback
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import brief
from onnx_dml_lowering.runtime.input_files import regular_file

from .loader_spec import parse_spec


def _where(exc: BaseException, path: Path) -> str:
    """' (line N)' of the deepest frame of the traceback inside the script, if any."""
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    if isinstance(exc, SyntaxError) and exc.lineno:
        lines.append(exc.lineno)
    return f" (line {lines[-1]})" if lines else ""


def _failure(exc: BaseException, path: Path) -> str:
    message = brief(str(exc))
    return f"{type(exc).__name__}{': ' + message if message else ''}{_where(exc, path)}"


def load_function(spec: str) -> "tuple[Callable[[], object], str, Path]":
    """The script's function, or DmlLowerError naming the script."""
    path, function = parse_spec(spec)
    what = f"data loader script {str(path)!r}"
    regular_file(path, what, "a Python script")       # and an input no output may replace
    resolved = path.resolve()
    name = "dml_lower_data_loader_" + hashlib.sha1(str(resolved).encode()).hexdigest()[:12]
    module_spec = importlib.util.spec_from_file_location(name, resolved)
    if module_spec is None or module_spec.loader is None:      # a suffix importlib has no loader for
        raise DmlLowerError(f"{what} is not Python source by its name: call it FILE.py")
    try:
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # whatever the user's code raises, said in one line
        raise DmlLowerError(f"{what} failed to load: {_failure(exc, resolved)}") from None
    func = getattr(module, function, None)
    if func is None:
        defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                         and getattr(v, "__module__", None) == name)
        raise DmlLowerError(f"{what} has no function {function!r} "
                            f"(its functions: {', '.join(defined) or 'none'}; choose one with FILE.py:FUNC)")
    if not callable(func):
        raise DmlLowerError(f"{what}: {function!r} is a {type(func).__name__}, not a function")
    return func, what, resolved


def feed_sets(spec: str, inputs: "list[onnx.ValueInfoProto]",
              optional: "Sequence[onnx.ValueInfoProto]" = ()) -> "Iterator[dict[str, np.ndarray]]":
    """The script's feed sets one at a time, each checked against the model's inputs (names,
    types, ranks, fixed dimensions); the script runs lazily, as the sets are consumed."""
    from onnx_dml_lowering.runtime.feeds import check_feeds
    func, what, resolved = load_function(spec)
    function = parse_spec(spec)[1]
    try:
        produced = func()
    except (Exception, SystemExit) as exc:
        raise DmlLowerError(f"{what}: {function}() raised {_failure(exc, resolved)}") from None
    if isinstance(produced, Mapping):
        produced = [produced]
    if not isinstance(produced, Iterable) or isinstance(produced, (str, bytes)):
        raise DmlLowerError(f"{what}: {function}() returned {type(produced).__name__}, not feed dicts "
                            "(return a dict, a list of dicts or yield dicts)")
    iterator = iter(produced)
    index = 0
    while True:
        try:
            feeds = next(iterator)
        except StopIteration:
            break
        except (Exception, SystemExit) as exc:
            raise DmlLowerError(f"{what}, iteration #{index}: {function}() raised {_failure(exc, resolved)}") from None
        if not isinstance(feeds, Mapping):
            raise DmlLowerError(f"{what}, iteration #{index}: {function}() gave a {type(feeds).__name__}, "
                                "not a dict of input name to array")
        try:
            yield check_feeds(inputs, {str(k): v for k, v in feeds.items()}, optional)
        except DmlLowerError as exc:
            raise DmlLowerError(f"{what}, iteration #{index}: {exc}") from None
        index += 1
    if index == 0:
        raise DmlLowerError(f"{what}: {function}() gave no feed sets")
