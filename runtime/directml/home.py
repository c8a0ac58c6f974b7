"""The one folder `make directml` fills and every DirectML backend reads:

    HOME/bin/        DirectML.dll, onnxruntime.dll, d3d12.dll and the host programs (*.exe) side by side
    HOME/prefix/     the Wine prefix (WINEPREFIX)
    HOME/include/    onnxruntime's C API headers the hosts were compiled against
    HOME/setup.json  what setup found: versions, sha256 of the dlls, the Vulkan device, feature level

HOME is DML_LOWER_DIRECTML_HOME, else ~/.cache/onnx-dml-lowering/directml."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_dml_lowering.ir import DmlLowerError

HOME_ENV = "DML_LOWER_DIRECTML_HOME"
SETUP_HINT = "run `make directml`"
HOSTS = Path(__file__).resolve().parent / "hosts"          # the host programs' C sources
DLLS = ("DirectML.dll", "onnxruntime.dll", "d3d12.dll")


class DirectMLUnavailable(DmlLowerError):
    """DirectML is not set up here: the one line names `make directml` and what is missing."""


def default_home() -> Path:
    """HOME as the environment names it (it need not exist)."""
    named = os.environ.get(HOME_ENV)
    if named:
        return Path(named).expanduser()
    return Path.home() / ".cache" / "onnx-dml-lowering" / "directml"


def on_windows() -> bool:
    return sys.platform == "win32"


@dataclass(frozen=True)
class DirectMLHome:
    """A HOME that setup completed (setup.json written after every host's self-test)."""
    root: Path
    info: "dict[str, Any]"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def prefix(self) -> Path:
        return self.root / "prefix"

    @property
    def include(self) -> Path:
        return self.root / "include"

    def exe(self, name: str) -> Path:
        """The host program `name` (with or without .exe); missing is DirectMLUnavailable."""
        stem = name[:-4] if name.endswith(".exe") else name
        path = self.bin / f"{stem}.exe"
        if not path.is_file():
            where = f"in {self.bin} {_not_a_file(path)}" if path.exists() else f"is not in {self.bin}"
            raise DirectMLUnavailable(f"DirectML host {path.name} {where}; {SETUP_HINT} again (it compiles every host)")
        # a host built from other sources than this checkout's speaks another protocol, or lacks a guard
        if (self.info.get("host_sources") or {}).get(stem) != source_digest(stem):
            raise DirectMLUnavailable(f"DirectML host {path.name} in {self.bin} was built from another "
                                      f"hosts/{stem}.c than this checkout's; {SETUP_HINT} again (it compiles every host)")
        return path

    def runnable(self, name: str) -> Path:
        """exe(name), and off Windows Wine to run it: what starting that host takes of the setup."""
        path = self.exe(name)
        if not on_windows() and shutil.which("wine") is None:
            raise DirectMLUnavailable(f"Wine is not installed; {SETUP_HINT}")
        return path


def source_digest(name: str) -> str:
    """The sha256 of hosts/NAME.c as this checkout has it ('' where there is none)."""
    source = HOSTS / f"{name}.c"
    return hashlib.sha256(source.read_bytes()).hexdigest() if source.is_file() else ""


def _missing(root: Path) -> "str | None":
    """What of a complete HOME is absent at `root` (None: nothing)."""
    if not root.is_dir():
        return f"no DirectML setup at {root}"
    setup = root / "setup.json"
    if not setup.is_file():
        return f"{setup} {_not_a_file(setup)}" if setup.exists() else f"{setup} is missing (setup did not finish)"
    for dll in DLLS:
        path = root / "bin" / dll
        if not path.is_file():
            return f"{path} {_not_a_file(path)}" if path.exists() else f"{path} is missing"
    prefix = root / "prefix"
    if not on_windows() and not prefix.is_dir():
        return f"the Wine prefix {prefix} is not a folder" if prefix.exists() else f"the Wine prefix {prefix} is missing"
    return None


def _not_a_file(path: Path) -> str:
    """What a path that exists but is no regular file is, said as the reason it does not serve."""
    return "is a directory, not a file" if path.is_dir() else "is not a regular file (a FIFO, device or socket)"


def routes_off_windows() -> str:
    """Where an in-process DmlExecutionProvider is asked for off Windows (onnxruntime's Linux
    wheels have none): the two backends that reach the real DirectML here, and whether this
    machine's setup serves them now ('' on Windows, where the 'directml' extra is the way)."""
    if on_windows():
        return ""
    missing = []
    for host in ("dml_host", "ort_host"):
        try:
            find_home(host)
        except DirectMLUnavailable as exc:
            missing.append(str(exc))
    ready = "both set up here" if not missing else \
        "run `make directml`" if not default_home().exists() else missing[0]
    return ("off Windows, DirectML runs through `--backends dml` (the lowered graph's DirectML operators on "
            f"DirectML.dll) and `--backends ort-dml` (onnxruntime.dll's DirectML EP) under Wine: {ready}")


def find_home(host: "str | None" = None) -> DirectMLHome:
    """The completed HOME, or DirectMLUnavailable naming `make directml` and what is missing. With
    `host` (dml_host, ort_host), also what starting that host takes (DirectMLHome.runnable): every
    DirectML backend decides here, before it runs anything, whether the setup serves, so a stale or
    partial setup is the same one line for both hosts (UNAVAILABLE beside other backends, an
    error alone), never a backend's ERROR when the host starts."""
    home = home_at(default_home())
    if host is not None:
        home.runnable(host)
    return home


def home_at(root: Path) -> DirectMLHome:
    """The HOME a setup completed at `root` (find_home's, for any folder)."""
    missing = _missing(root)
    if missing:
        raise DirectMLUnavailable(f"DirectML is not set up: {missing}; {SETUP_HINT} (or set {HOME_ENV})")
    try:
        info = json.loads((root / "setup.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DirectMLUnavailable(f"cannot read {root / 'setup.json'} ({exc}); {SETUP_HINT} again") from None
    if not isinstance(info, dict):
        raise DirectMLUnavailable(f"{root / 'setup.json'} is not a JSON object; {SETUP_HINT} again")
    return DirectMLHome(root, info)
