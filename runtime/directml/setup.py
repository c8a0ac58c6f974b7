"""`make directml`'s second half: `python -m onnx_dml_lowering.runtime.directml.setup` fills HOME
(home.py) and exits 0, or prints one line naming what is missing and what to do, and exits 2.

Idempotent: what is already in HOME and matches is kept (the wheel, the prefix); the host programs
are compiled again every time (a second each), and setup.json is written last, after every host's
self-test, so a HOME with setup.json is a complete one. Where each piece comes from:
    DirectML.dll, onnxruntime.dll   the onnxruntime-directml==1.24.4 win_amd64 wheel (pip download)
    d3d12.dll                       DML_LOWER_D3D12_DLL, else ../shared/directml-wine/vkd3d-proton-2.8/
                                    d3d12.dll beside the repository, else built by that folder's
                                    build-vkd3d-proton.sh from the tarball DML_LOWER_VKD3D_SOURCE names
    include/ (onnxruntime C API)    DML_LOWER_ORT_INCLUDE, else ../shared/directml-wine/onnxruntime-c-api/
    bin/<name>.exe                  every hosts/*.c, by x86_64-w64-mingw32-gcc with the flags its first
                                    line names: /* mingw: -ld3d12 -ldxgi ... */
"""
from __future__ import annotations

from typing import Any

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from onnx_dml_lowering.ir import DmlLowerError

from .home import DLLS, HOME_ENV, DirectMLHome, default_home, on_windows, source_digest
from .wine import HostProcess, Xvfb, display_answers, wine_environment

ORT_DIRECTML = "onnxruntime-directml==1.24.4"
HOSTS = Path(__file__).resolve().parent / "hosts"
REPOSITORY = Path(__file__).resolve().parents[2]


def main_repository(repository: Path) -> Path:
    """The repository a git worktree belongs to (its .git file names .../<repo>/.git/worktrees/<name>),
    else `repository` itself: ../shared is beside the main clone."""
    dot_git = repository / ".git"
    if dot_git.is_file():
        text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            gitdir = Path(text[len("gitdir:"):].strip())
            if gitdir.parent.name == "worktrees" and gitdir.parent.parent.name == ".git":
                return gitdir.parent.parent.parent
    return repository


SHARED = next((folder for folder in (REPOSITORY.parent / "shared" / "directml-wine",
                                     main_repository(REPOSITORY).parent / "shared" / "directml-wine")
               if folder.is_dir()), REPOSITORY.parent / "shared" / "directml-wine")
MINGW = "x86_64-w64-mingw32-gcc"
FLAGS_LINE = re.compile(r"/\*\s*mingw:(.*?)\*/")
INSTALL_HINT = "run `make directml` (its install-system.sh installs it)"


class SetupError(DmlLowerError):
    """One piece of the DirectML setup is missing or failed: the line says which and what to do."""


def say(message: str) -> None:
    print(f"directml setup: {message}", flush=True)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def run_quiet(command: "list[str]", what: str, **kwargs: Any) -> str:
    """Run `command`; its failure is a SetupError with the last line it printed."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    except OSError as exc:
        raise SetupError(f"{what}: cannot run {command[0]} ({exc})") from None
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        raise SetupError(f"{what} failed (exit {done.returncode}){': ' + lines[-1].strip() if lines else ''}")
    return done.stdout


def check_platform() -> None:
    if on_windows():
        return
    if not sys.platform.startswith("linux") or os.uname().machine != "x86_64":
        raise SetupError(f"DirectML runs here only on Linux x86-64 under Wine (this is {sys.platform} "
                         f"{os.uname().machine}), or natively on Windows")
    for tool, package in (("wine", "wine"), ("wineserver", "wine"), (MINGW, "gcc-mingw-w64-x86-64"),
                          ("Xvfb", "xvfb")):
        if shutil.which(tool) is None:
            raise SetupError(f"{tool} is not installed (Debian package {package}); {INSTALL_HINT}")


# -- the dlls -----------------------------------------------------------------------------------
def wheel_dlls(home: Path) -> "dict[str, str]":
    """DirectML.dll and onnxruntime.dll (and what sits beside them) from the wheel into bin/."""
    download = home / "download"
    download.mkdir(parents=True, exist_ok=True)
    wheels = sorted(download.glob("onnxruntime_directml-1.24.4-*win_amd64.whl"))
    if not wheels:
        say(f"pip download {ORT_DIRECTML} (win_amd64)")
        run_quiet([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                   "--platform", "win_amd64", "--python-version", "312", "--dest", str(download), ORT_DIRECTML],
                  f"pip download {ORT_DIRECTML} (needs PyPI)")
        wheels = sorted(download.glob("onnxruntime_directml-1.24.4-*win_amd64.whl"))
    if not wheels:
        raise SetupError(f"pip download {ORT_DIRECTML} left no win_amd64 wheel in {download}")
    copied = {}
    with zipfile.ZipFile(wheels[-1]) as wheel:
        for member in wheel.namelist():
            name = member.rsplit("/", 1)[-1]
            if member.startswith("onnxruntime/capi/") and name.lower().endswith(".dll"):
                target = home / "bin" / name
                data = wheel.read(member)
                if not target.is_file() or target.read_bytes() != data:
                    target.write_bytes(data)
                copied[name] = wheels[-1].name
    for dll in ("DirectML.dll", "onnxruntime.dll"):
        if dll not in copied:
            raise SetupError(f"{wheels[-1].name} holds no onnxruntime/capi/{dll}")
    return copied


def build_d3d12(source: Path, out: Path) -> Path:
    """d3d12.dll built by the shared folder's build-vkd3d-proton.sh from the tarball `source`."""
    script = SHARED / "vkd3d-proton-2.8" / "build-vkd3d-proton.sh"
    if not script.is_file():
        raise SetupError(f"DML_LOWER_VKD3D_SOURCE is set but there is no build script at {script}; "
                         f"set DML_LOWER_D3D12_DLL to a d3d12.dll of vkd3d-proton instead")
    if not source.is_file():
        raise SetupError(f"DML_LOWER_VKD3D_SOURCE names {source}, which is not a file")
    say(f"building d3d12.dll from {source} (about 4 minutes)")
    with tempfile.TemporaryDirectory() as work:
        # the script reads source-patched.tar.xz beside itself
        (Path(work) / "build-vkd3d-proton.sh").symlink_to(script)
        (Path(work) / "source-patched.tar.xz").symlink_to(source.resolve())
        run_quiet(["bash", str(Path(work) / "build-vkd3d-proton.sh"), str(out)],
                  "building vkd3d-proton (needs meson ninja-build glslang-tools mingw-w64 mingw-w64-tools)")
    return out / "d3d12.dll"


def find_d3d12(home: Path, build: bool = True) -> Path:
    """The d3d12.dll to install; `build=False` only says whether there is one (a source tarball
    named is not built: its path is returned)."""
    named = os.environ.get("DML_LOWER_D3D12_DLL")
    if named:
        if not Path(named).is_file():
            raise SetupError(f"DML_LOWER_D3D12_DLL names {named}, which is not a file")
        return Path(named)
    shared = SHARED / "vkd3d-proton-2.8" / "d3d12.dll"
    if shared.is_file():
        return shared
    source = os.environ.get("DML_LOWER_VKD3D_SOURCE")
    if source:
        return build_d3d12(Path(source), home / "build") if build else Path(source)
    raise SetupError(f"no d3d12.dll that runs DirectML: set DML_LOWER_D3D12_DLL to vkd3d-proton's d3d12.dll "
                     f"(2.8 patched, or a build whose EnumerateMetaCommands is not a stub), or "
                     f"DML_LOWER_VKD3D_SOURCE to its source tarball (not found: {shared})")


def copy_if_changed(source: Path, target: Path) -> None:
    if not target.is_file() or sha256(target) != sha256(source):
        shutil.copyfile(source, target)


def find_include() -> Path:
    named = os.environ.get("DML_LOWER_ORT_INCLUDE")
    folder = Path(named) if named else SHARED / "onnxruntime-c-api"
    if not (folder / "onnxruntime_c_api.h").is_file():
        raise SetupError(f"no onnxruntime C API headers at {folder}: set DML_LOWER_ORT_INCLUDE to the include "
                         f"folder of an onnxruntime release package (github.com/microsoft/onnxruntime/releases, "
                         f"onnxruntime-win-x64-1.24.4.zip)")
    return folder


def find_inputs(home: Path) -> "tuple[Path, Path]":
    """(d3d12.dll, the C API headers), the two pieces a setup takes from outside, found before
    anything in HOME changes: a missing one is one line (both named when both are missing, not
    one per run), and a HOME that worked stays as it was."""
    try:
        include = find_include()
    except SetupError as no_include:
        try:
            find_d3d12(home, build=False)
        except SetupError as no_d3d12:
            raise SetupError(f"{no_d3d12}; and {no_include}") from None
        raise
    return find_d3d12(home), include


def copy_include(folder: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for header in folder.glob("*.h"):
        copy_if_changed(header, target / header.name)


# -- the hosts ----------------------------------------------------------------------------------
def host_sources() -> "list[Path]":
    return sorted(HOSTS.glob("*.c"))


def compile_host(source: Path, home: DirectMLHome) -> Path:
    """bin/<name>.exe from hosts/<name>.c with the flags of its first line."""
    with source.open(encoding="utf-8") as stream:
        first = stream.readline()
    match = FLAGS_LINE.search(first)
    flags = match.group(1).split() if match else []
    out = home.bin / f"{source.stem}.exe"
    compiler = "gcc" if on_windows() else MINGW
    run_quiet([compiler, "-O2", "-Wall", "-std=c11", "-I", str(home.include), "-o", str(out),
               str(source), *flags], f"compiling {source.name}")
    return out


def make_prefix(home: DirectMLHome) -> None:
    """The Wine prefix, once (about 8 s)."""
    if on_windows() or (home.prefix / "system.reg").is_file():
        return
    say(f"creating the Wine prefix {home.prefix}")
    home.prefix.mkdir(parents=True, exist_ok=True)
    xvfb = None if display_answers(os.environ.get("DISPLAY")) else Xvfb()
    try:
        env = wine_environment(home, xvfb.display if xvfb else os.environ["DISPLAY"], "setup")
        env["WINEDLLOVERRIDES"] = "mscoree,mshtml="    # no Mono / Gecko download prompts
        run_quiet(["wine", "wineboot", "--init"], "creating the Wine prefix (wineboot --init)", env=env, timeout=300)
        run_quiet(["wineserver", "--wait"], "waiting for the Wine prefix", env=env, timeout=300)
    finally:
        if xvfb is not None:
            xvfb.close()


def self_test(home: DirectMLHome, exe: Path) -> str:
    """Start the host and read its hello: "ok ..." or the SetupError with the reason."""
    with HostProcess(home, exe.name) as host:
        started = time.monotonic()
        host.start()
        if not host.hello.startswith("ok"):
            raise SetupError(f"{exe.name}'s self-test failed: {host.hello}")
        return f"{host.hello} ({time.monotonic() - started:.1f} s)"


# -- the device facts ---------------------------------------------------------------------------
def vulkan_device() -> "dict[str, str]":
    """The Vulkan device and driver vulkaninfo reports ({} where it cannot tell)."""
    if shutil.which("vulkaninfo") is None:
        return {}
    try:
        out = subprocess.run(["vulkaninfo", "--summary"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    facts = {}
    for key in ("deviceName", "driverName", "driverInfo", "apiVersion"):
        found = re.search(rf"^\s*{key}\s*=\s*(.+)$", out, re.M)
        if found:
            facts[key] = found.group(1).strip()
    return facts


def kept_home(root: Path, missing: SetupError) -> "dict[str, object]":
    """The HOME a previous setup completed at `root`, when the inputs to make it again are not here
    (a clone without ../shared): it serves if its hosts were compiled from this checkout's sources
    and their self-tests pass now; else `missing` is the error, with why the old HOME does not do."""
    from .home import DirectMLUnavailable, home_at
    try:
        home = home_at(root)
    except DirectMLUnavailable:
        raise missing from None             # nothing made before: what is missing is the whole story
    hosts = {source.stem for source in host_sources()}
    if set(home.info.get("hosts") or {}) != hosts:
        raise SetupError(f"{missing} (the setup at {root} was made for other host programs)") from None
    try:
        tests = {name: self_test(home, home.exe(name)) for name in sorted(hosts)}
    except DirectMLUnavailable as stale:
        raise SetupError(f"{missing} ({stale})") from None
    say(f"kept the setup made before at {root} (its hosts' self-tests pass), as this clone lacks what it "
        f"would take to make it again: {missing}")
    return {**home.info, "hosts": tests}


def setup(root: Path) -> "dict[str, object]":
    check_platform()
    try:
        d3d12, include = find_inputs(root)
    except SetupError as missing:
        return kept_home(root, missing)
    # the hosts are compiled from these sources below (exe() holds a host to them, self-test included)
    sources = {source.stem: source_digest(source.stem) for source in host_sources()}
    home = DirectMLHome(root, {"host_sources": sources})
    for folder in (home.bin, home.include):
        folder.mkdir(parents=True, exist_ok=True)
    (root / "setup.json").unlink(missing_ok=True)      # incomplete until the end
    wheel = wheel_dlls(root)
    copy_if_changed(d3d12, home.bin / "d3d12.dll")
    copy_include(include, home.include)
    hosts = {}
    for source in host_sources():
        say(f"compiling {source.name}")
        hosts[source.stem] = str(compile_host(source, home).name)
    make_prefix(home)
    tests = {}
    for name, exe in hosts.items():
        say(f"self-test of {exe}")
        tests[name] = self_test(home, home.bin / exe)
    info: "dict[str, object]" = {
        "onnxruntime_directml": ORT_DIRECTML.split("==")[1], "wheel": wheel.get("DirectML.dll", ""),
        "d3d12_source": str(d3d12), "include_source": str(include),
        "sha256": {dll: sha256(home.bin / dll) for dll in DLLS},
        "vulkan": vulkan_device(), "hosts": tests,
        "host_sources": sources,
        "wine": "" if on_windows() else run_quiet(["wine", "--version"], "wine --version").strip(),
    }
    (root / "setup.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info


def main() -> int:
    root = default_home()
    try:
        info = setup(root)
    except DmlLowerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    hosts = ", ".join(info["hosts"]) or "no host programs"   # type: ignore[arg-type]
    say(f"ready in {root} ({hosts}; set {HOME_ENV} to use another folder)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
