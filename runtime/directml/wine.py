"""A host program (HOME/bin/<name>.exe) as one long-lived process spoken to over a pipe.

Framing, both directions: a u32 little-endian length, then that many bytes. The first frame a host
writes, before reading anything, is its hello: UTF-8, "ok ..." once its device is up and its known-
answer self-test passed, or "failed: why" (the host then refuses every request but still answers
what it can, e.g. its device facts). `HostProcess.hello` holds it.

Off Windows the program runs under Wine: WINEPREFIX = HOME/prefix, WINEDLLOVERRIDES="d3d12=n" (the
d3d12.dll beside the exe, vkd3d-proton, instead of Wine's own, which has no DXIL), WINEDEBUG=-all
unless DML_LOWER_WINEDEBUG names channels, VKD3D_CONFIG with mutable_single_set added to the
user's flags (VKD3D_FLAGS: half the descriptor memory lavapipe zero-fills at start-up), and an X
display (Wine's dxgi needs one): DISPLAY when it answers, else an Xvfb started here (-displayfd).
The process is started on first use and dies
with its parent: the host exits when its stdin closes (the parent gone, whatever killed it), and
the Wine process and the Xvfb also get SIGKILL from the kernel when the parent dies
(PR_SET_PDEATHSIG); both run in their own session, so a Ctrl-C reaches only the parent, which
closes them in order.

When DML_LOWER_WINESERVER_PERSIST names seconds (unset or 0: Wine's own 3 s, the default, so
nothing of a command outlives it by more than Wine's own linger), the prefix's wineserver is started
here, before the first host, persistent for that long after its last client has gone, so the
commands that follow within that time find Wine's session (the wineserver and the Windows services
it runs) up: a host then starts in about 1 s instead of 1.3-2. That session is shared by every
command of this user on this prefix and exits by itself once idle (its own host and Xvfb die with
the command)."""
from __future__ import annotations

import ctypes
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import uuid
from collections import deque
from typing import IO, Any, Callable, Iterator

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.digits import ascii_digits
from onnx_dml_lowering.ir.errors import brief

from .home import SETUP_HINT, DirectMLHome, DirectMLUnavailable, on_windows

HEADER = struct.Struct("<I")
MAX_FRAME = 1 << 34          # 16 GiB: a length past it is a broken host, not a tensor
STDERR_KEEP = 64 * 1024      # bytes of a host's stderr kept for its failure line
CLOSE_WAIT = 10.0            # seconds a host gets to exit once its stdin is closed
RUN_ENV = "DML_LOWER_HOST_RUN"   # tags every process of one HostProcess (tests find them by it)
# Test hook: a file to which every host start appends one line (its program's name), in whichever
# process starts it: the zoo's test counts the hosts of a whole zoo run, its checks' processes too.
START_LOG_ENV = "DML_LOWER_TEST_HOST_START_LOG"
_PR_SET_PDEATHSIG = 1
PERSIST_ENV = "DML_LOWER_WINESERVER_PERSIST"
DEFAULT_PERSIST = 0          # opt-in: by default a command leaves no Wine session up beyond Wine's own 3 s
VKD3D_ENV = "VKD3D_CONFIG"
# vkd3d-proton's single descriptor set for all of a CBV/SRV/UAV heap (its default on Intel GPUs)
# instead of a second set for raw buffers: lavapipe sizes each set of a shader-visible heap for
# vkd3d-proton's 1,000,000 descriptors (256 MB, zero-filled while the host starts) whatever the
# heap's size, so one set less is 250 MB and 60,000 page faults less per host
VKD3D_FLAGS = ("mutable_single_set",)


class HostFailed(DmlLowerError):
    """A host program died, could not start or broke the framing: one line with its stderr's last line."""


def _die_with_parent() -> "Callable[[], None] | None":
    """A preexec function asking the kernel for SIGKILL when the parent dies (Linux). The signal
    follows the thread that started the process: a host dies with the thread that uses it (each
    zoo worker thread has its own: dml_host.shared_host), or with the whole process."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:       # the parent died before prctl took effect
            os._exit(1)
    return preexec


def display_answers(display: "str | None") -> bool:
    """`display` (":N", ":N.S", "host:N") accepts a connection."""
    if not display or ":" not in display:
        return False
    host, _, rest = display.rpartition(":")
    number = rest.split(".")[0]
    if not ascii_digits(number):
        return False
    try:
        if host in ("", "unix"):
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(2)
                sock.connect(f"/tmp/.X11-unix/X{number}")
        else:
            socket.create_connection((host, 6000 + int(number)), timeout=2).close()
    except OSError:
        return False
    return True


class Xvfb:
    """An X server of our own for Wine, on the first free display (-displayfd)."""

    def __init__(self, run_id: str = "") -> None:
        xvfb = shutil.which("Xvfb")
        if xvfb is None:
            raise DirectMLUnavailable(f"no X display and no Xvfb for Wine; {SETUP_HINT} (it installs xvfb)")
        read_fd, write_fd = os.pipe()
        try:
            self.process = subprocess.Popen(
                [xvfb, "-displayfd", str(write_fd), "-nolisten", "tcp", "-screen", "0", "640x480x24"],
                pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent(),
                env={**os.environ, RUN_ENV: run_id})
        finally:
            os.close(write_fd)
        with os.fdopen(read_fd, "rb") as reader:
            number = reader.readline().strip()
        if not number.isdigit():
            self.close()
            raise HostFailed("Xvfb did not start (it named no display); try DISPLAY=:N with a running X server")
        self.display = f":{number.decode()}"

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def wine_environment(home: DirectMLHome, display: str, run_id: str) -> "dict[str, str]":
    env = dict(os.environ)
    env.update(WINEPREFIX=str(home.prefix), WINEDLLOVERRIDES="d3d12=n;mscoree,mshtml=",
               WINEDEBUG=os.environ.get("DML_LOWER_WINEDEBUG") or "-all", DISPLAY=display)
    env[RUN_ENV] = run_id
    env[VKD3D_ENV] = vkd3d_config(os.environ.get(VKD3D_ENV, ""))
    return env


def vkd3d_config(given: str) -> str:
    """VKD3D_CONFIG for a host: the user's flags, and ours (VKD3D_FLAGS) where they are not among them."""
    flags = [flag for flag in given.replace(";", ",").split(",") if flag]
    return ",".join(flags + [flag for flag in VKD3D_FLAGS if flag not in flags])


def persist_seconds() -> int:
    """DML_LOWER_WINESERVER_PERSIST as whole seconds (unset: DEFAULT_PERSIST)."""
    text = os.environ.get(PERSIST_ENV, "").strip()
    if not text:
        return DEFAULT_PERSIST
    if not ascii_digits(text):
        raise DirectMLUnavailable(f"{PERSIST_ENV}={text!r} is not a whole number of seconds")
    return int(text)


def _wineserver(home: DirectMLHome, argument: str) -> "subprocess.CompletedProcess[bytes] | None":
    """`wineserver ARGUMENT` for the prefix (None: no wineserver here, or it did not answer). Its
    stdio is /dev/null and its environment has no run tag: the server belongs to no single command
    (and holds no command's pipe open)."""
    server = shutil.which("wineserver")
    if server is None:
        return None
    env = {k: v for k, v in os.environ.items() if k != RUN_ENV}
    env["WINEPREFIX"] = str(home.prefix)
    try:
        return subprocess.run([server, argument], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None


def keep_session(home: DirectMLHome) -> bool:
    """Start the prefix's wineserver, persistent for persist_seconds() once idle, unless one runs
    (True: started here). Not started: Wine then starts its own wineserver, as without this."""
    seconds = persist_seconds()
    if not seconds:
        return False
    done = _wineserver(home, f"-p{seconds}")
    return done is not None and done.returncode == 0


def end_session(home: DirectMLHome) -> None:
    """Stop a wineserver keep_session started for a host that then could not start (a server no
    client ever joined would not exit by itself)."""
    _wineserver(home, "-k")


class HostProcess:
    """One host program, started on first use; `request(payload) -> payload`. `attached(...)`: a
    host another process started and handed over (its pipe's two ends and its hello): used, never
    started nor stopped here."""

    def __init__(self, home: DirectMLHome, exe_name: str) -> None:
        self.home = home
        self.exe = home.runnable(exe_name)        # the setup serves this host, or one line
        self.name = self.exe.name
        self.run_id = uuid.uuid4().hex
        self.hello = ""
        self.requests = 0                 # requests sent (tests: what a refused host never got)
        self._process: "subprocess.Popen[bytes] | None" = None
        self._writer: "IO[bytes] | None" = None     # the host's stdin
        self._reader: "IO[bytes] | None" = None     # the host's stdout
        self._xvfb: "Xvfb | None" = None
        self._stderr: "deque[bytes]" = deque()
        self._stderr_thread: "threading.Thread | None" = None
        self._stderr_stop: "tuple[int, int] | None" = None    # a pipe whose write ends the reader
        self._lock = threading.Lock()

    @classmethod
    def attached(cls, home: DirectMLHome, exe_name: str, write_fd: int, read_fd: int, hello: str) -> "HostProcess":
        """The host whose stdin is `write_fd` and stdout `read_fd` here, already started (`hello`)."""
        host = cls(home, exe_name)
        host._writer, host._reader = os.fdopen(write_fd, "wb"), os.fdopen(read_fd, "rb")
        host.hello = hello
        return host

    def pipe_fds(self) -> "tuple[int, int]":
        """(the host's stdin, its stdout) as file descriptors of this process, to hand the host over
        to a child process (which must be its only user until it exits)."""
        self.start()
        assert self._writer is not None and self._reader is not None
        return self._writer.fileno(), self._reader.fileno()

    # -- life cycle ---------------------------------------------------------------------------
    def _command(self) -> "tuple[list[str], dict[str, str]]":
        if on_windows():
            env = dict(os.environ)
            env[RUN_ENV] = self.run_id
            return [str(self.exe)], env
        wine = shutil.which("wine")
        if wine is None:
            raise DirectMLUnavailable(f"Wine is not installed; {SETUP_HINT}")
        display = os.environ.get("DISPLAY")
        if not display_answers(display):
            self._xvfb = Xvfb(self.run_id)
            display = self._xvfb.display
        return [wine, str(self.exe)], wine_environment(self.home, display or "", self.run_id)

    def start(self) -> None:
        """Start the host (if not running) and read its hello frame."""
        if self._writer is not None and self.hello:
            return
        self.spawn()
        self.hello = self._read_frame().decode("utf-8", "replace")

    def spawn(self) -> None:
        """Start the host's process without waiting for its hello: its start-up (seconds of Wine and
        device creation) then runs beside the caller's own work until the first request."""
        if self._writer is not None:
            return
        command, env = self._command()
        started_session = not on_windows() and keep_session(self.home)
        try:
            self._process = subprocess.Popen(
                command, cwd=self.home.bin, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=not on_windows(),
                preexec_fn=None if on_windows() else _die_with_parent())
        except OSError as exc:
            self.close()
            if started_session:
                end_session(self.home)
            raise HostFailed(f"cannot start DirectML host {self.name}: {exc}") from None
        self._writer, self._reader = self._process.stdin, self._process.stdout
        _log_start(self.name, self._process.pid)
        if not on_windows():
            self._stderr_stop = os.pipe()
        self._stderr_thread = threading.Thread(target=self._collect_stderr, args=(self._process.stderr,), daemon=True)
        self._stderr_thread.start()

    def _collect_stderr(self, stream: "IO[bytes]") -> None:
        """Keep the last STDERR_KEEP bytes of the host's stderr. The Windows services the host's
        Wine session starts inherit that pipe and hold it open as long as the session lives, so
        the end of the host does not end the pipe: off Windows, close() ends this reader through
        the stop pipe (a reader left blocked would keep the command from its fast exit)."""
        kept = 0
        for chunk in self._stderr_chunks(stream):
            self._stderr.append(chunk)
            kept += len(chunk)
            while kept > STDERR_KEEP and len(self._stderr) > 1:
                kept -= len(self._stderr.popleft())

    def _stderr_chunks(self, stream: "IO[bytes]") -> "Iterator[bytes]":
        stop = self._stderr_stop
        if stop is None:                              # Windows: pipes cannot be selected
            yield from iter(lambda: stream.read1(4096), b"")  # type: ignore[attr-defined]
            return
        source = stream.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(source, selectors.EVENT_READ)
            selector.register(stop[0], selectors.EVENT_READ)
            while True:
                ready = {key.fd for key, _ in selector.select()}
                chunk = os.read(source, 4096) if source in ready else b""
                if chunk:
                    yield chunk
                elif source in ready or stop[0] in ready:
                    return

    def stderr_line(self) -> str:
        """The last non-blank line the host wrote on stderr ('' if none)."""
        text = b"".join(self._stderr).decode("utf-8", "replace")
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        return brief(lines[-1]) if lines else ""

    def close(self, wait: bool = True) -> None:
        """Close stdin (the host exits), wait for it, kill it if it does not; stop our Xvfb. An
        attached host only loses this process's ends of its pipe (its starter keeps it).
        wait=False, for a command's exit: the host is left to exit on its own (its stdin closed; the
        kernel kills it when this process ends anyway), which saves the 0.2-0.4 s Wine takes."""
        process, self._process = self._process, None
        streams, self._writer, self._reader = (self._writer, self._reader), None, None
        for stream in streams:
            try:
                if stream:
                    stream.close()
            except OSError:
                pass
        if process is not None and not wait:
            self._stop_stderr()
        elif process is not None:
            try:
                process.wait(CLOSE_WAIT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            self._stop_stderr()
        if self._xvfb is not None:
            self._xvfb.close()
            self._xvfb = None

    def _stop_stderr(self) -> None:
        """End the stderr reader once the host has exited: what it wrote is read first (the
        selector reports the pipe's bytes before the stop)."""
        thread, stop = self._stderr_thread, self._stderr_stop
        if thread is not None and stop is not None:
            os.write(stop[1], b"x")
            thread.join(2)
            self._stderr_stop = None
        elif thread is not None:
            thread.join(0.05)
        if stop is not None:
            os.close(stop[0])
            os.close(stop[1])

    def __enter__(self) -> "HostProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def pid(self) -> "int | None":
        return self._process.pid if self._process is not None else None

    # -- frames -------------------------------------------------------------------------------
    def _failed(self, what: str) -> HostFailed:
        process = self._process
        code = process.poll() if process is not None else None
        if process is not None and code is None:
            try:
                code = process.wait(2)
            except subprocess.TimeoutExpired:
                code = None
        if code is not None:
            self._stop_stderr()              # the host is gone: all it wrote is read
        elif self._stderr_thread is not None:
            self._stderr_thread.join(1)
        status = f"exit code {code:#x}" if isinstance(code, int) and code > 255 else f"exit code {code}"
        said = self.stderr_line()
        self.close()
        if not said and not on_windows() and not os.environ.get("DML_LOWER_WINEDEBUG"):
            said = "it said nothing (DML_LOWER_WINEDEBUG=err+all shows Wine's messages)"
        return HostFailed(f"DirectML host {self.name} {what} ({status}): {said}" if said
                          else f"DirectML host {self.name} {what} ({status})")

    def _read_exact(self, size: int) -> bytes:
        assert self._reader is not None
        data = self._reader.read(size)
        if data is None or len(data) != size:
            raise self._failed("stopped answering")
        return data

    def _read_frame(self) -> bytes:
        (size,) = HEADER.unpack(self._read_exact(HEADER.size))
        if size > MAX_FRAME:
            raise self._failed(f"sent a frame of {size} bytes")
        return self._read_exact(size) if size else b""

    def request(self, payload: bytes) -> bytes:
        """Send one frame, return the host's answer frame (the host is started on first use)."""
        with self._lock:
            self.start()
            assert self._writer is not None
            try:
                self._writer.write(HEADER.pack(len(payload)))
                self._writer.write(payload)
                self._writer.flush()
            except (BrokenPipeError, OSError):
                raise self._failed("stopped reading") from None
            self.requests += 1
            return self._read_frame()


def _log_start(name: str, pid: int) -> None:
    """A test hook: one line per host started, the host first, then who started it (a count that
    is off says which process and thread started the extra one)."""
    log = os.environ.get(START_LOG_ENV)
    if log:
        with open(log, "a", encoding="utf-8") as stream:
            stream.write(f"{name} host={pid} by={os.getpid()}/{threading.current_thread().name}\n")
