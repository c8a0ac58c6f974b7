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
            raise DirectMLUnavailable(f"DirectML host {path.name} is not in {self.bin}; {SETUP_HINT} again "
                                      f"(it compiles every host)")
        # a host built from other sources than this checkout's speaks another protocol, or lacks a guard
        if (self.info.get("host_sources") or {}).get(stem) != source_digest(stem):
            raise DirectMLUnavailable(f"DirectML host {path.name} in {self.bin} was built from another "
                                      f"hosts/{stem}.c than this checkout's; {SETUP_HINT} again (it compiles every host)")
        return path


def source_digest(name: str) -> str:
    """The sha256 of hosts/NAME.c as this checkout has it ('' where there is none)."""
    source = HOSTS / f"{name}.c"
    return hashlib.sha256(source.read_bytes()).hexdigest() if source.is_file() else ""


def _missing(root: Path) -> "str | None":
    """What of a complete HOME is absent at `root` (None: nothing)."""
    if not root.is_dir():
        return f"no DirectML setup at {root}"
    if not (root / "setup.json").is_file():
        return f"{root / 'setup.json'} is missing (setup did not finish)"
    for dll in DLLS:
        if not (root / "bin" / dll).is_file():
            return f"{root / 'bin' / dll} is missing"
    if not on_windows() and not (root / "prefix").is_dir():
        return f"the Wine prefix {root / 'prefix'} is missing"
    return None


def find_home() -> DirectMLHome:
    """The completed HOME, or DirectMLUnavailable naming `make directml` and what is missing."""
    return home_at(default_home())


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
