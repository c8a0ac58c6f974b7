"""A headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe: the
browser reads commands on fd 3 and answers on fd 4, NUL-terminated JSON), standard library only:
open a page at 1600 x 1000, wait until an expression holds in it, read values, take a screenshot.
make picture-check uses it where a page keeps working after its load event (Model Explorer's app
converts the model and draws it after that), so --dump-dom / --screenshot would catch it early."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from pathlib import Path


class Chromium:
    def __init__(self, binary: str, profile: Path, width: int = 1600, height: int = 1000) -> None:
        self.width, self.height = width, height
        to_browser, self._in = os.pipe()          # we write commands, the browser reads fd 3
        self._out, from_browser = os.pipe()       # the browser answers on fd 4, we read

        def on_fds_3_and_4() -> None:             # in the child, before exec
            a, b = os.dup(to_browser), os.dup(from_browser)
            os.dup2(a, 3)
            os.dup2(b, 4)
        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--remote-debugging-pipe", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
             "--use-angle=swiftshader", "--enable-unsafe-swiftshader", f"--window-size={width},{height}",
             f"--user-data-dir={profile}", "about:blank"],
            preexec_fn=on_fds_3_and_4, pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next = 0
        self.session = ""

    def call(self, method: str, params: "dict | None" = None, session: "str | None" = None, timeout: float = 60) -> dict:
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session or (session is None and self.session):
            message["sessionId"] = session or self.session
        os.write(self._in, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reply = self._read()
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
        raise TimeoutError(f"{method}: no answer in {timeout} s")

    def _read(self) -> dict:
        while b"\0" not in self._buffer:
            chunk = os.read(self._out, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def open(self, url: str) -> None:
        target = self.call("Target.createTarget", {"url": "about:blank"}, session="")["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True}, session="")["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        self.call("Page.enable")
        self.call("Page.navigate", {"url": url})

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 90, every: float = 0.5):
        """The expression's value once it is truthy; TimeoutError with its last value otherwise."""
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(every)
        raise TimeoutError(f"{expression} still {value!r} after {timeout} s")

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.call("Browser.close", session="", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._in)
        os.close(self._out)

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
